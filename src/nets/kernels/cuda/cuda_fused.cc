#include "cuda_fused.h"

#include <cstdint>
#include <vector>

#include "slimtorch/core/error.h"

#ifdef SLIMTORCH_WITH_CUDA_KERNELS
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "cuda_kernels.h"
#endif

namespace slimtorch {
namespace nets {
namespace internal {

#ifndef SLIMTORCH_WITH_CUDA_KERNELS

bool CudaKernelsBuilt() { return false; }

torch::Tensor BatchNormActCuda(const torch::Tensor&, const torch::Tensor&,
                               const torch::Tensor&, torch::Tensor&,
                               torch::Tensor&, bool, double, double,
                               BnActivation) {
  return {};
}

torch::Tensor AddReluCuda(const torch::Tensor&, const torch::Tensor&) {
  return {};
}

torch::Tensor MaxPoolCuda(const torch::Tensor&, int64_t, int64_t, int64_t,
                          int64_t, int64_t, int64_t) {
  return {};
}

torch::Tensor BiasActCuda(const torch::Tensor&, const torch::Tensor&,
                          BnActivation) {
  return {};
}

std::pair<torch::Tensor, torch::Tensor> PadInputChannelsCuda(
    const torch::Tensor&, const torch::Tensor&) {
  return {};
}

torch::Tensor LocalResponseNormCuda(const torch::Tensor&, int64_t, double,
                                    double, double) {
  return {};
}

#else

bool CudaKernelsBuilt() { return true; }

namespace {

bool Element(const torch::Tensor& t, CudaElement* e) {
  switch (t.scalar_type()) {
    case torch::kFloat32:
      *e = CudaElement::kFloat32;
      return true;
    case torch::kBFloat16:
      *e = CudaElement::kBFloat16;
      return true;
    case torch::kFloat16:
      *e = CudaElement::kFloat16;
      return true;
    default:
      return false;
  }
}

bool Aligned(const torch::Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0;
}

// The memory order the kernels read x in: channels-last for 4-D tensors
// with H * W > 1, plain rows otherwise; nothing when x is in neither.
c10::optional<torch::MemoryFormat> RowsFormat(const torch::Tensor& x) {
  if (x.dim() == 2 || (x.dim() == 4 && x.size(2) * x.size(3) == 1)) {
    if (x.is_contiguous()) return torch::MemoryFormat::Contiguous;
    return c10::nullopt;
  }
  if (x.dim() == 4 && x.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    return torch::MemoryFormat::ChannelsLast;
  }
  return c10::nullopt;
}

BnCudaShape ShapeOf(const torch::Tensor& x, BnActivation act) {
  BnCudaShape s;
  Element(x, &s.element);
  s.channels = x.size(1);
  s.rows = x.numel() / s.channels;
  s.act = act;
  s.device = x.get_device();
  s.stream = at::cuda::getCurrentCUDAStream(s.device).stream();
  return s;
}

void Check(const char* error, const char* what) {
  SLIM_CHECK(error == nullptr, "CUDA batch norm kernels (", what, "): ", error);
}

// The output gradient as the row kernels read it: x's element type and
// memory order, 16-byte aligned.
torch::Tensor RowsGradient(const torch::Tensor& grad, const torch::Tensor& x) {
  const torch::MemoryFormat format = *RowsFormat(x);
  torch::Tensor g = grad.to(x.scalar_type()).contiguous(format);
  if (!Aligned(g)) g = g.clone(format);
  return g;
}

float* FloatsOrNull(const torch::Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.data_ptr<float>() : nullptr;
}

// y = act(x * scale + shift) with the per-channel values of `coef`
// ([4, C] float32: mean, invstd, scale, shift; computed by the caller and
// not differentiated: their gradient paths are in the backward formula).
class BatchNormActCudaFunction
    : public torch::autograd::Function<BatchNormActCudaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& gamma,
                               const torch::Tensor& beta,
                               const torch::Tensor& coef, int64_t act) {
    const BnCudaShape s = ShapeOf(x, static_cast<BnActivation>(act));
    torch::Tensor y = torch::empty_like(x, *RowsFormat(x));
    Check(BnCudaApply(s, x.data_ptr(), coef.data_ptr<float>(), y.data_ptr()),
          "apply");
    ctx->save_for_backward({x, gamma, coef});
    ctx->saved_data["act"] = act;
    ctx->saved_data["beta"] = beta.numel() > 0;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& gamma = saved[1];
    const torch::Tensor& coef = saved[2];
    const c10::cuda::CUDAGuard guard(x.device());
    const BnCudaShape s =
        ShapeOf(x, static_cast<BnActivation>(ctx->saved_data["act"].toInt()));
    const torch::MemoryFormat format = *RowsFormat(x);
    const torch::Tensor g = RowsGradient(grad_outputs[0], x);
    const auto floats = x.options().dtype(torch::kFloat32);
    torch::Tensor work = torch::empty({BnCudaWorkspaceFloats(s)}, floats);
    torch::Tensor dx = torch::empty_like(x, format);
    torch::Tensor dgamma, dbeta;
    if (gamma.numel() > 0) dgamma = torch::empty({s.channels}, floats);
    if (ctx->saved_data["beta"].toBool()) {
      dbeta = torch::empty({s.channels}, floats);
    }
    Check(BnCudaBackward(s, g.data_ptr(), x.data_ptr(), FloatsOrNull(gamma),
                         coef.data_ptr<float>(), work.data_ptr<float>(),
                         dx.data_ptr(), FloatsOrNull(dgamma),
                         FloatsOrNull(dbeta)),
          "backward");
    return {dx, dgamma, dbeta, torch::Tensor(), torch::Tensor()};
  }
};

// act(x + bias): the layer's bias and activation after its product.
class BiasActCudaFunction
    : public torch::autograd::Function<BiasActCudaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x,
                               const torch::Tensor& bias, int64_t act) {
    const BnCudaShape s = ShapeOf(x, static_cast<BnActivation>(act));
    torch::Tensor y = torch::empty_like(x, *RowsFormat(x));
    Check(BiasActCuda(s, x.data_ptr(), bias.data_ptr<float>(), y.data_ptr()),
          "bias + activation");
    ctx->save_for_backward({x, bias});
    ctx->saved_data["act"] = act;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& bias = saved[1];
    const c10::cuda::CUDAGuard guard(x.device());
    const auto act = static_cast<BnActivation>(ctx->saved_data["act"].toInt());
    const BnCudaShape s = ShapeOf(x, act);
    const torch::MemoryFormat format = *RowsFormat(x);
    const torch::Tensor g = RowsGradient(grad_outputs[0], x);
    const auto floats = x.options().dtype(torch::kFloat32);
    torch::Tensor work = torch::empty({BiasGradWorkspaceFloats(s)}, floats);
    torch::Tensor dbias = torch::empty({s.channels}, floats);
    // Without an activation the input's gradient is g itself.
    torch::Tensor dx =
        act == BnActivation::kNone ? g : torch::empty_like(x, format);
    Check(BiasActBackwardCuda(
              s, g.data_ptr(), x.data_ptr(), bias.data_ptr<float>(),
              work.data_ptr<float>(),
              act == BnActivation::kNone ? nullptr : dx.data_ptr(),
              dbias.data_ptr<float>()),
          "bias + activation backward");
    return {dx, dbias, torch::Tensor()};
  }
};

