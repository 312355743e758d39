#include "conv_dnnl.h"

#include "slimtorch/core/error.h"

#ifdef SLIMTORCH_WITH_DNNL
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dnnl_context.h"
#endif

namespace slimtorch {
namespace nets {
namespace internal {

#ifndef SLIMTORCH_WITH_DNNL

bool DnnlWinogradBuilt() { return false; }
bool DnnlWinogradApplies(const WinogradShape&) { return false; }
void DnnlWinogradForward(const WinogradShape&, const float*, const float*,
                         const float*, float*) {
  SLIM_CHECK(false, "slimtorch was built without oneDNN's convolutions");
}
void DnnlWinogradBackward(const WinogradShape&, const float*, const float*,
                          const float*, float*, float*, float*) {
  SLIM_CHECK(false, "slimtorch was built without oneDNN's convolutions");
}

#else

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// One shape's three primitives, the caller's layouts (`*_user`) and the
// reorders between those and the kernels' blocked layouts.
struct Primitives {
  memory::desc x_user, y_user, w_user, bias;
  dnnl::convolution_forward forward;
  memory::desc f_src, f_weights, f_dst;
  dnnl::convolution_backward_data backward_data;
  memory::desc d_diff_dst, d_weights, d_diff_src;
  dnnl::convolution_backward_weights backward_weights;
  memory::desc w_src, w_diff_dst, w_diff_weights;
  // The largest blocked activation on the input side / output side and
  // the largest blocked weights (scratch sizes, bytes).
  size_t in_bytes = 0, out_bytes = 0, weight_bytes = 0;
  std::map<std::pair<int, int>, dnnl::reorder> reorders;
  std::vector<memory::desc> descs;  // reorders' keys index this

