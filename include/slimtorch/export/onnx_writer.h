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
//
// A quantized net's graph (kFakeQuant nodes, conv / fully connected layers
// with weights_quant) is written in QDQ form, which onnxruntime fuses into
// its int8 kernels (QLinearConv, QGemm, ...): each fake quantization as
// QuantizeLinear + DequantizeLinear with uint8 values, scale and zero point
// those of TensorFlow's nudged range (its grid exactly; QuantizeLinear
// rounds ties to even where TensorFlow rounds half up), fewer than 8 bits
// or a narrow range clipped first; quantized weights as 8-bit integer
// initializers (TensorFlow's rounding) + DequantizeLinear, per tensor or per
// output channel (axis 0, opset 13 on), biases float; a max pool, flatten
// or squeeze of quantized values quantized again with the same grid (exact,
// and it keeps onnxruntime in int8); relu6 as Clip. Means, concats and the
// other ops stay float, as in TensorFlow's quantized graphs.

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
  // A quantized net's weights (weights_quant) as int8: TensorFlow's
  // integers and zero point less 128; false: as uint8, TensorFlow's own.
  // The same values either way (DequantizeLinear gives TensorFlow's
  // fake-quantized weights), and onnxruntime 1.32 fuses both into its int8
  // kernels with the uint8 activations; int8 (its default) ran mobilenet_v1
  // at batch 32 twice as fast as uint8 on an AVX-512 VNNI CPU. On x86 CPUs
  // without VNNI its uint8 × int8 kernels may saturate 16-bit sums of
  // products (onnxruntime's quantization docs), which uint8 weights avoid.
  TORCH_ARG(bool, signed_weights) = true;
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
