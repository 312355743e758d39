#include "nasnet_cells.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/core/error.h"
#include "slimtorch/nets/graph_ops.h"
#include "slimtorch/nets/layer_trace.h"

namespace slimtorch {
namespace nets {

using K = NasOpKind;

// nasnet_utils.NasNetANormalCell / NasNetAReductionCell, pnasnet's
// PNasNetNormalCell.
const NasCellDef kNasNetANormalCell = {
    {K::kSep5, K::kSep3, K::kSep5, K::kSep3, K::kAvg3, K::kNone, K::kAvg3,
     K::kAvg3, K::kSep3, K::kNone},
    {0, 1, 1, 1, 0, 1, 1, 1, 0, 0},
    {true, false, false, false, false, false, false}};
const NasCellDef kNasNetAReductionCell = {
    {K::kSep5, K::kSep7, K::kMax3, K::kSep7, K::kAvg3, K::kSep5, K::kNone,
     K::kAvg3, K::kSep3, K::kMax3},
    {0, 1, 0, 1, 0, 1, 3, 2, 2, 0},
    {true, true, true, false, false, false, false}};
const NasCellDef kPnasNet5Cell = {
    {K::kSep5, K::kMax3, K::kSep7, K::kMax3, K::kSep5, K::kSep3, K::kSep3,
     K::kMax3, K::kSep3, K::kNone},
    {1, 1, 0, 0, 0, 0, 4, 0, 1, 0},
    {true, true, false, false, false, false, false}};

namespace {

int64_t SepKernel(NasOpKind op) {
  switch (op) {
    case K::kSep3:
      return 3;
    case K::kSep5:
      return 5;
    case K::kSep7:
      return 7;
    default:
      return 0;
  }
}

int64_t Strided(int64_t size, int64_t stride) {
  return (size + stride - 1) / stride;
}

// factorized_reduction's path 2 before its conv: x one pixel up and left, a
// zero row and column entering at the bottom and right (tf.pad(...)[:, 1:,
// 1:, :]), then every other pixel: the odd rows and columns of x, with a
// zero row / column past the end of an odd size.
torch::Tensor ShiftedHalf(const torch::Tensor& x) {
  const int64_t pad_h = x.size(2) % 2, pad_w = x.size(3) % 2;
  if (!TracingOps()) {
    torch::Tensor odd = x.slice(2, 1, x.size(2), 2).slice(3, 1, x.size(3), 2);
    return torch::constant_pad_nd(odd, {0, pad_w, 0, pad_h}, 0.0);
  }
  // For an exported graph, the same as one op every engine runs: a 2x2
  // stride-2 depthwise conv taking each window's bottom-right pixel, zero
  // padded at the bottom / right of an odd size.
  torch::Tensor w = torch::zeros({x.size(1), 1, 2, 2}, x.options());
  w.select(2, 1).select(2, 1).fill_(1.0);
  const std::vector<int64_t> stride = {2, 2}, zero = {0, 0}, one = {1, 1};
  torch::Tensor y =
      torch::conv2d(torch::constant_pad_nd(x, {0, pad_w, 0, pad_h}, 0.0), w,
                    torch::Tensor(), stride, zero, one, x.size(1));
  TracedOp op(OpKind::kConv, nullptr, "", {x}, y);
  op.kernel_h = op.kernel_w = 2;
  op.stride = 2;
  op.pads = {0, 0, pad_h, pad_w};
  op.weights = w;
  TraceOp(op);
  return y;
}

}  // namespace

double DropPathKeepProb(double keep_prob, int64_t cell_num, int64_t total_cells,
                        int64_t step, int64_t total_steps) {
  SLIM_CHECK(total_cells > 0 && total_steps > 0,
             "drop_path: total cells and steps must be positive");
  const double layer_ratio =
      static_cast<double>(cell_num + 1) / static_cast<double>(total_cells);
  const double step_ratio = std::min(
      1.0, static_cast<double>(step) / static_cast<double>(total_steps));
  // TF-Slim scales by the layer, then by the step (v3): the same product.
  const double by_layer = 1.0 - layer_ratio * (1.0 - keep_prob);
  return 1.0 - step_ratio * (1.0 - by_layer);
}

torch::Tensor DropPath(const torch::Tensor& x, double keep) {
  SLIM_CHECK(keep > 0.0 && keep <= 1.0, "drop_path: keep probability ", keep,
             " is not in (0, 1]");
  torch::Tensor noise =
      torch::rand({x.size(0), 1, 1, 1}, x.options().dtype(torch::kFloat32));
  torch::Tensor mask = torch::floor(noise + keep).to(x.scalar_type());
  return x * (1.0 / keep) * mask;
}

Conv2d NasConv(int64_t in, int64_t out, int64_t kernel, int64_t stride,
               const NasArgScope& scope, Padding padding) {
  return Conv2d(Conv2dOptions(in, out, kernel)
                    .stride(stride)
                    .padding(padding)
                    .activation(Activation::kNone)
                    .use_bias(false)
                    .weights_init(Initializer::VarianceScalingFanOut())
                    .weight_decay(scope.weight_decay));
}

BatchNorm NasBatchNorm(int64_t channels, const NasArgScope& scope) {
  return BatchNorm(BatchNormOptions(channels)
                       .decay(scope.bn_decay)
                       .epsilon(scope.bn_epsilon)
                       .scale(true));
}

FactorizedReduction::FactorizedReduction(torch::nn::Module& owner, int64_t in,
                                         int64_t out, int64_t stride,
                                         const NasArgScope& scope)
    : stride_(stride) {
  if (stride == 1) {
    conv1_ = owner.register_module("path_conv", NasConv(in, out, 1, 1, scope));
    bn_ = owner.register_module("path_bn", NasBatchNorm(out, scope));
    return;
  }
  SLIM_CHECK(stride == 2, "factorized_reduction: stride 1 or 2, got ", stride);
  // An odd depth gives path2 the extra filter (TF-Slim since it allowed
  // odd depths: PNASNet mobile's 13 and 27).
  conv1_ =
      owner.register_module("path1_conv", NasConv(in, out / 2, 1, 1, scope));
  conv2_ = owner.register_module("path2_conv",
                                 NasConv(in, out - out / 2, 1, 1, scope));
  bn_ = owner.register_module("final_path_bn", NasBatchNorm(out, scope));
}

torch::Tensor FactorizedReduction::operator()(const torch::Tensor& x) {
  if (stride_ == 1) return bn_->forward(conv1_->forward(x));
  // avg_pool 1x1 stride 2 'VALID': every other pixel.
  torch::Tensor path1 = conv1_->forward(MaxPool2d(x, 1, stride_));
  torch::Tensor path2 = conv2_->forward(ShiftedHalf(x));
  return bn_->forward(Concat({path1, path2}));
}

NasOpImpl::NasOpImpl(NasOpKind op, int64_t in, int64_t filters, int64_t stride,
                     const NasArgScope& scope)
    : op_(op), in_(in), filters_(filters), stride_(stride), scope_(scope) {
  reset();
}

void NasOpImpl::reset() {
  seps_.clear();
  sep_bns_.clear();
  conv_ = nullptr;
  bn_ = nullptr;
  const int64_t k = SepKernel(op_);
  if (k > 0) {
    int64_t c = in_;
    for (int j = 1; j <= 2; ++j) {
      const std::string tag =
          std::to_string(k) + "x" + std::to_string(k) + "_" + std::to_string(j);
      seps_.push_back(register_module(
          "separable_" + tag,
          SeparableConv2d(
              SeparableConv2dOptions(c, filters_, k, 1)
                  .stride(j == 1 ? stride_ : 1)
                  .activation(Activation::kNone)
                  .use_bias(false)
                  .weights_init(Initializer::VarianceScalingFanOut())
                  .weight_decay(scope_.weight_decay))));
      sep_bns_.push_back(
          register_module("bn_sep_" + tag, NasBatchNorm(filters_, scope_)));
      c = filters_;
    }
    return;
  }
  const bool pool = op_ == K::kAvg3 || op_ == K::kMax3;
  const bool project = in_ != filters_ || (op_ == K::kNone && stride_ > 1);
  if (project) {
    // A pool's 1x1 runs after the (strided) pool; none's carries the stride.
    conv_ = register_module(
        "1x1", NasConv(in_, filters_, 1, pool ? 1 : stride_, scope_));
    bn_ = register_module("bn_1", NasBatchNorm(filters_, scope_));
  }
}

torch::Tensor NasOpImpl::forward(const torch::Tensor& x, double drop_keep) {
  torch::Tensor y = x;
  if (!seps_.empty()) {
    for (size_t j = 0; j < seps_.size(); ++j) {
      y = sep_bns_[j]->forward(seps_[j]->forward(Relu(y)));
    }
  } else if (op_ == K::kNone) {
    if (conv_) y = bn_->forward(conv_->forward(Relu(y)));
    return y;  // no drop_path on none
  } else {
    y = op_ == K::kAvg3 ? AvgPool2d(y, 3, stride_, Padding::kSame)
                        : MaxPool2d(y, 3, stride_, Padding::kSame);
    if (conv_) y = bn_->forward(conv_->forward(y));
  }
  return drop_keep < 1.0 ? DropPath(y, drop_keep) : y;
}

NasCellImpl::NasCellImpl(const NasCellDef& def, NasShape net, NasShape prev,
                         int64_t filters, int64_t stride,
                         const NasArgScope& scope)
    : def_(def),
      net_(net),
      prev_(prev),
      filters_(filters),
      stride_(stride),
      scope_(scope) {
  reset();
}

void NasCellImpl::reset() {
  const int64_t f = filters_;
  prev_reduction_ = FactorizedReduction();
  prev_conv_ = nullptr;
  prev_bn_ = nullptr;
  // _reduce_prev_layer: the previous layer matched to the current one.
  NasShape h1 = net_;
  if (prev_.channels > 0) {
    h1 = prev_;
    if (prev_.size != net_.size) {
      prev_reduction_ =
          FactorizedReduction(*this, prev_.channels, f, 2, scope_);
      h1 = {f, net_.size};
    } else if (prev_.channels != f) {
      prev_conv_ =
          register_module("prev_1x1", NasConv(prev_.channels, f, 1, 1, scope_));
      prev_bn_ = register_module("prev_bn", NasBatchNorm(f, scope_));
      h1 = {f, net_.size};
    }
  }
  conv_ = register_module("1x1", NasConv(net_.channels, f, 1, 1, scope_));
  bn_ = register_module("beginning_bn", NasBatchNorm(f, scope_));
  std::vector<NasShape> states = {{f, net_.size}, h1};
  ops_.clear();
  for (int i = 0; i < 5; ++i) {
    NamedModules pair;
    NasShape combined;
    for (int side = 0; side < 2; ++side) {
      const int slot = 2 * i + side;
      const int input = def_.inputs[slot];
      const int64_t stride = input < 2 ? stride_ : 1;
      const NasShape in = states[input];
      NasOp op(def_.ops[slot], in.channels, f, stride, scope_);
      ops_.push_back(op);
      pair.emplace_back(side == 0 ? "left" : "right", op.ptr());
      combined = {f, Strided(in.size, stride)};
    }
    register_module("comb_iter_" + std::to_string(i), Scope(pair));
    states.push_back(combined);
  }
  BuildOutput(std::move(states));
}

void NasCellImpl::BuildOutput(std::vector<NasShape> states) {
  // _combine_unused_states: an unused state of another depth or size than
  // the last one is factorized-reduced to it.
  const NasShape last = states.back();
  output_reductions_.assign(states.size(), FactorizedReduction());
  torch::nn::ModuleDict cell_output{nullptr};
  output_ = {0, last.size};
  for (size_t idx = 0; idx < states.size(); ++idx) {
    if (def_.used[idx]) continue;
    const NasShape s = states[idx];
    if (s.channels != last.channels || s.size != last.size) {
      if (!cell_output) {
        cell_output = register_module("cell_output", torch::nn::ModuleDict());
      }
      auto scope = cell_output->register_module(
          "reduction_" + std::to_string(idx), torch::nn::ModuleDict());
      output_reductions_[idx] =
          FactorizedReduction(*scope, s.channels, last.channels,
                              s.size != last.size ? 2 : 1, scope_);
    }
    output_.channels += last.channels;
  }
}

torch::Tensor NasCellImpl::forward(const torch::Tensor& net,
                                   const torch::Tensor& prev,
                                   double drop_keep) {
  torch::Tensor h1 = prev.defined() ? prev : net;
  if (prev_reduction_.defined()) {
    h1 = prev_reduction_(Relu(h1));
  } else if (prev_conv_) {
    h1 = prev_bn_->forward(prev_conv_->forward(Relu(h1)));
  }
  std::vector<torch::Tensor> states = {bn_->forward(conv_->forward(Relu(net))),
                                       h1};
  for (int i = 0; i < 5; ++i) {
    torch::Tensor left =
        ops_[2 * i]->forward(states[def_.inputs[2 * i]], drop_keep);
    torch::Tensor right =
        ops_[2 * i + 1]->forward(states[def_.inputs[2 * i + 1]], drop_keep);
    states.push_back(Add(left, right));
  }
  std::vector<torch::Tensor> unused;
  for (size_t idx = 0; idx < states.size(); ++idx) {
    if (def_.used[idx]) continue;
    unused.push_back(output_reductions_[idx].defined()
                         ? output_reductions_[idx](states[idx])
                         : states[idx]);
  }
  return Concat(unused);
}

NasAuxHeadImpl::NasAuxHeadImpl(int64_t in, int64_t map_size,
                               int64_t num_classes, const NasArgScope& scope)
    : in_(in), map_size_(map_size), num_classes_(num_classes), scope_(scope) {
  reset();
}

void NasAuxHeadImpl::reset() {
  const int64_t pooled = map_size_ < 5 ? 0 : (map_size_ - 5) / 3 + 1;
  SLIM_CHECK(pooled >= 1,
             "the NASNet aux head needs a map of at least 5x5, "
             "got ",
             map_size_, "x", map_size_);
  proj_ = register_module("proj", NasConv(in_, 128, 1, 1, scope_));
  bn0_ = register_module("aux_bn0", NasBatchNorm(128, scope_));
  conv_ = register_module(
      "Conv", NasConv(128, 768, pooled, 1, scope_, Padding::kValid));
  bn1_ = register_module("aux_bn1", NasBatchNorm(768, scope_));
  fc_ = register_module(
      "FC",
      FullyConnected(FullyConnectedOptions(768, num_classes_)
                         .activation(Activation::kNone)
                         .weights_init(Initializer::VarianceScalingFanOut())
                         .weight_decay(scope_.weight_decay)));
}

torch::Tensor NasAuxHeadImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = AvgPool2d(x, 5, 3, Padding::kValid);
  y = Relu(bn0_->forward(proj_->forward(y)));
  y = Relu(bn1_->forward(conv_->forward(y)));
  return fc_->forward(FlattenNhwc(y));
}

}  // namespace nets
}  // namespace slimtorch
