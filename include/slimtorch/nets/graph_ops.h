#pragma once
// The tensor ops nets use between layers, reported to the layer traces
// (layer_trace.h) like the layers' own: the inference graph's recorder
// (export_inference_graph) sees them; otherwise plain LibTorch ops. A net that computes with any other op between its layers
// fails to export with an error naming the node that consumes the result,
// so every op of a net's inference pass must be a layer (layers.h) or one
// of these.

#include <torch/torch.h>

#include <vector>

namespace slimtorch {
namespace nets {

// Concatenation along the channels (dim 1).
torch::Tensor Concat(const std::vector<torch::Tensor>& xs);
// a + b (same shapes).
torch::Tensor Add(const torch::Tensor& a, const torch::Tensor& b);
// ReluInPlace(Add(a, b)): one pass on a GPU and over CPU float32 tensors
// (the sum is not kept).
torch::Tensor AddRelu(const torch::Tensor& a, const torch::Tensor& b);
// x * factor, a constant.
torch::Tensor Scale(const torch::Tensor& x, double factor);
// max(x, 0), not in place.
torch::Tensor Relu(const torch::Tensor& x);
// Scale and Relu overwriting x unless a layer trace takes the ops (the hot
// path of training and eval: no extra allocation), out of place while one
// does (a node's output must not alias its input). For a caller that
// never reads x again and whose x autograd does not need.
torch::Tensor ScaleInPlace(torch::Tensor x, double factor);
torch::Tensor ReluInPlace(torch::Tensor x);
// The mean over H and W of NCHW x, keeping them ([N, C, 1, 1]).
torch::Tensor SpatialMean(const torch::Tensor& x);
// [N, C, 1, 1] → [N, C].
torch::Tensor SqueezeHw(const torch::Tensor& x);

// Video nets (I3D, S3D-G).
// 1 / (1 + exp(-x)).
torch::Tensor Sigmoid(const torch::Tensor& x);
// x * y, y broadcast over the spatial dims (or the same shape): y is x's
// shape or [N, C, 1, ...] of x's rank (S3D-G's self-gating, squeeze-excite).
torch::Tensor Mul(const torch::Tensor& x, const torch::Tensor& y);
// The mean over T, H and W of [N, C, T, H, W] x, keeping them
// ([N, C, 1, 1, 1]).
torch::Tensor SpatiotemporalMean(const torch::Tensor& x);
// [N, C, 1, 1, 1] → [N, C].
torch::Tensor SqueezeThw(const torch::Tensor& x);
// MobileNet v3 / EdgeTPU (squeeze-excite gates, hard-swish; Mul too):
// x + c, a constant.
torch::Tensor AddConstant(const torch::Tensor& x, double c);
// min(max(x, 0), 6), not in place (tf.nn.relu6 between layers).
torch::Tensor Relu6(const torch::Tensor& x);

}  // namespace nets
}  // namespace slimtorch
