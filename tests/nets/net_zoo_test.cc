// The net zoo against TF-Slim itself: variable names, shapes and
// trainability, parameter counts and end-point shapes of every net of
// TF-Slim's nets_factory, as scripts/golden/gen_net_goldens.py recorded them
// from tf_slim.nets and, for the nets the pip package lacks, from a copy of
// research/slim (TensorFlow graphs, training mode, batch 2, default size).
// Rows of nets not registered yet skip.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nets/golden_util.h"
#include "slimtorch/core/registry.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/preprocessing/preprocessing.h"
#include "io/io_test_util.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using golden::Dims;
using golden::GoldenShape;

struct GoldenVar {
  const char* name;
  GoldenShape shape;  // TF layout
  bool trainable;
};
struct GoldenEndPoint {
  const char* key;
  GoldenShape shape;  // TF layout (NHWC; clips NDHWC)
};
struct NetZooGolden {
  const char* net;
  int64_t image_size;
  int64_t num_classes;
  int64_t num_parameters;
  const GoldenVar* vars;
  size_t num_vars;
  const GoldenEndPoint* points;
  size_t num_points;
  // Rows of research/slim's nets: the image size the end points were
  // recorded at (the heavy nets' smaller than image_size, to keep the
  // forward pass cheap; the net is then built for it with
  // NetOptions::image_size) and, for the video nets, the clip's frames
  // (input [2, 3, frames, size, size]). 0: image_size / images.
  int64_t points_size = 0;
  int64_t num_frames = 0;
};

#include "golden/net_zoo_goldens.inc"

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// TF layout → LibTorch layout: conv [kh, kw, in, out] → [out, in, kh, kw],
// conv3d [kt, kh, kw, in, out] → [out, in, kt, kh, kw], depthwise [kh, kw,
// in, mult] → [in * mult, 1, kh, kw], fully connected [in, out] → [out, in];
// 1-D stays.
std::vector<int64_t> TorchVarShape(const std::string& name,
                                   const std::vector<int64_t>& tf) {
  if (tf.size() == 4 && EndsWith(name, "depthwise_weights")) {
    return {tf[2] * tf[3], 1, tf[0], tf[1]};
  }
  if (tf.size() == 5) return {tf[4], tf[3], tf[0], tf[1], tf[2]};
  if (tf.size() == 4) return {tf[3], tf[2], tf[0], tf[1]};
  if (tf.size() == 2) return {tf[1], tf[0]};
  return tf;
}
// NHWC → NCHW for 4-D end points, NDHWC → NCDHW for 5-D ones.
std::vector<int64_t> TorchPointShape(const std::vector<int64_t>& tf) {
  if (tf.size() == 5) return {tf[0], tf[4], tf[1], tf[2], tf[3]};
  if (tf.size() == 4) return {tf[0], tf[3], tf[1], tf[2]};
  return tf;
}

// NASNet-A cifar / large and PNASNet large (drop-path keep < 1) make
// TensorFlow's global step inside their first cell in training mode
// (tf.train.get_or_create_global_step in the drop-path schedule; e.g.
// cell_stem_0/comb_iter_0/left/global_step). Our drop-path reads the
// trainer's step instead, so the net has no such variable (and restoring a
// checkpoint passes it by).
bool IsGlobalStep(const std::string& name) {
  return name == "global_step" || EndsWith(name, "/global_step");
}

// The variable scope every variable of the row shares (the net's scope),
// or "" when there is none (NASNet / PNASNet: conv0, cell_stem_0, ...).
std::string CommonScope(const NetZooGolden& g) {
  const std::string first = g.vars[0].name;
  const std::string scope = first.substr(0, first.find('/'));
  for (size_t i = 0; i < g.num_vars; ++i) {
    if (std::string(g.vars[i].name).rfind(scope + "/", 0) != 0) return "";
  }
  return scope;
}

bool Registered(const std::string& name) {
  return GetNetRegistry().Has(name);
}

class NetZooTest : public ::testing::TestWithParam<size_t> {
 protected:
  const NetZooGolden& golden() const { return kNetZooGoldens[GetParam()]; }
  void SetUp() override {
    if (!Registered(golden().net)) {
      GTEST_SKIP() << golden().net << " is not built yet";
    }
  }
  std::shared_ptr<Net> Make() const {
    torch::manual_seed(0);
    return CreateNet(golden().net, NetOptions()
                                       .num_classes(golden().num_classes)
                                       .weight_decay(0.0005));
  }
};

