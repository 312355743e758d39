#include "slimtorch/io/archive.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>
#include <set>
#include <sstream>

#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/core/resource_limits.h"

namespace slimtorch {
namespace {

// Path components of `path`, without empty and "." components.
std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (!part.empty() && part != ".") parts.push_back(part);
  }
  return parts;
}

// True when following `relative` from the folder `base` (components under
// the archive root) stays under the root.
bool StaysInside(std::vector<std::string> base, const std::string& relative) {
  for (const std::string& part : Components(relative)) {
    if (part == "..") {
      if (base.empty()) return false;
      base.pop_back();
    } else {
      base.push_back(part);
    }
  }
  return true;
}

std::string Normalize(const std::string& path) {
  std::string out;
  for (const std::string& part : Components(path)) {
    if (!out.empty()) out += '/';
    out += part;
  }
  return out;
}

struct ArchiveCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};

}  // namespace

void CheckArchiveEntryPath(const std::string& archive, const std::string& entry,
                           const std::string& link_target, bool is_symlink) {
  const std::string where =
      StrCat("archive '", archive, "': entry '", entry, "'");
  SLIM_CHECK(!entry.empty(), "archive '", archive,
             "' holds an entry with an empty path");
  SLIM_CHECK(entry[0] != '/', where,
             " has an absolute path; refusing to extract it");
  for (const std::string& part : Components(entry)) {
    SLIM_CHECK(part != "..", where,
               " has a '..' component that would leave the target folder");
  }
  if (link_target.empty()) return;
  const char* kind = is_symlink ? "symlink" : "hardlink";
  SLIM_CHECK(link_target[0] != '/', where, " is a ", kind,
             " to the absolute path '", link_target,
             "', which would leave the target folder");
  std::vector<std::string> base;
  if (is_symlink) {
    base = Components(entry);
    // "." or "./": a link in place of the target folder itself.
    SLIM_CHECK(!base.empty(), where, " is a symlink in place of the target "
               "folder itself");
    base.pop_back();  // relative to the link's own folder
  }
  SLIM_CHECK(StaysInside(base, link_target), where, " is a ", kind, " to '",
             link_target, "', which would leave the target folder");
}

namespace {

using ArchivePtr = std::unique_ptr<archive, ArchiveCloser>;

// A libarchive reader over `archive_path` (any format and compression).
ArchivePtr OpenArchive(const std::string& archive_path) {
  ArchivePtr a(archive_read_new());
  SLIM_CHECK(a != nullptr, "archive '", archive_path,
             "': cannot allocate a libarchive reader");
  archive_read_support_filter_all(a.get());
  archive_read_support_format_all(a.get());
  if (archive_read_open_filename(a.get(), archive_path.c_str(), 1 << 16) !=
      ARCHIVE_OK) {
    const char* why = archive_error_string(a.get());
    SLIM_CHECK(PathExists(archive_path), "cannot open archive '", archive_path,
               "': ", why ? why : "no such file");
    // libarchive reads ahead while opening: a short archive fails here.
    SLIM_FAIL("archive '", archive_path,
              "' is truncated or corrupt: ", why ? why : "unreadable");
  }
  return a;
}

}  // namespace

std::string ReadArchiveEntryData(archive* a, archive_entry* entry,
                                 const std::string& archive_path,
                                 const std::string& name) {
  const uint64_t limit = GetResourceLimits().max_member_bytes;
  const auto fail_size = [&](const char* claim, uint64_t size) {
    SLIM_FAIL("archive '", archive_path, "': entry '", name, "' ", claim, " ",
              size, " bytes, more than a member may hold (",
              LimitHint(limit, "bytes", "SLIMTORCH_MAX_MEMBER_BYTES"), ")");
  };
  std::string data;
  if (archive_entry_size_is_set(entry) && archive_entry_size(entry) > 0) {
    const auto size = static_cast<uint64_t>(archive_entry_size(entry));
    if (size > limit) fail_size("claims", size);
    data.reserve(static_cast<size_t>(size));
  }
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      SLIM_FAIL("archive '", archive_path,
                "' is truncated or corrupt at entry '", name,
                "': ", archive_error_string(a));
    }
    if (data.size() + static_cast<size_t>(n) > limit) {
      fail_size("grows past", data.size() + static_cast<size_t>(n));
    }
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

namespace {

// Throws naming the members of `wanted` not in `members`, and the archive's
// top-level entries (a wrong archive shows there).
void CheckAllFound(const std::string& archive_path,
                   const std::vector<std::string>& wanted,
                   const std::map<std::string, std::string>& members,
                   const std::set<std::string>& top_level) {
  std::string missing;
  for (const std::string& w : wanted) {
    if (!members.count(w))
      missing += StrCat(missing.empty() ? "" : ", ", "'", w, "'");
  }
  if (!missing.empty()) {
    std::string folders;
    for (const std::string& t : top_level) {
      folders += StrCat(folders.empty() ? "" : ", ", "'", t, "'");
    }
    SLIM_FAIL("archive '", archive_path, "' lacks ", missing,
              " (its top-level entries: ", folders.empty() ? "none" : folders,
              ")");
  }
}

}  // namespace

void CheckArchiveEntry(const std::string& archive, archive_entry* entry) {
  const char* raw = archive_entry_pathname(entry);
  const std::string name = raw ? raw : "";
  const char* sym = archive_entry_symlink(entry);
  const char* hard = archive_entry_hardlink(entry);
  if (sym && *sym) {
    CheckArchiveEntryPath(archive, name, sym, true);
  } else if (hard && *hard) {
    CheckArchiveEntryPath(archive, name, hard, false);
  } else {
    CheckArchiveEntryPath(archive, name);
  }
}

std::map<std::string, std::string> ReadArchiveMembers(
    const std::string& archive_path, const std::vector<std::string>& wanted) {
  ArchivePtr a = OpenArchive(archive_path);
  const std::set<std::string> want(wanted.begin(), wanted.end());
  std::map<std::string, std::string> members;
  std::set<std::string> top_level;
  for (;;) {
    archive_entry* entry = nullptr;
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      SLIM_FAIL("archive '", archive_path,
                "' is truncated or corrupt: ", archive_error_string(a.get()));
    }
    const char* raw = archive_entry_pathname(entry);
    const std::string name = raw ? raw : "";
    CheckArchiveEntry(archive_path, entry);
    const std::string path = Normalize(name);
    std::vector<std::string> parts = Components(path);
    if (!parts.empty()) top_level.insert(parts[0]);
    if (!want.count(path)) continue;
    const char* hard = archive_entry_hardlink(entry);
    SLIM_CHECK(archive_entry_filetype(entry) == AE_IFREG && !(hard && *hard),
               "archive '", archive_path, "': entry '", name,
               "' is not a regular file");
    members[path] = ReadArchiveEntryData(a.get(), entry, archive_path, name);
  }
  CheckAllFound(archive_path, wanted, members, top_level);
  return members;
}

}  // namespace slimtorch
