// Fuzz target: the CIFAR converters (datasets/cifar.h) from their tar.gz,
// as download_and_convert_data runs them on a file:// mirror with
// check_split_sizes off: libarchive, the 3073-byte (CIFAR-10) or 3074-byte
// (CIFAR-100) records, the label names, and the TFRecords written from
// them. Input: a mode byte; bit 0 set, the rest is the archive as it is;
// clear, the rest is the members' contents (U16-sized fields, in the order
// of the variant's member list), which the target packs into a tar.gz.
// Bit 1 picks CIFAR-100 (bit 2 its coarse labels) over CIFAR-10.
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/datasets/dataset.h"
#include "tar_writer.h"

namespace {

const std::vector<std::string>& MemberNames(bool cifar100) {
  static const std::vector<std::string> c10 = {
      "cifar-10-batches-bin/data_batch_1.bin",
      "cifar-10-batches-bin/data_batch_2.bin",
      "cifar-10-batches-bin/data_batch_3.bin",
      "cifar-10-batches-bin/data_batch_4.bin",
      "cifar-10-batches-bin/data_batch_5.bin",
      "cifar-10-batches-bin/test_batch.bin",
      "cifar-10-batches-bin/batches.meta.txt"};
  static const std::vector<std::string> c100 = {
      "cifar-100-binary/train.bin", "cifar-100-binary/test.bin",
      "cifar-100-binary/fine_label_names.txt",
      "cifar-100-binary/coarse_label_names.txt"};
  return cifar100 ? c100 : c10;
}

}  // namespace

SLIM_FUZZ_TARGET(cifar) {
  using namespace slimtorch;  // NOLINT
  fuzz::UseSmallLimits();
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const bool cifar100 = mode & 2;
  std::string archive;
  if (mode & 1) {
    archive = in.Rest();
  } else {
    std::vector<fuzz::Member> members;
    for (const std::string& name : MemberNames(cifar100)) {
      members.push_back({name, in.Field(), 0});
    }
    archive = fuzz::WriteArchive(members, 0, true);
  }
  const std::string src = fuzz::FreshDir("cifar_src");
  fuzz::WriteFile(src + (cifar100 ? "/cifar-100-binary.tar.gz"
                                  : "/cifar-10-binary.tar.gz"),
                  archive);
  ConvertOptions options;
  options.dataset_dir = fuzz::FreshDir("cifar_out");
  options.source_url = "file://" + src + "/";
  options.check_split_sizes = false;
  options.num_threads = 1;
  options.cifar100_label_mode = (mode & 4) ? "coarse" : "fine";
  try {
    GetConverterRegistry().Get(cifar100 ? "cifar100" : "cifar10")(options);
  } catch (const Error&) {
  }
  return 0;
}
