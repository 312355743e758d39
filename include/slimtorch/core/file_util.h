#pragma once
// Small file-system helpers shared by the readers and writers.
//
// Every writer of a persisted file (TFRecord shards, labels.txt, checkpoints
// and their index, exports) goes through AtomicFileWriter so that a crash or
// an error never leaves a partial file under its final name. Event files,
// which TensorBoard reads while they grow, are appended instead
// (io/event_writer.h). Both ask core/fault_injection.h before each
// operation, so that tests can make any of them fail.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace slimtorch {

// Reads a whole file; throws slimtorch::Error naming the path on failure.
std::string ReadFileToString(const std::string& path);

// Writes `data` to `path` through an AtomicFileWriter.
void WriteFileAtomically(const std::string& path, const std::string& data);

bool PathExists(const std::string& path);

// Creates `dir` and its parents; throws naming the directory on failure.
void MakeDirs(const std::string& dir);

// Creates `dir` if needed; throws "<what> '<dir>' is not writable:
// <reason>" when it cannot be made or is not a directory.
void MakeDirFor(const std::string& dir, const std::string& what);

// MakeDirFor, then proves `dir` writable by creating and removing a probe
// file; throws "<what> '<dir>' is not writable: <reason>".
void CheckDirWritable(const std::string& dir, const std::string& what);

// Joins two path components with exactly one '/'.
std::string JoinPath(const std::string& a, const std::string& b);

// True when `s` ends with `suffix` (a file name's extension, ...).
bool EndsWith(const std::string& s, const std::string& suffix);

// Paths matching a shell glob pattern, sorted; empty when none match.
std::vector<std::string> Glob(const std::string& pattern);

// fsyncs the directory holding `path`, so that a rename into it outlives a
// crash (best effort: some file systems refuse to sync a directory).
void SyncParentDir(const std::string& path);

// Writes to "<path>.tmp.<pid>.<n>" and renames onto `path` on Commit()
// (after an fsync; the directory is fsynced after the rename). Destroying an
// uncommitted writer removes the temporary file, so a failure anywhere
// before Commit() leaves nothing behind under either name, and an older
// file at `path` unchanged. Errors name `path` and the temporary. Not
// thread-safe; one writer per file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void Write(const void* data, size_t size);
  void Write(const std::string& data) { Write(data.data(), data.size()); }
  // Bytes written so far.
  uint64_t offset() const { return offset_; }
  // Flushes, fsyncs and renames onto the final path. Throws on failure.
  void Commit();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
  bool committed_ = false;
};

}  // namespace slimtorch
