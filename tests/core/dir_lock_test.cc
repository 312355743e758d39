// The train_dir lock against other processes (forked children that lock
// the file themselves, as a second trainer would).
#include "slimtorch/core/dir_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "io/io_test_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// Whether a process other than this one could take `path`'s lock now: a
// child opens the file afresh and tries.
bool OtherProcessCouldLock(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(path.c_str(), O_RDWR);
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    ::_exit(fd >= 0 && ::fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(DirLockTest, HeldUntilReleasedAndSharedInProcess) {
  testing::TempDir dir;
  const std::string train_dir = dir.Join("train/sub");  // made by Acquire
  {
    auto lock = DirLock::Acquire(train_dir, "--train_dir");
    EXPECT_TRUE(lock->held());
    EXPECT_EQ(lock->path(), train_dir + "/LOCK");
    // The same directory, named another way, is the same lock.
    EXPECT_EQ(DirLock::Acquire(dir.Join("train/./sub/"), "--train_dir"), lock);
    EXPECT_FALSE(OtherProcessCouldLock(lock->path()));
    const std::string holder = DirLock::Holder(train_dir);
    EXPECT_EQ(holder.rfind("host ", 0), 0u) << holder;
    EXPECT_NE(holder.find(" pid " + std::to_string(::getpid()) + " since 20"),
              std::string::npos)
        << holder;
  }
  // Released with the last holder; the file stays (its text is stale).
  EXPECT_TRUE(PathExists(train_dir + "/LOCK"));
  EXPECT_TRUE(OtherProcessCouldLock(train_dir + "/LOCK"));
}

// A lock another process holds refuses Acquire, naming what the holder
// wrote; once the holder is killed (kill -9), the kernel has released it
// and Acquire succeeds with nothing cleaned up.
TEST(DirLockTest, AnotherProcessIsRefusedUntilItDies) {
  testing::TempDir dir;
  const std::string path = dir.Join("LOCK");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const std::string text =
        "host elsewhere pid 4242 since 2026-01-01T00:00:00Z\n";
    if (fd < 0 || ::fcntl(fd, F_OFD_SETLK, &fl) != 0 ||
        ::write(fd, text.data(), text.size()) !=
            static_cast<ssize_t>(text.size())) {
      ::_exit(1);
    }
    char c = 'x';
    if (::write(ready[1], &c, 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_ERROR_CONTAINS(
      DirLock::Acquire(dir.path(), "--train_dir"), "--train_dir " + dir.path(),
      "is in use by another trainer (host elsewhere pid 4242 since "
      "2026-01-01T00:00:00Z; it holds the lock on " +
          path);
  ::kill(holder, SIGKILL);
  int status = 0;
  ::waitpid(holder, &status, 0);
  auto lock = DirLock::Acquire(dir.path(), "--train_dir");
  EXPECT_TRUE(lock->held());
  EXPECT_NE(
      DirLock::Holder(dir.path()).find("pid " + std::to_string(::getpid())),
      std::string::npos);
  ::close(ready[0]);
  ::close(ready[1]);
}

// ShareWithChildren: the descriptor that SLIMTORCH_DIR_LOCK_FDS names stays
// open across exec, and a child holding it owns the lock with this process
// (the e2e tests run --num_clones, whose clone 0 adopts it so); a stranger
// is still refused.
TEST(DirLockTest, ChildrenShareTheLockWhenAsked) {
  testing::TempDir dir;
  auto lock = DirLock::Acquire(dir.path(), "--train_dir");
  const char* before = std::getenv("SLIMTORCH_DIR_LOCK_FDS");
  const std::string saved = before ? before : "";
  lock->ShareWithChildren();
  const char* fds = std::getenv("SLIMTORCH_DIR_LOCK_FDS");
  ASSERT_NE(fds, nullptr);
  // The named descriptor is the LOCK file's, open across exec.
  const int fd = std::atoi(
      std::string(fds).substr(std::string(fds).rfind(',') + 1).c_str());
  EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The inherited descriptor shares the open file description, whose
    // lock this already is: taking it again through it succeeds.
    struct flock fl = {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    ::_exit(::fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(OtherProcessCouldLock(lock->path()));
  if (before) {
    ::setenv("SLIMTORCH_DIR_LOCK_FDS", saved.c_str(), 1);
  } else {
    ::unsetenv("SLIMTORCH_DIR_LOCK_FDS");
  }
}

}  // namespace
}  // namespace slimtorch
