#include "slimtorch/nets/pooling.h"

#include <array>
#include <limits>
#include <vector>

#include "kernels/cpu/pool_kernel.h"
#include "kernels/cuda/cuda_fused.h"
#include "kernels/dnnl/pool_dnnl.h"
#include "layer_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/kernel_switches.h"
#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {
namespace {

// Every stride-th pixel of x, in x's memory order. Its gradient is made in
// x's memory order too (autograd's slice backward makes a contiguous
// tensor, which the gradient from x's other consumer, channels-last, then
// meets in a slow mixed-order sum: ~0.9 ms a call on ResNet-50's
// 256x256x56x56 in bf16 on an H100).
class StridedPickFunction
    : public torch::autograd::Function<StridedPickFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, int64_t stride) {
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["channels_last"] =
        x.suggest_memory_format() == torch::MemoryFormat::ChannelsLast;
    return Pick(x, stride).contiguous(x.suggest_memory_format());
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const int64_t stride = ctx->saved_data["stride"].toInt();
    const auto format = ctx->saved_data["channels_last"].toBool()
                            ? torch::MemoryFormat::ChannelsLast
                            : torch::MemoryFormat::Contiguous;
    // (zeros() takes no memory format)
    torch::Tensor dx =
        torch::empty(ctx->saved_data["sizes"].toIntVector(),
                     grad_outputs[0].options().memory_format(format))
            .zero_();
    Pick(dx, stride).copy_(grad_outputs[0]);
    return {dx, torch::Tensor()};
  }

 private:
  static torch::Tensor Pick(const torch::Tensor& x, int64_t stride) {
    return x.slice(2, 0, x.size(2), stride).slice(3, 0, x.size(3), stride);
  }
};

// PyTorch's max_pool2d output size for `in` with padding `pad` on both
// sides, in ceil mode (a window may run past the end, not start there).
int64_t CeilPoolSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  int64_t out = (in + 2 * pad - kernel + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad) --out;
  return out;
}

// Max pooling by the fused CPU kernel (pool_kernel.h): x a CPU float32
// NCHW-contiguous [N, C, H, W]; first-order gradients.
class MaxPoolFunction : public torch::autograd::Function<MaxPoolFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, int64_t kernel,
                               int64_t stride, int64_t pad_top,
                               int64_t pad_left, int64_t out_h, int64_t out_w) {
    const internal::PoolShape s{x.size(0) * x.size(1),
                                x.size(2),
                                x.size(3),
                                out_h,
                                out_w,
                                kernel,
                                stride,
                                pad_top,
                                pad_left};
    const std::vector<int64_t> out_sizes = {x.size(0), x.size(1), out_h, out_w};
    torch::Tensor y = torch::empty(out_sizes, x.options());
    torch::Tensor argmax =
        torch::empty(out_sizes, x.options().dtype(torch::kInt32));
    internal::MaxPoolForwardCpu(x.data_ptr<float>(), y.data_ptr<float>(),
                                argmax.data_ptr<int32_t>(), s);
    ctx->save_for_backward({argmax});
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["window"] =
        std::vector<int64_t>{kernel, stride, pad_top, pad_left};
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor argmax = ctx->get_saved_variables()[0];
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const std::vector<int64_t> w = ctx->saved_data["window"].toIntVector();
    const torch::Tensor g = grad_outputs[0].contiguous();
    const internal::PoolShape s{sizes[0] * sizes[1],
                                sizes[2],
                                sizes[3],
                                argmax.size(2),
                                argmax.size(3),
                                w[0],
                                w[1],
                                w[2],
                                w[3]};
    torch::Tensor dx = torch::empty(sizes, g.options());
    internal::MaxPoolBackwardCpu(g.data_ptr<float>(),
                                 argmax.data_ptr<int32_t>(),
                                 dx.data_ptr<float>(), s);
    torch::autograd::variable_list out(7);
    out[0] = dx;
    return out;
  }
};