bool UsableParameter(const torch::Tensor& t, const torch::Tensor& x) {
  return !t.defined() ||
         (t.device() == x.device() && t.scalar_type() == torch::kFloat32 &&
          t.is_contiguous() && t.numel() == x.size(1));
}

// max(a + b, 0); the gradient, g where the output is positive, goes to both.
class AddReluCudaFunction
    : public torch::autograd::Function<AddReluCudaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& a, const torch::Tensor& b) {
    CudaElement e = CudaElement::kFloat32;
    Element(a, &e);
    torch::Tensor out = torch::empty_like(a);
    const int device = a.get_device();
    const char* error = internal::AddReluCuda(
        e, a.numel(), a.data_ptr(), b.data_ptr(), out.data_ptr(), device,
        at::cuda::getCurrentCUDAStream(device).stream());
    SLIM_CHECK(error == nullptr, "CUDA add + ReLU kernel: ", error);
    ctx->save_for_backward({out});
    return out;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor out = ctx->get_saved_variables()[0];
    torch::Tensor g = torch::threshold_backward(grad_outputs[0], out, 0);
    return {g, g};
  }
};

// x's shape and memory order for the pooling and LRN kernels, or nothing
// when they do not take it (an NCHW tensor that is also channels-last, as
// with C = 1 or H = W = 1, is the same bytes: read as NCHW).
c10::optional<Cuda4d> Dense4d(const torch::Tensor& x) {
  CudaElement e;
  if (!x.defined() || !x.is_cuda() || x.dim() != 4 || x.numel() == 0 ||
      !Element(x, &e)) {
    return c10::nullopt;
  }
  Cuda4d s;
  s.n = x.size(0);
  s.c = x.size(1);
  s.h = x.size(2);
  s.w = x.size(3);
  if (x.is_contiguous()) return s;
  if (x.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    s.channels_last = true;
    return s;
  }
  return c10::nullopt;
}

