#pragma once
// The CPU engine and the per-thread stream that src/nets' oneDNN primitives
// (batch_norm_dnnl.cc, conv_dnnl.cc) run on. Include only where
// SLIMTORCH_WITH_DNNL is defined (oneDNN's headers found).

#include <oneapi/dnnl/dnnl.hpp>

namespace slimtorch {
namespace nets {
namespace internal {

inline dnnl::engine& DnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Each thread its own stream, so calls from several threads never share one.
inline dnnl::stream& DnnlStream() {
  thread_local dnnl::stream stream(DnnlEngine());
  return stream;
}

// oneDNN's view of caller-owned memory laid out as d (inputs are read only,
// whatever the handle's constness).
inline dnnl::memory DnnlMemory(const dnnl::memory::desc& d, const void* p) {
  return dnnl::memory(d, DnnlEngine(), const_cast<void*>(p));
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
