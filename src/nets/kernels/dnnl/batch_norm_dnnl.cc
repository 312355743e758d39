#include "batch_norm_dnnl.h"

#include "slimtorch/core/error.h"

#ifdef SLIMTORCH_WITH_DNNL
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "dnnl_context.h"
#endif

namespace slimtorch {
namespace nets {
namespace internal {

#ifndef SLIMTORCH_WITH_DNNL

bool DnnlBatchNormBuilt() { return false; }
size_t DnnlBnWorkspaceBytes(const BnLayout&, bool, float) { return 0; }
void DnnlBnForwardTraining(const void*, const BnLayout&, const float*,
                           const float*, float, bool, void*, float*, float*,
                           void*) {
  SLIM_CHECK(false, "slimtorch was built without oneDNN's batch norm");
}
void DnnlBnBackward(const void*, const void*, const BnLayout&, const float*,
                    const float*, const float*, const void*, float, bool, void*,
                    float*, float*) {
  SLIM_CHECK(false, "slimtorch was built without oneDNN's batch norm");
}

#else

namespace {

using dnnl::memory;
using Flags = dnnl::normalization_flags;

// One shape's primitives. The scale and shift arguments are always given
// (ones / zeros standing in for an absent gamma / beta), so one pair of
// primitives serves every layer of a shape.
struct Primitives {
  memory::desc data, channels;
  dnnl::batch_normalization_forward forward;
  dnnl::batch_normalization_backward backward;
  memory::desc workspace;
  std::vector<float> ones, zeros;
};

using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, float>;

Primitives& Get(const BnLayout& l, bool relu, float epsilon) {
  thread_local std::map<Key, std::unique_ptr<Primitives> > cache;
  const Key key{l.n,        l.channels, l.spatial, l.channels_last,
                l.bfloat16, relu,       epsilon};
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  auto p = std::make_unique<Primitives>();
  // [N, C, S, 1]: H and W only matter through their product.
  const memory::dims dims = {l.n, l.channels, l.spatial, 1};
  p->data = memory::desc(
      dims, l.bfloat16 ? memory::data_type::bf16 : memory::data_type::f32,
      l.channels_last ? memory::format_tag::nhwc : memory::format_tag::nchw);
  p->channels =
      memory::desc({l.channels}, memory::data_type::f32, memory::format_tag::x);
  Flags flags = Flags::use_scale | Flags::use_shift;
  if (relu) flags = flags | Flags::fuse_norm_relu;
  const dnnl::batch_normalization_forward::primitive_desc fpd(
      dnnl::batch_normalization_forward::desc(dnnl::prop_kind::forward_training,
                                              p->data, epsilon, flags),
      DnnlEngine());
  const dnnl::batch_normalization_backward::primitive_desc bpd(
      dnnl::batch_normalization_backward::desc(
          dnnl::prop_kind::backward, p->data, p->data, epsilon, flags),
      DnnlEngine(), fpd);
  p->forward = dnnl::batch_normalization_forward(fpd);
  p->backward = dnnl::batch_normalization_backward(bpd);
  p->workspace = fpd.workspace_desc();
  p->ones.assign(l.channels, 1.0f);
  p->zeros.assign(l.channels, 0.0f);
  return *cache.emplace(key, std::move(p)).first->second;
}

// f(), with oneDNN's errors rethrown naming the batch norm's shape.
template <typename F>
void Run(const char* what, const BnLayout& l, F&& f) {
  RunDnnl(f, [&] {
    return StrCat("oneDNN's batch norm ", what, " on [N=", l.n,
                  ", C=", l.channels, ", H*W=", l.spatial,
                  l.channels_last ? "] channels-last" : "] NCHW",
                  l.bfloat16 ? " bfloat16" : "");
  });
}

}  // namespace

bool DnnlBatchNormBuilt() { return true; }

size_t DnnlBnWorkspaceBytes(const BnLayout& l, bool relu, float epsilon) {
  if (!relu) return 0;
  size_t bytes = 0;
  Run("set-up", l, [&] { bytes = Get(l, relu, epsilon).workspace.get_size(); });
  return bytes;
}

void DnnlBnForwardTraining(const void* x, const BnLayout& l, const float* gamma,
                           const float* beta, float epsilon, bool relu, void* y,
                           float* mean, float* variance, void* workspace) {
  Run("forward", l, [&] {
    Primitives& p = Get(l, relu, epsilon);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, DnnlMemory(p.data, x)},
        {DNNL_ARG_DST, DnnlMemory(p.data, y)},
        {DNNL_ARG_SCALE,
         DnnlMemory(p.channels, gamma != nullptr ? gamma : p.ones.data())},
        {DNNL_ARG_SHIFT,
         DnnlMemory(p.channels, beta != nullptr ? beta : p.zeros.data())},
        {DNNL_ARG_MEAN, DnnlMemory(p.channels, mean)},
        {DNNL_ARG_VARIANCE, DnnlMemory(p.channels, variance)}};
    if (relu)
      args.emplace(DNNL_ARG_WORKSPACE, DnnlMemory(p.workspace, workspace));
    p.forward.execute(DnnlStream(), args);
  });
}

void DnnlBnBackward(const void* x, const void* g, const BnLayout& l,
                    const float* gamma, const float* mean,
                    const float* variance, const void* workspace, float epsilon,
                    bool relu, void* dx, float* dgamma, float* dbeta) {
  Run("backward", l, [&] {
    Primitives& p = Get(l, relu, epsilon);
    std::vector<float> dscale, dshift;
    if (dgamma == nullptr) dscale.resize(l.channels);
    if (dbeta == nullptr) dshift.resize(l.channels);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, DnnlMemory(p.data, x)},
        {DNNL_ARG_DIFF_DST, DnnlMemory(p.data, g)},
        {DNNL_ARG_SCALE,
         DnnlMemory(p.channels, gamma != nullptr ? gamma : p.ones.data())},
        {DNNL_ARG_SHIFT, DnnlMemory(p.channels, p.zeros.data())},
        {DNNL_ARG_MEAN, DnnlMemory(p.channels, mean)},
        {DNNL_ARG_VARIANCE, DnnlMemory(p.channels, variance)},
        {DNNL_ARG_DIFF_SRC, DnnlMemory(p.data, dx)},
        {DNNL_ARG_DIFF_SCALE,
         DnnlMemory(p.channels, dgamma != nullptr ? dgamma : dscale.data())},
        {DNNL_ARG_DIFF_SHIFT,
         DnnlMemory(p.channels, dbeta != nullptr ? dbeta : dshift.data())}};
    if (relu)
      args.emplace(DNNL_ARG_WORKSPACE, DnnlMemory(p.workspace, workspace));
    p.backward.execute(DnnlStream(), args);
  });
}

#endif  // SLIMTORCH_WITH_DNNL

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
