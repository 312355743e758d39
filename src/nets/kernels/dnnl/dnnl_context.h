#pragma once
// The CPU engine and the per-thread stream that src/nets' oneDNN primitives
// (batch_norm_dnnl.cc, conv_dnnl.cc, pool_dnnl.cc) run on. Include only where
// SLIMTORCH_WITH_DNNL is defined (oneDNN's headers found).

#include <oneapi/dnnl/dnnl.hpp>

#include "slimtorch/core/error.h"

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

// f() and a wait for the primitives it ran on this thread's stream, with
// oneDNN's errors (a shape it refuses, a failed run) rethrown as
// slimtorch's: "<describe()>: <oneDNN's message>".
template <typename F, typename D>
void RunDnnl(F&& f, D&& describe) {
  try {
    f();
    DnnlStream().wait();
  } catch (const dnnl::error& e) {
    SLIM_FAIL(describe(), ": ", e.what());
  }
}

}  // namespace internal
}  // namespace nets
}  // namespace slimtorch
