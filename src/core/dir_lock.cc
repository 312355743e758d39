#include "slimtorch/core/dir_lock.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"

namespace slimtorch {
namespace {

constexpr const char* kSharedFds = "SLIMTORCH_DIR_LOCK_FDS";
constexpr long kNfsSuperMagic = 0x6969;
// How long a lock call may take before the file system is taken to have
// no working lock manager.
constexpr std::chrono::seconds kLockAnswer{10};

std::mutex g_mu;
std::map<std::string, std::weak_ptr<DirLock>>& Held() {
  static auto* held = new std::map<std::string, std::weak_ptr<DirLock>>();
  return *held;
}

std::string HolderText() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  const std::time_t now = std::time(nullptr);
  std::tm utc = {};
  ::gmtime_r(&now, &utc);
  char since[32] = {};
  std::strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::ostringstream out;
  out << "host " << host << " pid " << ::getpid() << " since " << since << "\n";
  return out.str();
}

// A descriptor named by kSharedFds that is open on `path`'s file, or -1.
int InheritedFd(const std::string& path) {
  const char* fds = SlimtorchVariable(kSharedFds);
  struct stat want = {};
  if (fds == nullptr || ::stat(path.c_str(), &want) != 0) return -1;
  std::istringstream list(fds);
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const long fd = std::strtol(item.c_str(), &end, 10);
    struct stat got = {};
    if (end != item.c_str() && *end == '\0' && fd >= 0 &&
        ::fstat(static_cast<int>(fd), &got) == 0 && got.st_dev == want.st_dev &&
        got.st_ino == want.st_ino) {
      return static_cast<int>(fd);
    }
  }
  return -1;
}

struct LockCall {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  int err = 0;
};

// F_OFD_SETLK of the whole file, on a thread: a call that has not
// answered within kLockAnswer is abandoned (false), the thread left to
// finish on its own.
bool TryLock(int fd, int* rc, int* err) {
  auto call = std::make_shared<LockCall>();
  std::thread([call, fd] {
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const int r = ::fcntl(fd, F_OFD_SETLK, &fl);
    const int e = errno;
    std::lock_guard<std::mutex> lock(call->mu);
    call->done = true;
    call->rc = r;
    call->err = e;
    call->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(call->mu);
  if (!call->cv.wait_for(lock, kLockAnswer, [&] { return call->done; })) {
    return false;
  }
  *rc = call->rc;
  *err = call->err;
  return true;
}

}  // namespace

std::string DirLock::Holder(const std::string& dir) {
  const std::string path = JoinPath(dir, "LOCK");
  if (!PathExists(path)) return "";
  std::string text;
  try {
    text = ReadFileToString(path);
  } catch (const Error&) {
    return "";
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) {
    text.pop_back();
  }
  return text;
}

namespace {

// The LOCK file's descriptor: one this process was given to share
// (`*inherited`), or the file opened afresh. Throws naming the file.
int OpenLockFile(const std::string& dir, const std::string& path,
                 const std::string& what, bool* inherited) {
  int fd = InheritedFd(path);
  *inherited = fd >= 0;
  if (*inherited) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // ours now; passed on only when shared
    return fd;
  }
  // Not a file of the run: storage faults (core/fault_injection.h) leave
  // it alone.
  fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  SLIM_CHECK(fd >= 0, what, " '", dir,
             "' is not writable: cannot open its "
             "lock file ",
             path, ": ", std::strerror(errno));
  return fd;
}

void WriteHolder(int fd, const std::string& path) {
  const std::string text = HolderText();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) !=
                                     static_cast<ssize_t>(text.size())) {
    LOG(WARNING) << "Could not write the holder into " << path << ": "
                 << std::strerror(errno);
  }
}

}  // namespace

std::shared_ptr<DirLock> DirLock::Acquire(const std::string& dir,
                                          const std::string& what) {
  MakeDirFor(dir, what);
  const std::string key = std::filesystem::weakly_canonical(dir).string();
  std::lock_guard<std::mutex> guard(g_mu);
  if (auto held = Held()[key].lock()) return held;
  const std::string path = JoinPath(dir, "LOCK");
  bool inherited = false;
  const int fd = OpenLockFile(dir, path, what, &inherited);
  struct statfs fs = {};
  const bool nfs = ::fstatfs(fd, &fs) == 0 && fs.f_type == kNfsSuperMagic;
  int rc = 0, err = 0;
  const bool answered = TryLock(fd, &rc, &err);
  if (answered && rc != 0 && (err == EAGAIN || err == EACCES)) {
    if (!inherited) ::close(fd);
    const std::string holder = Holder(dir);
    SLIM_FAIL(what, " ", dir, " is in use by another trainer (",
              holder.empty() ? "which has not written who it is yet" : holder,
              "; it holds the lock on ", path,
              "): two trainers on one directory would overwrite each other's "
              "checkpoints. Stop it, wait for it to end, or give this one "
              "another ",
              what);
  }
  if (!answered || rc != 0) {
    LOG(WARNING) << (answered
                         ? "The file system of " + path +
                               " does not lock files (" + std::strerror(err) +
                               "; NFS without a lock manager?)"
                         : "Locking " + path + " got no answer within " +
                               std::to_string(kLockAnswer.count()) +
                               " s (a network file system whose lock "
                               "manager does not answer?)")
                 << ": going on without the lock; nothing stops a second "
                 << "trainer on " << what << " " << dir;
  } else if (nfs) {
    LOG(WARNING) << path << " is on NFS: its lock keeps out a second trainer "
                 << "only as far as the server's lock manager reaches (a "
                 << "mount with -o nolock keeps it on this host)";
  }
  const bool held = answered && rc == 0;
  if (held && !inherited) WriteHolder(fd, path);
  // An abandoned call may still use fd: it stays open, owned by nobody.
  auto lock =
      std::shared_ptr<DirLock>(new DirLock(path, answered ? fd : -1, held));
  Held()[key] = lock;
  return lock;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // the kernel drops the lock with the file
}

void DirLock::ShareWithChildren() {
  if (fd_ < 0) return;
  ::fcntl(fd_, F_SETFD, 0);
  const char* old = EnvironmentVariable(kSharedFds);
  std::string fds = std::to_string(fd_);
  if (old != nullptr && *old != '\0') fds = std::string(old) + "," + fds;
  SetEnvironmentVariable(kSharedFds, fds);
}

}  // namespace slimtorch
