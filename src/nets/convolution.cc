#include "slimtorch/nets/convolution.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_fused.h"
#include "depthwise_conv.h"
#include "kernels/dnnl/conv_dnnl.h"
#include "layer_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/nets/layer_trace.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace nets {

Conv2dImpl::Conv2dImpl(const Conv2dOptions& options_) : options(options_) {
  reset();
}

void Conv2dImpl::reset() {
  const auto& o = options;
  SLIM_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && o.kernel_h() > 0 &&
                 o.kernel_w() > 0 && o.stride() > 0,
             "Conv2d: channels, kernel and stride must be positive");
  SLIM_CHECK(!o.depthwise() || o.out_channels() == o.in_channels(),
             "Conv2d: a depthwise conv (multiplier 1) keeps its ",
             o.in_channels(), " channels, not ", o.out_channels());
  weights =
      o.depthwise()
          ? register_parameter(
                "depthwise_weights",
                torch::empty({o.in_channels(), 1, o.kernel_h(), o.kernel_w()}))
          : register_parameter("weights",
                               torch::empty({o.out_channels(), o.in_channels(),
                                             o.kernel_h(), o.kernel_w()}));
  int64_t area = o.kernel_h() * o.kernel_w();
  Initialize(weights, o.weights_init(), area * o.in_channels(),
             area * o.out_channels());
  if (o.batch_norm()) {
    batch_norm = register_module("BatchNorm", BatchNorm(*o.batch_norm()));
  }
  if (o.use_bias() && !o.batch_norm()) {
    biases = register_parameter("biases", torch::empty({o.out_channels()}));
    Initialize(biases, o.biases_init(), o.out_channels(), o.out_channels());
  } else {
    biases = torch::Tensor();
  }
}

