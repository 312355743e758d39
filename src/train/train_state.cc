#include "train_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>
#include <mutex>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// Checkpoint keys beside the model variables and optimizer slots.
// Persisted names: do not change.
constexpr const char* kGlobalStepKey = "global_step";
constexpr const char* kRngStateKey = "slimtorch/cpu_rng_state";
constexpr const char* kInputPositionKey = "slimtorch/input_position";
// The record reader's state at input_position, as uint8 bytes; absent for
// the in-memory input.
constexpr const char* kInputStateKey = "slimtorch/input_state";

torch::Tensor DefaultState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetDefaultState(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

RunGenerator::RunGenerator(uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  state_ = gen.get_state();
}

torch::Tensor RunGenerator::state() const {
  return depth_ > 0 ? DefaultState() : state_;
}

void RunGenerator::set_state(const torch::Tensor& state) {
  if (depth_ > 0) {
    SetDefaultState(state);
  } else {
    state_ = state.clone();
  }
}

RunGenerator::Scope::Scope(RunGenerator& generator) : generator_(generator) {
  if (generator_.depth_++ > 0) return;
  caller_ = DefaultState();
  SetDefaultState(generator_.state_);
}

RunGenerator::Scope::~Scope() {
  if (--generator_.depth_ > 0) return;
  generator_.state_ = DefaultState();
  SetDefaultState(caller_);
}

void AppendTrainState(const TrainState& state, NamedTensors* tensors) {
  tensors->push_back(
      {kGlobalStepKey, torch::tensor(state.global_step, torch::kInt64)});
  tensors->push_back({kRngStateKey, state.rng_state});
  tensors->push_back(
      {kInputPositionKey, torch::tensor(state.input_position, torch::kInt64)});
  if (!state.input_state) return;
  torch::Tensor bytes = torch::empty(
      {static_cast<int64_t>(state.input_state->size())}, torch::kUInt8);
  std::memcpy(bytes.data_ptr<uint8_t>(), state.input_state->data(),
              state.input_state->size());
  tensors->push_back({kInputStateKey, bytes});
}

TrainState ReadTrainState(const CheckpointData& ckpt, const std::string& path,
                          int64_t batch_size) {
  TrainState state;
  torch::Tensor step = ckpt.Find(kGlobalStepKey);
  SLIM_CHECK(step.defined() && step.numel() == 1, "checkpoint '", path,
             "' has no ", kGlobalStepKey);
  state.global_step = step.item<int64_t>();
  state.rng_state = ckpt.Find(kRngStateKey);
  torch::Tensor pos = ckpt.Find(kInputPositionKey);
  state.input_position =
      pos.defined() ? pos.item<int64_t>() : state.global_step * batch_size;
  torch::Tensor input_state = ckpt.Find(kInputStateKey);
  if (input_state.defined() && input_state.scalar_type() == torch::kUInt8) {
    torch::Tensor bytes = input_state.contiguous().cpu();
    state.input_state = std::make_shared<const std::string>(
        reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
        static_cast<size_t>(bytes.numel()));
  }
  return state;
}

}  // namespace slimtorch
