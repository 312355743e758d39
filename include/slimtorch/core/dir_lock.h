#pragma once
// One writer per directory: an exclusive lock on <dir>/LOCK, held from
// Acquire until the last holder lets go or the process ends (the kernel
// releases it when a process dies, kill -9 included: nothing is left to
// clean up). Its owner writes "host H pid P since T" into the file, and a
// second writer is refused at once with that text.
//
// The lock is a Linux open-file-description lock (fcntl F_OFD_SETLK): it
// belongs to the open LOCK file, not to the process, so two Acquire calls
// in one process share one lock (the same DirLock), and processes started
// with ShareWithChildren's environment own it together with this one.
// File systems without such locks (NFS mounted without a lock manager,
// some FUSE file systems) answer with an error: Acquire then warns that
// the directory is unguarded and goes on; a lock call that does not answer
// within a few seconds (an unreachable NFS lock manager) is treated the
// same way: Acquire never hangs.

#include <memory>
#include <string>

namespace slimtorch {

class DirLock {
 public:
  // Locks `dir` (made when missing) for this process, or returns the lock
  // this process already holds on it. `what` names the directory in
  // errors ("--train_dir"). Throws slimtorch::Error naming the holder when
  // another process holds it, and "<what> '<dir>' is not writable: ..."
  // when the directory or its LOCK file cannot be made.
  static std::shared_ptr<DirLock> Acquire(const std::string& dir,
                                          const std::string& what);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  // True when the lock is held; false on a file system without locks
  // (Acquire warned).
  bool held() const { return held_; }
  const std::string& path() const { return path_; }

  // Lets processes this one starts (fork + exec) own the lock too: the
  // LOCK file's descriptor stays open across exec and the environment
  // variable SLIMTORCH_DIR_LOCK_FDS names it, so that their Acquire of the
  // same directory adopts it instead of being refused. Call it before
  // starting them; the environment is this process's.
  void ShareWithChildren();

  // The text the holder of `dir`'s lock wrote ("" when there is none).
  static std::string Holder(const std::string& dir);

 private:
  DirLock(std::string path, int fd, bool held)
      : path_(std::move(path)), fd_(fd), held_(held) {}
  std::string path_;
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace slimtorch
