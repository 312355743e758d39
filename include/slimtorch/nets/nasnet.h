#pragma once
// NASNet-A and PNASNet-5 as TF-Slim's nets/nasnet/nasnet.py and pnasnet.py,
// registered as nasnet_cifar (32x32), nasnet_mobile (224), nasnet_large
// (331), pnasnet_mobile (224) and pnasnet_large (331). No outer scope: the
// variables are "conv0/weights", "cell_stem_0/...", "cell_0/...",
// "reduction_cell_0/...", "aux_7/aux_logits/...", "final_layer/FC/...".
//
// hparams (num_cells / filters F / stem multiplier / drop-path keep / dense
// keep / skip_reduction_layer_input / arg scope wd, BN decay, epsilon):
//   nasnet_cifar   18 / 32 / 3 / 0.6 / 1.0 / 0 / 5e-4, 0.9,    1e-5
//   nasnet_mobile  12 / 44 / 1 / 1.0 / 0.5 / 0 / 4e-5, 0.9997, 1e-3
//   nasnet_large   18 /168 / 3 / 0.7 / 0.5 / 1 / 5e-5, 0.9997, 1e-3
//   pnasnet_mobile  9 / 54 / 1 / 1.0 / 0.5 / 1 / 4e-5, 0.9997, 1e-3
//   pnasnet_large  12 /216 / 3 / 0.6 / 0.5 / 1 / 4e-5, 0.9997, 1e-3
// NetOptions::weight_decay, when not 0, replaces the arg scope's (as
// nets_factory passes --weight_decay into it).
//
// Stem: ImageNet "conv0" 3x3/2 VALID (32 * stem multiplier) + "conv0_bn",
// then "cell_stem_0" / "cell_stem_1" (a NASNet reduction cell or a PNASNet
// cell, stride 2, filters F / 4, F / 2); CIFAR "l1_stem_3x3" 3x3 SAME
// (F * 3) + "l1_stem_bn". Cells "cell_0" .. at reductions num_cells / 3 and
// 2 * num_cells / 3 the filters double: NASNet inserts "reduction_cell_j"
// before that cell, PNASNet's cell itself has stride 2. The aux head
// ("aux_<k>/aux_logits": ReLU, avg pool 5x5/3 VALID, "proj" 1x1 128 +
// "aux_bn0", ReLU, "Conv" (the whole map, VALID) 768 + "aux_bn1", ReLU,
// "FC") follows cell k = the second reduction - 1, in training only (its
// logits in NetOutput::aux_logits); its Conv's kernel is sized from the
// image size the net is built for (NetOptions::image_size); a net built for
// images too small for its 5x5 pool has no aux head and cannot train, as
// TF-Slim's. --model_summary runs the head too (its own AuxLogits line:
// checkpoints carry its variables). Final layer:
// ReLU, mean over H and W (end point global_pool [N, C]), dropout, "FC"
// with biases. End points: Stem, Cell_i, Reduction_Cell_j, AuxLogits,
// global_pool, Logits, Predictions.
//
// Drop path (nasnet_cifar, nasnet_large, pnasnet_large): in training, every
// op of a cell but none keeps each example with probability
//   1 - min(1, step / total_training_steps) * (cell + 1) / total_cells
//       * (1 - drop_path_keep_prob)
// (cell counted from 0 with the stems, total_cells = cells + reductions +
// stems), step the global step the trainer sets with SetGlobalStep(), and
// total_training_steps TF-Slim's hparam (937500 for CIFAR, 250000 for
// ImageNet), not --max_number_of_steps (TF-Slim's schedule does not read
// it either).

#include <cstdint>
#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace nets {

struct NasNetConfig {
  const char* name;
  bool pnasnet;  // PNASNet-5 cells, no reduction cells
  bool cifar_stem;
  int64_t default_image_size;
  int64_t num_cells;
  int64_t filters;
  double stem_multiplier;
  double drop_path_keep_prob;
  double dense_dropout_keep_prob;
  bool skip_reduction_layer_input;
  int64_t total_training_steps;
  double weight_decay, bn_decay, bn_epsilon;
};
// nasnet_cifar, nasnet_mobile, nasnet_large, pnasnet_mobile, pnasnet_large.
const NasNetConfig& NasNetConfigOf(const std::string& name);

class NasNetImpl : public torch::nn::Cloneable<NasNetImpl> {
 public:
  NasNetImpl(const NasNetConfig& config, const NetOptions& options);
  void reset() override;
  NetOutput forward(const torch::Tensor& images);
  int64_t input_channels() const { return options_.input_channels(); }
  void CheckImageSize(int64_t size) const;
  void SetGlobalStep(int64_t step) { global_step_ = step; }
  // The drop-path keep probability of the cell numbered `cell_num` (stems
  // from 0) at the current global step; 1 in inference.
  double DropPathKeep(int64_t cell_num) const;
  int64_t total_cells() const;
  // Whether a net built for size x size images has the aux head (its 5x5
  // pool needs a 5x5 map).
  bool HasAuxHead(int64_t size) const;

 private:
  // The stem's conv and batch norm; the stem output's shape.
  struct Shape {
    int64_t channels, size;
  };
  Shape BuildStem();
  // Lays out the cells, given the stem's output shape.
  void BuildCells(Shape stem);
  // The aux head (after cell aux_cell, of shape aux_in; none without
  // classes or room for its pool) and the final layer (after the last cell).
  void BuildAuxHead(Shape aux_in, int64_t aux_cell);
  void BuildFinalLayer(Shape last);
  // One cell of the body or stem: built for its inputs, appended to steps_.
  Shape AddCell(const std::string& scope, const std::string& end_point,
                bool reduction, int64_t filters, int64_t stride, int prev,
                int64_t cell_num, const std::vector<Shape>& outputs);

  NasNetConfig config_;
  NetOptions options_;
  int64_t image_size_;
  int64_t global_step_ = 0;
  Conv2d stem_conv_{nullptr};
  BatchNorm stem_bn_{nullptr};
  // The cells in order; each takes the last output and (prev >= 1) the
  // output numbered prev (outputs: 0 = none, 1 = the stem, then each
  // cell's).
  struct CellStep {
    std::string end_point;
    std::shared_ptr<torch::nn::Module> cell;  // a NasCellImpl
    int prev;
    int64_t cell_num;
  };
  std::vector<CellStep> steps_;
  size_t aux_after_ = 0;  // the number of steps the aux head follows
  std::shared_ptr<torch::nn::Module> aux_;  // a NasAuxHeadImpl, or null
  FullyConnected fc_{nullptr};
};
TORCH_MODULE(NasNet);

}  // namespace nets
}  // namespace slimtorch
