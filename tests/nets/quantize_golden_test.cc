// The 8-bit rewrite inside the layers (nets/quantize.h) against TensorFlow
// 1.15's contrib.quantize run on TensorFlow 2.21
// (scripts/golden/gen_quantize_goldens.py, whose docstring describes the
// goldens):
//   - numbers: a conv + batch norm (scale) + ReLU6 layer and a 1x1 conv
//     with biases and no activation, run a few training steps with
//     quant_delay 0 and 2 and with freeze_bn_delay 2 (outputs, the
//     gradients of sum(out * r), every range variable with its zero-debias
//     shadows, the batch norm's moving statistics after each step), then
//     evaluated; the float net too;
//   - placement: the ranges TensorFlow's eval graph gives nine TF-Slim nets
//     against the ranges Net::EnableQuantization gives ours, by name.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "slimtorch/nets/layers.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/nets/quantize.h"

namespace slimtorch {
namespace {

struct QuantizeGolden {
  const char* name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

#include "golden/quantize_goldens.inc"

const QuantizeGolden* FindRow(const std::string& name) {
  for (const QuantizeGolden& g : kQuantizeGoldens) {
    if (name == g.name) return &g;
  }
  return nullptr;
}

// A golden row as a tensor in TensorFlow's layout.
torch::Tensor Tf(const std::string& name) {
  const QuantizeGolden* g = FindRow(name);
  if (!g) {
    ADD_FAILURE() << "no golden row " << name;
    return torch::zeros({0});
  }
  return torch::tensor(g->values).reshape(g->shape);
}

// NHWC -> NCHW; conv weights TF [kh, kw, in, out] -> ours [out, in, kh, kw].
torch::Tensor Nchw(const torch::Tensor& nhwc) {
  return nhwc.permute({0, 3, 1, 2}).contiguous();
}
torch::Tensor WeightsFromTf(const torch::Tensor& t) {
  return t.permute({3, 2, 0, 1}).contiguous();
}

// Both sides compute in float32 in different orders: the convolutions'
// sums (Eigen vs LibTorch), the batch's variance (TF's fused kernel takes
// the Bessel-corrected one, then undoes the correction), the folded weights
// (TF: (sigma_B / sigma_mv * w) * gamma / sigma_B; ours w * (gamma /
// sigma_B * sigma_B / sigma_mv)) and the moving averages (TF: mv - (mv -
// v)(1 - decay); ours mv * decay + v (1 - decay)). Measured: at most 3.7e-7
// of max(1, max |TF|) for any quantity (outputs 2.4e-7 absolute, the
// ranges 4.8e-7, gradients 1.4e-6 on values up to ~5). One quantization
// level of the outputs is range / 255 = 3e-3 of the range, and a level
// moved by a rounding (a value sitting on a boundary) would show as such:
// none does.
constexpr double kTolerance = 2e-6;

double Scale(const torch::Tensor& tf) {
  return std::max(1.0, tf.abs().max().item<double>());
}

double MaxDiff(const torch::Tensor& ours, const torch::Tensor& tf) {
  return (ours.detach().to(torch::kFloat64) - tf.to(torch::kFloat64))
      .abs()
      .max()
      .item<double>();
}

void ExpectClose(const torch::Tensor& ours, const torch::Tensor& tf,
                 const std::string& what) {
  ASSERT_TRUE(ours.defined()) << what;
  ASSERT_EQ(ours.sizes(), tf.sizes()) << what;
  const double d = MaxDiff(ours, tf);
  EXPECT_LE(d, kTolerance * Scale(tf))
      << what << ": max |ours - TF| = " << d << " (max |TF| " << Scale(tf)
      << ")";
}

// The generator's model: slim.conv2d(4, [3, 3], batch norm with scale,
// decay 0.9, epsilon 0.001, relu6, scope conv1) -> slim.conv2d(3, [1, 1],
// biases, no activation, scope conv2), with the golden's values.
struct TwoLayers : torch::nn::Module {
  TwoLayers() {
    conv1 = register_module(
        "conv1",
        nets::Conv2d(nets::Conv2dOptions(3, 4, 3)
                         .activation(nets::Activation::kRelu6)
                         .batch_norm(nets::BatchNormOptions(4)
                                         .scale(true)
                                         .decay(0.9)
                                         .epsilon(0.001))));
    conv2 = register_module(
        "conv2", nets::Conv2d(nets::Conv2dOptions(4, 3, 1)
                                  .activation(nets::Activation::kNone)));
    torch::NoGradGuard no_grad;
    conv1->weights.copy_(WeightsFromTf(Tf("param/conv1/weights")));
    auto& bn = *conv1->batch_norm;
    bn.gamma.copy_(Tf("param/conv1/BatchNorm/gamma"));
    bn.beta.copy_(Tf("param/conv1/BatchNorm/beta"));
    bn.moving_mean.copy_(Tf("param/conv1/BatchNorm/moving_mean"));
    bn.moving_variance.copy_(Tf("param/conv1/BatchNorm/moving_variance"));
    conv2->weights.copy_(WeightsFromTf(Tf("param/conv2/weights")));
    conv2->biases.copy_(Tf("param/conv2/biases"));
  }
  nets::Conv2d conv1{nullptr}, conv2{nullptr};
};

// The model with a quantizer (none: the float net). No net scope: the
// ranges are "conv1/weights_quant/min", ..., as the golden's.
struct Model {
  std::shared_ptr<TwoLayers> net = std::make_shared<TwoLayers>();
  std::unique_ptr<nets::Quantizer> q;
  explicit Model(const nets::QuantizeOptions* options) {
    if (!options) return;
    q = std::make_unique<nets::Quantizer>(*net, "", *options);
    q->Discover([&] { Forward(torch::zeros({2, 3, 5, 5})); });
  }
  torch::Tensor Forward(const torch::Tensor& x) {
    nets::QuantizerScope scope(q.get());
    if (q) q->BeginPass();
    return net->conv2->forward(net->conv1->forward(x));
  }
};

// TensorFlow's name of one of our range variables: it names the
// zero-debias shadows after the variable's full name inside the range's
// scope ("conv1/act_quant/conv1/act_quant/max/biased"); ours drop the
// repeat ("conv1/act_quant/max/biased").
std::string TfVariableName(const std::string& ours) {
  for (const std::string shadow : {"/min/biased", "/min/local_step",
                                   "/max/biased", "/max/local_step"}) {
    if (ours.size() > shadow.size() &&
        ours.compare(ours.size() - shadow.size(), shadow.size(), shadow) ==
            0) {
      const std::string range = ours.substr(0, ours.size() - shadow.size());
      return range + "/" + range + shadow;
    }
  }
  return ours;
}

// The variables the rewrite added, as recorded after `run` ("delay2/1"):
// TensorFlow's names, fake_quantization_step and the moving statistics
// left out.
std::set<std::string> GoldenRangeVariables(const std::string& run) {
  const std::string prefix = run + "/var/";
  std::set<std::string> names;
  for (const QuantizeGolden& g : kQuantizeGoldens) {
    const std::string n = g.name;
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string v = n.substr(prefix.size());
    if (v == "fake_quantization_step" ||
        v.compare(0, 16, "conv1/BatchNorm/") == 0) {
      continue;
    }
    names.insert(v);
  }
  return names;
}

// Runs `steps` training steps of golden case `the_case` on `m`, checking
// each against the golden. A run, as the generator's session.run: forward
// and backward on the variables as the previous run left them, then the
// moving statistics' update (ours updates them during the forward pass,
// from the batch's statistics, after reading the old moving variance for
// the fold's correction). No optimizer step: the parameters stay.
void CheckTraining(const std::string& the_case, Model& m, int steps) {
  m.net->train();
  const torch::Tensor r = Nchw(Tf("upstream"));
  auto& bn = *m.net->conv1->batch_norm;
  for (int k = 1; k <= steps; ++k) {
    const std::string run = the_case + "/" + std::to_string(k);
    SCOPED_TRACE(run);
    if (m.q) {
      // TensorFlow's fake_quantization_step during run k is k (it counts
      // runs from 1): our global step before it is k - 1.
      m.q->SetGlobalStep(k - 1);
      if (FindRow(run + "/var/fake_quantization_step")) {
        EXPECT_EQ(Tf(run + "/var/fake_quantization_step").item<float>(), k);
      }
    }
    m.net->zero_grad();
    const torch::Tensor x =
        Nchw(Tf("input/" + std::to_string(k))).requires_grad_(true);
    const torch::Tensor y = m.Forward(x);
    (y * r).sum().backward();
    ExpectClose(y, Nchw(Tf(run + "/output")), "output");
    ExpectClose(x.grad(), Nchw(Tf(run + "/grad/input")), "input gradient");
    ExpectClose(m.net->conv1->weights.grad(),
                WeightsFromTf(Tf(run + "/grad/conv1/weights")),
                "conv1/weights gradient");
    ExpectClose(bn.gamma.grad(), Tf(run + "/grad/conv1/BatchNorm/gamma"),
                "gamma gradient");
    ExpectClose(bn.beta.grad(), Tf(run + "/grad/conv1/BatchNorm/beta"),
                "beta gradient");
    ExpectClose(m.net->conv2->weights.grad(),
                WeightsFromTf(Tf(run + "/grad/conv2/weights")),
                "conv2/weights gradient");
    ExpectClose(m.net->conv2->biases.grad(), Tf(run + "/grad/conv2/biases"),
                "conv2/biases gradient");
    ExpectClose(bn.moving_mean, Tf(run + "/var/conv1/BatchNorm/moving_mean"),
                "moving_mean");
    ExpectClose(bn.moving_variance,
                Tf(run + "/var/conv1/BatchNorm/moving_variance"),
                "moving_variance");
    if (!m.q) continue;
    const auto buffers = m.net->named_buffers();
    std::set<std::string> ours;
    for (const std::string& name : m.q->VariableNames()) {
      const std::string tf = TfVariableName(name);
      ours.insert(tf);
      if (!FindRow(run + "/var/" + tf)) continue;  // reported below
      const torch::Tensor golden = Tf(run + "/var/" + tf);
      if (name.size() > 11 &&
          name.compare(name.size() - 11, 11, "/local_step") == 0) {
        EXPECT_EQ(buffers[name].item<float>(), golden.item<float>()) << name;
      } else {
        ExpectClose(buffers[name], golden, name);
      }
    }
    EXPECT_EQ(ours, GoldenRangeVariables(run))
        << "our range variables (in TensorFlow's names) vs the golden's";
  }
}

// The goldens tell a quantized output from a float one by far more than
// the tolerance (so a missing fake quantization would fail), and quant
// delay 2's first run is the float net's.
TEST(QuantizeGoldenTest, GoldensSeparateQuantizedFromFloat) {
  const torch::Tensor f = Tf("float/1/output");
  EXPECT_GT(MaxDiff(Tf("delay0/1/output"), f), 100 * kTolerance * Scale(f));
  EXPECT_LE(MaxDiff(Tf("delay2/1/output"), f), kTolerance * Scale(f));
  EXPECT_GT(MaxDiff(Tf("delay2/2/output"), Tf("float/2/output")),
            100 * kTolerance * Scale(f));
}

TEST(QuantizeGoldenTest, FloatNet) {
  Model m(nullptr);
  CheckTraining("float", m, 4);
}

// create_training_graph(quant_delay=0): 3 runs; then create_eval_graph on
// the net rebuilt for inference with those variables: batch norm folded
// with the moving statistics, the stored ranges.
TEST(QuantizeGoldenTest, QuantDelay0ThenEval) {
  nets::QuantizeOptions o;
  Model m(&o);
  CheckTraining("delay0", m, 3);
  m.net->eval();
  torch::NoGradGuard no_grad;
  for (int k = 1; k <= 4; ++k) {
    const std::string i = std::to_string(k);
    ExpectClose(m.Forward(Nchw(Tf("input/" + i))),
                Nchw(Tf("eval/" + i + "/output")), "eval output " + i);
  }
}

// quant_delay 2: run 1 float (its ranges updated all the same), runs 2-4
// quantized.
TEST(QuantizeGoldenTest, QuantDelay2) {
  nets::QuantizeOptions o;
  o.quant_delay(2);
  Model m(&o);
  CheckTraining("delay2", m, 4);
}

// freeze_bn_delay 2: run 1 folds with the batch's statistics and updates
// the moving ones; runs 2-4 fold with the moving statistics, left as they
// are.
TEST(QuantizeGoldenTest, FreezeBatchNormDelay2) {
  nets::QuantizeOptions o;
  o.freeze_bn_delay(2);
  Model m(&o);
  CheckTraining("freeze2", m, 4);
}

// ---- Placement ----

struct QuantizePlacementGolden {
  const char* net;
  const char* scope;
  const char* input_type;
  const char* input;
  bool in_eval;
};

#include "golden/quantize_placement_goldens.inc"

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string Last(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

// A TensorFlow quantizer scope as ours names it. TensorFlow names its
// ranges after the ops (the op's name scope), ours after the layers:
//  1. nets that re-enter their variable scope (mobilenet_v1, inception_v1)
//     have a doubled op scope, "MobilenetV1/MobilenetV1/Conv2d_0": one;
//  2. "<layer>/conv_quant" (a layer's output feeding a bypass add or
//     hard_swish's + 3, without activation): ours "<layer>/act_quant", as
//     any layer's output;
//  3. a residual add's "<block>/post_activation_bypass_quant" (MobileNet v2
//     and v3) and "<block>/add/activation_AddV2_quant" (ResNet v2): ours
//     "<block>/add_quant";
//  4. "<op>/activation_Mul_quant", named after the Mul op
//     ("<layer>/hard_swish/mul_1", "<block>/squeeze_excite/Conv_1/mul" for
//     the hard sigmoid's 1/6, "<block>/squeeze_excite/mul" for the gating):
//     ours are named after the block of the layer quantized last,
//     "<block>/activation_Mul_quant", "_1", "_2", ... in a block. Both
//     become "<block>/activation_Mul_quant" (the op's scope less
//     "hard_swish", less the layer when the op is inside one), compared by
//     count per block.
// The "act_quant_N" that TensorFlow uniquifies (hard_swish's ReLU6, one
// level above its layer) are ours exactly.
std::string Normalized(std::string tf, const std::set<std::string>& layers) {
  const size_t slash = tf.find('/');
  if (slash != std::string::npos) {
    const std::string first = tf.substr(0, slash + 1);
    if (tf.compare(slash + 1, first.size(), first) == 0) {
      tf = tf.substr(slash + 1);
    }
  }
  const std::string last = Last(tf), dir = Parent(tf);
  if (last == "conv_quant") return dir + "/act_quant";
  if (last == "post_activation_bypass_quant") return dir + "/add_quant";
  if (last == "activation_AddV2_quant") return Parent(dir) + "/add_quant";
  if (last == "activation_Mul_quant") {
    std::string scope = Parent(dir);
    if (Last(scope) == "hard_swish") scope = Parent(scope);
    if (layers.count(scope)) scope = Parent(scope);
    return scope + "/activation_Mul_quant";
  }
  return tf;
}

// Ours, for rule 4: "<block>/activation_Mul_quant_3" -> without the count.
std::string NormalizedOurs(const std::string& name) {
  const std::string mul = "/activation_Mul_quant";
  const size_t at = name.rfind(mul);
  if (at != std::string::npos && at + mul.size() < name.size() &&
      name[at + mul.size()] == '_') {
    return name.substr(0, at + mul.size());
  }
  return name;
}

bool IsWeights(const std::string& range) {
  return Last(range) == "weights_quant";
}

std::string Differences(const std::vector<std::string>& tf,
                        const std::vector<std::string>& ours) {
  std::vector<std::string> only_tf, only_ours;
  std::set_difference(tf.begin(), tf.end(), ours.begin(), ours.end(),
                      std::back_inserter(only_tf));
  std::set_difference(ours.begin(), ours.end(), tf.begin(), tf.end(),
                      std::back_inserter(only_ours));
  std::ostringstream s;
  for (const std::string& n : only_tf) s << "\n  TensorFlow only: " << n;
  for (const std::string& n : only_ours) s << "\n  ours only: " << n;
  return s.str();
}

struct PlacementCase {
  const char* net;  // the golden's name and ours
  int64_t classes;  // as the generator built it
  int64_t channels;
  int64_t image_size;  // small where the net takes it
  bool global_pool;    // inception_v1's 7x7 head pool needs 224 without it
};

class QuantizePlacementGoldenTest
    : public ::testing::TestWithParam<PlacementCase> {};

// The eval graph's ranges (TensorFlow's training graph has the same plus
// the dropout Muls' activation_Mul_quant of lenet, cifarnet and vgg_a,
// which ours do not quantize in training either).
TEST_P(QuantizePlacementGoldenTest, RangesAreTensorFlows) {
  const PlacementCase& c = GetParam();
  std::vector<std::string> tf_scopes;
  for (const QuantizePlacementGolden& g : kQuantizePlacementGoldens) {
    if (c.net == std::string(g.net) && g.in_eval) tf_scopes.push_back(g.scope);
  }
  ASSERT_FALSE(tf_scopes.empty());
  std::set<std::string> layers;
  for (const std::string& s : tf_scopes) {
    if (IsWeights(s)) layers.insert(Parent(Normalized(s, {})));
  }
  std::vector<std::string> tf_weights, tf_acts;
  for (const std::string& s : tf_scopes) {
    (IsWeights(s) ? tf_weights : tf_acts).push_back(Normalized(s, layers));
  }

  NetOptions options;
  options.num_classes(c.classes).input_channels(c.channels).image_size(
      c.image_size);
  if (c.global_pool) options.global_pool(true);
  torch::manual_seed(0);
  auto net = CreateNet(c.net, options);
  net->EnableQuantization(nets::QuantizeOptions(), c.image_size);
  std::vector<std::string> weights, acts;
  for (const std::string& v : net->quantizer()->VariableNames()) {
    if (Last(v) != "min") continue;  // not max, not the shadows
    const std::string range = Parent(v);
    if (IsWeights(range)) {
      weights.push_back(range);
    } else {
      acts.push_back(NormalizedOurs(range));
    }
  }
  EXPECT_EQ(acts, [&] {
    std::vector<std::string> a;
    for (const std::string& n : net->quantizer()->ActivationRangeNames()) {
      a.push_back(NormalizedOurs(n));
    }
    return a;
  }());

  EXPECT_EQ(weights.size(), tf_weights.size());
  EXPECT_EQ(acts.size(), tf_acts.size());
  for (auto* v : {&tf_weights, &tf_acts, &weights, &acts}) {
    std::sort(v->begin(), v->end());
  }
  EXPECT_EQ(weights, tf_weights) << Differences(tf_weights, weights);
  EXPECT_EQ(acts, tf_acts) << Differences(tf_acts, acts);
}

INSTANTIATE_TEST_SUITE_P(
    Nets, QuantizePlacementGoldenTest,
    ::testing::Values(PlacementCase{"lenet", 10, 1, 28, false},
                      PlacementCase{"cifarnet", 10, 3, 32, false},
                      PlacementCase{"mobilenet_v1_025", 1001, 3, 32, false},
                      PlacementCase{"mobilenet_v2", 1001, 3, 32, false},
                      PlacementCase{"inception_v1", 1001, 3, 32, true},
                      PlacementCase{"resnet_v1_50", 1000, 3, 32, false},
                      PlacementCase{"resnet_v2_50", 1001, 3, 32, false},
                      PlacementCase{"mobilenet_v3_small", 1001, 3, 32, false},
                      // fc6's 7x7 VALID window needs 224.
                      PlacementCase{"vgg_a", 1000, 3, 224, false}),
    [](const ::testing::TestParamInfo<PlacementCase>& info) {
      return std::string(info.param.net);
    });

}  // namespace
}  // namespace slimtorch
