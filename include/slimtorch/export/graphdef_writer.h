#pragma once
// Writes a recorded InferenceGraph as a frozen TensorFlow GraphDef
// (tensorflow/core/framework/graph.proto): what TF-Slim's
// export_inference_graph.py followed by freeze_graph gives, in one step.
//
// The graph is float32 and NHWC throughout, as TensorFlow's CPU kernels want
// it: a Placeholder "input" [batch, height, width, channels], the weights as
// Const nodes in TensorFlow's layouts (conv [kh, kw, in, out], depthwise
// [kh, kw, in, multiplier], fully connected [in, out]) named as TF-Slim's
// variables ("<layer>/weights", "<layer>/biases", "<layer>/BatchNorm/beta",
// ...), and standard ops (Conv2D, DepthwiseConv2dNative, BiasAdd,
// FusedBatchNormV3, Relu, Relu6, MaxPool, AvgPool, LRN, MatMul, ConcatV2,
// AddV2, Mul, Reshape, Mean, Squeeze, Softmax, Identity). Each layer's last
// op takes the layer's name (TF-Slim's scope). The outputs are
// "<scope>/Logits" and "<scope>/Predictions/Reshape_1" (the softmax of the
// logits), the names TF-Slim users pass to label_image and freeze_graph.
// Padding is "VALID" when a layer's pads are zero, "SAME" when they are
// TensorFlow's SAME pads for its input, else "EXPLICIT" (Conv2D,
// DepthwiseConv2dNative and MaxPool; AvgPool has no explicit padding, and
// other pads fail). Nodes that feed neither output are left out. The bytes
// depend only on the graph and the options.
//
// A quantized net's graph holds TensorFlow's fake quantization as
// contrib.quantize's eval rewrite leaves it (export_inference_graph
// --quantize): each kFakeQuant node a FakeQuantWithMinMaxVars (per channel:
// ...PerChannel, over the channels) with its min and max as Consts
// "<node>/min", "<node>/max"; weights with weights_quant a Const →
// "<layer>/weights_quant/FakeQuantWithMinMaxVars" (narrow range, min and max
// Consts beside it; per output channel ...PerChannel, a depthwise or 3-D
// filter reshaped to [elements / out, out] around it) → the conv or MatMul.

#include <torch/arg.h>

#include <cstdint>
#include <string>

#include "slimtorch/export/inference_graph.h"

namespace slimtorch {

// versions.producer of the written GraphDef: the version TensorFlow's
// graphs carried on 2022-07-27 (TensorFlow 2.10's development; versions
// advance daily from 30 on 2019-05-09, core/public/version.h). A consumer
// refuses only producers below its minimum (0 in every 1.x and 2.x
// release); keep it at 22 or above (Placeholder shapes are enforced).
inline constexpr int kGraphDefProducer = 1205;

struct GraphDefOptions {
  // Batch dimension of the input placeholder; 0 writes -1 (any batch runs).
  TORCH_ARG(int64_t, batch_size) = 0;
  // Folds a batch norm into the convolution before it when that
  // convolution's output feeds nothing else (w·γ/√(var+ε), computed in
  // double), as the ONNX writer does; other batch norms become
  // FusedBatchNormV3 (is_training false) on 4-D values, Mul + AddV2 on 2-D.
  TORCH_ARG(bool, fold_batch_norm) = true;
};

// The serialized GraphDef (deterministic: map entries in key order). Throws
// slimtorch::Error naming the node when the graph is malformed or has what
// TensorFlow cannot run as recorded (a grouped, non-depthwise convolution;
// an average pool whose pads are neither zero nor SAME's).
std::string GraphDefBytes(const InferenceGraph& graph,
                          const GraphDefOptions& options = GraphDefOptions());

// The same GraphDef in protobuf's text format (a .pbtxt, as
// tf.io.write_graph(as_text=True) writes and text_format.Parse reads).
std::string GraphDefText(const InferenceGraph& graph,
                         const GraphDefOptions& options = GraphDefOptions());

// Writes GraphDefBytes (or GraphDefText when `text`) to `path` through a
// temporary file renamed into place, so that a failure leaves no partial
// file under `path`.
void WriteGraphDef(const std::string& path, const InferenceGraph& graph,
                   const GraphDefOptions& options = GraphDefOptions(),
                   bool text = false);

}  // namespace slimtorch
