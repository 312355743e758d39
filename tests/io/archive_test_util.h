#pragma once
// Writes tar.gz archives with libarchive for the tests of archive reading
// and of the CIFAR converters.

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace slimtorch {
namespace testing_util {

struct TarEntry {
  enum Kind { kFile, kDir, kSymlink, kHardlink };
  std::string path;
  std::string data;  // kFile: contents
  Kind kind = kFile;
  std::string link;  // kSymlink / kHardlink: target
};

// Writes `entries`, in order, as a gzip-compressed ustar/pax archive.
inline void WriteTarGz(const std::string& path,
                       const std::vector<TarEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK)
      << archive_error_string(a);
  for (const TarEntry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.path.c_str());
    archive_entry_set_perm(entry, 0644);
    switch (e.kind) {
      case TarEntry::kFile:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_size(entry, static_cast<la_int64_t>(e.data.size()));
        break;
      case TarEntry::kDir:
        archive_entry_set_filetype(entry, AE_IFDIR);
        archive_entry_set_perm(entry, 0755);
        break;
      case TarEntry::kSymlink:
        archive_entry_set_filetype(entry, AE_IFLNK);
        archive_entry_set_symlink(entry, e.link.c_str());
        break;
      case TarEntry::kHardlink:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_hardlink(entry, e.link.c_str());
        archive_entry_set_size(entry, 0);
        break;
    }
    ASSERT_EQ(archive_write_header(a, entry), ARCHIVE_OK)
        << archive_error_string(a);
    if (e.kind == TarEntry::kFile && !e.data.empty()) {
      ASSERT_EQ(archive_write_data(a, e.data.data(), e.data.size()),
                static_cast<la_ssize_t>(e.data.size()));
    }
    archive_entry_free(entry);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

}  // namespace testing_util
}  // namespace slimtorch
