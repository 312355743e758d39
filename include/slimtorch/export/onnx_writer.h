#pragma once
// Writes a recorded InferenceGraph as an ONNX model (onnx/onnx.proto).
//
// The model mirrors TF-Slim's exported inference graph: one float32 input
// named "input" in NHWC, [batch, height, width, channels], as TF-Slim's
// placeholder, and two float32 outputs, "<scope>/Logits" and
// "<scope>/Predictions" (the softmax of the logits). Every GraphOp maps to
// standard ONNX ops of the default domain (Conv, BatchNormalization, Relu,
// Clip or Relu + Sub for relu6, MaxPool, AveragePool, LRN, Gemm, Concat, Add,
// Mul, Transpose, Flatten, GlobalAveragePool, Softmax), weights are float32
// initializers. Nodes that feed neither output are left out. The bytes depend
// only on the graph and the options.

#include <torch/arg.h>

#include <cstdint>
#include <string>

#include "slimtorch/export/inference_graph.h"

namespace slimtorch {

struct OnnxOptions {
  // Batch dimension of the input and outputs; 0 writes the symbolic
  // dimension "batch" (any batch size runs).
  TORCH_ARG(int64_t, batch_size) = 0;
  // Folds a batch norm into the convolution before it when that
  // convolution's output feeds nothing else (w·γ/√(var+ε), computed in
  // double); other batch norms become BatchNormalization nodes.
  TORCH_ARG(bool, fold_batch_norm) = true;
  // Opset of the default ONNX domain, 11 to 21 (Clip takes its bounds as
  // inputs from 11); the IR version follows from it (7 for opset 13).
  TORCH_ARG(int, opset) = 13;
  // Relu6 as Clip(x, 0, 6); false (the default) writes it as
  // 6 - Relu(6 - Relu(x)), which OpenCV 4.6's importer also runs (it takes
  // Clip only with attribute bounds, which opset 11+ no longer has).
  TORCH_ARG(bool, relu6_as_clip) = false;
  // ModelProto.producer_name.
  TORCH_ARG(std::string, producer) = "slimtorch";
};

// The serialized ModelProto. Throws slimtorch::Error naming the node when the
// graph is malformed (an input no node produces, weights that do not match
// the input's channels, ...) or the options are out of range.
std::string OnnxModelBytes(const InferenceGraph& graph,
                           const OnnxOptions& options = OnnxOptions());

// Writes OnnxModelBytes to `path` through a temporary file renamed into
// place, so that a failure leaves no partial file under `path`.
void WriteOnnxModel(const std::string& path, const InferenceGraph& graph,
                    const OnnxOptions& options = OnnxOptions());

}  // namespace slimtorch
