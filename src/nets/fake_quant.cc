#include "slimtorch/nets/fake_quant.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/fake_quant_kernel.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace nets {
namespace {

// Everything TensorFlow's Nudge and the kernels derive from a range, as
// float32 tensors of the range's shape (0-d or [C]) on its device.
// tensorflow/core/kernels/fake_quant_ops_functor.h (TF 2.21):
//   scale = (max - min) / (qmax - qmin)
//   inv_scale = (qmax - qmin) / (max - min)   (recomputed, not 1 / scale)
//   zero_point_from_min = qmin - min / scale
//   nudged zero point: qmin below qmin, qmax above, else std::round (half
//     away from zero), then cast to uint16
//   nudged_min = (qmin - nzp) * scale, nudged_max = (qmax - nzp) * scale
//   quant_zero = floor(-nudged_min * inv_scale + 0.5)
// and a range with min == max == 0 is special-cased before any of it.
struct Grid {
  torch::Tensor nudged_min;
  torch::Tensor nudged_max;
  torch::Tensor scale;
  torch::Tensor inv_scale;
  torch::Tensor quant_zero;
  torch::Tensor zero_point;  // the nudged zero point, a float
  torch::Tensor zero_range;  // bool: min == max == 0
};

torch::Tensor Constant(const torch::Tensor& like, float value) {
  // A 0-d tensor on the range's device rather than a host scalar: CUDA
  // divides by a host scalar as a multiplication by its reciprocal, which
  // is not TensorFlow's division.
  return torch::full({}, value, like.options());
}

// std::round for the non-negative values it is applied to (floor(z + 0.5)
// would round 0.49999997 up: the sum rounds to 1).
torch::Tensor RoundHalfAway(const torch::Tensor& z) {
  torch::Tensor whole = z.trunc();
  return whole + (z - whole >= 0.5).to(z.scalar_type());
}

Grid ComputeGrid(const torch::Tensor& min, const torch::Tensor& max,
                 int64_t num_bits, bool narrow_range) {
  const float qmin = narrow_range ? 1.0f : 0.0f;
  const float qmax = static_cast<float>((int64_t{1} << num_bits) - 1);
  const torch::Tensor qmin_t = Constant(min, qmin);
  const torch::Tensor qmax_t = Constant(min, qmax);
  const torch::Tensor levels = Constant(min, qmax - qmin);
  Grid g;
  g.scale = (max - min) / levels;
  g.inv_scale = levels / (max - min);
  const torch::Tensor from_min = qmin_t - min / g.scale;
  g.zero_point = torch::where(
      from_min < qmin, qmin_t,
      torch::where(from_min > qmax, qmax_t, RoundHalfAway(from_min)));
  g.nudged_min = (qmin_t - g.zero_point) * g.scale;
  g.nudged_max = (qmax_t - g.zero_point) * g.scale;
  g.quant_zero = (-g.nudged_min * g.inv_scale + 0.5).floor_();
  g.zero_range = (min == 0) & (max == 0);
  return g;
}

void CheckBits(int64_t num_bits) {
  SLIM_CHECK(num_bits >= 2 && num_bits <= 16,
             "FakeQuant: num_bits must be in [2, 16], got ", num_bits);
}

// TensorFlow computes whatever an empty or inverted range gives (NaN for
// min == max != 0); we refuse one where the range can be read without a
// device synchronisation, i.e. on the CPU. Ranges on a GPU are not read
// back and get TensorFlow's values.
void CheckRangeOnCpu(const torch::Tensor& min, const torch::Tensor& max,
                     const char* op) {
  if (!min.device().is_cpu() || !max.device().is_cpu()) return;
  const torch::Tensor bad =
      (min > max) | ((min == max) & (min != 0)) | min.isnan() | max.isnan();
  if (!bad.any().item<bool>()) return;
  const int64_t i = bad.reshape(-1).nonzero()[0][0].item<int64_t>();
  const float lo = min.reshape(-1)[i].item<float>();
  const float hi = max.reshape(-1)[i].item<float>();
  SLIM_FAIL(op, ": the range must have min < max (or min == max == 0, which ",
            "gives zeros), got [", lo, ", ", hi, "]",
            min.dim() > 0 ? StrCat(" for channel ", i) : std::string());
}

// x's float32 version and the range as float32 on x's device.
struct Inputs {
  torch::Tensor x;
  torch::Tensor min;
  torch::Tensor max;
};

Inputs Prepare(const torch::Tensor& x, const torch::Tensor& min,
               const torch::Tensor& max) {
  const auto options = x.options().dtype(torch::kFloat);
  return {x.to(torch::kFloat), min.to(options), max.to(options)};
}

// The shape that lines a [C] range up with `axis` of an x of `rank`
// dimensions; {} for a per-tensor range.
std::vector<int64_t> RangeView(int64_t rank, int64_t axis, int64_t channels) {
  if (axis < 0) return {};
  std::vector<int64_t> shape(rank, 1);
  shape[axis] = channels;
  return shape;
}

Grid Reshaped(Grid g, const std::vector<int64_t>& shape) {
  for (torch::Tensor* t : {&g.nudged_min, &g.nudged_max, &g.scale,
                           &g.inv_scale, &g.quant_zero, &g.zero_point,
                           &g.zero_range}) {
    *t = t->reshape(shape);
  }
  return g;
}

// The forward pass with tensor ops, in TensorFlow's order of operations:
// the per-tensor kernel divides by the scale, the per-channel kernel
// multiplies by inv_scale (they differ in the last bit, which moves some
// ties to the other grid point).
torch::Tensor QuantizeOps(const torch::Tensor& x, const Grid& g,
                          bool per_channel) {
  torch::Tensor y = torch::minimum(x, g.nudged_max);
  at::maximum_out(y, y, g.nudged_min);
  y.sub_(g.nudged_min);
  if (per_channel) {
    y.mul_(g.inv_scale);
  } else {
    y.div_(g.scale);
  }
  y.sub_(g.quant_zero).add_(0.5).floor_().mul_(g.scale);
  return y.masked_fill_(g.zero_range, 0.0);
}

// dx = dy inside [nudged_min, nudged_max] (everywhere for a zero range),
// dmin and dmax the sums of dy below and above it, per channel along
// `axis` (-1: one range).
torch::autograd::variable_list Gradients(const torch::Tensor& dy,
                                         const torch::Tensor& x, const Grid& g,
                                         int64_t axis, bool need_min,
                                         bool need_max) {
  const torch::Tensor inside =
      ((x >= g.nudged_min) & (x <= g.nudged_max)) | g.zero_range;
  torch::Tensor dx = dy * inside.to(dy.scalar_type());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d != axis) dims.push_back(d);
  }
  auto sum_where = [&](const torch::Tensor& mask) {
    const torch::Tensor masked =
        dy * (mask & g.zero_range.logical_not()).to(dy.scalar_type());
    return dims.empty() ? masked : masked.sum(dims);
  };
  torch::Tensor dmin = need_min ? sum_where(x < g.nudged_min) : torch::Tensor();
  torch::Tensor dmax = need_max ? sum_where(x > g.nudged_max) : torch::Tensor();
  return {dx, dmin, dmax};
}

