// Fuzz target: PNG (libpng) decoding at the pixel
// level; input format and checked properties in image_fuzz.h. Seeded with
// png files (tests/fuzz/corpus/png/).
#include "image_fuzz.h"

SLIM_FUZZ_TARGET(png) { return slimtorch::fuzz::FuzzImage(data, size); }