TEST_P(NetZooTest, VariablesMatchTfSlim) {
  const NetZooGolden& g = golden();
  auto net = Make();
  EXPECT_EQ(net->scope(), CommonScope(g));
  EXPECT_EQ(net->default_image_size(), g.image_size);
  std::map<std::string, std::vector<int64_t>> ours;
  std::set<std::string> trainable;
  std::vector<std::string> order;
  for (const auto& v : net->ModelVariables()) {
    ours[v.name] = v.tensor.sizes().vec();
    order.push_back(v.name);
  }
  for (const auto& v : net->TrainableVariables()) trainable.insert(v.name);
  ASSERT_EQ(ours.size(), order.size()) << "duplicate variable names";
  size_t tf_vars = 0;
  for (size_t i = 0; i < g.num_vars; ++i) tf_vars += !IsGlobalStep(g.vars[i].name);
  EXPECT_EQ(ours.size(), tf_vars);
  for (size_t i = 0; i < g.num_vars; ++i) {
    const GoldenVar& v = g.vars[i];
    if (IsGlobalStep(v.name)) continue;
    auto it = ours.find(v.name);
    if (it == ours.end()) {
      ADD_FAILURE() << g.net << ": missing " << v.name;
      continue;
    }
    EXPECT_EQ(it->second, TorchVarShape(v.name, Dims(v.shape))) << v.name;
    EXPECT_EQ(trainable.count(v.name) == 1, v.trainable) << v.name;
  }
  for (const auto& [name, shape] : ours) {
    bool known = false;
    for (size_t i = 0; i < g.num_vars && !known; ++i) known = name == g.vars[i].name;
    EXPECT_TRUE(known) << g.net << ": extra variable " << name;
  }
  // Trainable variables come in TF-Slim's order; moving statistics follow.
  std::vector<std::string> tf_trainable, our_trainable;
  for (size_t i = 0; i < g.num_vars; ++i) {
    if (g.vars[i].trainable) tf_trainable.push_back(g.vars[i].name);
  }
  for (const auto& v : net->TrainableVariables()) our_trainable.push_back(v.name);
  EXPECT_EQ(our_trainable, tf_trainable);
  EXPECT_EQ(net->NumParameters(), g.num_parameters);
}

TEST_P(NetZooTest, EndPointsMatchTfSlim) {
  const NetZooGolden& g = golden();
  const int64_t size = g.points_size > 0 ? g.points_size : g.image_size;
  std::shared_ptr<Net> net;
  if (size == g.image_size) {
    net = Make();
  } else {
    torch::manual_seed(0);
    net = CreateNet(g.net, NetOptions()
                               .num_classes(g.num_classes)
                               .weight_decay(0.0005)
                               .image_size(size));
  }
  net->module().train();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(
      g.num_frames > 0 ? torch::randn({2, 3, g.num_frames, size, size})
                       : torch::randn({2, 3, size, size}));
  ASSERT_EQ(out.end_points.size(), g.num_points);
  for (size_t i = 0; i < g.num_points; ++i) {
    EXPECT_EQ(out.end_points[i].first, g.points[i].key);
    EXPECT_EQ(out.end_points[i].second.sizes().vec(),
              TorchPointShape(Dims(g.points[i].shape)))
        << g.points[i].key;
  }
  EXPECT_EQ(out.logits.sizes().vec(),
            (std::vector<int64_t>{2, g.num_classes}));
  EXPECT_TRUE(torch::isfinite(out.logits).all().item<bool>());
}

std::string GoldenName(const ::testing::TestParamInfo<size_t>& info) {
  return kNetZooGoldens[info.param].net;
}

INSTANTIATE_TEST_SUITE_P(
    TfSlim, NetZooTest,
    ::testing::Range<size_t>(0, sizeof(kNetZooGoldens) / sizeof(kNetZooGoldens[0])),
    GoldenName);

// The published figure (nets/vgg.py users; Simonyan & Zisserman): VGG-16
// with 1000 classes has 138 357 544 parameters. Independent of the goldens.
TEST(NetZooPublishedTest, Vgg16Has138357544Parameters) {
  auto net = CreateNet("vgg_16", NetOptions().num_classes(1000));
  EXPECT_EQ(net->NumParameters(), 138357544);
}