// ---- The fused CPU kernels (contiguous float32 on the CPU). ----

using internal::FakeQuantGrid;
using internal::FakeQuantLayout;

// Values per row of a per-tensor range (see fake_quant_kernel.h).
constexpr int64_t kPerTensorRow = int64_t{1} << 14;

bool UseCpuKernel(const torch::Tensor& x) {
  return x.is_cpu() && x.is_contiguous() && x.scalar_type() == torch::kFloat;
}

FakeQuantLayout CpuLayout(const torch::Tensor& x, int64_t axis) {
  if (axis < 0) return {x.numel(), kPerTensorRow, 1, false};
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < x.dim(); ++d) inner *= x.size(d);
  return {x.numel(), std::max<int64_t>(inner, 1), x.size(axis), true};
}

// The grid's values on the host (the range lives on the CPU here); fields
// whose tensors are undefined stay 0.
std::vector<FakeQuantGrid> CpuGrids(const Grid& g) {
  const int64_t n = g.nudged_min.numel();
  std::vector<FakeQuantGrid> grids(n, FakeQuantGrid{});
  auto fill = [&](const torch::Tensor& t, float FakeQuantGrid::*field) {
    if (!t.defined()) return;
    const torch::Tensor c = t.reshape(-1).contiguous();
    const float* v = c.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) grids[i].*field = v[i];
  };
  fill(g.nudged_min, &FakeQuantGrid::nudged_min);
  fill(g.nudged_max, &FakeQuantGrid::nudged_max);
  fill(g.scale, &FakeQuantGrid::scale);
  fill(g.inv_scale, &FakeQuantGrid::inv_scale);
  fill(g.quant_zero, &FakeQuantGrid::quant_zero);
  const torch::Tensor zero = g.zero_range.reshape(-1).contiguous();
  for (int64_t i = 0; i < n; ++i) {
    grids[i].zero_range = zero.data_ptr<bool>()[i];
  }
  return grids;
}

