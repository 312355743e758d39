#include "slimtorch/nets/convolution3d.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "layer_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {
namespace {

Extent3d SizeOf(const torch::Tensor& x) {
  return {x.size(2), x.size(3), x.size(4)};
}

void CheckVideo(const torch::Tensor& x, const std::string& op) {
  SLIM_CHECK(x.dim() == 5, op, " expects [N, C, T, H, W], got ", x.sizes());
}

// {front, back, top, bottom, left, right}: TensorFlow's 'SAME' pads, or
// zeros for 'VALID' (which the caller checks fits).
std::array<int64_t, 6> Pads3d(const torch::Tensor& x, Extent3d kernel,
                              Extent3d stride, Padding padding) {
  SLIM_CHECK(padding != Padding::kFixed,
             "3-D layers take 'SAME' or 'VALID' padding only");
  if (padding == Padding::kSame)
    return SamePadding3d(SizeOf(x), kernel, stride);
  for (int i = 0; i < 3; ++i) {
    SLIM_CHECK(x.size(2 + i) >= kernel[i], "a 'VALID' window of ", kernel[i],
               " does not fit axis ", i, " of ", x.sizes());
  }
  return {0, 0, 0, 0, 0, 0};
}

bool Symmetric(const std::array<int64_t, 6>& p) {
  return p[0] == p[1] && p[2] == p[3] && p[4] == p[5];
}

// x padded with `value` (constant_pad_nd takes the last axis first).
torch::Tensor Pad(const torch::Tensor& x, const std::array<int64_t, 6>& p,
                  double value) {
  return torch::constant_pad_nd(x, {p[4], p[5], p[2], p[3], p[0], p[1]}, value);
}

// Reports a 3-D window op (H and W share one stride in the traced
// attributes, as in every video net of the zoo).
void TraceWindowOp(OpKind kind, const torch::nn::Module* layer,
                   const std::string& suffix, const torch::Tensor& x,
                   const torch::Tensor& y, Extent3d kernel, Extent3d stride,
                   const std::array<int64_t, 6>& p, const torch::Tensor& w,
                   const torch::Tensor& b) {
  SLIM_CHECK(stride[1] == stride[2], OpKindName(kind),
             ": exporting needs one stride along H and W, got ", stride[1],
             " and ", stride[2]);
  TracedOp op(kind, layer, suffix, {x}, y);
  op.kernel_t = kernel[0];
  op.kernel_h = kernel[1];
  op.kernel_w = kernel[2];
  op.stride_t = stride[0];
  op.stride = stride[1];
  op.pads_t = {p[0], p[1]};
  op.pads = {p[2], p[4], p[3], p[5]};  // top, left, bottom, right
  if (w.defined()) op.weights = w.detach();
  if (b.defined()) op.bias = b.detach();
  TraceOp(op);
}

torch::Tensor Conv3dPadded(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& b, Extent3d stride,
                           const std::array<int64_t, 6>& p) {
  const std::vector<int64_t> s(stride.begin(), stride.end());
  if (Symmetric(p)) {
    return torch::conv3d(x, w, b, s, std::vector<int64_t>{p[0], p[2], p[4]});
  }
  return torch::conv3d(Pad(x, p, 0.0), w, b, s);
}

// The batch norm and activation after a conv: over a 4-D view of a
// contiguous 5-D value where no trace takes the ops, so that the fused
// kernels of BatchNorm (4-D only) run; the statistics are per channel
// either way.
torch::Tensor NormalizeActivate(BatchNormImpl& bn, const torch::Tensor& y,
                                Activation activation,
                                const torch::nn::Module* layer) {
  if (TracingOps() || !y.is_contiguous()) {
    return bn.ForwardActivated(y, activation, layer);
  }
  const torch::Tensor flat =
      y.view({y.size(0), y.size(1), y.size(2) * y.size(3), y.size(4)});
  return bn.ForwardActivated(flat, activation, layer).view(y.sizes());
}

}  // namespace

std::array<int64_t, 6> SamePadding3d(Extent3d size, Extent3d kernel,
                                     Extent3d stride) {
  std::array<int64_t, 6> p{};
  for (int i = 0; i < 3; ++i) {
    const int64_t out = (size[i] + stride[i] - 1) / stride[i];
    const int64_t total =
        std::max<int64_t>((out - 1) * stride[i] + kernel[i] - size[i], 0);
    p[2 * i] = total / 2;
    p[2 * i + 1] = total - total / 2;
  }
  return p;
}

Conv3dImpl::Conv3dImpl(const Conv3dOptions& options_) : options(options_) {
  reset();
}

