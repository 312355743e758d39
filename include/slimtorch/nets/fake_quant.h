#pragma once
// TensorFlow's fake quantization (tf.quantization.fake_quant_with_min_max_vars
// and its _per_channel form, the ops contrib.quantize inserts), and the
// moving averages its activation ranges follow. Tensor ops on any device
// (no host synchronisation): the range arrives as tensors, the nudging is
// computed from them in float32 as TensorFlow's kernel computes it.
//
// For a range [min, max] and b bits, with qmin = narrow_range ? 1 : 0 and
// qmax = 2^b - 1, every step float32 as TensorFlow 2.21's kernel
// (tensorflow/core/kernels/fake_quant_ops_functor.h) computes it:
//   scale = (max - min) / (qmax - qmin)
//   inv_scale = (qmax - qmin) / (max - min)   (recomputed, not 1 / scale)
//   zero_point_from_min = qmin - min / scale
//   nudged zero point = qmin below qmin, qmax above qmax, else round(it)
//     (std::round: half away from zero, so 2.5 -> 3)
//   nudged_min = (qmin - zp) * scale, nudged_max = (qmax - zp) * scale
//   quant_zero = floor(-nudged_min * inv_scale + 0.5)
// so that 0 is exactly on the grid (and FakeQuant(0) == 0 for any range).
// Forward, c = max(min(x, nudged_max), nudged_min):
//   per tensor:  y = floor((c - nudged_min) / scale - quant_zero + 0.5) * scale
//   per channel: y = floor((c - nudged_min) * inv_scale - quant_zero + 0.5)
//                    * scale
// (the two kernels differ in that one operation, so an input within an
// ulp of a tie between two grid points can land on different points).
// A range with min == max == 0 gives y = 0 and passes dy through to x.
// Gradient (straight through inside the range): dx = dy where
// nudged_min <= x <= nudged_max, else 0 (dy * 0, so -0 for a negative
// dy); dmin = sum of dy where x < nudged_min, dmax = sum of dy where x >
// nudged_max (per channel: summed per channel). TensorFlow's CPU kernels
// run with denormals treated as zero, ours compare IEEE values: a denormal
// x just outside a nudged end at 0 is outside here, inside there.
//
// Contiguous float32 data on the CPU goes through fused kernels (one pass
// forward, one backward; src/nets/kernels/cpu/fake_quant_kernel.h), the
// rest through tensor ops; both give TensorFlow's bits for y and dx.

#include <torch/torch.h>

#include <cstdint>

namespace slimtorch {
namespace nets {

// The grid a range is nudged to (float32 values, as TensorFlow's kernel).
// For min == max == 0 (TensorFlow's zeros): min = max = scale = 0 and
// zero_point = qmin, rather than the formulas' NaN.
struct Nudged {
  torch::Tensor min;         // nudged_min, min's shape
  torch::Tensor max;         // nudged_max
  torch::Tensor scale;       // (max - min) / (qmax - qmin)
  torch::Tensor zero_point;  // the nudged zero point in [qmin, qmax], float
};
// `min`, `max`: 0-d tensors, or [C] for a per-channel range.
Nudged NudgeRange(const torch::Tensor& min, const torch::Tensor& max,
                  int64_t num_bits, bool narrow_range);

// FakeQuantWithMinMaxVars: `min`, `max` 0-d (or one-element) float tensors,
// best on x's device (moved there otherwise). Differentiable in x, min and
// max (TensorFlow's gradients, above); y has x's dtype, computed in
// float32. num_bits in [2, 16] (throws otherwise); min <= 0 <= max is not
// required (nudging handles it); min < max or min == max == 0 is: a range
// on the CPU that is neither throws, naming it. A range on a GPU is not
// read back (no synchronisation) and gets TensorFlow's values for it (NaN
// for min == max != 0).
torch::Tensor FakeQuant(const torch::Tensor& x, const torch::Tensor& min,
                        const torch::Tensor& max, int64_t num_bits = 8,
                        bool narrow_range = false);

// FakeQuantWithMinMaxVarsPerChannel, with the channels along `axis` of x
// (TensorFlow's op takes the last dimension; our weights [out, in, kh, kw]
// have theirs on axis 0, NCHW activations on axis 1; negative counts from
// the end). min, max: [C] with C = x.size(axis); per channel as
// FakeQuant (a channel with min == max == 0 gives zeros).
torch::Tensor FakeQuantPerChannel(const torch::Tensor& x,
                                  const torch::Tensor& min,
                                  const torch::Tensor& max, int64_t axis,
                                  int64_t num_bits = 8,
                                  bool narrow_range = false);

// tf.compat.v1.train.assign_moving_average(variable, value, decay,
// zero_debias) in place, no gradient:
//   zero_debias false: variable -= (1 - decay) * (variable - value)
//   zero_debias true (TF1's default, which contrib.quantize's ranges get):
//     biased -= (1 - decay) * (biased - value); local_step += 1;
//     variable = biased / (1 - decay^local_step)
//   (`biased`, `local_step` are the shadow variables TF creates beside the
//   variable, "<variable>/biased" and "<variable>/local_step"; both start at
//   zero.) All tensors on one device; local_step float32 0-d as TF's.
// In float32 as tensorflow/python/training/moving_averages.py computes it
// (TF 2.21): d = float32(1 - decay) (the Python double, converted), the
// update variable - (variable - value) * d, and with zero debias
//   bias_factor = 1 - pow(1 - d, local_step)   (1 - d in float32 too)
//   variable = biased / bias_factor
// so the first debiased value is the first value only to rounding.
void AssignMovingAverage(torch::Tensor& variable, const torch::Tensor& value,
                         double decay);
void AssignMovingAverageZeroDebias(torch::Tensor& variable,
                                   torch::Tensor& biased,
                                   torch::Tensor& local_step,
                                   const torch::Tensor& value, double decay);

}  // namespace nets
}  // namespace slimtorch
