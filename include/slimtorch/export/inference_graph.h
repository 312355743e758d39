#pragma once
// A net's inference pass as a graph of layer-level ops: what
// export_inference_graph writes (ONNX, TensorFlow GraphDef) and what the
// writers are checked against.
//
// The graph is recorded, not written by hand per net: while a GraphRecorder
// is active on a thread, every slim layer and every graph op of nets/
// (nets/graph_ops.h) called on that thread adds its node, so a net's
// Forward() in eval mode yields its graph. Values are NCHW activations (or
// [N, features] after a flatten / squeeze) with a fixed batch; weights are
// held in our layouts (conv [out, in / group, kh, kw], fully connected
// [out, in]). RunGraph evaluates a graph with LibTorch, op by op, as the
// reference every writer's output is compared with.

#include <torch/torch.h>

#include <array>
#include <map>
#include <string>
#include <vector>

namespace slimtorch {

enum class GraphOp {
  kConv,       // x → conv(x, weights, bias?) (group = in / weights.size(1))
  kBatchNorm,  // x → (x - mean) / sqrt(variance + epsilon) * scale + offset
  kRelu,       // x → max(x, 0)
  kRelu6,      // x → min(max(x, 0), 6)
  kMaxPool,    // window max; padded cells never win
  kAvgPool,    // window mean over the cells inside the input only
  kLrn,        // tf.nn.lrn(depth_radius, bias, alpha, beta) over channels
  kFullyConnected,  // [N, in] → [N, in] · weightsᵀ + bias?
  kConcat,          // inputs → concatenated along the channels
  kAdd,             // a + b (same shape)
  kScale,           // x * scale (a constant)
  kFlatten,         // [N, C, H, W] → [N, H * W * C] in NHWC order
  kMean,            // [N, C, H, W] → [N, C, 1, 1], the mean over H and W
  kSqueeze,         // [N, C, 1, 1] → [N, C]
  kSoftmax,         // softmax over the last dimension
};

// Name of an op ("Conv", "MaxPool", ...), for errors and dumps.
const char* GraphOpName(GraphOp op);

struct GraphNode {
  GraphOp op;
  // The layer's module path ("InceptionV3/Mixed_5b/Branch_1/Conv2d_0a_1x1")
  // for layers, or a generated one ("Concat_3") for plain ops.
  std::string name;
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
  // kConv, kMaxPool, kAvgPool.
  int64_t kernel_h = 1, kernel_w = 1, stride = 1;
  std::array<int64_t, 4> pads = {0, 0, 0, 0};  // top, left, bottom, right
  // kConv, kFullyConnected: weights in our layout, bias or undefined.
  torch::Tensor weights, bias;
  // kBatchNorm: per-channel tensors (scale = gamma or ones, offset = beta or
  // zeros), epsilon as applied (TensorFlow's floor included).
  torch::Tensor scale, offset, mean, variance;
  double epsilon = 0;
  // kLrn.
  int64_t depth_radius = 0;
  double lrn_bias = 0, lrn_alpha = 0, lrn_beta = 0;
  // kScale.
  double factor = 1;
};

struct GraphValue {
  std::vector<int64_t> shape;  // NCHW or [N, F]
  std::string end_point;       // TF-Slim's end point name, when it is one
};

struct InferenceGraph {
  std::string scope;  // the net's scope ("InceptionV3")
  std::vector<GraphValue> values;
  std::vector<GraphNode> nodes;  // in execution order
  int input = -1;                // NCHW images
  int logits = -1;
  int predictions = -1;  // softmax of the logits
};

// Records the graph of the ops run on this thread while it is alive (one
// recorder per thread at a time). Values are matched to tensors by their
// TensorImpl; the recorder keeps every recorded tensor alive so that an
// address is never reused within one recording.
class GraphRecorder {
 public:
  // `input`: the images the forward pass will take. `names`: module → its
  // path ("InceptionV3/Conv2d_1a_3x3"), e.g. from ModulePaths.
  GraphRecorder(const torch::Tensor& input,
                std::map<const torch::nn::Module*, std::string> names);
  ~GraphRecorder();
  GraphRecorder(const GraphRecorder&) = delete;
  GraphRecorder& operator=(const GraphRecorder&) = delete;

  // This thread's recorder, or null.
  static GraphRecorder* Active();

  // Adds a node computing `output` from `inputs`; its name is `module`'s
  // path (plus `suffix`), or the op's name numbered when `module` is null.
  // Throws when an input was not produced by a recorded op (a net op that
  // does not go through nets/graph_ops.h) — naming the node. Returns the
  // node for its attributes.
  GraphNode& Add(GraphOp op, const torch::nn::Module* module,
                 const std::string& suffix,
                 const std::vector<torch::Tensor>& inputs,
                 const torch::Tensor& output);

  // Ends the recording: names end points (each tensor of `end_points` that
  // is a recorded value), adds the softmax of `logits`, returns the graph.
  InferenceGraph Finish(
      const std::string& scope, const torch::Tensor& logits,
      const std::vector<std::pair<std::string, torch::Tensor>>& end_points);

 private:
  int ValueOf(const torch::Tensor& t, const std::string& node) const;
  int NewValue(const torch::Tensor& t);

  InferenceGraph graph_;
  std::map<const torch::nn::Module*, std::string> names_;
  std::map<const c10::TensorImpl*, int> ids_;
  std::vector<torch::Tensor> keep_;
  std::map<std::string, int> counts_;
};

// The path of every submodule of `root` ("<scope>/<child>/<grandchild>"),
// as TF-Slim's scopes read.
std::map<const torch::nn::Module*, std::string> ModulePaths(
    const torch::nn::Module& root, const std::string& scope);

// Evaluates `graph` on NCHW `images` (batch as recorded or any other),
// returning every value (index = value id).
std::vector<torch::Tensor> RunGraph(const InferenceGraph& graph,
                                    const torch::Tensor& images);

}  // namespace slimtorch