torch::MemoryFormat FormatOf(const Cuda4d& s) {
  return s.channels_last ? torch::MemoryFormat::ChannelsLast
                         : torch::MemoryFormat::Contiguous;
}

void* StreamOf(const torch::Tensor& x) {
  return at::cuda::getCurrentCUDAStream(x.get_device()).stream();
}

CudaElement ElementOf(const torch::Tensor& x) {
  CudaElement e = CudaElement::kFloat32;
  Element(x, &e);
  return e;
}

class MaxPoolCudaFunction
    : public torch::autograd::Function<MaxPoolCudaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, int64_t kernel,
                               int64_t stride, int64_t pad_top,
                               int64_t pad_left, int64_t out_h, int64_t out_w) {
    const Cuda4d in = *Dense4d(x);
    const CudaPool pool = Pool(kernel, stride, pad_top, pad_left, out_h, out_w);
    const auto opts = x.options().memory_format(FormatOf(in));
    torch::Tensor y = torch::empty({in.n, in.c, out_h, out_w}, opts);
    torch::Tensor argmax =
        torch::empty({in.n, in.c, out_h, out_w}, opts.dtype(torch::kInt32));
    const char* error = internal::MaxPoolCuda(
        ElementOf(x), x.data_ptr(), in, pool, y.data_ptr(),
        argmax.data_ptr<int32_t>(), x.get_device(), StreamOf(x));
    SLIM_CHECK(error == nullptr, "CUDA max pool kernel: ", error);
    ctx->save_for_backward({argmax});
    ctx->saved_data["input"] =
        std::vector<int64_t>{in.n, in.c, in.h, in.w, in.channels_last};
    ctx->saved_data["window"] =
        std::vector<int64_t>{kernel, stride, pad_top, pad_left, out_h, out_w};
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const torch::Tensor argmax = ctx->get_saved_variables()[0];
    const std::vector<int64_t> v = ctx->saved_data["input"].toIntVector();
    const std::vector<int64_t> w = ctx->saved_data["window"].toIntVector();
    const auto dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    Cuda4d in;
    in.n = v[0];
    in.c = v[1];
    in.h = v[2];
    in.w = v[3];
    in.channels_last = v[4] != 0;
    const CudaPool pool = Pool(w[0], w[1], w[2], w[3], w[4], w[5]);
    const c10::cuda::CUDAGuard guard(argmax.device());
    const torch::Tensor g = grad_outputs[0].to(dtype).contiguous(FormatOf(in));
    torch::Tensor dx = torch::empty({in.n, in.c, in.h, in.w},
                                    g.options().memory_format(FormatOf(in)));
    const char* error = internal::MaxPoolBackwardCuda(
        ElementOf(g), g.data_ptr(), argmax.data_ptr<int32_t>(), in, pool,
        dx.data_ptr(), g.get_device(), StreamOf(g));
    SLIM_CHECK(error == nullptr, "CUDA max pool backward kernel: ", error);
    torch::autograd::variable_list out(7);
    out[0] = dx;
    return out;
  }

  static CudaPool Pool(int64_t kernel, int64_t stride, int64_t pad_top,
                       int64_t pad_left, int64_t out_h, int64_t out_w) {
    CudaPool p;
    p.kernel = static_cast<int>(kernel);
    p.stride = static_cast<int>(stride);
    p.pad_top = static_cast<int>(pad_top);
    p.pad_left = static_cast<int>(pad_left);
    p.out_h = out_h;
    p.out_w = out_w;
    return p;
  }
};

