// Fuzz target: TFRecord framing (io/tfrecord.h). The first byte picks how
// the rest becomes a file: bit 0 set, the bytes as they are; clear, the
// rest is a list of records (each a U16-sized field) framed with valid CRCs,
// then damaged at one place: the file cut after U16 bytes (bit 1) and one
// byte at U16 xor-ed with a byte (bit 2), so that the fuzzer reaches the
// records after the first and each check of the framing.
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/tfrecord.h"

namespace {

std::string FramedFile(slimtorch::fuzz::Input* in, uint8_t mode) {
  const uint32_t cut = in->U16();
  const uint32_t flip_at = in->U16();
  const uint8_t flip = in->Byte();
  std::string file;
  while (in->left() > 0) file += slimtorch::FrameTFRecord(in->Field());
  if ((mode & 2) && cut < file.size()) file.resize(cut);
  if ((mode & 4) && flip_at < file.size()) file[flip_at] ^= flip;
  return file;
}

}  // namespace

SLIM_FUZZ_TARGET(tfrecord) {
  using namespace slimtorch;  // NOLINT
  fuzz::UseSmallLimits();
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  const std::string path = fuzz::FreshDir("tfrecord") + "/data.tfrecord";
  fuzz::WriteFile(path, (mode & 1) ? in.Rest() : FramedFile(&in, mode));
  uint64_t offset_of_second = 0;
  try {
    TFRecordReader reader(path);
    std::string record;
    while (reader.Read(&record)) {
      if (reader.record_index() == 1) offset_of_second = reader.offset();
    }
  } catch (const Error&) {
  }
  try {
    CountTFRecords(path);
  } catch (const Error&) {
  }
  try {  // resuming at the second record, as the record pipeline does
    TFRecordReader reader(path);
    reader.Seek(offset_of_second, offset_of_second > 0 ? 1 : 0);
    std::string record;
    while (reader.Read(&record)) {
    }
  } catch (const Error&) {
  }
  return 0;
}