namespace {

// Whether t is dense channels-last (and not also dense NCHW: then NCHW).
bool DenseChannelsLast(const torch::Tensor& t) {
  return !t.is_contiguous() &&
         t.is_contiguous(torch::MemoryFormat::ChannelsLast);
}

// x [N, C, h, w] or w [O, C, h, w] as rows of C * h * w values in the order
// `channels_last` says (h, w, C) or (C, h, w): views where the tensor lies
// in that order already.
torch::Tensor Rows(const torch::Tensor& t, bool channels_last) {
  return (channels_last ? t.permute({0, 2, 3, 1}) : t).reshape({t.size(0), -1});
}

// The convolution when its kernel covers the whole unpadded input, so the
// output is 1 x 1 (the fully-connected layers of VGG, AlexNet and OverFeat
// written as convolutions, and 1 x 1 convolutions of 1 x 1 inputs): one
// matrix product. LibTorch 1.13's oneDNN path runs these with weight-sized
// reorder copies (VGG-16's fc6 holds 103M weights). Undefined where it does
// not apply.
torch::Tensor ConvAsMatmul(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& b, Padding padding,
                           int64_t groups) {
  const int64_t kh = w.size(2), kw = w.size(3);
  const bool whole = x.size(2) == kh && x.size(3) == kw &&
                     (padding == Padding::kValid || (kh == 1 && kw == 1));
  if (groups != 1 || !whole || !x.is_cpu() || x.size(1) != w.size(1)) {
    return {};
  }
  const bool channels_last = DenseChannelsLast(x);
  return torch::linear(Rows(x, channels_last), Rows(w, channels_last), b)
      .view({x.size(0), w.size(0), 1, 1});
}

// ---- 3 x 3 stride-1 convolutions through oneDNN's Winograd kernels. ----

// Whether they may run: SetDnnlWinograd, or SLIMTORCH_WINOGRAD=0 for a
// whole process (core/kernel_switches.h).
// Where the Winograd kernels win, batch 8, 2 threads (docs/performance.md):
// outputs of 8 x 8 and more (448 -> 384 channels at 8 x 8: 14 against 20 ms
// forward + backward; 7 x 7 pads to 8 x 8 tiles and gains ~10%, which the
// reorders to their layout take back), inputs of 16 channels or more (3 RGB
// channels at 224 x 224: 22 against 8 ms forward).
constexpr int64_t kWinogradMinOutputPixels = 8 * 8;
constexpr int64_t kWinogradMinInputChannels = 16;

bool CpuAutocastEnabled() {
#if TORCH_VERSION_MAJOR >= 2
  return at::autocast::is_autocast_enabled(at::kCPU);
#else
  return at::autocast::is_cpu_enabled();
#endif
}

internal::WinogradShape WinogradShapeOf(const torch::Tensor& x,
                                        const torch::Tensor& w, bool bias,
                                        int64_t pad_h, int64_t pad_w) {
  internal::WinogradShape s;
  s.n = x.size(0);
  s.in_channels = x.size(1);
  s.height = x.size(2);
  s.width = x.size(3);
  s.out_channels = w.size(0);
  s.pad_h = pad_h;
  s.pad_w = pad_w;
  s.channels_last = DenseChannelsLast(x);
  s.weights_channels_last = DenseChannelsLast(w);
  s.bias = bias;
  return s;
}

torch::MemoryFormat ActivationFormat(const internal::WinogradShape& s) {
  return s.channels_last ? torch::MemoryFormat::ChannelsLast
                         : torch::MemoryFormat::Contiguous;
}

// conv2d(x, w, b, stride 1, padding {pad_h, pad_w}) by oneDNN's Winograd
// kernels, forward and backward; b may be empty (no bias).
class WinogradConvFunction
    : public torch::autograd::Function<WinogradConvFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b, int64_t pad_h,
                               int64_t pad_w) {
    const internal::WinogradShape s =
        WinogradShapeOf(x, w, b.numel() > 0, pad_h, pad_w);
    torch::Tensor y =
        torch::empty({s.n, s.out_channels, s.out_height(), s.out_width()},
                     x.options().memory_format(ActivationFormat(s)));
    internal::DnnlWinogradForward(s, x.data_ptr<float>(), w.data_ptr<float>(),
                                  FloatsOrNull(b), y.data_ptr<float>());
    ctx->save_for_backward({x, w});
    ctx->saved_data["pad_h"] = pad_h;
    ctx->saved_data["pad_w"] = pad_w;
    ctx->saved_data["bias"] = s.bias;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const internal::WinogradShape s = WinogradShapeOf(
        x, w, ctx->saved_data["bias"].toBool(),
        ctx->saved_data["pad_h"].toInt(), ctx->saved_data["pad_w"].toInt());
    const torch::Tensor g = grad_outputs[0].contiguous(ActivationFormat(s));
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = torch::empty_like(x, ActivationFormat(s));
    }
    if (ctx->needs_input_grad(1)) dw = torch::empty_like(w);
    if (s.bias && ctx->needs_input_grad(2)) {
      db = torch::empty({s.out_channels}, torch::kFloat32);
    }
    internal::DnnlWinogradBackward(
        s, x.data_ptr<float>(), w.data_ptr<float>(), g.data_ptr<float>(),
        dx.defined() ? dx.data_ptr<float>() : nullptr,
        dw.defined() ? dw.data_ptr<float>() : nullptr,
        db.defined() ? db.data_ptr<float>() : nullptr);
    return {dx, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

// The convolution by WinogradConvFunction where it applies (a CPU float32
// 3 x 3 stride-1 convolution, not under autocast, padding 0 or 1 on each
// side, dense inputs, the sizes above, a shape oneDNN's Winograd kernels
// take); else undefined.
torch::Tensor WinogradConv(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& b, int64_t stride,
                           const std::vector<int64_t>& pad, int64_t groups) {
  if (!KernelSwitchOn(KernelSwitch::kWinograd) ||
      !internal::DnnlWinogradBuilt() || groups != 1 || stride != 1 ||
      x.dim() != 4 || w.size(2) != 3 || w.size(3) != 3 || !x.is_cpu() ||
      x.scalar_type() != torch::kFloat32 ||
      w.scalar_type() != torch::kFloat32 ||
      (b.defined() && b.scalar_type() != torch::kFloat32) ||
      x.size(1) != w.size(1) || CpuAutocastEnabled()) {
    return {};
  }
  const int64_t oh = x.size(2) + 2 * pad[0] - 2;
  const int64_t ow = x.size(3) + 2 * pad[1] - 2;
  const auto dense = [](const torch::Tensor& t) {
    return t.is_contiguous() ||
           t.is_contiguous(torch::MemoryFormat::ChannelsLast);
  };
  if (oh * ow < kWinogradMinOutputPixels ||
      x.size(1) < kWinogradMinInputChannels || !dense(x) || !dense(w) ||
      (b.defined() && !b.is_contiguous())) {
    return {};
  }
  if (!internal::DnnlWinogradApplies(
          WinogradShapeOf(x, w, b.defined(), pad[0], pad[1]))) {
    return {};
  }
  return WinogradConvFunction::apply(x, w, b.defined() ? b : torch::empty({0}),
                                     pad[0], pad[1]);
}

torch::Tensor ConvPaddedImpl(const torch::Tensor& x, const torch::Tensor& w,
                             const torch::Tensor& b, int64_t stride,
                             Padding padding, int64_t groups) {
  if (torch::Tensor y = ConvAsMatmul(x, w, b, padding, groups); y.defined()) {
    return y;
  }
  const int64_t kh = w.size(2), kw = w.size(3);
  if (groups > 1 && groups == x.size(1) && !b.defined() &&
      !CpuAutocastEnabled()) {
    // Channels-last float32 on the CPU: the own kernel, which takes
    // TensorFlow's asymmetric pads without a padded copy (depthwise_conv.h).
    if (torch::Tensor y = DepthwiseConvCpu(
            x, w, stride, WindowPads(x, kh, kw, stride, padding));
        y.defined()) {
      return y;
    }
  }
  torch::Tensor in = x;
  std::vector<int64_t> pad = {0, 0};
  if (padding == Padding::kFixed) {
    const int64_t bh = (kh - 1) / 2, eh = kh - 1 - bh;
    const int64_t bw = (kw - 1) / 2, ew = kw - 1 - bw;
    if (bh == eh && bw == ew) {
      pad = {bh, bw};
    } else {
      in = torch::constant_pad_nd(x, {bw, ew, bh, eh}, 0.0);
    }
  } else if (padding == Padding::kSame) {
    auto p = SamePadding(x.size(2), x.size(3), kh, kw, stride);
    if (p[0] == p[1] && p[2] == p[3]) {
      pad = {p[0], p[2]};
    } else {
      in = torch::constant_pad_nd(x, {p[2], p[3], p[0], p[1]}, 0.0);
    }
  }
  if (groups == 1 && UseCudaKernels()) {
    // A first layer's few input channels (RGB) padded with zeros to 8 on a
    // GPU in 16 bits: cuDNN then runs its tensor-core kernels instead of a
    // generic one (CIFAR-10 tutorial's conv1: see docs/kernels.md).
    std::pair<torch::Tensor, torch::Tensor> padded =
        internal::PadInputChannelsCuda(in, w);
    if (padded.first.defined()) {
      return torch::conv2d(padded.first, padded.second, b, {stride, stride},
                           pad, /*dilation=*/{1, 1}, groups);
    }
  }
  if (torch::Tensor y = WinogradConv(in, w, b, stride, pad, groups);
      y.defined()) {
    return y;
  }
  return torch::conv2d(in, w, b, {stride, stride}, pad, /*dilation=*/{1, 1},
                       groups);
}

// A convolution with TensorFlow's padding modes; w is [out, in / groups,
// kh, kw]. Recorded as `layer`'s node (+ `suffix`).
// In a quantized net `w` is fake-quantized; the graph then records
// `float_weights` with their range `weights_quant`.
torch::Tensor ConvPadded(const torch::Tensor& x, const torch::Tensor& w,
                         const torch::Tensor& b, int64_t stride,
                         Padding padding, int64_t groups,
                         const torch::nn::Module* layer,
                         const std::string& suffix,
                         const torch::Tensor& float_weights = {},
                         const QuantRange& weights_quant = {}) {
  const torch::Tensor y = ConvPaddedImpl(x, w, b, stride, padding, groups);
  if (TracingOps()) {
    TracedOp op(OpKind::kConv, layer, suffix, {x}, y);
    op.kernel_h = w.size(2);
    op.kernel_w = w.size(3);
    op.stride = stride;
    op.pads = WindowPads(x, w.size(2), w.size(3), stride, padding);
    op.weights = (float_weights.defined() ? float_weights : w).detach();
    if (b.defined()) op.bias = b.detach();
    op.weights_quant = weights_quant;
    TraceOp(op);
  }
  return y;
}

}  // namespace