  int Index(const memory::desc& d) {
    for (size_t i = 0; i < descs.size(); ++i) {
      if (descs[i] == d) return static_cast<int>(i);
    }
    descs.push_back(d);
    return static_cast<int>(descs.size() - 1);
  }
  dnnl::reorder& Reorder(const memory::desc& from, const memory::desc& to) {
    const std::pair<int, int> key{Index(from), Index(to)};
    auto it = reorders.find(key);
    if (it != reorders.end()) return it->second;
    const dnnl::reorder::primitive_desc pd(DnnlEngine(), from, DnnlEngine(),
                                           to);
    return reorders.emplace(key, dnnl::reorder(pd)).first->second;
  }
};

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, bool, bool, bool>;

Key KeyOf(const WinogradShape& s) {
  return {s.n,      s.in_channels,   s.out_channels,
          s.height, s.width,         s.pad_h,
          s.pad_w,  s.channels_last, s.weights_channels_last,
          s.bias};
}

using Fwd = dnnl::convolution_forward;
using BwdData = dnnl::convolution_backward_data;
using BwdWeights = dnnl::convolution_backward_weights;

// The convolution's source, destination and weights dimensions.
struct ConvDims {
  memory::dims src, dst, wei;
};

ConvDims DimsOf(const WinogradShape& s) {
  return {{s.n, s.in_channels, s.height, s.width},
          {s.n, s.out_channels, s.out_height(), s.out_width()},
          {s.out_channels, s.in_channels, 3, 3}};
}

// The three passes' Winograd primitive descriptors, oneDNN choosing the
// layouts; `bias` empty for none. Throws dnnl::error where oneDNN has no
// Winograd kernel for the shape or the CPU.
struct PassDescs {
  std::unique_ptr<Fwd::primitive_desc> forward;
  std::unique_ptr<BwdData::primitive_desc> backward_data;
  std::unique_ptr<BwdWeights::primitive_desc> backward_weights;
};

PassDescs DescribePasses(const WinogradShape& s, const memory::desc& bias) {
  const ConvDims d = DimsOf(s);
  const memory::dims strides = {1, 1}, pad = {s.pad_h, s.pad_w};
  const auto f32 = memory::data_type::f32;
  const memory::desc src_any(d.src, f32, Tag::any),
      dst_any(d.dst, f32, Tag::any), wei_any(d.wei, f32, Tag::any);
  const auto alg = dnnl::algorithm::convolution_winograd;
  PassDescs p;
  if (s.bias) {
    p.forward = std::make_unique<Fwd::primitive_desc>(
        Fwd::desc(dnnl::prop_kind::forward_training, alg, src_any, wei_any,
                  bias, dst_any, strides, pad, pad),
        DnnlEngine());
    p.backward_weights = std::make_unique<BwdWeights::primitive_desc>(
        BwdWeights::desc(alg, src_any, wei_any, bias, dst_any, strides, pad,
                         pad),
        DnnlEngine(), *p.forward);
  } else {
    p.forward = std::make_unique<Fwd::primitive_desc>(
        Fwd::desc(dnnl::prop_kind::forward_training, alg, src_any, wei_any,
                  dst_any, strides, pad, pad),
        DnnlEngine());
    p.backward_weights = std::make_unique<BwdWeights::primitive_desc>(
        BwdWeights::desc(alg, src_any, wei_any, dst_any, strides, pad, pad),
        DnnlEngine(), *p.forward);
  }
  p.backward_data = std::make_unique<BwdData::primitive_desc>(
      BwdData::desc(alg, src_any, wei_any, dst_any, strides, pad, pad),
      DnnlEngine(), *p.forward);
  return p;
}

// The passes' primitives and their layouts into `p`, with the buffer sizes
// the largest of them need.
void TakePasses(const PassDescs& d, Primitives& p) {
  p.forward = Fwd(*d.forward);
  p.f_src = d.forward->src_desc();
  p.f_weights = d.forward->weights_desc();
  p.f_dst = d.forward->dst_desc();
  p.backward_data = BwdData(*d.backward_data);
  p.d_diff_dst = d.backward_data->diff_dst_desc();
  p.d_weights = d.backward_data->weights_desc();
  p.d_diff_src = d.backward_data->diff_src_desc();
  p.backward_weights = BwdWeights(*d.backward_weights);
  p.w_src = d.backward_weights->src_desc();
  p.w_diff_dst = d.backward_weights->diff_dst_desc();
  p.w_diff_weights = d.backward_weights->diff_weights_desc();
  p.in_bytes = std::max(
      {p.f_src.get_size(), p.d_diff_src.get_size(), p.w_src.get_size()});
  p.out_bytes = std::max(
      {p.f_dst.get_size(), p.d_diff_dst.get_size(), p.w_diff_dst.get_size()});
  p.weight_bytes = std::max({p.f_weights.get_size(), p.d_weights.get_size(),
                             p.w_diff_weights.get_size()});
}

std::unique_ptr<Primitives> Make(const WinogradShape& s) {
  auto p = std::make_unique<Primitives>();
  const ConvDims d = DimsOf(s);
  const auto f32 = memory::data_type::f32;
  p->x_user = memory::desc(d.src, f32, s.channels_last ? Tag::nhwc : Tag::nchw);
  p->y_user = memory::desc(d.dst, f32, s.channels_last ? Tag::nhwc : Tag::nchw);
  p->w_user =
      memory::desc(d.wei, f32, s.weights_channels_last ? Tag::ohwi : Tag::oihw);
  if (s.bias) p->bias = memory::desc({s.out_channels}, f32, Tag::x);
  PassDescs passes;
  try {
    passes = DescribePasses(s, p->bias);
  } catch (const dnnl::error&) {
    return nullptr;  // no Winograd kernel for this shape or CPU
  }
  TakePasses(passes, *p);
  return p;
}

// This thread's primitives for `s`, or null where oneDNN has no Winograd
// kernel for it (remembered too).
Primitives* Find(const WinogradShape& s) {
  thread_local std::map<Key, std::unique_ptr<Primitives> > cache;
  const Key key = KeyOf(s);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, Make(s)).first;
  return it->second.get();
}

// The same where the caller has checked DnnlWinogradApplies (on any thread).
Primitives& Get(const WinogradShape& s) {
  Primitives* p = Find(s);
  SLIM_CHECK(p != nullptr, "oneDNN has no Winograd convolution for [N=", s.n,
             ", C=", s.in_channels, ", H=", s.height, ", W=", s.width, "] -> ",
             s.out_channels, " channels");
  return *p;
}

// A growing 64-byte-aligned buffer, kept by its thread: the blocked copies
// of every call reuse the same pages (fresh large allocations would cost a
// page fault per 4 KiB each call).
class Scratch {
 public:
  void* Get(size_t bytes) {
    if (bytes > size_) {
      data_.reset(static_cast<char*>(std::aligned_alloc(64, Round(bytes))));
      SLIM_CHECK(data_ != nullptr, "out of memory: ", bytes,
                 " bytes of convolution scratch");
      size_ = Round(bytes);
    }
    return data_.get();
  }

