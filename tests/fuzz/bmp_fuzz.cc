// Fuzz target: BMP (our decoder, TensorFlow's reading and the palette one) decoding at the pixel
// level; input format and checked properties in image_fuzz.h. Seeded with
// bmp files (tests/fuzz/corpus/bmp/).
#include "image_fuzz.h"

SLIM_FUZZ_TARGET(bmp) { return slimtorch::fuzz::FuzzImage(data, size); }