torch::Tensor Conv2dImpl::QuantizedForward(Quantizer& q,
                                           const torch::Tensor& x) {
  const auto& o = options;
  const int64_t groups = o.depthwise() ? o.in_channels() : 1;
  torch::Tensor w = weights, b = biases, correction;
  if (batch_norm) {
    // contrib.quantize's FoldBatchNorms: the batch norm's scale into the
    // weights (then quantized), its shift into a bias.
    const FoldedBatchNorm f = FoldBatchNorm(
        *batch_norm, q.training() && !q.batch_norm_frozen(), [&] {
          return ConvPaddedImpl(x, weights, torch::Tensor(), o.stride(),
                                o.padding(), groups);
        });
    w = weights * f.multiplier.view({-1, 1, 1, 1});
    b = f.bias;
    correction = f.correction;
  }
  QuantRange range;
  const torch::Tensor wq = q.Weights(this, "weights_quant", w, &range);
  torch::Tensor y = ConvPadded(
      x, wq, correction.defined() ? torch::Tensor() : b, o.stride(),
      o.padding(), groups, this, o.depthwise() ? "/depthwise" : "/Conv2D", w,
      range);
  if (correction.defined()) {
    // Training on the batch's statistics: the product rescaled from the
    // moving statistics' scale to the batch's, then the batch's shift.
    y = y * correction.view({1, -1, 1, 1}) + b.view({1, -1, 1, 1});
  }
  if (TracingCosts()) {
    TraceCost(weights.numel() + Numel(biases),
              y.size(2) * y.size(3) * weights.numel());
  }
  return q.LayerOutput(this, Activate(y, o.activation(), this));
}

