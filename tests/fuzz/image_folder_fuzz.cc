// Fuzz target: the image_folder converter (src/datasets/image_folder.cc) on
// a folder whose files hold the input: up to 6 files (each a name byte and
// a U16-sized body) placed in two class folders under names with .jpg,
// .png, .bmp, .gif or no known extension, converted with --skip_bad_images
// as mode bit 0 says. What it writes (shards, labels.txt, the description)
// is read back.
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/tfrecord.h"

SLIM_FUZZ_TARGET(image_folder) {
  using namespace slimtorch;  // NOLINT
  fuzz::UseSmallLimits();
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const std::string src = fuzz::FreshDir("image_folder_src");
  fuzz::FreshDir("image_folder_src/cats");
  fuzz::FreshDir("image_folder_src/dogs");
  static const char* kExt[] = {".jpg", ".png", ".bmp", ".gif", ".JPEG",
                               ".txt"};
  for (int i = 0; i < 6 && in.left() > 0; ++i) {
    const uint8_t name = in.Byte();
    fuzz::WriteFile(src + ((name & 1) ? "/cats/" : "/dogs/") +
                        std::to_string(i) + kExt[(name >> 1) % 6],
                    in.Field());
  }
  ConvertOptions options;
  options.dataset_dir = fuzz::FreshDir("image_folder_out");
  options.skip_bad_images = mode & 1;
  options.num_threads = 1;
  options.image_folder.image_dir = src;
  options.image_folder.validation_percentage = 50;
  try {
    GetConverterRegistry().Get("image_folder")(options);
    const DatasetSpec spec = ReadDatasetDescription(options.dataset_dir);
    for (const auto& split : spec.splits_to_sizes) {
      (void)split;
    }
  } catch (const Error&) {
  }
  return 0;
}
