#include "pool_dnnl.h"

#include "slimtorch/core/error.h"

#ifdef SLIMTORCH_WITH_DNNL
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "dnnl_context.h"
#endif

namespace slimtorch {
namespace nets {
namespace internal {

#ifndef SLIMTORCH_WITH_DNNL

bool DnnlPoolBuilt() { return false; }
bool DnnlMaxPoolApplies(const DnnlPoolShape&) { return false; }
size_t DnnlMaxPoolWorkspaceBytes(const DnnlPoolShape&) { return 0; }
void DnnlMaxPoolForward(const DnnlPoolShape&, const void*, void*, void*) {
  SLIM_CHECK(false, "slimtorch was built without oneDNN's pooling");
}
void DnnlMaxPoolBackward(const DnnlPoolShape&, const void*, const void*,
                         void*) {
  SLIM_CHECK(false, "slimtorch was built without oneDNN's pooling");
}

#else

namespace {

using dnnl::memory;

// One shape's primitives; `ok` false where oneDNN refused it.
struct Primitives {
  bool ok = false;
  memory::desc src, dst, workspace;
  dnnl::pooling_forward training, inference;
  dnnl::pooling_backward backward;
};

using Key =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
               int64_t, int64_t, int64_t, int64_t, int64_t, bool>;

Primitives& Get(const DnnlPoolShape& s) {
  thread_local std::map<Key, std::unique_ptr<Primitives> > cache;
  const Key key{s.n,         s.channels,  s.height,  s.width,   s.out_height,
                s.out_width, s.kernel,    s.stride,  s.pad_top, s.pad_bottom,
                s.pad_left,  s.pad_right, s.bfloat16};
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  auto p = std::make_unique<Primitives>();
  const auto type =
      s.bfloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  p->src = memory::desc({s.n, s.channels, s.height, s.width}, type,
                        memory::format_tag::nhwc);
  p->dst = memory::desc({s.n, s.channels, s.out_height, s.out_width}, type,
                        memory::format_tag::nhwc);
  const memory::dims strides = {s.stride, s.stride};
  const memory::dims kernel = {s.kernel, s.kernel};
  const memory::dims pad_l = {s.pad_top, s.pad_left};
  const memory::dims pad_r = {s.pad_bottom, s.pad_right};
  try {
    const dnnl::pooling_forward::primitive_desc train_pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training,
                                    dnnl::algorithm::pooling_max, p->src,
                                    p->dst, strides, kernel, pad_l, pad_r),
        DnnlEngine());
    const dnnl::pooling_forward::primitive_desc infer_pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::pooling_max, p->src,
                                    p->dst, strides, kernel, pad_l, pad_r),
        DnnlEngine());
    const dnnl::pooling_backward::primitive_desc back_pd(
        dnnl::pooling_backward::desc(dnnl::algorithm::pooling_max, p->src,
                                     p->dst, strides, kernel, pad_l, pad_r),
        DnnlEngine(), train_pd);
    p->training = dnnl::pooling_forward(train_pd);
    p->inference = dnnl::pooling_forward(infer_pd);
    p->backward = dnnl::pooling_backward(back_pd);
    p->workspace = train_pd.workspace_desc();
    p->ok = true;
  } catch (const dnnl::error&) {
    p->ok = false;  // LibTorch's pooling takes this shape
  }
  return *cache.emplace(key, std::move(p)).first->second;
}

Primitives& Checked(const DnnlPoolShape& s) {
  Primitives& p = Get(s);
  SLIM_CHECK(p.ok, "oneDNN's max pooling has no kernel for [N=", s.n,
             ", C=", s.channels, ", H=", s.height, ", W=", s.width, "] window ",
             s.kernel, " stride ", s.stride);
  return p;
}

// f(), with oneDNN's errors rethrown naming the pooling's shape.
template <typename F>
void Run(const char* what, const DnnlPoolShape& s, F&& f) {
  RunDnnl(f, [&] {
    return StrCat("oneDNN's max pooling ", what, " on [N=", s.n,
                  ", C=", s.channels, ", H=", s.height, ", W=", s.width,
                  "] channels-last", s.bfloat16 ? " bfloat16" : "");
  });
}

}  // namespace

bool DnnlPoolBuilt() { return true; }

bool DnnlMaxPoolApplies(const DnnlPoolShape& s) { return Get(s).ok; }

size_t DnnlMaxPoolWorkspaceBytes(const DnnlPoolShape& s) {
  return Checked(s).workspace.get_size();
}

void DnnlMaxPoolForward(const DnnlPoolShape& s, const void* x, void* y,
                        void* workspace) {
  Run("forward", s, [&] {
    Primitives& p = Checked(s);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, DnnlMemory(p.src, x)},
        {DNNL_ARG_DST, DnnlMemory(p.dst, y)}};
    if (workspace != nullptr) {
      args.emplace(DNNL_ARG_WORKSPACE, DnnlMemory(p.workspace, workspace));
      p.training.execute(DnnlStream(), args);
    } else {
      p.inference.execute(DnnlStream(), args);
    }
  });
}

void DnnlMaxPoolBackward(const DnnlPoolShape& s, const void* g,
                         const void* workspace, void* dx) {
  Run("backward", s, [&] {
    Primitives& p = Checked(s);
    p.backward.execute(
        DnnlStream(), {{DNNL_ARG_DIFF_DST, DnnlMemory(p.dst, g)},
                       {DNNL_ARG_WORKSPACE, DnnlMemory(p.workspace, workspace)},
                       {DNNL_ARG_DIFF_SRC, DnnlMemory(p.src, dx)}});
  });
}

#endif  // SLIMTORCH_WITH_DNNL

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
