#pragma once
// What the layers report of themselves while a trace watches them: each op
// they run (its kind, its layer, its inputs and output, its attributes) and
// each layer's cost. The layers (layers.h) and the graph ops (graph_ops.h)
// report to the traces active on their thread and know nothing of who
// listens: the inference-graph recorder (export/inference_graph.h) builds a
// graph from the ops, the cost recorder (layer_cost.h) sums the costs for
// --model_summary; another (ranges for quantization, say) may take the ops'
// outputs the same way.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace slimtorch {
namespace nets {

enum class OpKind {
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
  // Video nets (I3D, S3D-G): 5-D values [N, C, T, H, W]. The 3-D window ops
  // take kernel_t / stride_t / pads_t beside the H and W attributes. kMean
  // and kSqueeze take 5-D values too: [N, C, T, H, W] → [N, C, 1, 1, 1] (the
  // mean over T, H and W) and [N, C, 1, 1, 1] → [N, C].
  kConv3d,     // x → conv3d(x, weights [out, in, kt, kh, kw], bias?)
  kMaxPool3d,  // window max over T, H, W; padded cells never win
  kAvgPool3d,  // window mean over the cells inside the input only
  kSigmoid,    // x → 1 / (1 + exp(-x))
  kMul,        // x * y, y broadcast over the spatial dims (or the same shape)
  // MobileNet v3 / EdgeTPU (squeeze-excite, hard-swish; kMul too):
  kAddConstant,  // x + a constant (attribute factor)
  // 8-bit nets (--quantize): fake quantization of an activation,
  // TensorFlow's FakeQuantWithMinMaxVars with the range in `quant`
  // (nets/fake_quant.h).
  kFakeQuant,
};

// Name of an op kind ("Conv", "MaxPool", ...), for errors, dumps and the
// names of ops that belong to no layer.
const char* OpKindName(OpKind kind);

// A fake-quantization range (TensorFlow's FakeQuantWithMinMaxVars): min and
// max as 0-d float tensors, or [C] per channel along `axis`.
struct QuantRange {
  torch::Tensor min, max;
  int64_t num_bits = 8;
  bool narrow_range = false;
  int64_t axis = -1;  // per channel: the channel axis; -1: per tensor
  bool defined() const { return min.defined(); }
};

// What an op computes with besides its inputs, by kind; the fields of the
// other kinds keep their defaults.
struct OpAttributes {
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
  // kScale: the factor; kAddConstant: the constant added.
  double factor = 1;
  // kConv3d, kMaxPool3d, kAvgPool3d: the time axis (kernel_h / kernel_w,
  // stride and pads above hold H and W).
  int64_t kernel_t = 1, stride_t = 1;
  std::array<int64_t, 2> pads_t = {0, 0};  // front, back
  // kFakeQuant: the activation's range (per tensor).
  QuantRange quant;
  // kConv, kFullyConnected of a quantized net: the range the weights are
  // fake-quantized with before use (narrow, per tensor or per output
  // channel: axis 0 of our layout); `weights` holds them unquantized (batch
  // norm already folded in), so a writer quantizes them with TensorFlow's
  // rounding (round half up). Undefined in a float net.
  QuantRange weights_quant;
};

// One op as a layer reports it.
struct TracedOp : OpAttributes {
  TracedOp(OpKind kind, const torch::nn::Module* layer, std::string suffix,
           std::vector<torch::Tensor> inputs, torch::Tensor output)
      : kind(kind),
        layer(layer),
        suffix(std::move(suffix)),
        inputs(std::move(inputs)),
        output(std::move(output)) {}

  OpKind kind;
  // The layer that ran it, its op named by its path plus `suffix` ("/Conv2D",
  // "/Relu"); null for an op of no layer (a pool, a graph op).
  const torch::nn::Module* layer;
  std::string suffix;
  std::vector<torch::Tensor> inputs;
  // May be an input's tensor itself (an op in place).
  torch::Tensor output;
  // kBatchNorm: normalised with the batch's statistics (training mode), so
  // the moving ones in the attributes do not describe it.
  bool batch_statistics = false;
};

// A listener to the layers of its thread, from Attach() to Detach() (or its
// destruction). Several may listen at once; each gets what it asked for.
class LayerTrace {
 public:
  virtual ~LayerTrace();
  LayerTrace(const LayerTrace&) = delete;
  LayerTrace& operator=(const LayerTrace&) = delete;

  // Each op run, in order (when attached with `ops`).
  virtual void Op(const TracedOp& op);
  // Each call of a layer with parameters or multiply-adds: its parameters
  // and its multiply-adds per example (when attached with `costs`).
  virtual void Cost(int64_t parameters, int64_t multiply_adds);

 protected:
  struct Wants {
    // Every op, each as its own plain LibTorch op: while a trace takes ops
    // the fused kernels (which would hide the ops they fuse) and the
    // in-place shortcuts of graph_ops.h are off on its thread.
    bool ops = false;
    bool costs = false;
  };
  LayerTrace() = default;
  void Attach(Wants wants);
  void Detach();  // no-op when not attached

 private:
  bool attached_ = false;
};

// For the layers: whether a trace of this thread takes ops (then the plain
// paths run, and each op is reported), takes costs; and the reports, to
// every such trace in the order they attached.
bool TracingOps();
bool TracingCosts();
void TraceOp(const TracedOp& op);
void TraceCost(int64_t parameters, int64_t multiply_adds);

}  // namespace nets
}  // namespace slimtorch
