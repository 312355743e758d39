// Fuzz target: GIF (our decoder, giflib's reading) decoding at the pixel
// level; input format and checked properties in image_fuzz.h. Seeded with
// gif files (tests/fuzz/corpus/gif/).
#include "image_fuzz.h"

SLIM_FUZZ_TARGET(gif) { return slimtorch::fuzz::FuzzImage(data, size); }
