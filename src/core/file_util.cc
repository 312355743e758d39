#include "slimtorch/core/file_util.h"

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

void CheckDirWritable(const std::string& dir, const std::string& what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SLIM_CHECK(!ec && fs::is_directory(dir), what, " '", dir,
             "' is not writable: ",
             ec ? ec.message() : "a file of that name exists");
  std::string probe = JoinPath(dir, ".slimtorch_write_probe." +
                                        std::to_string(::getpid()));
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  SLIM_CHECK(f != nullptr, what, " '", dir, "' is not writable: ",
             std::strerror(errno));
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
}

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path) {
  tmp_path_ = path + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(g_tmp_counter++);
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  SLIM_CHECK(file_ != nullptr, "cannot create '", tmp_path_,
             "' (for '", path, "'): ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_) std::remove(tmp_path_.c_str());
}

void AtomicFileWriter::Write(const void* data, size_t size) {
  SLIM_CHECK(file_ != nullptr && !committed_, "write to closed file '", path_,
             "'");
  if (size == 0) return;
  size_t n = std::fwrite(data, 1, size, file_);
  SLIM_CHECK(n == size, "error writing '", tmp_path_, "' at byte ", offset_,
             ": ", std::strerror(errno));
  offset_ += size;
}

void AtomicFileWriter::Commit() {
  SLIM_CHECK(file_ != nullptr && !committed_, "commit of closed file '", path_,
             "'");
  bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  int err = errno;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  SLIM_CHECK(ok, "error writing '", tmp_path_, "': ", std::strerror(err));
  SLIM_CHECK(std::rename(tmp_path_.c_str(), path_.c_str()) == 0,
             "cannot rename '", tmp_path_, "' to '", path_, "': ",
             std::strerror(errno));
  committed_ = true;
}

}  // namespace slimtorch