 private:
  static size_t Round(size_t b) { return (b + 63) / 64 * 64; }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t size_ = 0;
};

struct Buffers {
  Scratch in, out, weights, diff_weights;
};

Buffers& ThreadBuffers() {
  thread_local Buffers b;
  return b;
}

// `from` (laid out as `fd`) copied into `to` (as `td`).
void Copy(Primitives& p, const memory::desc& fd, const void* from,
          const memory::desc& td, void* to) {
  memory src = DnnlMemory(fd, from), dst = DnnlMemory(td, to);
  p.Reorder(fd, td).execute(DnnlStream(), src, dst);
}

template <typename F>
void Run(const char* what, const WinogradShape& s, F&& f) {
  RunDnnl(f, [&] {
    return StrCat("oneDNN's Winograd convolution ", what, " on [N=", s.n,
                  ", C=", s.in_channels, ", H=", s.height, ", W=", s.width,
                  "] -> ", s.out_channels, " channels");
  });
}

}  // namespace

bool DnnlWinogradBuilt() { return true; }

bool DnnlWinogradApplies(const WinogradShape& s) {
  if (s.pad_h < 0 || s.pad_h > 1 || s.pad_w < 0 || s.pad_w > 1 ||
      s.out_height() < 1 || s.out_width() < 1) {
    return false;
  }
  return Find(s) != nullptr;
}

void DnnlWinogradForward(const WinogradShape& s, const float* x, const float* w,
                         const float* b, float* y) {
  Run("forward", s, [&] {
    Primitives& p = Get(s);
    Buffers& buf = ThreadBuffers();
    void* in = buf.in.Get(p.in_bytes);
    void* out = buf.out.Get(p.out_bytes);
    void* weights = buf.weights.Get(p.weight_bytes);
    Copy(p, p.x_user, x, p.f_src, in);
    Copy(p, p.w_user, w, p.f_weights, weights);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, DnnlMemory(p.f_src, in)},
        {DNNL_ARG_WEIGHTS, DnnlMemory(p.f_weights, weights)},
        {DNNL_ARG_DST, DnnlMemory(p.f_dst, out)}};
    if (s.bias) args.emplace(DNNL_ARG_BIAS, DnnlMemory(p.bias, b));
    p.forward.execute(DnnlStream(), args);
    Copy(p, p.f_dst, out, p.y_user, y);
  });
}

void DnnlWinogradBackward(const WinogradShape& s, const float* x,
                          const float* w, const float* g, float* dx, float* dw,
                          float* db) {
  Run("backward", s, [&] {
    Primitives& p = Get(s);
    Buffers& buf = ThreadBuffers();
    void* in = buf.in.Get(p.in_bytes);
    void* out = buf.out.Get(p.out_bytes);
    const bool weights_grad = dw != nullptr || (s.bias && db != nullptr);
    if (weights_grad) {
      void* diff_weights = buf.diff_weights.Get(p.weight_bytes);
      std::vector<float> bias_grad;
      if (s.bias && db == nullptr) bias_grad.resize(s.out_channels);
      Copy(p, p.x_user, x, p.w_src, in);
      Copy(p, p.y_user, g, p.w_diff_dst, out);
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, DnnlMemory(p.w_src, in)},
          {DNNL_ARG_DIFF_DST, DnnlMemory(p.w_diff_dst, out)},
          {DNNL_ARG_DIFF_WEIGHTS, DnnlMemory(p.w_diff_weights, diff_weights)}};
      if (s.bias) {
        args.emplace(DNNL_ARG_DIFF_BIAS,
                     DnnlMemory(p.bias, db != nullptr ? db : bias_grad.data()));
      }
      p.backward_weights.execute(DnnlStream(), args);
      DnnlStream().wait();  // before bias_grad goes
      if (dw != nullptr) {
        Copy(p, p.w_diff_weights, diff_weights, p.w_user, dw);
      }
    }
    if (dx != nullptr) {
      if (!weights_grad || !(p.d_diff_dst == p.w_diff_dst)) {
        Copy(p, p.y_user, g, p.d_diff_dst, out);
      }
      void* weights = buf.weights.Get(p.weight_bytes);
      Copy(p, p.w_user, w, p.d_weights, weights);
      p.backward_data.execute(
          DnnlStream(), {{DNNL_ARG_DIFF_DST, DnnlMemory(p.d_diff_dst, out)},
                         {DNNL_ARG_WEIGHTS, DnnlMemory(p.d_weights, weights)},
                         {DNNL_ARG_DIFF_SRC, DnnlMemory(p.d_diff_src, in)}});
      Copy(p, p.d_diff_src, in, p.x_user, dx);
    }
  });
}

#endif  // SLIMTORCH_WITH_DNNL

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
