#pragma once
// The counter-based draws of preprocessing.h (CounterHash, CounterUniform,
// CounterUniformInt) for one value, on the host and in CUDA kernels
// (cifar_counter_kernel.h). Persisted behaviour: runs repeat under a seed;
// do not change.

#include <cstdint>

#include "../core/host_device.h"

namespace slimtorch {
namespace counter_hash {

// SplitMix64's finaliser.
SLIMTORCH_HOST_DEVICE inline uint64_t SplitMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The key of parameter k under `seed`.
SLIMTORCH_HOST_DEVICE inline uint64_t Key(uint64_t seed, int64_t k) {
  return SplitMix64(seed +
                    0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(k + 1));
}

constexpr uint64_t kPositionMultiplier = 0xD1342543DE82EF95ULL;

// CounterHash's 64 bits for one position and key.
SLIMTORCH_HOST_DEVICE inline uint64_t Hash(int64_t position, uint64_t key) {
  return SplitMix64(static_cast<uint64_t>(position) * kPositionMultiplier +
                    key);
}

// CounterUniformInt: (hash >>> 11) % (max + 1), max >= 0.
SLIMTORCH_HOST_DEVICE inline int64_t UniformInt(uint64_t hash, int64_t max) {
  return static_cast<int64_t>((hash >> 11) % static_cast<uint64_t>(max + 1));
}

// CounterUniform: u * (hi - lo) + lo, u = (hash >>> 40) * 2^-24, each
// operation rounded in float32, at most below_hi (the float below hi).
// span = hi - lo in float32.
SLIMTORCH_HOST_DEVICE inline float Uniform(uint64_t hash, float lo, float span,
                                           float below_hi) {
  const float u = static_cast<float>(hash >> 40) * (1.0f / 16777216.0f);
  const float v = host_device::AddRn(host_device::MulRn(u, span), lo);
  return v < below_hi ? v : below_hi;
}

}  // namespace counter_hash
}  // namespace slimtorch