// Max pooling of channels-last CPU bfloat16 through oneDNN's pooling
// (pool_dnnl.h; switch dnnl_pooling): LibTorch's channels-last bfloat16
// kernels zero-fill dx and scatter into it through float (inception_v1
// under --precision=bf16: ~29 ms of a 290 ms step; 269 ms with oneDNN's).
internal::DnnlPoolShape DnnlPoolShapeOf(torch::IntArrayRef sizes, bool bf16,
                                        const std::vector<int64_t>& window) {
  internal::DnnlPoolShape s;
  s.n = sizes[0];
  s.channels = sizes[1];
  s.height = sizes[2];
  s.width = sizes[3];
  s.kernel = window[0];
  s.stride = window[1];
  s.pad_top = window[2];
  s.pad_bottom = window[3];
  s.pad_left = window[4];
  s.pad_right = window[5];
  s.out_height = window[6];
  s.out_width = window[7];
  s.bfloat16 = bf16;
  return s;
}

class DnnlMaxPoolFunction
    : public torch::autograd::Function<DnnlMaxPoolFunction> {
 public:
  // window: kernel, stride, pads top / bottom / left / right, out h / w.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               std::vector<int64_t> window) {
    const bool bf16 = x.scalar_type() == torch::kBFloat16;
    const internal::DnnlPoolShape s = DnnlPoolShapeOf(x.sizes(), bf16, window);
    torch::Tensor y = torch::empty(
        {s.n, s.channels, s.out_height, s.out_width},
        x.options().memory_format(torch::MemoryFormat::ChannelsLast));
    torch::Tensor workspace = torch::empty(
        {static_cast<int64_t>(internal::DnnlMaxPoolWorkspaceBytes(s))},
        x.options().dtype(torch::kUInt8));
    internal::DnnlMaxPoolForward(s, x.data_ptr(), y.data_ptr(),
                                 workspace.data_ptr());
    ctx->save_for_backward({workspace});
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["window"] = window;
    ctx->saved_data["bf16"] = bf16;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor workspace = ctx->get_saved_variables()[0];
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const bool bf16 = ctx->saved_data["bf16"].toBool();
    const internal::DnnlPoolShape s =
        DnnlPoolShapeOf(sizes, bf16, ctx->saved_data["window"].toIntVector());
    const torch::Tensor g = grad_outputs[0]
                                .to(bf16 ? torch::kBFloat16 : torch::kFloat32)
                                .contiguous(torch::MemoryFormat::ChannelsLast);
    torch::Tensor dx = torch::empty(
        sizes, g.options().memory_format(torch::MemoryFormat::ChannelsLast));
    internal::DnnlMaxPoolBackward(s, g.data_ptr(), workspace.data_ptr(),
                                  dx.data_ptr());
    return {dx, torch::Tensor()};
  }
};

// Max pooling of x through oneDNN where it applies (a channels-last CPU
// bfloat16 x, oneDNN accepting the shape); undefined otherwise. pads: top,
// bottom, left, right. Float32 keeps LibTorch's kernel (as fast in a float32
// inception_v1 step) and with it NaN propagation: oneDNN's max ignores a NaN
// in a window, and a window of NaNs gives -inf (still not finite), as
// TensorFlow's oneDNN pooling does.
torch::Tensor DnnlMaxPool(const torch::Tensor& x, int64_t kernel,
                          int64_t stride, const std::array<int64_t, 4>& pads,
                          int64_t out_h, int64_t out_w) {
  if (!KernelSwitchOn(KernelSwitch::kDnnlPooling) ||
      !internal::DnnlPoolBuilt() || x.dim() != 4 || !x.is_cpu() ||
      x.numel() == 0 || x.scalar_type() != torch::kBFloat16 ||
      !x.is_contiguous(torch::MemoryFormat::ChannelsLast) ||
      x.is_contiguous() || TracingOps()) {
    return {};
  }
  const std::vector<int64_t> window = {kernel,  stride,  pads[0], pads[1],
                                       pads[2], pads[3], out_h,   out_w};
  const internal::DnnlPoolShape s =
      DnnlPoolShapeOf(x.sizes(), x.scalar_type() == torch::kBFloat16, window);
  if (!internal::DnnlMaxPoolApplies(s)) return {};
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) {
    torch::Tensor y = torch::empty(
        {s.n, s.channels, out_h, out_w},
        x.options().memory_format(torch::MemoryFormat::ChannelsLast));
    internal::DnnlMaxPoolForward(s, x.data_ptr(), y.data_ptr(), nullptr);
    return y;
  }
  return DnnlMaxPoolFunction::apply(x, window);
}

