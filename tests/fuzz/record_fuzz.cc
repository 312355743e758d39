// Fuzz target: the record level of the input pipeline. The bytes after the
// first are one record's payload, framed with valid CRCs into a TFRecord
// file, so that a hostile payload reaches the dataset decoding as it would
// from a shard: TFRecordReader, ParseRecord (label check), the image decode
// of the record path (DecodeRecordImage, DecodeRecordImageInto at the
// spec's size, "raw" images included) and the photo path (ScanExample, then
// a window of the JPEG through JpegDecoder). The first byte picks the
// channels, the default format and the spec's image size.
#include <cstdlib>
#include <vector>

#include "data/example_scan.h"
#include "data/record_decode.h"
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/jpeg_decoder.h"
#include "slimtorch/io/tfrecord.h"

namespace {

using slimtorch::Error;

void DecodeAsRecordPath(const std::string& record,
                        const slimtorch::internal::RecordFormat& format,
                        int side) {
  using namespace slimtorch::internal;  // NOLINT
  int64_t label = 0;
  slimtorch::ImageExample ex;
  try {
    ex = ParseRecord(record, format, "fuzz record 0", &label);
  } catch (const Error&) {
    return;
  }
  try {
    DecodeRecordImage(ex, format, "fuzz record 0");
  } catch (const Error&) {
  }
  std::vector<uint8_t> out(static_cast<size_t>(side) * side *
                           format.decode_channels);
  try {
    DecodeRecordImageInto(ex, format, side, side, out.data(), "fuzz record 0");
  } catch (const Error&) {
  }
}

void DecodeAsPhotoPath(const std::string& record, int channels) {
  slimtorch::internal::ExampleScan scan;
  try {
    slimtorch::internal::ScanExample(record, "fuzz record 0", &scan);
    const auto* p = reinterpret_cast<const uint8_t*>(scan.encoded.data());
    slimtorch::JpegDecoder decoder;
    if (!slimtorch::JpegDecoder::IsJpeg(p, scan.encoded.size())) return;
    const auto h = decoder.ReadHeader(p, scan.encoded.size(), "fuzz record 0");
    int64_t stride = 0;
    decoder.DecodeWindowInPlace(p, scan.encoded.size(), 0, 0, h.height,
                                h.width, channels, &stride, "fuzz record 0");
  } catch (const Error&) {
  }
}

}  // namespace

SLIM_FUZZ_TARGET(record) {
  using namespace slimtorch;  // NOLINT
  fuzz::UseSmallLimits();
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  internal::RecordFormat format;
  format.decode_channels = (mode & 1) ? 3 : 1;
  format.default_format = (mode & 2) ? "raw" : "png";
  format.num_classes = 10;
  format.labels_offset = (mode & 4) ? 1 : 0;
  const int side = (mode & 8) ? 32 : 28;
  const std::string path = fuzz::FreshDir("record") + "/shard.tfrecord";
  fuzz::WriteFile(path, FrameTFRecord(in.Rest()));
  std::string record;
  try {
    TFRecordReader reader(path);
    if (!reader.Read(&record)) return 0;
  } catch (const Error&) {
    std::abort();  // a framed record must read back
  }
  DecodeAsRecordPath(record, format, side);
  DecodeAsPhotoPath(record, format.decode_channels);
  return 0;
}
