#pragma once
// An exported ONNX model run by onnxruntime (label_image's engine for int8
// QDQ models, which OpenCV 4.6's DNN module cannot import). onnxruntime is
// loaded at run time with dlopen through its C API: nothing of it is needed
// to build slimtorch, and a missing library is an error only when a model
// is run with it.
//
// Which library: OnnxRuntimeOptions::library when set, else the
// environment variable SLIMTORCH_ONNXRUNTIME_LIBRARY, else the first of
// "libonnxruntime.so.1" and "libonnxruntime.so" that the dynamic loader
// finds (LD_LIBRARY_PATH, the system's folders). PyPI's onnxruntime wheel
// ships one as site-packages/onnxruntime/capi/libonnxruntime.so.1.<minor>.<patch>.
// A library once loaded stays loaded for the process (onnxruntime's thread
// pools and globals do not survive dlclose).

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace slimtorch {

struct OnnxRuntimeOptions {
  // The library to load (a path, or a file name the dynamic loader looks
  // up); empty: $SLIMTORCH_ONNXRUNTIME_LIBRARY, then the default names.
  OnnxRuntimeOptions& library(std::string v) {
    library_ = std::move(v);
    return *this;
  }
  // Threads inside one operator (SetIntraOpNumThreads); 0: onnxruntime's
  // default (one per physical core).
  OnnxRuntimeOptions& intra_op_threads(int v) {
    intra_op_threads_ = v;
    return *this;
  }
  std::string library_;
  int intra_op_threads_ = 0;
};

// The libraries OnnxRuntimeOptions::library (`library`) stands for, in the
// order they are tried: `library` alone when given, else the environment
// variable's value alone when set, else the default names.
std::vector<std::string> OnnxRuntimeLibraryCandidates(
    const std::string& library);

// onnxruntime loaded from the first candidate of `library` that loads.
struct OnnxRuntimeInfo {
  std::string library;  // the candidate that loaded
  std::string version;  // the library's version ("1.32.0")
  int api_version = 0;  // the C API version slimtorch asked for
};
// Throws when no candidate loads (naming each with the loader's reason and
// saying how to point at the library), when the library is not
// onnxruntime's (no OrtGetApiBase), or when its C API is older than
// slimtorch's calls.
OnnxRuntimeInfo LoadOnnxRuntime(const std::string& library = "");

class OnnxRuntimeModel {
 public:
  // Loads onnxruntime (LoadOnnxRuntime) and the model into a CPU session;
  // throws naming the file with onnxruntime's reason when it refuses it.
  explicit OnnxRuntimeModel(const std::string& onnx_path,
                            const OnnxRuntimeOptions& options = {});
  ~OnnxRuntimeModel();
  OnnxRuntimeModel(const OnnxRuntimeModel&) = delete;
  OnnxRuntimeModel& operator=(const OnnxRuntimeModel&) = delete;

  // Feeds float `input` (any shape the model takes, e.g. NHWC; copied to a
  // contiguous CPU float tensor) as `input_name` and returns the output
  // `output_name` as a float tensor. Throws naming the file on
  // onnxruntime's errors and on a non-float output.
  torch::Tensor Run(const torch::Tensor& input, const std::string& input_name,
                    const std::string& output_name);

  const OnnxRuntimeInfo& info() const { return info_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  OnnxRuntimeInfo info_;
  std::string path_;
};

}  // namespace slimtorch