// Whether the fused CPU max pool takes x (NCHW float32 on the CPU; in
// channels-last LibTorch's kernel, vectorised over the channels, measured
// faster in an inception_v1 step).
bool FusedMaxPoolApplies(const torch::Tensor& x) {
  return x.dim() == 4 && x.is_cpu() && x.scalar_type() == torch::kFloat32 &&
         x.is_contiguous() && x.size(2) * x.size(3) < (int64_t{1} << 31) &&
         x.numel() > 0;
}

// Where a max pool's windows lie on a 4-D x: the pads (top, bottom, left,
// right; TensorFlow's for SAME, none for VALID) and the output size; nothing
// for a VALID window larger than x.
struct PoolPlacement {
  std::array<int64_t, 4> pads;
  int64_t out_h, out_w;
};

c10::optional<PoolPlacement> PlacePool(const torch::Tensor& x, int64_t kernel,
                                       int64_t stride, Padding padding) {
  if (padding == Padding::kSame) {
    const auto p = SamePadding(x.size(2), x.size(3), kernel, kernel, stride);
    return PoolPlacement{{p[0], p[1], p[2], p[3]},
                         (x.size(2) + stride - 1) / stride,
                         (x.size(3) + stride - 1) / stride};
  }
  if (x.size(2) < kernel || x.size(3) < kernel) return c10::nullopt;
  return PoolPlacement{{0, 0, 0, 0},
                       (x.size(2) - kernel) / stride + 1,
                       (x.size(3) - kernel) / stride + 1};
}

// Max pooling of a 4-D x by the CUDA kernel, oneDNN or the fused CPU
// kernel, the first that applies; undefined where none does.
torch::Tensor MaxPoolByKernels(const torch::Tensor& x, int64_t kernel,
                               int64_t stride, Padding padding) {
  const c10::optional<PoolPlacement> at = PlacePool(x, kernel, stride, padding);
  if (at && x.is_cuda() && UseCudaKernels()) {
    // The CUDA kernel: one pass forward, one gather backward (LibTorch's
    // NCHW backward scatters with atomics after zeroing, ~38 us a call on
    // the CIFAR-10 tutorial's 128x64x24x24).
    torch::Tensor y = internal::MaxPoolCuda(x, kernel, stride, at->pads[0],
                                            at->pads[2], at->out_h, at->out_w);
    if (y.defined()) return y;
  }
  if (at) {
    torch::Tensor y =
        DnnlMaxPool(x, kernel, stride, at->pads, at->out_h, at->out_w);
    if (y.defined()) return y;
  }
  if (FusedMaxPoolApplies(x)) {
    // LibTorch's CPU kernel scans NCHW windows one output at a time with a
    // branch per element (~30 ms a call on the CIFAR-10 tutorial's
    // 128x64x24x24, a fifth of its step, 1 thread); this one takes rows as
    // vectors, without branches on the data (~5.5 ms).
    SLIM_CHECK(at.has_value(), "MaxPool2d: a VALID ", kernel, "x", kernel,
               " window on ", x.sizes());
    return MaxPoolFunction::apply(x, kernel, stride, at->pads[0], at->pads[2],
                                  at->out_h, at->out_w);
  }
  return {};
}

// TensorFlow's SAME max pool by LibTorch's max_pool2d.
torch::Tensor SameMaxPool(const torch::Tensor& x, int64_t kernel,
                          int64_t stride) {
  auto p = SamePadding(x.size(2), x.size(3), kernel, kernel, stride);
  // TensorFlow's SAME max pool ignores the padded positions, as PyTorch's
  // own padding does; the extra row / column TF adds at the end is ceil
  // mode's window past the end. So no padded copy when PyTorch's windows
  // are TF's: same begin padding on both axes, at most one more at the
  // end, and the same output size.
  const int64_t out_h = (x.size(2) + stride - 1) / stride;
  const int64_t out_w = (x.size(3) + stride - 1) / stride;
  if (p[0] == p[2] && p[1] - p[0] <= 1 && p[3] - p[2] <= 1 &&
      2 * p[0] <= kernel &&
      CeilPoolSize(x.size(2), kernel, stride, p[0]) == out_h &&
      CeilPoolSize(x.size(3), kernel, stride, p[2]) == out_w) {
    return torch::max_pool2d(x, {kernel, kernel}, {stride, stride},
                             {p[0], p[2]}, /*dilation=*/{1, 1},
                             /*ceil_mode=*/p[1] > p[0] || p[3] > p[2]);
  }
  if (p[0] + p[1] + p[2] + p[3] > 0) {
    torch::Tensor padded = torch::constant_pad_nd(
        x, {p[2], p[3], p[0], p[1]}, -std::numeric_limits<double>::infinity());
    return torch::max_pool2d(padded, {kernel, kernel}, {stride, stride});
  }
  return torch::max_pool2d(x, {kernel, kernel}, {stride, stride});
}

