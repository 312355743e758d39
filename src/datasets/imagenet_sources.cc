#include "imagenet_sources.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/resource_limits.h"
#include "slimtorch/io/archive.h"

namespace slimtorch {
namespace internal {
namespace {

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveFree>;

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Path without empty and "." components ("./a//b" → "a/b").
std::string NormalizeMember(const std::string& path) {
  std::string out, part;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!part.empty() && part != ".") out += (out.empty() ? "" : "/") + part;
      part.clear();
    } else {
      part += path[i];
    }
  }
  return out;
}

bool IsRegular(archive_entry* entry) {
  const char* hard = archive_entry_hardlink(entry);
  return archive_entry_filetype(entry) == AE_IFREG && !(hard && *hard);
}

// build_imagenet_data's glob '*.JPEG' on a basename.
bool IsJpegName(const std::string& name) {
  return name.size() > 5 && name[0] != '.' &&
         name.compare(name.size() - 5, 5, ".JPEG") == 0;
}

// Reads the byte range [begin, begin + length) of a file for libarchive,
// with skipping, so that listing a tar reads its headers only. Reads are
// small (a page) because each header of ILSVRC2012_img_train.tar's 1.28M
// members costs one read: listing it reads ~5 GB, not the 140 GB.
struct RangeReader {
  int fd = -1;
  uint64_t begin = 0, length = 0, pos = 0;
  std::vector<char> buf = std::vector<char>(4096);

  static la_ssize_t Read(archive* a, void* data, const void** out) {
    auto* r = static_cast<RangeReader*>(data);
    const uint64_t want = std::min<uint64_t>(r->buf.size(), r->length - r->pos);
    if (want == 0) return 0;
    ssize_t n = ::pread(r->fd, r->buf.data(), want, r->begin + r->pos);
    if (n < 0) {
      archive_set_error(a, errno, "read failed: %s", std::strerror(errno));
      return -1;
    }
    r->pos += static_cast<uint64_t>(n);
    *out = r->buf.data();
    return n;
  }
  static la_int64_t Skip(archive*, void* data, la_int64_t request) {
    auto* r = static_cast<RangeReader*>(data);
    const uint64_t n = std::min<uint64_t>(request, r->length - r->pos);
    r->pos += n;
    return static_cast<la_int64_t>(n);
  }
};

// A regular member of an uncompressed tar and where its bytes are.
struct TarMember {
  std::string path;  // normalized
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The regular members of the uncompressed tar in bytes [begin, begin+length)
// of `fd`. `where` names the tar in errors.
std::vector<TarMember> ListTar(int fd, uint64_t begin, uint64_t length,
                               const std::string& where) {
  ArchivePtr a(archive_read_new());
  archive_read_support_format_tar(a.get());
  RangeReader reader;
  reader.fd = fd;
  reader.begin = begin;
  reader.length = length;
  if (archive_read_open2(a.get(), &reader, nullptr, &RangeReader::Read,
                         &RangeReader::Skip, nullptr) != ARCHIVE_OK) {
    SLIM_FAIL(where, " is not an uncompressed tar archive (",
              archive_error_string(a.get()),
              "); pass the .tar as distributed or an extracted folder");
  }
  std::vector<TarMember> members;
  for (;;) {
    archive_entry* entry = nullptr;
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    SLIM_CHECK(r >= ARCHIVE_WARN, where,
               " is truncated or corrupt: ", archive_error_string(a.get()));
    CheckArchiveEntry(where, entry);
    if (!IsRegular(entry)) continue;
    TarMember m;
    m.path = NormalizeMember(archive_entry_pathname(entry));
    m.offset = begin + static_cast<uint64_t>(archive_filter_bytes(a.get(), 0));
    m.size = static_cast<uint64_t>(archive_entry_size(entry));
    const uint64_t limit = GetResourceLimits().max_member_bytes;
    SLIM_CHECK(m.size <= limit, where, ": member '", m.path, "' claims ",
               m.size, " bytes, more than a member may hold (",
               LimitHint(limit, "bytes", "SLIMTORCH_MAX_MEMBER_BYTES"), ")");
    SLIM_CHECK(m.offset + m.size <= begin + length, where, ": member '", m.path,
               "' extends past the end (truncated archive)");
    members.push_back(std::move(m));
  }
  return members;
}

using SynsetImages = std::map<std::string, std::vector<ImageNetImage>>;

// Adds a flat validation image when the labels name its synset.
void AddFlat(ImageNetImage image,
             const std::map<std::string, std::string>& flat_labels,
             SynsetImages* out, int64_t* unlabeled) {
  auto it = flat_labels.find(image.basename);
  if (it == flat_labels.end()) {
    ++*unlabeled;
    return;
  }
  image.synset = it->second;
  (*out)[image.synset].push_back(std::move(image));
}

void ListTarSource(const std::string& source,
                   const std::map<std::string, std::string>& flat_labels,
                   SynsetImages* out, int64_t* unlabeled) {
  FdCloser fd{::open(source.c_str(), O_RDONLY)};
  SLIM_CHECK(fd.fd >= 0, "cannot open '", source, "': ", std::strerror(errno));
  const uint64_t size = std::filesystem::file_size(source);
  const std::string where = StrCat("archive '", source, "'");
  for (const TarMember& m : ListTar(fd.fd, 0, size, where)) {
    const size_t slash = m.path.find('/');
    auto image_at = [&](const std::string& synset, const std::string& base,
                        uint64_t offset, uint64_t bytes,
                        const std::string& member) {
      return ImageNetImage{synset, base,
                           source, offset,
                           bytes,  StrCat(where, " member '", member, "'")};
    };
    if (slash == std::string::npos && m.path.size() > 4 &&
        m.path.compare(m.path.size() - 4, 4, ".tar") == 0) {
      const std::string synset = m.path.substr(0, m.path.size() - 4);
      const std::string inner_where = StrCat(where, " member '", m.path, "'");
      for (const TarMember& in :
           ListTar(fd.fd, m.offset, m.size, inner_where)) {
        if (in.path.find('/') != std::string::npos || !IsJpegName(in.path)) {
          continue;
        }
        (*out)[synset].push_back(image_at(synset, in.path, in.offset, in.size,
                                          m.path + "/" + in.path));
      }
    } else if (slash == std::string::npos) {
      if (IsJpegName(m.path)) {
        AddFlat(image_at("", m.path, m.offset, m.size, m.path), flat_labels,
                out, unlabeled);
      }
    } else if (m.path.find('/', slash + 1) == std::string::npos) {
      const std::string base = m.path.substr(slash + 1);
      const std::string synset = m.path.substr(0, slash);
      if (IsJpegName(base)) {
        (*out)[synset].push_back(
            image_at(synset, base, m.offset, m.size, m.path));
      }
    }
  }
}

void ListFolderSource(const std::string& source,
                      const std::map<std::string, std::string>& flat_labels,
                      SynsetImages* out, int64_t* unlabeled) {
  namespace fs = std::filesystem;
  for (const fs::directory_entry& e : fs::directory_iterator(source)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory()) {
      for (const fs::directory_entry& f : fs::directory_iterator(e.path())) {
        const std::string base = f.path().filename().string();
        if (!IsJpegName(base) || !f.is_regular_file()) continue;
        const std::string path = f.path().string();
        (*out)[name].push_back(ImageNetImage{name, base, path, 0,
                                             fs::file_size(f.path()),
                                             StrCat("'", path, "'")});
      }
    } else if (e.is_regular_file() && IsJpegName(name)) {
      const std::string path = e.path().string();
      AddFlat(ImageNetImage{"", name, path, 0, fs::file_size(e.path()),
                            StrCat("'", path, "'")},
              flat_labels, out, unlabeled);
    }
  }
}

}  // namespace

