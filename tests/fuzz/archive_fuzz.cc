// Fuzz target: archives through libarchive (io/archive.h), as the CIFAR
// converters read members by name and the flowers and ImageNet converters
// walk every member (src/datasets/imagenet_sources.h, ForEachArchiveFile).
// Input: a mode byte; bit 0 set, the rest is the archive file as it is (any
// format and filter libarchive reads); clear, the rest is a list of members
// (a kind byte, a U16-sized path, a U16-sized body: contents or link
// target), which the target writes in the format of mode bits 1-3 (ustar,
// pax, gnutar, zip, cpio, 7zip), gzip-compressed by bit 4.
#include "datasets/imagenet_sources.h"
#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/archive.h"
#include "tar_writer.h"

SLIM_FUZZ_TARGET(archive) {
  using namespace slimtorch;  // NOLINT
  fuzz::UseSmallLimits();
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  std::string bytes;
  if (mode & 1) {
    bytes = in.Rest();
  } else {
    std::vector<fuzz::Member> members;
    while (in.left() > 0 && members.size() < 64) {
      fuzz::Member m;
      m.kind = in.Byte() % 4;
      m.path = in.Field();
      m.data = in.Field();
      members.push_back(std::move(m));
    }
    bytes = fuzz::WriteArchive(members, (mode >> 1) % 6, mode & 16);
  }
  const std::string path = fuzz::FreshDir("archive") + "/data.tar.gz";
  fuzz::WriteFile(path, bytes);
  try {
    ReadArchiveMembers(path, {"a", "top/b.bin"});
  } catch (const Error&) {
  }
  try {
    size_t total = 0;
    internal::ForEachArchiveFile(
        path, [&](const std::string& name, const std::string& contents) {
          total += name.size() + contents.size();
        });
  } catch (const Error&) {
  }
  return 0;
}
