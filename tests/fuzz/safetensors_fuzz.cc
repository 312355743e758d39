// Fuzz target: safetensors checkpoints (io/safetensors.h). Input: a mode
// byte; bit 0 set, the rest is the file as it is; clear, a U16-sized JSON
// header and then the data section, which the target joins with the right
// 8-byte header length (so that the fuzzer works on the header grammar and
// the offsets). Every tensor loaded must be a defined CPU tensor.
#include <torch/torch.h>

#include "fuzz_target.h"
#include "slimtorch/core/error.h"
#include "slimtorch/io/safetensors.h"

SLIM_FUZZ_TARGET(safetensors) {
  using namespace slimtorch;  // NOLINT
  fuzz::Input in(data, size);
  const uint8_t mode = in.Byte();
  std::string file;
  if (mode & 1) {
    file = in.Rest();
  } else {
    const std::string header = in.Field();
    for (int i = 0; i < 8; ++i) {
      file += static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
    }
    file += header + in.Rest();
  }
  const std::string path = fuzz::FreshDir("safetensors") + "/model.safetensors";
  fuzz::WriteFile(path, file);
  try {
    const CheckpointData ckpt = LoadCheckpoint(path);
    for (const auto& t : ckpt.tensors) {
      if (!t.tensor.defined() || !t.tensor.device().is_cpu()) std::abort();
    }
  } catch (const Error&) {
  }
  return 0;
}