class LrnCudaFunction : public torch::autograd::Function<LrnCudaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x, int64_t radius,
                               double bias, double alpha, double beta) {
    const Cuda4d s = *Dense4d(x);
    const CudaLrn lrn = Params(radius, bias, alpha, beta);
    torch::Tensor y = torch::empty_like(x, FormatOf(s));
    torch::Tensor norm =
        torch::empty_like(x, x.options().dtype(torch::kFloat32), FormatOf(s));
    const char* error =
        LrnForwardCuda(ElementOf(x), x.data_ptr(), s, lrn, y.data_ptr(),
                       norm.data_ptr<float>(), x.get_device(), StreamOf(x));
    SLIM_CHECK(error == nullptr, "CUDA LRN kernel: ", error);
    ctx->save_for_backward({x, norm});
    ctx->saved_data["params"] =
        std::vector<double>{static_cast<double>(radius), bias, alpha, beta};
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& norm = saved[1];
    const std::vector<double> p = ctx->saved_data["params"].toDoubleVector();
    const CudaLrn lrn = Params(static_cast<int64_t>(p[0]), p[1], p[2], p[3]);
    const Cuda4d s = *Dense4d(x);
    const c10::cuda::CUDAGuard guard(x.device());
    const torch::Tensor g =
        grad_outputs[0].to(x.scalar_type()).contiguous(FormatOf(s));
    torch::Tensor scratch = torch::empty_like(norm);
    torch::Tensor dx = torch::empty_like(x, FormatOf(s));
    const char* error = LrnBackwardCuda(
        ElementOf(x), x.data_ptr(), g.data_ptr(), norm.data_ptr<float>(), s,
        lrn, scratch.data_ptr<float>(), dx.data_ptr(), x.get_device(),
        StreamOf(x));
    SLIM_CHECK(error == nullptr, "CUDA LRN backward kernels: ", error);
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }

  static CudaLrn Params(int64_t radius, double bias, double alpha,
                        double beta) {
    CudaLrn l;
    l.radius = static_cast<int>(radius);
    l.bias = static_cast<float>(bias);
    l.alpha = static_cast<float>(alpha);
    l.beta = static_cast<float>(beta);
    return l;
  }
};

}  // namespace

torch::Tensor MaxPoolCuda(const torch::Tensor& x, int64_t kernel,
                          int64_t stride, int64_t pad_top, int64_t pad_left,
                          int64_t out_h, int64_t out_w) {
  if (!Dense4d(x) || kernel < 1 || stride < 1 || out_h < 1 || out_w < 1 ||
      kernel > 1024 || x.size(2) * x.size(3) >= (int64_t{1} << 31)) {
    return {};
  }
  const c10::cuda::CUDAGuard guard(x.device());
  return MaxPoolCudaFunction::apply(x, kernel, stride, pad_top, pad_left, out_h,
                                    out_w);
}

torch::Tensor LocalResponseNormCuda(const torch::Tensor& x,
                                    int64_t depth_radius, double bias,
                                    double alpha, double beta) {
  if (!Dense4d(x) || depth_radius > (int64_t{1} << 20)) return {};
  const c10::cuda::CUDAGuard guard(x.device());
  return LrnCudaFunction::apply(x, depth_radius, bias, alpha, beta);
}

torch::Tensor BatchNormActCuda(const torch::Tensor& x,
                               const torch::Tensor& gamma,
                               const torch::Tensor& beta,
                               torch::Tensor& moving_mean,
                               torch::Tensor& moving_variance, bool training,
                               double decay, double epsilon, BnActivation act) {
  CudaElement element = CudaElement::kFloat32;
  if (!x.defined() || !x.is_cuda() || !Element(x, &element) || x.numel() == 0 ||
      !RowsFormat(x) || !Aligned(x) || x.size(1) > (int64_t{1} << 24)) {
    return {};
  }
  for (const torch::Tensor* t :
       {&gamma, &beta, &static_cast<const torch::Tensor&>(moving_mean),
        &static_cast<const torch::Tensor&>(moving_variance)}) {
    if (!UsableParameter(*t, x)) return {};
  }
  if (!moving_mean.defined() || !moving_variance.defined()) return {};
  const bool needs_grad =
      torch::GradMode::is_enabled() &&
      (x.requires_grad() || (gamma.defined() && gamma.requires_grad()) ||
       (beta.defined() && beta.requires_grad()));
  if (!training && needs_grad) return {};  // LibTorch's path
  RECORD_FUNCTION("slimtorch::batch_norm_act_cuda", std::vector<c10::IValue>());
  const c10::cuda::CUDAGuard device_guard(x.device());
  const BnCudaShape s = ShapeOf(x, act);
  const auto floats = x.options().dtype(torch::kFloat32);
  torch::Tensor coef = torch::empty({4, s.channels}, floats);
  if (training) {
    torch::Tensor work = torch::empty({BnCudaWorkspaceFloats(s)}, floats);
    Check(BnCudaTrainStats(s, x.data_ptr(), FloatsOrNull(gamma),
                           FloatsOrNull(beta), decay, epsilon,
                           moving_mean.data_ptr<float>(),
                           moving_variance.data_ptr<float>(),
                           work.data_ptr<float>(), coef.data_ptr<float>()),
          "statistics");
    // (the buffers' versions are bumped as an in-place op's would be)
    moving_mean.unsafeGetTensorImpl()->bump_version();
    moving_variance.unsafeGetTensorImpl()->bump_version();
    // (custom autograd functions take no undefined tensors: an absent
    // gamma or beta goes in as an empty one)
    const torch::Tensor none = torch::empty({0}, floats);
    return BatchNormActCudaFunction::apply(x, gamma.defined() ? gamma : none,
                                           beta.defined() ? beta : none, coef,
                                           static_cast<int64_t>(act));
  }
  Check(BnCudaInferenceCoefficients(s, FloatsOrNull(gamma), FloatsOrNull(beta),
                                    moving_mean.data_ptr<float>(),
                                    moving_variance.data_ptr<float>(), epsilon,
                                    coef.data_ptr<float>()),
        "inference coefficients");
  torch::Tensor y = torch::empty_like(x, *RowsFormat(x));
  Check(BnCudaApply(s, x.data_ptr(), coef.data_ptr<float>(), y.data_ptr()),
        "apply");
  return y;
}