torch::Tensor Conv2dImpl::forward(const torch::Tensor& x) {
  if (Quantizer* q = ActiveQuantizer()) return QuantizedForward(*q, x);
  const auto& o = options;
  // On a GPU the bias joins the activation's kernel (BiasActCuda).
  const bool bias_on_gpu =
      !batch_norm && biases.defined() && x.is_cuda() && UseCudaKernels();
  torch::Tensor y =
      ConvPadded(x, weights, bias_on_gpu ? torch::Tensor() : biases, o.stride(),
                 o.padding(), o.depthwise() ? o.in_channels() : 1, this,
                 o.depthwise() ? "/depthwise" : "/Conv2D");
  if (TracingCosts()) {
    // Per output pixel, every weight once (a depthwise filter only sees its
    // own channel, and its [C, 1, kh, kw] weights say so).
    TraceCost(weights.numel() + Numel(biases),
              y.size(2) * y.size(3) * weights.numel());
  }
  if (batch_norm) return batch_norm->ForwardActivated(y, o.activation(), this);
  if (bias_on_gpu) {
    torch::Tensor z =
        internal::BiasActCuda(y, biases, ToBnActivation(o.activation()));
    if (z.defined()) return z;
    // (in place, as LibTorch's convolution adds its bias: the product is
    // not saved for its backward)
    y.add_(biases.to(y.scalar_type()).view({1, -1, 1, 1}));
  }
  return Activate(y, o.activation(), this);
}

