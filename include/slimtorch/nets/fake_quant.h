#pragma once
// TensorFlow's fake quantization (tf.quantization.fake_quant_with_min_max_vars
// and its _per_channel form, the ops contrib.quantize inserts), and the
// moving averages its activation ranges follow. Tensor ops on any device
// (no host synchronisation): the range arrives as tensors, the nudging is
// computed from them in float32 as TensorFlow's kernel computes it.
//
// For a range [min, max] and b bits, with qmin = narrow_range ? 1 : 0 and
// qmax = 2^b - 1:
//   scale = (max - min) / (qmax - qmin)
//   zero_point_from_min = qmin - min / scale
//   nudged zero point = qmin below qmin, qmax above qmax, else round(it)
//     (half away from zero)
//   nudged_min = (qmin - zp) * scale, nudged_max = (qmax - zp) * scale
// so that 0 is exactly on the grid. Forward:
//   y = floor((clamp(x, nudged_min, nudged_max) - nudged_min) / scale + 0.5)
//       * scale + nudged_min
// Gradient (straight through inside the range): dx = dy where
// nudged_min <= x <= nudged_max, else 0; dmin = sum of dy where x <
// nudged_min, dmax = sum of dy where x > nudged_max (per channel: summed
// per channel).

#include <torch/torch.h>

#include <cstdint>

namespace slimtorch {
namespace nets {

// The grid a range is nudged to (float32 values, as TensorFlow's kernel).
struct Nudged {
  torch::Tensor min;         // nudged_min, min's shape
  torch::Tensor max;         // nudged_max
  torch::Tensor scale;       // (max - min) / (qmax - qmin)
  torch::Tensor zero_point;  // the nudged zero point in [qmin, qmax], float
};
// `min`, `max`: 0-d tensors, or [C] for a per-channel range.
Nudged NudgeRange(const torch::Tensor& min, const torch::Tensor& max,
                  int64_t num_bits, bool narrow_range);

// FakeQuantWithMinMaxVars: `min`, `max` 0-d float tensors on x's device.
// Differentiable in x, min and max (TensorFlow's gradients, above).
// num_bits in [2, 16]; min <= 0 <= max is not required (nudging handles
// it), min < max is (throws otherwise, naming the range).
torch::Tensor FakeQuant(const torch::Tensor& x, const torch::Tensor& min,
                        const torch::Tensor& max, int64_t num_bits = 8,
                        bool narrow_range = false);

// FakeQuantWithMinMaxVarsPerChannel, with the channels along `axis` of x
// (TensorFlow's op takes the last dimension; our weights [out, in, kh, kw]
// have theirs on axis 0, NCHW activations on axis 1). min, max: [C].
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
void AssignMovingAverage(torch::Tensor& variable, const torch::Tensor& value,
                         double decay);
void AssignMovingAverageZeroDebias(torch::Tensor& variable,
                                   torch::Tensor& biased,
                                   torch::Tensor& local_step,
                                   const torch::Tensor& value, double decay);

}  // namespace nets
}  // namespace slimtorch
