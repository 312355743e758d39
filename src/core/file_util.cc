#include "slimtorch/core/file_util.h"

#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "slimtorch/core/error.h"
#include "slimtorch/core/fault_injection.h"

namespace slimtorch {
namespace fs = std::filesystem;

std::string ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SLIM_CHECK(in.good(), "cannot open '", path, "' for reading: ",
             std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  SLIM_CHECK(!in.bad(), "error reading '", path, "'");
  return ss.str();
}

void WriteFileAtomically(const std::string& path, const std::string& data) {
  AtomicFileWriter writer(path);
  writer.Write(data);
  writer.Commit();
}

bool PathExists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

void MakeDirs(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  SLIM_CHECK(!ec && fs::is_directory(dir), "cannot create directory '", dir,
             "': ", ec ? ec.message() : "a file of that name exists");
}

void MakeDirFor(const std::string& dir, const std::string& what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SLIM_CHECK(!ec && fs::is_directory(dir), what, " '", dir,
             "' is not writable: ",
             ec ? ec.message() : "a file of that name exists");
}

void CheckDirWritable(const std::string& dir, const std::string& what) {
  MakeDirFor(dir, what);
  std::string probe = JoinPath(dir, ".slimtorch_write_probe." +
                                        std::to_string(::getpid()));
  const int fault = CheckFileFault(FileOp::kOpen, probe);
  std::FILE* f = fault == 0 ? std::fopen(probe.c_str(), "wb") : nullptr;
  SLIM_CHECK(f != nullptr, what, " '", dir, "' is not writable: ",
             std::strerror(fault != 0 ? fault : errno));
  std::fclose(f);
  std::remove(probe.c_str());
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  if (a.back() == '/') return a + (b.front() == '/' ? b.substr(1) : b);
  return a + (b.front() == '/' ? b : "/" + b);
}

std::vector<std::string> Glob(const std::string& pattern) {
  glob_t g;
  std::memset(&g, 0, sizeof(g));
  std::vector<std::string> out;
  int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
std::atomic<uint64_t> g_tmp_counter{0};

}  // namespace

void SyncParentDir(const std::string& path) {
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path) {
  tmp_path_ = path + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(g_tmp_counter++);
  const int fault = CheckFileFault(FileOp::kOpen, path_);
  if (fault == 0) file_ = std::fopen(tmp_path_.c_str(), "wb");
  SLIM_CHECK(file_ != nullptr, "cannot create '", path_, "' (temporary '",
             tmp_path_, "'): ", std::strerror(fault != 0 ? fault : errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_) std::remove(tmp_path_.c_str());
}

void AtomicFileWriter::Write(const void* data, size_t size) {
  SLIM_CHECK(file_ != nullptr && !committed_, "write to closed file '", path_,
             "'");
  if (size == 0) return;
  size_t allowed = size;
  const int fault = CheckFileFault(FileOp::kWrite, path_, &allowed);
  const size_t n = std::fwrite(data, 1, allowed, file_);
  const int err = fault != 0 && n == allowed ? fault : errno;
  SLIM_CHECK(fault == 0 && n == size, "error writing '", path_,
             "' (temporary '", tmp_path_, "') at byte ", offset_ + n, ": ",
             std::strerror(err), "; the file was not written");
  offset_ += size;
}

void AtomicFileWriter::Commit() {
  SLIM_CHECK(file_ != nullptr && !committed_, "commit of closed file '", path_,
             "'");
  bool ok = std::fflush(file_) == 0;
  int err = errno;
  if (ok) {
    const int fault = CheckFileFault(FileOp::kFsync, path_);
    ok = fault == 0 && ::fsync(::fileno(file_)) == 0;
    err = fault != 0 ? fault : errno;
  }
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  SLIM_CHECK(ok, "error writing '", path_, "' (temporary '", tmp_path_,
             "'): ", std::strerror(err), "; the file was not written");
  const int fault = CheckFileFault(FileOp::kRename, path_);
  SLIM_CHECK(fault == 0 && std::rename(tmp_path_.c_str(), path_.c_str()) == 0,
             "cannot rename '", tmp_path_, "' to '", path_,
             "': ", std::strerror(fault != 0 ? fault : errno),
             "; the file was not written");
  committed_ = true;
  SyncParentDir(path_);
}

}  // namespace slimtorch
