#pragma once
// Image preprocessing (TF-Slim's preprocessing_factory): name → a function
// from one decoded image to the net's input.
//
// Contract of a preprocessing function:
//   image: uint8 [H, W, C] CPU tensor (RGB or grayscale, as decoded).
//   returns: float [C', out_h, out_w] CPU tensor, contiguous (CHW, ready to
//   stack into an NCHW batch).
//   `rng` is this example's own generator (seeded per example by the data
//   pipeline), so results do not depend on thread scheduling.
// Functions are stateless and safe to call from several threads at once.

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "slimtorch/core/registry.h"
#include "slimtorch/preprocessing/augment.h"
#include "slimtorch/preprocessing/image_ops.h"

namespace slimtorch {

struct PreprocessingOptions {
  int64_t output_height = 0;
  int64_t output_width = 0;
  bool is_training = false;
  // --use_grayscale: convert RGB to one channel first.
  bool use_grayscale = false;
  // Training only: --auto_augment and --random_erase (augment.h; null =
  // none). Each example draws its augmentation from its generator after the
  // preprocessing's own draws; the policy runs after the crop and flip, the
  // erasing on the output. The fused photo path and the counter-based GPU
  // draws do not take it (their Create / Get return none).
  std::shared_ptr<const Augmentation> augmentation;
};

using PreprocessingFn = std::function<torch::Tensor(
    const torch::Tensor& image, std::mt19937_64& rng)>;

// Builds the function for one configuration.
using PreprocessingFactory =
    std::function<PreprocessingFn(const PreprocessingOptions& options)>;
using PreprocessingRegistry = Registry<PreprocessingFactory>;
PreprocessingRegistry& GetPreprocessingRegistry();

PreprocessingFn GetPreprocessing(const std::string& name,
                                 const PreprocessingOptions& options);

// The batched form of a preprocessing: the same transformation applied to a
// whole batch with tensor ops on the batch's device (the in-memory data path
// and GPU training use it).
//   images: uint8 [N, H, W, C] on any device (CPU or CUDA), one size for all.
//   rngs: N generators; rngs[i] is exactly the generator the per-image
//     function would get for example i. Random parameters are drawn from
//     them on the CPU, in the order the per-image function draws them, so
//     the result equals the stacked per-image results (up to float rounding).
//   returns: float [N, C', out_h, out_w], contiguous, on the images' device.
// Functions are stateless and safe to call from several threads at once.
using BatchPreprocessingFn = std::function<torch::Tensor(
    const torch::Tensor& images, std::vector<std::mt19937_64>& rngs)>;
using BatchPreprocessingFactory = std::function<BatchPreprocessingFn(
    const PreprocessingOptions& options)>;
using BatchPreprocessingRegistry = Registry<BatchPreprocessingFactory>;
BatchPreprocessingRegistry& GetBatchPreprocessingRegistry();

// Whether `name` has a batched form.
bool HasBatchPreprocessing(const std::string& name);
BatchPreprocessingFn GetBatchPreprocessing(
    const std::string& name, const PreprocessingOptions& options);

// The counter-based batched form (training batches augmented on a GPU):
// every random parameter of the example at stream position p is a function
// of (seed, p) alone, hashed with integer tensor ops on the images' device
// (CounterHash), so a batch needs nothing drawn on or copied from the CPU,
// and a run resumed at any position draws what the uninterrupted run drew.
// Same transformation and distributions as the batched form; different
// values (the CPU forms draw from per-example std::mt19937_64 streams).
//   images: uint8 [N, H, W, C]; positions: int64 [N], same device.
//   returns: float [N, C', out_h, out_w], contiguous, on that device.
using CounterBatchPreprocessingFn =
    std::function<torch::Tensor(const torch::Tensor& images,
                                const torch::Tensor& positions, uint64_t seed)>;
using CounterBatchPreprocessingFactory =
    std::function<CounterBatchPreprocessingFn(
        const PreprocessingOptions& options)>;
using CounterBatchPreprocessingRegistry =
    Registry<CounterBatchPreprocessingFactory>;
CounterBatchPreprocessingRegistry& GetCounterBatchPreprocessingRegistry();

// The counter-based form of `name`, or an empty function when it has none.
CounterBatchPreprocessingFn GetCounterBatchPreprocessing(
    const std::string& name, const PreprocessingOptions& options);

// 64 uniform bits for each position (int64 [N], any device) as int64: the
// SplitMix64 finaliser of (seed, position, k) (persisted behaviour: runs
// repeat under a seed; do not change). k numbers a parameter of the example.
torch::Tensor CounterHash(const torch::Tensor& positions, uint64_t seed,
                          int64_t k);
// CounterHash(positions, seed, k) for k = 0..count-1 as the columns of one
// int64 [N, count], in a dozen kernels whatever the count.
torch::Tensor CounterHashes(const torch::Tensor& positions, uint64_t seed,
                            int64_t count);
// Floats uniform in [lo, hi) from the top 24 bits of a CounterHash:
// lo + (hi - lo) * u, u = bits * 2^-24, in float32.
torch::Tensor CounterUniform(const torch::Tensor& hash, float lo, float hi);
// Integers uniform in [0, max] (int64): (hash >>> 11) % (max + 1).
torch::Tensor CounterUniformInt(const torch::Tensor& hash, int64_t max);

// Channels a preprocessing produces for `input_channels` stored channels.
int64_t PreprocessedChannels(int64_t input_channels,
                             const PreprocessingOptions& options);

}  // namespace slimtorch

#define SLIM_REGISTER_PREPROCESSING(name, factory)                          \
  SLIM_STATIC_REGISTRATION(                                                 \
      [] { ::slimtorch::GetPreprocessingRegistry().Register(name, factory); })

#define SLIM_REGISTER_BATCH_PREPROCESSING(name, factory)         \
  SLIM_STATIC_REGISTRATION([] {                                  \
    ::slimtorch::GetBatchPreprocessingRegistry().Register(name,  \
                                                          factory); \
  })
