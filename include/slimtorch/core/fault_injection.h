#pragma once
// Storage faults injected into the file layer, as LevelDB's fault-injection
// Env does: every writer of a persisted file (AtomicFileWriter, so
// checkpoints, the "checkpoint" index, TFRecord shards, labels.txt, exports;
// and the event writer) asks CheckFileFault() before each open, write, fsync
// and rename, and fails as the system call would when a fault is due. Tests
// install faults with SetFileFaults(); the executables take them from the
// environment variable SLIMTORCH_FAULT_INJECT (docs/runtime_switches.md),
// so that end-to-end tests can fill a disk or make it read-only at a chosen
// point of a real run. Without faults the check is one relaxed atomic load.
//
// Thread-safe.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace slimtorch {

// The operations a fault can hit.
enum class FileOp { kOpen, kWrite, kFsync, kRename };

// One injected fault: operations `op` on files whose final path (not the
// temporary one) matches the shell pattern `pattern` (fnmatch without
// FNM_PATHNAME: '*' also matches '/') go ahead while fewer than `after` of
// them have run (kWrite: while fewer than `after` bytes have been written to
// all matching files together, a disk with `after` bytes free), then fail
// with errno `error`, and so does every later one (a full disk stays full, a
// read-only one read-only).
struct FileFault {
  FileOp op = FileOp::kWrite;
  std::string pattern = "*";
  uint64_t after = 0;
  int error = 0;
};

// Parses SLIMTORCH_FAULT_INJECT's syntax: faults separated by ';', each
// "<op>:<pattern>:<after>:<errno>" with op one of open, write, fsync, rename
// and errno a name (ENOSPC, EIO, EROFS, EACCES, EFBIG, EDQUOT, ENOENT) or a
// positive number, e.g. "write:*/model.ckpt-4.safetensors:1000:ENOSPC".
// Throws slimtorch::Error naming the bad part.
std::vector<FileFault> ParseFileFaults(const std::string& spec);

// Replaces the faults in force and their counts; an empty list turns
// injection off. Until the first call the faults are those of
// SLIMTORCH_FAULT_INJECT, read once at the first check.
void SetFileFaults(std::vector<FileFault> faults);

// Called before operation `op` on the file whose final path is `path`.
// Returns 0 to go ahead, or the errno to fail with. For kWrite, `*size` is
// the number of bytes about to be written; when a fault is due within them,
// *size is cut to the bytes that may still be written first (a short write
// precedes the failure) and the errno is returned.
int CheckFileFault(FileOp op, const std::string& path, size_t* size = nullptr);

}  // namespace slimtorch
