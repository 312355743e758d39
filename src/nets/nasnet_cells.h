#pragma once
// The cells NASNet-A and PNASNet-5 are built of, as TF-Slim's
// nets/nasnet/nasnet_utils.py and pnasnet.py: the cell base (the previous
// layer matched to the current one, the current one through ReLU, 1x1 and
// batch norm), five combinations of two ops each, the unused states
// concatenated; factorized_reduction; drop_path and its schedule.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

// The arg scope of every layer of a cell: L2 on the weights, batch norm's
// decay and epsilon (conv and separable conv: no biases, no activation,
// variance_scaling FAN_OUT).
struct NasArgScope {
  double weight_decay = 0.0;
  double bn_decay = 0.9997;
  double bn_epsilon = 1e-3;
};

// The ops a cell combines: separable_KxK_2, avg / max_pool_3x3, none.
enum class NasOpKind { kSep3, kSep5, kSep7, kAvg3, kMax3, kNone };

// A cell: the op and the hidden state each of the 10 op slots takes
// (comb_iter_i's left = slot 2i, right = 2i + 1), and which of the 7 states
// (0 = the current input after its 1x1, 1 = the previous layer, 2.. = the
// combinations) some op uses (the others are concatenated, in index order).
struct NasCellDef {
  std::array<NasOpKind, 10> ops;
  std::array<int, 10> inputs;
  std::array<bool, 7> used;
};
extern const NasCellDef kNasNetANormalCell;
extern const NasCellDef kNasNetAReductionCell;
extern const NasCellDef kPnasNet5Cell;

// A hidden state's depth and height (= width) while a net is laid out.
struct NasShape {
  int64_t channels = 0;
  int64_t size = 0;
};

// TF-Slim's drop-path keep probability of cell `cell_num` (stems count
// from 0) of `total_cells` at global step `step`:
//   1 - min(1, step / total_steps) * (cell_num + 1) / total_cells
//       * (1 - keep_prob).
double DropPathKeepProb(double keep_prob, int64_t cell_num, int64_t total_cells,
                        int64_t step, int64_t total_steps);

// drop_path: each example of x kept (divided by keep) with probability
// `keep`, else zeroed: mask floor(keep + U[0, 1)) per example.
torch::Tensor DropPath(const torch::Tensor& x, double keep);

// factorized_reduction(output_filters, stride) with its variables on
// `owner`: stride 1 "path_conv" + "path_bn"; stride 2 "path1_conv" (1x1 on
// every other pixel, out / 2 filters) and "path2_conv" (the same one pixel
// down and right, zeros past the edge; out - out / 2 filters), concatenated,
// "final_path_bn".
class FactorizedReduction {
 public:
  FactorizedReduction() = default;
  FactorizedReduction(torch::nn::Module& owner, int64_t in, int64_t out,
                      int64_t stride, const NasArgScope& scope);
  bool defined() const { return static_cast<bool>(bn_); }
  torch::Tensor operator()(const torch::Tensor& x);

 private:
  int64_t stride_ = 1;
  Conv2d conv1_{nullptr}, conv2_{nullptr};
  BatchNorm bn_{nullptr};
};

// One op of a comb_iter ("left" / "right"): separable_KxK_2 (twice ReLU →
// separable conv → batch norm, the stride on the first), a 3x3 SAME pool
// (then 1x1 + "bn_1" when the depth changes) or none (identity, or ReLU →
// strided 1x1 → "bn_1" when the stride or the depth changes).
class NasOpImpl : public torch::nn::Cloneable<NasOpImpl> {
 public:
  NasOpImpl(NasOpKind op, int64_t in, int64_t filters, int64_t stride,
            const NasArgScope& scope);
  void reset() override;
  // drop_keep < 1: drop_path with that keep probability (not on none).
  torch::Tensor forward(const torch::Tensor& x, double drop_keep);

 private:
  NasOpKind op_;
  int64_t in_, filters_, stride_;
  NasArgScope scope_;
  std::vector<SeparableConv2d> seps_;
  std::vector<BatchNorm> sep_bns_;
  Conv2d conv_{nullptr};
  BatchNorm bn_{nullptr};
};
TORCH_MODULE(NasOp);

// One cell, laid out for its inputs' shapes (prev.channels == 0: no
// previous layer, the current input stands in for it).
class NasCellImpl : public torch::nn::Cloneable<NasCellImpl> {
 public:
  NasCellImpl(const NasCellDef& def, NasShape net, NasShape prev,
              int64_t filters, int64_t stride, const NasArgScope& scope);
  void reset() override;
  NasShape output_shape() const { return output_; }
  // prev undefined: none. drop_keep < 1 applies drop_path to every op but
  // none.
  torch::Tensor forward(const torch::Tensor& net, const torch::Tensor& prev,
                        double drop_keep);

 private:
  // Lays out the states' shapes and the cell_output reductions.
  void BuildOutput(std::vector<NasShape> states);

  NasCellDef def_;
  NasShape net_, prev_, output_;
  int64_t filters_, stride_;
  NasArgScope scope_;
  FactorizedReduction prev_reduction_;
  Conv2d prev_conv_{nullptr};
  BatchNorm prev_bn_{nullptr};
  Conv2d conv_{nullptr};
  BatchNorm bn_{nullptr};
  std::vector<NasOp> ops_;
  std::vector<FactorizedReduction> output_reductions_;  // per state
};
TORCH_MODULE(NasCell);

// _build_aux_head's "aux_logits": ReLU'd input → avg pool 5x5/3 VALID →
// "proj" 1x1 128 → "aux_bn0" → ReLU → "Conv" (kernel = the pooled map)
// 768 → "aux_bn1" → ReLU → flatten → "FC" (biases).
class NasAuxHeadImpl : public torch::nn::Cloneable<NasAuxHeadImpl> {
 public:
  NasAuxHeadImpl(int64_t in, int64_t map_size, int64_t num_classes,
                 const NasArgScope& scope);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t in_, map_size_, num_classes_;
  NasArgScope scope_;
  Conv2d proj_{nullptr}, conv_{nullptr};
  BatchNorm bn0_{nullptr}, bn1_{nullptr};
  FullyConnected fc_{nullptr};
};

// The arg scope's 1x1 (or k x k) conv: no biases, no activation, FAN_OUT.
Conv2d NasConv(int64_t in, int64_t out, int64_t kernel, int64_t stride,
               const NasArgScope& scope, Padding padding = Padding::kSame);
// The arg scope's batch norm (scale and center).
BatchNorm NasBatchNorm(int64_t channels, const NasArgScope& scope);

}  // namespace nets
}  // namespace slimtorch
