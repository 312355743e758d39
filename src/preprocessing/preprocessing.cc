#include "slimtorch/preprocessing/preprocessing.h"

#include <cmath>
#include <cstring>

#include "counter_hash.h"
#include "slimtorch/core/error.h"

namespace slimtorch {

PreprocessingRegistry& GetPreprocessingRegistry() {
  static PreprocessingRegistry registry("preprocessing");
  return registry;
}

PreprocessingFn GetPreprocessing(const std::string& name,
                                 const PreprocessingOptions& options) {
  SLIM_CHECK(options.output_height > 0 && options.output_width > 0,
             "preprocessing '", name, "': output size must be positive, got ",
             options.output_height, "x", options.output_width);
  return GetPreprocessingRegistry().Get(name)(options);
}

BatchPreprocessingRegistry& GetBatchPreprocessingRegistry() {
  static BatchPreprocessingRegistry registry("batched preprocessing");
  return registry;
}

bool HasBatchPreprocessing(const std::string& name) {
  return GetBatchPreprocessingRegistry().Has(name);
}

BatchPreprocessingFn GetBatchPreprocessing(
    const std::string& name, const PreprocessingOptions& options) {
  SLIM_CHECK(options.output_height > 0 && options.output_width > 0,
             "preprocessing '", name, "': output size must be positive, got ",
             options.output_height, "x", options.output_width);
  return GetBatchPreprocessingRegistry().Get(name)(options);
}

CounterBatchPreprocessingRegistry& GetCounterBatchPreprocessingRegistry() {
  static CounterBatchPreprocessingRegistry registry(
      "counter-based batched preprocessing");
  return registry;
}

CounterBatchPreprocessingFn GetCounterBatchPreprocessing(
    const std::string& name, const PreprocessingOptions& options) {
  if (!GetCounterBatchPreprocessingRegistry().Has(name)) return {};
  // The augmentation draws from the per-example generators (host draws).
  if (options.augmentation != nullptr) return {};
  SLIM_CHECK(options.output_height > 0 && options.output_width > 0,
             "preprocessing '", name, "': output size must be positive, got ",
             options.output_height, "x", options.output_width);
  return GetCounterBatchPreprocessingRegistry().Get(name)(options);
}

namespace {

// uint64 constants as the int64 bit patterns tensors hold.
int64_t Bits(uint64_t x) {
  int64_t out;
  std::memcpy(&out, &x, sizeof(out));
  return out;
}

// x >>> s (logical) on int64 tensors: an arithmetic shift, sign bits masked.
torch::Tensor ShiftRightLogical(const torch::Tensor& x, int64_t s) {
  return torch::bitwise_and(torch::bitwise_right_shift(x, s),
                            Bits((~uint64_t{0}) >> s));
}

// The key of parameter k under `seed`, as int64 bits.
int64_t CounterKey(uint64_t seed, int64_t k) {
  return Bits(counter_hash::Key(seed, k));
}

// SplitMix64's finaliser of z, elementwise. The products wrap modulo 2^64
// as int64 arithmetic does on every device.
torch::Tensor SplitMixTensor(torch::Tensor z) {
  z = torch::bitwise_xor(z, ShiftRightLogical(z, 30)) *
      Bits(0xBF58476D1CE4E5B9ULL);
  z = torch::bitwise_xor(z, ShiftRightLogical(z, 27)) *
      Bits(0x94D049BB133111EBULL);
  return torch::bitwise_xor(z, ShiftRightLogical(z, 31));
}

void CheckPositions(const torch::Tensor& positions) {
  SLIM_CHECK(positions.scalar_type() == torch::kInt64,
             "CounterHash: positions must be int64, got ",
             positions.scalar_type());
}

}  // namespace

torch::Tensor CounterHash(const torch::Tensor& positions, uint64_t seed,
                          int64_t k) {
  CheckPositions(positions);
  // z = position * golden + key(seed, k), then SplitMix64's finaliser.
  return SplitMixTensor(positions * Bits(counter_hash::kPositionMultiplier) +
                        CounterKey(seed, k));
}

torch::Tensor CounterHashes(const torch::Tensor& positions, uint64_t seed,
                            int64_t count) {
  CheckPositions(positions);
  SLIM_CHECK(positions.dim() == 1 && count >= 1,
             "CounterHashes: expected positions [N] and count >= 1, got ",
             positions.sizes(), " and ", count);
  // The keys filled in on the device (no copy from the host, so that a
  // CUDA graph can capture this), then all columns in one pass of ops.
  torch::Tensor keys = torch::empty({count}, positions.options());
  for (int64_t k = 0; k < count; ++k) keys[k].fill_(CounterKey(seed, k));
  return SplitMixTensor(
      positions.unsqueeze(1) * Bits(counter_hash::kPositionMultiplier) + keys);
}

torch::Tensor CounterUniform(const torch::Tensor& hash, float lo, float hi) {
  torch::Tensor u =
      ShiftRightLogical(hash, 40).to(torch::kFloat32) * (1.0f / 16777216.0f);
  // Rounding may reach hi; the next float below keeps [lo, hi).
  return (u * (hi - lo) + lo).clamp_max(std::nextafter(hi, lo));
}

torch::Tensor CounterUniformInt(const torch::Tensor& hash, int64_t max) {
  SLIM_CHECK(max >= 0, "CounterUniformInt: max must be >= 0, got ", max);
  return torch::remainder(ShiftRightLogical(hash, 11), max + 1);
}

int64_t PreprocessedChannels(int64_t input_channels,
                             const PreprocessingOptions& options) {
  return options.use_grayscale ? 1 : input_channels;
}

}  // namespace slimtorch