SeparableConv2dImpl::SeparableConv2dImpl(const SeparableConv2dOptions& options_)
    : options(options_) {
  reset();
}

void SeparableConv2dImpl::reset() {
  const auto& o = options;
  SLIM_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && o.kernel() > 0 &&
                 o.depth_multiplier() > 0 && o.stride() > 0,
             "SeparableConv2d: channels, kernel, multiplier and stride must be "
             "positive");
  const int64_t mid = o.in_channels() * o.depth_multiplier();
  const int64_t area = o.kernel() * o.kernel();
  depthwise_weights = register_parameter(
      "depthwise_weights", torch::empty({mid, 1, o.kernel(), o.kernel()}));
  // TensorFlow's fan-out of a [k, k, in, mult] kernel is k * k * mult; the
  // FAN_OUT initializer (NASNet's) takes that. The other initializers keep
  // the figure they were written with.
  const bool fan_out_mode =
      o.weights_init().kind == Initializer::Kind::kVarianceScalingFanOut;
  Initialize(depthwise_weights, o.weights_init(), area * o.in_channels(),
             fan_out_mode ? area * o.depth_multiplier() : area * mid);
  pointwise_weights = register_parameter(
      "pointwise_weights", torch::empty({o.out_channels(), mid, 1, 1}));
  Initialize(pointwise_weights, o.weights_init(), mid, o.out_channels());
  biases = o.use_bias()
               ? register_parameter("biases", torch::zeros({o.out_channels()}))
               : torch::Tensor();
}

torch::Tensor SeparableConv2dImpl::forward(const torch::Tensor& x) {
  const auto& o = options;
  Quantizer* q = ActiveQuantizer();
  QuantRange depthwise_range, pointwise_range;
  // Quantized: both weights (TensorFlow's rewrite names the depthwise
  // step's range after its op's scope "separable_conv2d"), not the value
  // between the two steps.
  const torch::Tensor dw =
      q ? q->Weights(this, "separable_conv2d/weights_quant", depthwise_weights,
                     &depthwise_range)
        : depthwise_weights;
  const torch::Tensor pw =
      q ? q->Weights(this, "weights_quant", pointwise_weights, &pointwise_range)
        : pointwise_weights;
  torch::Tensor y =
      ConvPadded(x, dw, torch::Tensor(), o.stride(), o.padding(),
                 o.in_channels(), this, "/depthwise", depthwise_weights,
                 depthwise_range);
  y = ConvPadded(y, pw, biases, 1, Padding::kValid, 1, this, "/pointwise",
                 pointwise_weights, pointwise_range);
  if (TracingCosts()) {
    TraceCost(
        depthwise_weights.numel() + pointwise_weights.numel() + Numel(biases),
        y.size(2) * y.size(3) *
            (depthwise_weights.numel() + pointwise_weights.numel()));
  }
  y = Activate(y, o.activation(), this);
  return q ? q->LayerOutput(this, y) : y;
}

std::vector<std::pair<torch::Tensor, double>> SeparableConv2dImpl::L2Variables()
    const {
  if (options.weight_decay() == 0.0) return {};
  return {{depthwise_weights, options.weight_decay()},
          {pointwise_weights, options.weight_decay()}};
}

std::vector<std::pair<torch::Tensor, double>> Conv2dImpl::L2Variables() const {
  return WeightsAndBiases(weights, options.weight_decay(), biases,
                          options.bias_decay());
}

bool SetDnnlWinograd(bool enabled) {
  SetKernelSwitch(KernelSwitch::kWinograd, enabled);
  return internal::DnnlWinogradBuilt();
}

}  // namespace nets
}  // namespace slimtorch
