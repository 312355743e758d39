#include "slimtorch/nets/nasnet.h"

#include <algorithm>
#include <utility>

#include "nasnet_cells.h"
#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"

namespace slimtorch {
namespace nets {
namespace {

// nasnet.py's cifar_config / large_imagenet_config / mobile_imagenet_config,
// pnasnet.py's, and their arg scopes' defaults.
const NasNetConfig kConfigs[] = {
    {"nasnet_cifar", false, true, 32, 18, 32, 3.0, 0.6, 1.0, false, 937500,
     5e-4, 0.9, 1e-5},
    {"nasnet_mobile", false, false, 224, 12, 44, 1.0, 1.0, 0.5, false, 250000,
     4e-5, 0.9997, 1e-3},
    {"nasnet_large", false, false, 331, 18, 168, 3.0, 0.7, 0.5, true, 250000,
     5e-5, 0.9997, 1e-3},
    {"pnasnet_mobile", true, false, 224, 9, 54, 1.0, 1.0, 0.5, true, 250000,
     4e-5, 0.9997, 1e-3},
    {"pnasnet_large", true, false, 331, 12, 216, 3.0, 0.6, 0.5, true, 250000,
     4e-5, 0.9997, 1e-3},
};

// calc_reduction_layers(num_cells, 2): int(k / 3 * num_cells), k = 1, 2.
std::vector<int64_t> ReductionCells(int64_t num_cells) {
  return {static_cast<int64_t>(1.0 / 3.0 * static_cast<double>(num_cells)),
          static_cast<int64_t>(2.0 / 3.0 * static_cast<double>(num_cells))};
}

// int(num_conv_filters * filter_scaling), as TF-Slim rounds it.
int64_t ScaledFilters(int64_t filters, double scaling) {
  return static_cast<int64_t>(static_cast<double>(filters) * scaling);
}

int64_t Halved(int64_t size) { return (size + 1) / 2; }

NasArgScope ArgScopeOf(const NasNetConfig& c, const NetOptions& options) {
  NasArgScope scope;
  scope.weight_decay =
      options.weight_decay() != 0.0 ? options.weight_decay() : c.weight_decay;
  scope.bn_decay = c.bn_decay;
  scope.bn_epsilon = c.bn_epsilon;
  return scope;
}

// The map size after the stem of an image_size input.
int64_t StemOutputSize(const NasNetConfig& c, int64_t image_size) {
  if (c.cifar_stem) return image_size;
  const int64_t conv0 = image_size < 3 ? 0 : (image_size - 3) / 2 + 1;
  return Halved(Halved(conv0));
}

// The map size the aux head pools (after cell second reduction - 1).
int64_t AuxMapSize(const NasNetConfig& c, int64_t image_size) {
  return Halved(StemOutputSize(c, image_size));
}

}  // namespace

const NasNetConfig& NasNetConfigOf(const std::string& name) {
  for (const NasNetConfig& c : kConfigs) {
    if (name == c.name) return c;
  }
  SLIM_FAIL("no NASNet / PNASNet configuration named '", name, "'");
}

NasNetImpl::NasNetImpl(const NasNetConfig& config, const NetOptions& options)
    : config_(config),
      options_(options),
      image_size_(options.image_size() > 0 ? options.image_size()
                                           : config.default_image_size) {
  CheckImageSize(image_size_);
  reset();
}

int64_t NasNetImpl::total_cells() const {
  // cells + the two reduction cells (NASNet) + the two stem cells
  // (ImageNet), as build_nasnet_* / build_pnasnet_* count them.
  if (config_.pnasnet) return config_.num_cells + 2;
  return config_.num_cells + 2 + (config_.cifar_stem ? 0 : 2);
}

void NasNetImpl::CheckImageSize(int64_t size) const {
  const int64_t last = Halved(AuxMapSize(config_, size));
  SLIM_CHECK(last >= 2, config_.name, " cannot take ", size, "x", size,
             " images: its last cells need maps of at least 2x2 (default ",
             config_.default_image_size, ")");
  if (!HasAuxHead(image_size_)) return;
  // Inference skips the aux head; its variables still have the built size.
  const int64_t aux = AuxMapSize(config_, size);
  SLIM_CHECK(
      aux >= 5 && (aux - 5) / 3 == (AuxMapSize(config_, image_size_) - 5) / 3,
      config_.name, " was built for ", image_size_, "x", image_size_,
      " images (its aux head's Conv kernel is sized from them) and "
      "cannot take ",
      size, "x", size,
      "; build it with that image size "
      "(--train_image_size / --eval_image_size)");
}

bool NasNetImpl::HasAuxHead(int64_t size) const {
  return options_.num_classes() > 0 && AuxMapSize(config_, size) >= 5;
}

NasNetImpl::Shape NasNetImpl::BuildStem() {
  const NasArgScope scope = ArgScopeOf(config_, options_);
  const int64_t in = options_.input_channels();
  if (config_.cifar_stem) {
    const int64_t c = ScaledFilters(config_.filters, config_.stem_multiplier);
    stem_conv_ = register_module("l1_stem_3x3", NasConv(in, c, 3, 1, scope));
    stem_bn_ = register_module("l1_stem_bn", NasBatchNorm(c, scope));
    return {c, image_size_};
  }
  const int64_t c = ScaledFilters(32, config_.stem_multiplier);
  stem_conv_ =
      register_module("conv0", NasConv(in, c, 3, 2, scope, Padding::kValid));
  stem_bn_ = register_module("conv0_bn", NasBatchNorm(c, scope));
  return {c, (image_size_ - 3) / 2 + 1};
}

NasNetImpl::Shape NasNetImpl::AddCell(const std::string& scope,
                                      const std::string& end_point,
                                      bool reduction, int64_t filters,
                                      int64_t stride, int prev,
                                      int64_t cell_num,
                                      const std::vector<Shape>& outputs) {
  const NasCellDef& def = config_.pnasnet ? kPnasNet5Cell
                          : reduction     ? kNasNetAReductionCell
                                          : kNasNetANormalCell;
  const Shape net = outputs.back();
  const NasShape prev_shape =
      prev >= 1 ? NasShape{outputs[prev].channels, outputs[prev].size}
                : NasShape{};
  NasCell cell(def, NasShape{net.channels, net.size}, prev_shape, filters,
               stride, ArgScopeOf(config_, options_));
  register_module(scope, cell);
  steps_.push_back({end_point, cell.ptr(), prev, cell_num});
  return {cell->output_shape().channels, cell->output_shape().size};
}

void NasNetImpl::BuildCells(Shape stem) {
  std::vector<Shape> outputs = {{0, 0}, stem};
  int64_t cell_num = 0;
  if (!config_.cifar_stem) {
    // _imagenet_stem: two stride-2 cells at filter scaling 1/4 and 1/2.
    double scaling = 0.25;
    for (int i = 0; i < 2; ++i) {
      const int prev = static_cast<int>(outputs.size()) - 2;
      outputs.push_back(AddCell("cell_stem_" + std::to_string(i), "",
                                !config_.pnasnet,
                                ScaledFilters(config_.filters, scaling), 2,
                                prev, cell_num++, outputs));
      scaling *= 2.0;
    }
  }
  const std::vector<int64_t> reductions = ReductionCells(config_.num_cells);
  double scaling = 1.0;
  for (int64_t i = 0; i < config_.num_cells; ++i) {
    const auto at = std::find(reductions.begin(), reductions.end(), i);
    const bool reduce = at != reductions.end();
    const std::string j = std::to_string(at - reductions.begin());
    int prev = static_cast<int>(outputs.size()) - 2;
    if (reduce) scaling *= 2.0;
    if (reduce && !config_.pnasnet) {
      outputs.push_back(AddCell("reduction_cell_" + j, "Reduction_Cell_" + j,
                                true, ScaledFilters(config_.filters, scaling),
                                2, prev, cell_num++, outputs));
      // skip_reduction_layer_input: the normal cell's previous layer is the
      // reduction's own previous one, else the reduction's input.
      if (!config_.skip_reduction_layer_input) {
        prev = static_cast<int>(outputs.size()) - 2;
      }
    }
    const int64_t stride = reduce && config_.pnasnet ? 2 : 1;
    outputs.push_back(AddCell("cell_" + std::to_string(i),
                              "Cell_" + std::to_string(i), false,
                              ScaledFilters(config_.filters, scaling), stride,
                              prev, cell_num++, outputs));
    if (i == reductions[1] - 1) {
      // The aux head's variables come right after its cell's, as TF-Slim
      // creates them.
      aux_after_ = steps_.size();
      BuildAuxHead(outputs.back(), i);
    }
  }
  BuildFinalLayer(outputs.back());
}

void NasNetImpl::BuildAuxHead(Shape aux_in, int64_t aux_cell) {
  aux_ = nullptr;
  // Too small an image for the aux head's 5x5 pool: TF-Slim's net then
  // works in inference only (training builds the head and fails); so here.
  if (!HasAuxHead(image_size_)) return;
  auto aux = std::make_shared<NasAuxHeadImpl>(aux_in.channels, aux_in.size,
                                              options_.num_classes(),
                                              ArgScopeOf(config_, options_));
  register_module("aux_" + std::to_string(aux_cell),
                  Scope({{"aux_logits", aux}}));
  aux_ = aux;
}

void NasNetImpl::BuildFinalLayer(Shape last) {
  fc_ = nullptr;
  if (options_.num_classes() <= 0) return;
  fc_ = FullyConnected(
      FullyConnectedOptions(last.channels, options_.num_classes())
          .activation(Activation::kNone)
          .weights_init(Initializer::VarianceScalingFanOut())
          .weight_decay(ArgScopeOf(config_, options_).weight_decay));
  register_module("final_layer", Scope({{"FC", fc_.ptr()}}));
}

void NasNetImpl::reset() {
  steps_.clear();
  BuildCells(BuildStem());
}

double NasNetImpl::DropPathKeep(int64_t cell_num) const {
  if (!is_training() || config_.drop_path_keep_prob >= 1.0) return 1.0;
  return DropPathKeepProb(config_.drop_path_keep_prob, cell_num, total_cells(),
                          global_step_, config_.total_training_steps);
}

NetOutput NasNetImpl::forward(const torch::Tensor& images) {
  CheckSquareImages(images, config_.name, options_.input_channels());
  CheckImageSize(images.size(2));
  SLIM_CHECK(!is_training() || options_.num_classes() <= 0 || aux_,
             config_.name, " cannot train on ", image_size_, "x", image_size_,
             " images: its aux head's 5x5 pool needs a map of at least 5x5 "
             "after the first reduction, got ",
             AuxMapSize(config_, image_size_), "x",
             AuxMapSize(config_, image_size_), " (default ",
             config_.default_image_size, ")");
  NetOutput out;
  auto& ep = out.end_points;
  std::vector<torch::Tensor> outputs = {
      torch::Tensor(), stem_bn_->forward(stem_conv_->forward(images))};
  // _cifar_stem's output is the Stem end point itself.
  if (config_.cifar_stem) ep.emplace_back("Stem", outputs[1]);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const CellStep& step = steps_[s];
    auto* cell = dynamic_cast<NasCellImpl*>(step.cell.get());
    const torch::Tensor prev =
        step.prev >= 1 ? outputs[step.prev] : torch::Tensor();
    outputs.push_back(
        cell->forward(outputs.back(), prev, DropPathKeep(step.cell_num)));
    if (step.end_point.empty()) {
      // The stem cells; "Stem" after the last of them.
      if (s + 1 < steps_.size() && steps_[s + 1].end_point.empty()) continue;
      ep.emplace_back("Stem", outputs.back());
      continue;
    }
    ep.emplace_back(step.end_point, outputs.back());
    // The aux head runs in training only, as TF-Slim's; a model summary
    // (a cost recorder) runs it too, so that its variables, which every
    // checkpoint carries, are accounted for (as its own line).
    if (s + 1 == aux_after_ && aux_ && (is_training() || TracingCosts())) {
      torch::Tensor aux = dynamic_cast<NasAuxHeadImpl*>(aux_.get())
                              ->forward(Relu(outputs.back()));
      if (is_training()) out.aux_logits = aux;
      ep.emplace_back("AuxLogits", aux);
    }
  }
  torch::Tensor net = SqueezeHw(SpatialMean(Relu(outputs.back())));
  ep.emplace_back("global_pool", net);
  if (!fc_) {
    out.logits = net;
    return out;
  }
  net =
      torch::dropout(net, 1.0 - config_.dense_dropout_keep_prob, is_training());
  SetLogits(out, fc_(net));
  return out;
}

// Channels-last on CPUs; a scheduled drop path (keep below 1) follows the
// global step. nasnet_cifar, which TF-Slim's preprocessing_factory leaves
// unmapped, takes cifarnet's preprocessing (pad 4, crop, flip: the
// augmentation the NASNet paper trained CIFAR-10 with).
#define SLIMTORCH_REGISTER_NASNET(name, preprocessing)                       \
  SLIM_REGISTER_NET_WITH_FACTS(                                              \
      name,                                                                  \
      [](const NetOptions& o) -> std::shared_ptr<Net> {                      \
        const NasNetConfig& c = NasNetConfigOf(name);                        \
        return std::make_shared<ModuleNet<NasNetImpl>>(                      \
            std::make_shared<NasNetImpl>(c, o), "", c.default_image_size);   \
      },                                                                     \
      NetFacts()                                                             \
          .CpuChannelsLast()                                                 \
          .FollowsGlobalStep(NasNetConfigOf(name).drop_path_keep_prob < 1.0) \
          .Preprocessing(preprocessing))
SLIMTORCH_REGISTER_NASNET("nasnet_cifar", "cifarnet");
SLIMTORCH_REGISTER_NASNET("nasnet_mobile", "inception");
SLIMTORCH_REGISTER_NASNET("nasnet_large", "inception");
SLIMTORCH_REGISTER_NASNET("pnasnet_mobile", "inception");
SLIMTORCH_REGISTER_NASNET("pnasnet_large", "inception");

}  // namespace nets
}  // namespace slimtorch
