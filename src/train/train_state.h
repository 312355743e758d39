#pragma once
// What a training run is beside its variables, optimizer slots and moving
// averages (private to the trainer): the state a checkpoint holds so that a
// resumed run continues exactly where the saved one stopped, and the run's
// own CPU random generator.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "slimtorch/core/named_tensor.h"
#include "slimtorch/io/safetensors.h"

namespace slimtorch {

// The CPU random generator of one run. LibTorch's initializers and layers
// (dropout, drop path) draw from the process's default CPU generator only,
// so a Scope swaps the run's state in for the length of one of the run's
// calls and the caller's back in after it: every draw the run makes comes
// from its own sequence, and the caller's sequence is as it left it. A run
// starts from the state torch::manual_seed would give; CUDA generators stay
// the process's.
class RunGenerator {
 public:
  // The state of a CPU generator seeded with `seed`.
  explicit RunGenerator(uint64_t seed);

  // The run's state: within a Scope, the default generator's now; outside,
  // as the last Scope left it.
  torch::Tensor state() const;
  void set_state(const torch::Tensor& state);

  // Swaps the run's state into the default generator (nested scopes of one
  // generator swap once).
  class Scope {
   public:
    explicit Scope(RunGenerator& generator);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    RunGenerator& generator_;
    torch::Tensor caller_;  // the caller's state, put back at the end
  };

 private:
  torch::Tensor state_;
  int depth_ = 0;
};

// The run's position beside its variables.
struct TrainState {
  int64_t global_step = 0;
  // Examples the input has handed out, and the record reader's state there
  // (null for the in-memory input).
  int64_t input_position = 0;
  std::shared_ptr<const std::string> input_state;
  // The run's CPU generator (RunGenerator::state()).
  torch::Tensor rng_state;
};

// Appends `state` to `tensors` under its persisted names.
void AppendTrainState(const TrainState& state, NamedTensors* tensors);

// The TrainState in checkpoint `path`; throws naming `path` when it has no
// global step. A checkpoint without an input position resumes at
// global_step * batch_size, one without a generator state leaves rng_state
// undefined.
TrainState ReadTrainState(const CheckpointData& ckpt, const std::string& path,
                          int64_t batch_size);

}  // namespace slimtorch