torch::Tensor QuantizeCpu(const torch::Tensor& x, const Grid& g,
                          int64_t axis) {
  torch::Tensor y = torch::empty_like(x);
  if (x.numel() == 0) return y;
  const std::vector<FakeQuantGrid> grids = CpuGrids(g);
  internal::FakeQuantForwardCpu(x.data_ptr<float>(), y.data_ptr<float>(),
                                grids.data(), CpuLayout(x, axis));
  return y;
}

torch::autograd::variable_list GradientsCpu(const torch::Tensor& dy,
                                            const torch::Tensor& x,
                                            const Grid& g, int64_t axis,
                                            bool need_min, bool need_max) {
  const std::vector<int64_t> range_shape =
      axis < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{x.size(axis)};
  torch::Tensor dx = torch::empty_like(x);
  torch::Tensor dmin = torch::zeros(range_shape, x.options());
  torch::Tensor dmax = torch::zeros(range_shape, x.options());
  if (x.numel() > 0) {
    const std::vector<FakeQuantGrid> grids = CpuGrids(g);
    internal::FakeQuantBackwardCpu(
        x.data_ptr<float>(), dy.data_ptr<float>(), dx.data_ptr<float>(),
        need_min ? dmin.data_ptr<float>() : nullptr,
        need_max ? dmax.data_ptr<float>() : nullptr, grids.data(),
        CpuLayout(x, axis));
  }
  return {dx, need_min ? dmin : torch::Tensor(),
          need_max ? dmax : torch::Tensor()};
}

