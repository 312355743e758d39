// Fuzz target: dataset_description.txt (datasets/dataset.h), the bytes as
// the file. What reads writes back and reads the same.
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/datasets/dataset.h"

SLIM_FUZZ_TARGET(dataset_description) {
  using namespace slimtorch;  // NOLINT
  const std::string dir = fuzz::FreshDir("description");
  fuzz::WriteFile(dir + "/" + kDatasetDescriptionFilename,
                  std::string(reinterpret_cast<const char*>(data), size));
  try {
    const DatasetSpec spec = ReadDatasetDescription(dir);
    const std::string again = fuzz::FreshDir("description_again");
    WriteDatasetDescription(spec, again);
    const DatasetSpec back = ReadDatasetDescription(again);
    if (back.name != spec.name || back.file_pattern != spec.file_pattern ||
        back.num_classes != spec.num_classes ||
        back.splits_to_sizes != spec.splits_to_sizes) {
      std::abort();
    }
  } catch (const Error&) {
  }
  return 0;
}