TEST(ConvStackTest, ImageSizesTfSlimCannotTakeAreClearErrors) {
  auto vgg = CreateNet("vgg_16", NetOptions().num_classes(10));
  vgg->CheckImageSize(224);
  vgg->CheckImageSize(255);  // pool5 is still 7x7
  EXPECT_ERROR_CONTAINS(vgg->CheckImageSize(256), "vgg_16 cannot take 256x256",
                        "fc6 would leave a 2x2 map");
  EXPECT_ERROR_CONTAINS(vgg->CheckImageSize(32), "vgg_16 cannot take 32x32",
                        "fc6's 7x7 VALID window does not fit its 1x1 input");
  auto alex = CreateNet("alexnet_v2", NetOptions().num_classes(10));
  EXPECT_ERROR_CONTAINS(alex->CheckImageSize(8), "alexnet_v2 cannot take 8x8",
                        "conv1's 11x11 VALID window");
  torch::NoGradGuard no_grad;
  EXPECT_ERROR_CONTAINS(vgg->Forward(torch::zeros({1, 3, 64, 64})),
                        "vgg_16 cannot take 64x64");
}

TEST(ConvStackTest, NoClassesReturnsFc7Features) {
  auto net = CreateNet("alexnet_v2", NetOptions().num_classes(0));
  net->module().eval();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(torch::randn({2, 3, 224, 224}));
  EXPECT_EQ(out.logits.sizes().vec(), (std::vector<int64_t>{2, 4096, 1, 1}));
  EXPECT_EQ(out.end_points.back().first, "alexnet_v2/fc7");
  for (const auto& v : net->ModelVariables()) {
    EXPECT_EQ(v.name.find("fc8"), std::string::npos) << v.name;
  }
}

// slim.l2_regularizer on every conv, fc8 included: wd * sum(W^2) / 2.
TEST(ConvStackTest, WeightDecayCoversEveryWeight) {
  auto net = CreateNet("vgg_a", NetOptions().num_classes(7).weight_decay(0.01));
  double expected = 0;
  for (const auto& v : net->TrainableVariables()) {
    if (v.name.size() > 8 &&
        v.name.compare(v.name.size() - 8, 8, "/weights") == 0) {
      expected += 0.01 * v.tensor.pow(2).sum().item<double>() / 2;
    }
  }
  EXPECT_NEAR(net->RegularizationLoss().item<double>(), expected,
              1e-5 * expected);
}

// Dropout (keep 0.5) acts in training only; eval is deterministic.
TEST(ConvStackTest, DropoutOnlyInTraining) {
  auto net = CreateNet("alexnet_v2", NetOptions().num_classes(5));
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({1, 3, 224, 224});
  net->module().eval();
  torch::Tensor a = net->Forward(x).logits, b = net->Forward(x).logits;
  EXPECT_TRUE(torch::equal(a, b));
  net->module().train();
  torch::manual_seed(1);
  torch::Tensor c = net->Forward(x).logits;
  torch::manual_seed(2);
  torch::Tensor d = net->Forward(x).logits;
  EXPECT_FALSE(torch::equal(c, d));
}

// The video facts of the registry are the nets': i3d and s3dg, whose
// default clip is as long as the fact says; every other net takes images.
TEST(NetFactsTest, VideoNetsAreTheNetsOfClips) {
  std::vector<std::string> video;
  for (const std::string& name : GetNetRegistry().Names()) {
    if (NetFactsOf(name).num_frames > 0) video.push_back(name);
  }
  EXPECT_EQ(video, (std::vector<std::string>{"i3d", "s3dg"}));
  for (const std::string& name : video) {
    auto net = CreateNet(name, NetOptions().num_classes(3));
    EXPECT_EQ(net->num_frames(), NetFactsOf(name).num_frames) << name;
  }
}

}  // namespace
}  // namespace slimtorch