torch::Tensor BiasActCuda(const torch::Tensor& x, const torch::Tensor& bias,
                          BnActivation act) {
  CudaElement element = CudaElement::kFloat32;
  if (!x.defined() || !x.is_cuda() || !Element(x, &element) || x.numel() == 0 ||
      !RowsFormat(x) || !Aligned(x) || !bias.defined() ||
      !UsableParameter(bias, x)) {
    return {};
  }
  const c10::cuda::CUDAGuard guard(x.device());
  return BiasActCudaFunction::apply(x, bias, static_cast<int64_t>(act));
}

std::pair<torch::Tensor, torch::Tensor> PadInputChannelsCuda(
    const torch::Tensor& x, const torch::Tensor& w) {
  constexpr int64_t kChannels = 8;
  if (!x.defined() || !x.is_cuda() || x.dim() != 4 || w.dim() != 4 ||
      x.size(1) >= kChannels || w.size(1) != x.size(1) || x.numel() == 0 ||
      x.is_contiguous() ||
      !x.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    return {};
  }
  const auto t = x.scalar_type();
  bool sixteen = t == torch::kBFloat16 || t == torch::kFloat16;
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  if (t == torch::kFloat32 && at::autocast::is_autocast_enabled(at::kCUDA)) {
    const auto a = at::autocast::get_autocast_dtype(at::kCUDA);
    sixteen = a == torch::kBFloat16 || a == torch::kFloat16;
  }
#endif
  if (!sixteen) return {};
  const int64_t extra = kChannels - x.size(1);
  const torch::Tensor xz = torch::zeros(
      {x.size(0), extra, x.size(2), x.size(3)},
      x.options().memory_format(torch::MemoryFormat::ChannelsLast));
  const torch::Tensor wz =
      torch::zeros({w.size(0), extra, w.size(2), w.size(3)},
                   w.options().memory_format(w.suggest_memory_format()));
  torch::Tensor xp = torch::cat({x, xz}, 1);
  if (!xp.is_contiguous(torch::MemoryFormat::ChannelsLast)) {
    xp = xp.contiguous(torch::MemoryFormat::ChannelsLast);
  }
  return {xp, torch::cat({w, wz}, 1)};
}

torch::Tensor AddReluCuda(const torch::Tensor& a, const torch::Tensor& b) {
  CudaElement e = CudaElement::kFloat32;
  if (!a.defined() || !b.defined() || !a.is_cuda() ||
      a.device() != b.device() || a.scalar_type() != b.scalar_type() ||
      !Element(a, &e) || a.sizes() != b.sizes() || a.numel() == 0) {
    return {};
  }
  const bool dense =
      (a.is_contiguous() && b.is_contiguous()) ||
      (a.dim() == 4 && a.is_contiguous(torch::MemoryFormat::ChannelsLast) &&
       b.is_contiguous(torch::MemoryFormat::ChannelsLast));
  if (!dense) return {};
  const c10::cuda::CUDAGuard guard(a.device());
  return AddReluCudaFunction::apply(a, b);
}

#endif  // SLIMTORCH_WITH_CUDA_KERNELS

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