void Conv3dImpl::reset() {
  const auto& o = options;
  const Extent3d k = o.kernel(), s = o.stride();
  SLIM_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && k[0] > 0 &&
                 k[1] > 0 && k[2] > 0 && s[0] > 0 && s[1] > 0 && s[2] > 0,
             "Conv3d: channels, kernel and stride must be positive");
  weights = register_parameter(
      "weights",
      torch::empty({o.out_channels(), o.in_channels(), k[0], k[1], k[2]}));
  if (o.center_init()) {
    SLIM_CHECK(k[0] % 2 == 1 && k[1] == 1 && k[2] == 1 &&
                   o.in_channels() == o.out_channels(),
               "Conv3d: the centre initializer needs an odd [kt, 1, 1] kernel "
               "and as many outputs as inputs");
    torch::NoGradGuard no_grad;
    weights.zero_();
    weights.select(2, k[0] / 2)
        .squeeze(-1)
        .squeeze(-1)
        .copy_(torch::eye(o.out_channels()));
  } else {
    const int64_t volume = k[0] * k[1] * k[2];
    Initialize(weights, o.weights_init(), volume * o.in_channels(),
               volume * o.out_channels());
  }
  if (o.batch_norm()) {
    batch_norm = register_module("BatchNorm", BatchNorm(*o.batch_norm()));
  }
  if (o.use_bias() && !o.batch_norm()) {
    biases = register_parameter("biases", torch::zeros({o.out_channels()}));
  } else {
    biases = torch::Tensor();
  }
}

torch::Tensor Conv3dImpl::forward(const torch::Tensor& x) {
  CheckVideo(x, "Conv3D");
  const auto& o = options;
  const Extent3d k = o.kernel();
  const std::array<int64_t, 6> p = Pads3d(x, k, o.stride(), o.padding());
  torch::Tensor y = Conv3dPadded(x, weights, biases, o.stride(), p);
  if (TracingOps()) {
    TraceWindowOp(OpKind::kConv3d, this, "/Conv3D", x, y, k, o.stride(), p,
                  weights, biases);
  }
  if (TracingCosts()) {
    TraceCost(weights.numel() + Numel(biases),
              y.size(2) * y.size(3) * y.size(4) * weights.numel());
  }
  if (batch_norm)
    return NormalizeActivate(*batch_norm, y, o.activation(), this);
  return Activate(y, o.activation(), this);
}

std::vector<std::pair<torch::Tensor, double>> Conv3dImpl::L2Variables() const {
  return WeightsAndBiases(weights, options.weight_decay(), biases, 0.0);
}

namespace {

// A 3-D pool of x: `pool(input, torch pads)` over x with TensorFlow's pads,
// LibTorch's own (symmetric, up to half a window) or, uneven, `padded(x)`
// pooled without more; reported as `kind`.
template <typename Pool, typename Padded>
torch::Tensor Pool3d(OpKind kind, const torch::Tensor& x, Extent3d kernel,
                     Extent3d stride, Padding padding, Pool pool,
                     Padded padded) {
  CheckVideo(x, OpKindName(kind));
  const std::array<int64_t, 6> p = Pads3d(x, kernel, stride, padding);
  const bool own = Symmetric(p) && 2 * p[0] <= kernel[0] &&
                   2 * p[2] <= kernel[1] && 2 * p[4] <= kernel[2];
  const torch::Tensor y =
      own ? pool(x, std::vector<int64_t>{p[0], p[2], p[4]}) : padded(x, p);
  if (TracingOps()) {
    TraceWindowOp(kind, nullptr, "", x, y, kernel, stride, p, {}, {});
  }
  return y;
}

std::vector<int64_t> Vec(Extent3d e) { return {e[0], e[1], e[2]}; }

}  // namespace

torch::Tensor MaxPool3d(const torch::Tensor& x, Extent3d kernel,
                        Extent3d stride, Padding padding) {
  const std::vector<int64_t> k = Vec(kernel), s = Vec(stride);
  return Pool3d(
      OpKind::kMaxPool3d, x, kernel, stride, padding,
      [&](const torch::Tensor& in, const std::vector<int64_t>& pads) {
        return torch::max_pool3d(in, k, s, pads);  // pads -inf itself
      },
      [&](const torch::Tensor& in, const std::array<int64_t, 6>& p) {
        return torch::max_pool3d(
            Pad(in, p, -std::numeric_limits<double>::infinity()), k, s);
      });
}

torch::Tensor AvgPool3d(const torch::Tensor& x, Extent3d kernel,
                        Extent3d stride, Padding padding) {
  const std::vector<int64_t> k = Vec(kernel), s = Vec(stride);
  return Pool3d(
      OpKind::kAvgPool3d, x, kernel, stride, padding,
      [&](const torch::Tensor& in, const std::vector<int64_t>& pads) {
        return torch::avg_pool3d(in, k, s, pads, /*ceil_mode=*/false,
                                 /*count_include_pad=*/false);
      },
      [&](const torch::Tensor& in, const std::array<int64_t, 6>& p) {
        // Window sums over the zero-padded input, divided by the number of
        // input cells in each window.
        const torch::Tensor ones = torch::ones(
            {1, 1, in.size(2), in.size(3), in.size(4)}, in.options());
        return torch::avg_pool3d(Pad(in, p, 0.0), k, s) /
               torch::avg_pool3d(Pad(ones, p, 0.0), k, s);
      });
}

}  // namespace nets
}  // namespace slimtorch