class FakeQuantFunction : public torch::autograd::Function<FakeQuantFunction> {
 public:
  // x, min, max: float32 on one device; min, max 0-d (axis -1) or [C] with
  // C = x.size(axis).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, const torch::Tensor& min,
                               const torch::Tensor& max, int64_t num_bits,
                               bool narrow_range, int64_t axis) {
    const Grid g = Reshaped(ComputeGrid(min, max, num_bits, narrow_range),
                            RangeView(x.dim(), axis, min.numel()));
    ctx->save_for_backward({x, g.nudged_min, g.nudged_max, g.zero_range});
    ctx->saved_data["axis"] = axis;
    return UseCpuKernel(x) ? QuantizeCpu(x, g, axis)
                           : QuantizeOps(x, g, axis >= 0);
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    Grid g;
    g.nudged_min = saved[1];
    g.nudged_max = saved[2];
    g.zero_range = saved[3];
    const torch::Tensor& x = saved[0];
    const torch::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous();
    const int64_t axis = ctx->saved_data["axis"].toInt();
    const bool need_min = ctx->needs_input_grad(1);
    const bool need_max = ctx->needs_input_grad(2);
    auto grads = UseCpuKernel(x) && UseCpuKernel(dy)
                     ? GradientsCpu(dy, x, g, axis, need_min, need_max)
                     : Gradients(dy, x, g, axis, need_min, need_max);
    return {grads[0], grads[1], grads[2], torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

Nudged NudgeRange(const torch::Tensor& min, const torch::Tensor& max,
                  int64_t num_bits, bool narrow_range) {
  CheckBits(num_bits);
  SLIM_CHECK(min.sizes() == max.sizes(), "NudgeRange: min ", min.sizes(),
             " and max ", max.sizes(), " differ in shape");
  const torch::Tensor lo = min.to(torch::kFloat);
  const torch::Tensor hi = max.to(lo.options());
  const Grid g = ComputeGrid(lo, hi, num_bits, narrow_range);
  // A [0, 0] range (TensorFlow outputs zeros for it): all zero, the zero
  // point qmin, rather than the NaN the formulas give.
  const torch::Tensor zero = Constant(lo, 0.0f);
  const torch::Tensor zp_min = Constant(lo, narrow_range ? 1.0f : 0.0f);
  return {torch::where(g.zero_range, zero, g.nudged_min),
          torch::where(g.zero_range, zero, g.nudged_max),
          torch::where(g.zero_range, zero, g.scale),
          torch::where(g.zero_range, zp_min, g.zero_point)};
}

torch::Tensor FakeQuant(const torch::Tensor& x, const torch::Tensor& min,
                        const torch::Tensor& max, int64_t num_bits,
                        bool narrow_range) {
  CheckBits(num_bits);
  SLIM_CHECK(min.numel() == 1 && max.numel() == 1,
             "FakeQuant: min and max must hold one value each, got shapes ",
             min.sizes(), " and ", max.sizes());
  CheckRangeOnCpu(min, max, "FakeQuant");
  const Inputs in = Prepare(x, min.reshape({}), max.reshape({}));
  torch::Tensor y = FakeQuantFunction::apply(in.x, in.min, in.max, num_bits,
                                             narrow_range, int64_t{-1});
  return y.to(x.scalar_type());
}

torch::Tensor FakeQuantPerChannel(const torch::Tensor& x,
                                  const torch::Tensor& min,
                                  const torch::Tensor& max, int64_t axis,
                                  int64_t num_bits, bool narrow_range) {
  CheckBits(num_bits);
  SLIM_CHECK(x.dim() >= 1, "FakeQuantPerChannel: x must have a channel axis");
  const int64_t rank = x.dim();
  SLIM_CHECK(axis >= -rank && axis < rank, "FakeQuantPerChannel: axis ", axis,
             " out of range for x of shape ", x.sizes());
  if (axis < 0) axis += rank;
  const int64_t channels = x.size(axis);
  SLIM_CHECK(min.dim() == 1 && max.dim() == 1 && min.size(0) == channels &&
                 max.size(0) == channels,
             "FakeQuantPerChannel: min and max must be [", channels,
             "] (x ", x.sizes(), ", axis ", axis, "), got ", min.sizes(),
             " and ", max.sizes());
  CheckRangeOnCpu(min, max, "FakeQuantPerChannel");
  const Inputs in = Prepare(x, min, max);
  torch::Tensor y = FakeQuantFunction::apply(in.x, in.min, in.max, num_bits,
                                             narrow_range, axis);
  return y.to(x.scalar_type());
}

void AssignMovingAverage(torch::Tensor& variable, const torch::Tensor& value,
                         double decay) {
  torch::NoGradGuard no_grad;
  // TensorFlow converts the Python float 1 - decay to the variable's dtype.
  const float one_minus_decay = static_cast<float>(1.0 - decay);
  variable.sub_((variable - value) * one_minus_decay);
}

void AssignMovingAverageZeroDebias(torch::Tensor& variable,
                                   torch::Tensor& biased,
                                   torch::Tensor& local_step,
                                   const torch::Tensor& value, double decay) {
  torch::NoGradGuard no_grad;
  const float one_minus_decay = static_cast<float>(1.0 - decay);
  biased.sub_((biased - value) * one_minus_decay);
  local_step.add_(1.0);
  // bias_factor = 1 - pow(1.0 - decay_t, local_step), every step float32:
  // decay_t is the float32 1 - decay, so 1 - decay_t is not decay's
  // nearest float.
  const torch::Tensor kept = torch::full({}, 1.0f - one_minus_decay,
                                         local_step.options());
  const torch::Tensor bias_factor = 1.0 - kept.pow(local_step);
  variable.copy_(biased / bias_factor);
}

}  // namespace nets
}  // namespace slimtorch