torch::Tensor MaxPool2dImpl(const torch::Tensor& x, int64_t kernel,
                            int64_t stride, Padding padding) {
  if (kernel > 1 && x.dim() == 4) {
    torch::Tensor y = MaxPoolByKernels(x, kernel, stride, padding);
    if (y.defined()) return y;
  }
  if (kernel == 1) {
    // A 1x1 window (resnet_utils.subsample) picks every stride-th pixel:
    // 'SAME' and 'VALID' alike give ceil(size / stride) of them, and the
    // gradient goes back to the pixel picked. A strided copy in the input's
    // memory order; LibTorch's max_pool2d scans windows for it (NCHW: ~6 ms
    // a call on ResNet-50's 8x256x56x56).
    return StridedPickFunction::apply(x, stride);
  }
  if (padding == Padding::kSame) return SameMaxPool(x, kernel, stride);
  return torch::max_pool2d(x, {kernel, kernel}, {stride, stride});
}

torch::Tensor AvgPool2dImpl(const torch::Tensor& x, int64_t kernel,
                            int64_t stride, Padding padding) {
  if (padding == Padding::kSame) {
    auto p = SamePadding(x.size(2), x.size(3), kernel, kernel, stride);
    if (p[0] == p[1] && p[2] == p[3]) {
      return torch::avg_pool2d(x, {kernel, kernel}, {stride, stride},
                               {p[0], p[2]}, /*ceil_mode=*/false,
                               /*count_include_pad=*/false);
    }
    // Uneven padding: window sums over the zero-padded image, divided by
    // the number of image pixels in each window.
    const std::vector<int64_t> pad = {p[2], p[3], p[0], p[1]};
    const double area = static_cast<double>(kernel * kernel);
    torch::Tensor sums = torch::avg_pool2d(torch::constant_pad_nd(x, pad, 0.0),
                                           {kernel, kernel}, {stride, stride}) *
                         area;
    torch::Tensor ones = torch::ones({1, 1, x.size(2), x.size(3)}, x.options());
    torch::Tensor counts =
        torch::avg_pool2d(torch::constant_pad_nd(ones, pad, 0.0),
                          {kernel, kernel}, {stride, stride}) *
        area;
    return sums / counts;
  }
  return torch::avg_pool2d(x, {kernel, kernel}, {stride, stride});
}

torch::Tensor TracePool(OpKind kind, const torch::Tensor& x,
                        const torch::Tensor& y, int64_t kernel, int64_t stride,
                        Padding padding) {
  if (TracingOps()) {
    TracedOp op(kind, nullptr, "", {x}, y);
    op.kernel_h = op.kernel_w = kernel;
    op.stride = stride;
    op.pads = WindowPads(x, kernel, kernel, stride, padding);
    TraceOp(op);
  }
  return y;
}

}  // namespace

torch::Tensor MaxPool2d(const torch::Tensor& x, int64_t kernel, int64_t stride,
                        Padding padding) {
  return TracePool(OpKind::kMaxPool, x,
                   MaxPool2dImpl(x, kernel, stride, padding), kernel, stride,
                   padding);
}

torch::Tensor AvgPool2d(const torch::Tensor& x, int64_t kernel, int64_t stride,
                        Padding padding) {
  return TracePool(OpKind::kAvgPool, x,
                   AvgPool2dImpl(x, kernel, stride, padding), kernel, stride,
                   padding);
}

bool SetDnnlPooling(bool enabled) {
  SetKernelSwitch(KernelSwitch::kDnnlPooling, enabled);
  return internal::DnnlPoolBuilt();
}

}  // namespace nets
}  // namespace slimtorch
