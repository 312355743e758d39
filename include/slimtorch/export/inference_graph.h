#pragma once
// A net's inference pass as a graph of layer-level ops: what
// export_inference_graph writes (ONNX, TensorFlow GraphDef) and what the
// writers are checked against.
//
// The graph is recorded, not written by hand per net: while a GraphRecorder
// is active on a thread, every slim layer and every graph op of nets/
// (nets/graph_ops.h) called on that thread reports its op to it (a layer
// trace, nets/layer_trace.h), which adds the node, so a net's Forward() in
// eval mode yields its graph. Values are NCHW activations (or
// [N, features] after a flatten / squeeze; a video net's are NCDHW) with a
// fixed batch; weights are held in our layouts (conv [out, in / group, kh,
// kw], 3-D conv [out, in, kt, kh, kw], fully connected [out, in]). RunGraph evaluates a graph with LibTorch, op by op, as the
// reference every writer's output is compared with.

#include <torch/torch.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {

// The op kinds and their attributes are the layers' (nets/layer_trace.h):
// a graph node is an op a layer reported, placed in the graph.
using GraphOp = nets::OpKind;

// Name of an op ("Conv", "MaxPool", ...), for errors and dumps.
inline const char* GraphOpName(GraphOp op) { return nets::OpKindName(op); }

struct GraphNode : nets::OpAttributes {
  GraphOp op;
  // The layer's module path ("InceptionV3/Mixed_5b/Branch_1/Conv2d_0a_1x1")
  // for layers, or a generated one ("Concat_3") for plain ops.
  std::string name;
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
};

struct GraphValue {
  std::vector<int64_t> shape;  // NCHW, NCDHW or [N, F]
  std::string end_point;       // TF-Slim's end point name, when it is one
};

struct InferenceGraph {
  std::string scope;  // the net's scope ("InceptionV3")
  std::vector<GraphValue> values;
  std::vector<GraphNode> nodes;  // in execution order
  int input = -1;                // NCHW images (NCDHW clips)
  int logits = -1;
  int predictions = -1;  // softmax of the logits
};

// Records the graph of the ops run on this thread while it is alive (one
// recorder per thread at a time): a layer trace taking the ops (so the
// layers run their plain paths meanwhile). Values are matched to tensors by
// their TensorImpl; the recorder keeps every recorded tensor alive so that an
// address is never reused within one recording.
class GraphRecorder : public nets::LayerTrace {
 public:
  // `input`: the images the forward pass will take. `names`: module → its
  // path ("InceptionV3/Conv2d_1a_3x3"), e.g. from ModulePaths.
  GraphRecorder(const torch::Tensor& input,
                std::map<const torch::nn::Module*, std::string> names);
  ~GraphRecorder() override;

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

  // A layer's op: Add, with the op's attributes. Throws for a batch norm
  // normalising with its batch's statistics (the net in training mode).
  void Op(const nets::TracedOp& op) override;

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
// returning every value (index = value id). A quantized net's kFakeQuant
// nodes and weights_quant weights are fake-quantized as TensorFlow does
// (nets/fake_quant.h).
std::vector<torch::Tensor> RunGraph(const InferenceGraph& graph,
                                    const torch::Tensor& images);

}  // namespace slimtorch
