#pragma once
// Builds archives in memory with libarchive for the fuzz targets whose
// input is a list of members (cifar, archive).
#include <archive.h>
#include <archive_entry.h>

#include <string>
#include <vector>

namespace slimtorch {
namespace fuzz {

struct Member {
  std::string path;
  std::string data;
  // 0 file, 1 folder, 2 symlink to `data`, 3 hardlink to `data`.
  int kind = 0;
};

// `format`: 0 ustar, 1 pax, 2 gnutar, 3 zip, 4 cpio, 5 7zip;
// `gzip`: compressed with gzip (not for zip and 7zip).
inline std::string WriteArchive(const std::vector<Member>& members,
                                int format, bool gzip) {
  archive* a = archive_write_new();
  switch (format) {
    case 1: archive_write_set_format_pax_restricted(a); break;
    case 2: archive_write_set_format_gnutar(a); break;
    case 3: archive_write_set_format_zip(a); gzip = false; break;
    case 4: archive_write_set_format_cpio_newc(a); break;
    case 5: archive_write_set_format_7zip(a); gzip = false; break;
    default: archive_write_set_format_ustar(a); break;
  }
  if (gzip) archive_write_add_filter_gzip(a);
  size_t room = 1 << 16;  // headers, padding, the end blocks
  for (const Member& m : members) room += 2 * m.data.size() + 4096;
  std::string out(room, '\0');
  size_t used = 0;
  if (archive_write_open_memory(a, &out[0], out.size(), &used) != ARCHIVE_OK) {
    archive_write_free(a);
    return "";
  }
  for (const Member& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.path.c_str());
    archive_entry_set_perm(e, m.kind == 1 ? 0755 : 0644);
    archive_entry_set_filetype(e, m.kind == 1 ? AE_IFDIR
                                  : m.kind == 2 ? AE_IFLNK
                                                : AE_IFREG);
    if (m.kind == 0) archive_entry_set_size(e, m.data.size());
    if (m.kind == 2) archive_entry_set_symlink(e, m.data.c_str());
    if (m.kind == 3) archive_entry_set_hardlink(e, m.data.c_str());
    if (archive_write_header(a, e) == ARCHIVE_OK && m.kind == 0) {
      archive_write_data(a, m.data.data(), m.data.size());
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  out.resize(used);
  return out;
}

}  // namespace fuzz
}  // namespace slimtorch
