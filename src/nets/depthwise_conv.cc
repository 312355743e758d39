#include "depthwise_conv.h"

#include "kernels/cpu/depthwise_kernel.h"
#include "slimtorch/core/kernel_switches.h"

namespace slimtorch {
namespace nets {
namespace {

internal::DepthwiseShape ShapeOf(const torch::Tensor& x, const torch::Tensor& w,
                                 int64_t stride,
                                 const std::array<int64_t, 4>& pads) {
  internal::DepthwiseShape s;
  s.n = x.size(0);
  s.channels = x.size(1);
  s.in_h = x.size(2);
  s.in_w = x.size(3);
  s.kernel_h = w.size(2);
  s.kernel_w = w.size(3);
  s.stride = stride;
  s.pad_top = pads[0];
  s.pad_left = pads[1];
  s.out_h = (s.in_h + pads[0] + pads[2] - s.kernel_h) / stride + 1;
  s.out_w = (s.in_w + pads[1] + pads[3] - s.kernel_w) / stride + 1;
  return s;
}

// w [C, 1, kh, kw] as the kernel's [kh, kw, C].
torch::Tensor TapsMajor(const torch::Tensor& w) {
  return w.permute({2, 3, 0, 1}).contiguous();
}

class DepthwiseConvFunction
    : public torch::autograd::Function<DepthwiseConvFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, const torch::Tensor& w,
                               int64_t stride, int64_t pad_top,
                               int64_t pad_left, int64_t pad_bottom,
                               int64_t pad_right) {
    // Forward by LibTorch's convolution (oneDNN's direct kernel, faster
    // than ours here); only the backward pass is the own kernel's.
    const std::vector<int64_t> strides = {stride, stride},
                               padding = {pad_top, pad_left},
                               dilation = {1, 1};
    torch::Tensor y = torch::conv2d(x, w, torch::Tensor(), strides, padding,
                                    dilation, x.size(1))
                          .contiguous(torch::MemoryFormat::ChannelsLast);
    ctx->save_for_backward({x, w});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["pads"] =
        std::vector<int64_t>{pad_top, pad_left, pad_bottom, pad_right};
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const std::vector<int64_t> p = ctx->saved_data["pads"].toIntVector();
    const internal::DepthwiseShape s = ShapeOf(
        x, w, ctx->saved_data["stride"].toInt(), {p[0], p[1], p[2], p[3]});
    const torch::Tensor g =
        grad_outputs[0].contiguous(torch::MemoryFormat::ChannelsLast);
    torch::Tensor dx, dtaps;
    if (ctx->needs_input_grad(0)) {
      dx = torch::empty_like(x, torch::MemoryFormat::ChannelsLast);
    }
    if (ctx->needs_input_grad(1)) {
      dtaps = torch::empty({s.kernel_h, s.kernel_w, s.channels, 1},
                           torch::kFloat32);
    }
    const torch::Tensor taps = TapsMajor(w);
    torch::Tensor scratch;
    if (dtaps.defined()) scratch = torch::empty({s.n, dtaps.numel()});
    internal::DepthwiseBackwardCpu(
        s, x.data_ptr<float>(), taps.data_ptr<float>(), g.data_ptr<float>(),
        dx.defined() ? dx.data_ptr<float>() : nullptr,
        dtaps.defined() ? dtaps.data_ptr<float>() : nullptr,
        dtaps.defined() ? scratch.data_ptr<float>() : nullptr);
    torch::Tensor dw;
    if (dtaps.defined()) {
      dw = torch::empty_like(w);
      dw.copy_(dtaps.permute({2, 3, 0, 1}));
    }
    return {dx,
            dw,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor DepthwiseConvCpu(const torch::Tensor& x, const torch::Tensor& w,
                               int64_t stride,
                               const std::array<int64_t, 4>& pads) {
  if (!KernelSwitchOn(KernelSwitch::kDepthwise) || x.dim() != 4 ||
      w.dim() != 4 || !x.is_cpu() || !w.is_cpu() ||
      x.scalar_type() != torch::kFloat32 ||
      w.scalar_type() != torch::kFloat32 || x.size(1) < 2 ||
      w.size(0) != x.size(1) || w.size(1) != 1 ||
      w.size(2) > internal::kDepthwiseMaxKernel ||
      w.size(3) > internal::kDepthwiseMaxKernel ||
      !x.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    return {};
  }
  // Where the own backward pass wins (depthwise_bench, batch 8, 2 threads,
  // AMD EPYC: 5 x 5 and 7 x 7 filters at stride 1 take 0.4-0.7x LibTorch's
  // backward time; 3 x 3 and strided ones run faster in LibTorch's), and
  // the pads are symmetric, as SAME's are at stride 1 for odd filters.
  if (stride != 1 || w.size(2) < 5 || w.size(3) < 5 ||
      pads[0] != pads[2] || pads[1] != pads[3]) {
    return {};
  }
  const internal::DepthwiseShape s = ShapeOf(x, w, stride, pads);
  if (s.out_h < 1 || s.out_w < 1 || x.numel() == 0) return {};
  return DepthwiseConvFunction::apply(x, w, stride, pads[0], pads[1], pads[2],
                                      pads[3]);
}

}  // namespace nets
}  // namespace slimtorch