namespace slimtorch {
namespace {

// Inception v3's aux head and final pool fix the sizes it takes (its
// Conv2d_2a_5x5 is built for 5x5 maps); others fail before any work.
TEST(InceptionV3Test, ImageSizesAndAuxLogits) {
  auto net = CreateNet("inception_v3", NetOptions().num_classes(7));
  net->CheckImageSize(299);
  net->CheckImageSize(330);
  EXPECT_ERROR_CONTAINS(net->CheckImageSize(224), "built for images whose "
                        "AuxLogits map is 5x5", "cannot take 224x224");
  EXPECT_ERROR_CONTAINS(net->CheckImageSize(400), "sizes up to 330 work");
  // Built for 160, as --train_image_size=160 does: the aux kernel shrinks
  // (TF-Slim's _reduced_kernel_size_for_small_input).
  auto small = CreateNet("inception_v3", NetOptions().num_classes(7).image_size(160));
  small->CheckImageSize(160);
  for (const auto& v : small->ModelVariables()) {
    if (v.name.find("/AuxLogits/Conv2d_2a_") != std::string::npos &&
        v.name.find("/weights") != std::string::npos) {
      EXPECT_EQ(v.name, "InceptionV3/AuxLogits/Conv2d_2a_2x2/weights");
      EXPECT_EQ(v.tensor.sizes().vec(), (std::vector<int64_t>{768, 128, 2, 2}));
    }
  }
  EXPECT_ERROR_CONTAINS(
      CreateNet("inception_v3", NetOptions().num_classes(7).image_size(100)),
      "cannot be built for 100x100", "sizes 107 to 330 work");
  EXPECT_ERROR_CONTAINS(net->CheckImageSize(64), "at least 75x75");
  net->module().eval();
  torch::NoGradGuard no_grad;
  NetOutput out = net->Forward(torch::randn({1, 3, 299, 299}));
  ASSERT_TRUE(out.aux_logits.defined());
  EXPECT_EQ(out.aux_logits.sizes().vec(), (std::vector<int64_t>{1, 7}));
  // Without classes there is no aux head, and PreLogits comes back.
  auto features = CreateNet("inception_v3", NetOptions().num_classes(0));
  features->module().eval();
  NetOutput f = features->Forward(torch::randn({1, 3, 299, 299}));
  EXPECT_FALSE(f.aux_logits.defined());
  EXPECT_EQ(f.logits.sizes().vec(), (std::vector<int64_t>{1, 2048, 1, 1}));
}

// TF-Slim's global_pool and spatial_squeeze arguments (tf_slim's nets take
// global_pool only in resnet, whose global_pool=False the logits test checks
// against TensorFlow; elsewhere it is tf.reduce_mean over H and W).
TEST(NetOptionsTest, GlobalPoolAndSpatialSqueeze) {
  torch::NoGradGuard no_grad;
  // Where the fixed pool covers the whole map (Inception v1 at 224: 7x7),
  // global_pool gives the same logits.
  torch::manual_seed(3);
  auto v1 = CreateNet("inception_v1", NetOptions().num_classes(5));
  torch::manual_seed(3);
  auto v1_pooled = CreateNet("inception_v1",
                             NetOptions().num_classes(5).global_pool(true));
  v1->module().eval();
  v1_pooled->module().eval();
  torch::Tensor x = torch::randn({1, 3, 224, 224});
  EXPECT_TRUE(torch::allclose(v1->Forward(x).logits,
                              v1_pooled->Forward(x).logits, 1e-5, 1e-6));
  v1_pooled->CheckImageSize(300);
  EXPECT_ERROR_CONTAINS(v1->CheckImageSize(300), "any with global_pool");
  // Without global_pool MobileNet v1 stops at 256; with it any size works.
  auto fixed = CreateNet("mobilenet_v1_025", NetOptions().num_classes(5));
  EXPECT_ERROR_CONTAINS(fixed->CheckImageSize(320), "any with global_pool");
  auto pooled = CreateNet("mobilenet_v1_025",
                          NetOptions().num_classes(5).global_pool(true));
  pooled->CheckImageSize(320);
  pooled->module().eval();
  NetOutput out = pooled->Forward(torch::randn({1, 3, 320, 320}));
  EXPECT_EQ(out.logits.sizes().vec(), (std::vector<int64_t>{1, 5}));
  bool has_global_pool = false;
  for (const auto& [k, t] : out.end_points) has_global_pool |= k == "global_pool";
  EXPECT_TRUE(has_global_pool);

  // spatial_squeeze=false keeps the conv head's [N, C, 1, 1].
  auto unsqueezed = CreateNet(
      "inception_v2", NetOptions().num_classes(5).spatial_squeeze(false));
  unsqueezed->module().eval();
  EXPECT_EQ(unsqueezed->Forward(torch::randn({1, 3, 96, 96})).logits.sizes().vec(),
            (std::vector<int64_t>{1, 5, 1, 1}));

  // ResNet pools by default; without it, only a 1x1 final map squeezes.
  auto no_pool = CreateNet("resnet_v1_50",
                           NetOptions().num_classes(5).global_pool(false));
  no_pool->CheckImageSize(32);
  EXPECT_ERROR_CONTAINS(no_pool->CheckImageSize(64), "without global_pool",
                        "final map would be 2x2");
}

// The trainer's L2 path (gradients added to .grad directly) equals
// backpropagating RegularizationLoss(): weights, biases (inception_resnet_v2
// regularizes them), separable convs (inception_v2), and frozen variables
// get no gradient.
// Net::Clone: an independent copy whose forward pass uses its own
// registered variables (LibTorch's Module::clone left the mobilenets'
// logits and the resnets' units on the original's unregistered copies, so
// a clone's variables got no gradients); cloning draws nothing from the
// global generator.
TEST(NetCloneTest, ClonesComputeWithTheirOwnVariables) {
  for (const auto& [name, size] : std::vector<std::pair<const char*, int64_t>>{
           {"mobilenet_v1_025", 64}, {"resnet_v1_50", 64}, {"lenet", 28}}) {
    torch::manual_seed(0);
    auto net = CreateNet(name, NetOptions().num_classes(5).image_size(size));
    net->SetMemoryFormat(torch::MemoryFormat::ChannelsLast);
    net->TrainableVariables().front().tensor.requires_grad_(false);
    torch::manual_seed(9);
    const torch::Tensor expected_draw = torch::rand({4});
    torch::manual_seed(9);
    auto copy = net->Clone();
    EXPECT_TRUE(torch::equal(torch::rand({4}), expected_draw)) << name;
    EXPECT_EQ(copy->memory_format(), torch::MemoryFormat::ChannelsLast);

    const torch::Tensor x =
        torch::randn({2, net->input_channels(), size, size});
    net->module().eval();
    copy->module().eval();
    net->Forward(x).logits.sum().backward();
    copy->Forward(x).logits.sum().backward();
    NamedTensors a = net->TrainableVariables(), b = copy->TrainableVariables();
    ASSERT_EQ(a.size(), b.size()) << name;
    EXPECT_FALSE(b.front().tensor.requires_grad()) << name;
    for (size_t i = 1; i < a.size(); ++i) {
      ASSERT_TRUE(b[i].tensor.grad().defined()) << name << " " << b[i].name;
      EXPECT_TRUE(
          torch::allclose(a[i].tensor.grad(), b[i].tensor.grad(), 1e-5, 1e-7))
          << name << " " << b[i].name;
      EXPECT_NE(a[i].tensor.data_ptr(), b[i].tensor.data_ptr()) << name;
    }
  }
}

TEST(RegularizationTest, DirectGradientsEqualBackprop) {
  for (const char* name : {"lenet", "inception_v2", "inception_resnet_v2"}) {
    auto net = CreateNet(name, NetOptions().num_classes(3).weight_decay(0.01));
    NamedTensors vars = net->TrainableVariables();
    vars.front().tensor.requires_grad_(false);  // as --trainable_scopes does
    torch::Tensor loss = net->RegularizationLoss();
    loss.backward();
    std::vector<torch::Tensor> expected;
    for (auto& v : vars) {
      expected.push_back(v.tensor.grad().defined() ? v.tensor.grad().clone()
                                                   : torch::Tensor());
      v.tensor.mutable_grad() = torch::Tensor();
    }
    torch::Tensor value = net->ApplyRegularizationGradients();
    EXPECT_NEAR(value.item<double>(), loss.item<double>(),
                1e-5 * loss.item<double>()) << name;
    EXPECT_FALSE(vars.front().tensor.grad().defined()) << name;
    int regularized = 0;
    for (size_t i = 0; i < vars.size(); ++i) {
      const torch::Tensor& got = vars[i].tensor.grad();
      ASSERT_EQ(got.defined(), expected[i].defined()) << vars[i].name;
      if (!got.defined()) continue;
      ++regularized;
      EXPECT_TRUE(torch::allclose(got, expected[i], 1e-6, 1e-9)) << vars[i].name;
    }
    EXPECT_GT(regularized, 0) << name;
  }
}

// Train and eval preprocess with --preprocessing_name or, unset,
// the model's name; every registered net has one (TF-Slim's
// preprocessing_factory, extended to the widths and nets it leaves out),
// so --model_name alone never fails on a flag the user did not set.
TEST(NetZooPreprocessingTest, EveryRegisteredNetHasAPreprocessing) {
  PreprocessingOptions o;
  o.output_height = 32;
  o.output_width = 32;
  for (const std::string& name : GetNetRegistry().Names()) {
    // The video nets (i3d, s3dg) take clips, which train / eval refuse:
    // TF-Slim's preprocessing_factory maps them to nothing either.
    if (NetFactsOf(name).num_frames > 0) {
      EXPECT_FALSE(GetPreprocessingRegistry().Has(name)) << name;
      continue;
    }
    EXPECT_TRUE(GetPreprocessingRegistry().Has(name)) << name;
    for (bool training : {false, true}) {
      o.is_training = training;
      try {
        std::mt19937_64 rng(1);
        const torch::Tensor out = GetPreprocessing(name, o)(
            torch::full({40, 50, 3}, 100, torch::kUInt8), rng);
        EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{3, 32, 32}))
            << name;
      } catch (const Error& e) {
        ADD_FAILURE() << name << ": " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace slimtorch
