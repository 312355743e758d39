// Fuzz target: JPEG (libjpeg-turbo, and the window decoder of the photo
// path) decoding at the pixel level; input format and checked properties in
// image_fuzz.h. Seeded with jpeg files (tests/fuzz/corpus/jpeg/).
#include "image_fuzz.h"

SLIM_FUZZ_TARGET(jpeg) { return slimtorch::fuzz::FuzzImage(data, size); }