void ForEachArchiveFile(
    const std::string& archive_path,
    const std::function<void(const std::string&, const std::string&)>& fn) {
  ArchivePtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_all(a.get());
  if (archive_read_open_filename(a.get(), archive_path.c_str(), 1 << 16) !=
      ARCHIVE_OK) {
    const char* why = archive_error_string(a.get());
    SLIM_CHECK(PathExists(archive_path), "cannot open archive '", archive_path,
               "': ", why ? why : "no such file");
    SLIM_FAIL("archive '", archive_path,
              "' is truncated or corrupt: ", why ? why : "unreadable");
  }
  for (;;) {
    archive_entry* entry = nullptr;
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    SLIM_CHECK(r >= ARCHIVE_WARN, "archive '", archive_path,
               "' is truncated or corrupt: ", archive_error_string(a.get()));
    CheckArchiveEntry(archive_path, entry);
    if (!IsRegular(entry)) continue;
    const std::string path = NormalizeMember(archive_entry_pathname(entry));
    const std::string data =
        ReadArchiveEntryData(a.get(), entry, archive_path, path);
    try {
      fn(path, data);
    } catch (const Error& e) {
      SLIM_FAIL("archive '", archive_path, "' member '", path, "': ", e.what());
    }
  }
}

SynsetImages ListImageNetImages(
    const std::string& source,
    const std::map<std::string, std::string>& flat_labels, int64_t* unlabeled) {
  *unlabeled = 0;
  SynsetImages out;
  SLIM_CHECK(PathExists(source), "'", source, "' does not exist");
  if (std::filesystem::is_directory(source)) {
    ListFolderSource(source, flat_labels, &out, unlabeled);
  } else {
    ListTarSource(source, flat_labels, &out, unlabeled);
  }
  for (auto& kv : out) {
    std::sort(kv.second.begin(), kv.second.end(),
              [](const ImageNetImage& a, const ImageNetImage& b) {
                return a.basename < b.basename;
              });
  }
  return out;
}

std::string ReadImageNetImage(const ImageNetImage& image) {
  FdCloser fd{::open(image.file.c_str(), O_RDONLY)};
  SLIM_CHECK(fd.fd >= 0, "cannot open ", image.where, ": ",
             std::strerror(errno));
  std::string data(image.size, '\0');
  uint64_t done = 0;
  while (done < image.size) {
    ssize_t n = ::pread(fd.fd, &data[done], image.size - done,
                        static_cast<off_t>(image.offset + done));
    SLIM_CHECK(n > 0, "cannot read ", image.where, " (", done, " of ",
               image.size,
               " bytes): ", n == 0 ? "file shrank" : std::strerror(errno));
    done += static_cast<uint64_t>(n);
  }
  return data;
}

}  // namespace internal
}  // namespace slimtorch
