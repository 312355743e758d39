// Nets of the zoo against TensorFlow numerically: every variable filled by
// the generators' formula (in TensorFlow's layout, mapped to ours), the same
// input, inference mode: the logits must be TensorFlow's within 1e-4 of
// their largest magnitude, and every end point's sum and sum of |.| must
// agree. Goldens: scripts/golden/gen_net_logits_goldens.py (tf_slim.nets)
// and, for nets tf_slim lacks (inception_resnet_v2, mobilenet_v2 and its
// multipliers), scripts/golden/gen_keras_net_logits_goldens.py (their
// tf_keras.applications ports, renamed to TF-Slim's variables). The
// research/slim nets (MobileNet v3 / EdgeTPU, NASNet, PNASNet, I3D, S3D-G)
// come from a copy of TF-Slim's own files (gen_net_logits_goldens.py
// --slim-dir); their rows skip until the net is registered.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "nets/golden_util.h"
#include "slimtorch/core/registry.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

using namespace golden;  // NOLINT(build/namespaces)

struct LogitsFill {
  const char* name;
  uint32_t stream;
  double scale;
  bool positive;  // 0.5 + |fill| (gamma, moving_variance)
  GoldenShape shape;  // TF layout
};
struct LogitsSums {
  const char* key;
  double sum;
  double abs_sum;
};
struct NetLogitsGolden {
  const char* net;
  int64_t image_size;
  int64_t num_classes;
  const LogitsFill* fills;
  size_t num_fills;
  const float* logits;
  size_t num_logits;
  const LogitsSums* sums;
  size_t num_sums;
  int global_pool;  // TF-Slim's global_pool argument; -1: the net's default
  // Video nets (i3d, s3dg): the clip's frames, input [2, frames, size, size,
  // 3] in TF's layout; 0: images. Rows of research/slim's nets carry it.
  int64_t num_frames = 0;
};

#include "golden/net_logits_goldens.inc"
#include "golden/keras_net_logits_goldens.inc"

// Both tables, one after the other.
std::vector<const NetLogitsGolden*> AllGoldens() {
  std::vector<const NetLogitsGolden*> all;
  for (const auto& g : kNetLogitsGoldens) all.push_back(&g);
  for (const auto& g : kKerasNetLogitsGoldens) all.push_back(&g);
  return all;
}

torch::Tensor FillValue(const std::vector<int64_t>& tf_shape,
                        const LogitsFill& f) {
  torch::Tensor v = Fill(tf_shape, GoldenFill{f.name, f.stream, f.scale});
  return f.positive ? (v.abs() + 0.5f) : v;
}

// NASNet's and PNASNet's auxiliary head (scope aux_<cell>/) exists in
// TF-Slim's training graph only: their inference graph, which the goldens
// come from, has no such variables. Ours may keep them (checkpoints carry
// them); they do not touch the eval logits and keep their initial values.
bool TrainingOnlyVariable(const std::string& name) {
  if (name.rfind("aux_", 0) != 0) return false;
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 4) return false;
  for (size_t i = 4; i < slash; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

class NetLogitsTest : public ::testing::TestWithParam<size_t> {
 protected:
  const NetLogitsGolden& golden() const { return *AllGoldens()[GetParam()]; }
  // Goldens may come ahead of their nets (research/slim's families land on
  // their own branches).
  void SetUp() override {
    if (!GetNetRegistry().Has(golden().net)) {
      GTEST_SKIP() << golden().net << " is not built yet";
    }
  }
};

TEST_P(NetLogitsTest, LogitsMatchTensorFlow) {
  const NetLogitsGolden& g = golden();
  NetOptions options =
      NetOptions().num_classes(g.num_classes).image_size(g.image_size);
  if (g.global_pool >= 0) options.global_pool(g.global_pool == 1);
  auto net = CreateNet(g.net, options);
  std::map<std::string, const LogitsFill*> fills;
  for (size_t i = 0; i < g.num_fills; ++i) fills[g.fills[i].name] = &g.fills[i];
  size_t training_only = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto& v : net->ModelVariables()) {
      auto it = fills.find(v.name);
      if (it == fills.end() && TrainingOnlyVariable(v.name)) {
        ++training_only;
        continue;
      }
      ASSERT_NE(it, fills.end()) << "TensorFlow has no variable " << v.name;
      const LogitsFill& f = *it->second;
      const torch::Tensor ours =
          NamedVariableFromTf(v.name, FillValue(Dims(f.shape), f));
      ASSERT_EQ(ours.sizes(), v.tensor.sizes()) << v.name;
      v.tensor.copy_(ours);
    }
  }
  EXPECT_EQ(net->ModelVariables().size() - training_only, g.num_fills);
  net->module().eval();
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> tf_shape =
      g.num_frames > 0
          ? std::vector<int64_t>{2, g.num_frames, g.image_size, g.image_size, 3}
          : std::vector<int64_t>{2, g.image_size, g.image_size, 3};
  torch::Tensor images = ActivationFromTf(
      FillValue(tf_shape, LogitsFill{"images", 0, 1.0, false, {}}));
  NetOutput out = net->Forward(images);

  torch::Tensor expected =
      torch::from_blob(const_cast<float*>(g.logits),
                       {2, g.num_classes}, torch::kFloat32);
  ASSERT_EQ(out.logits.sizes(), expected.sizes());
  const double scale = expected.abs().max().item<double>();
  const double worst = (out.logits - expected).abs().max().item<double>();
  EXPECT_LE(worst, 1e-4 * scale) << g.net << ": logits differ by " << worst
                                 << " (largest |logit| " << scale << ")";

  std::map<std::string, torch::Tensor> points(out.end_points.begin(),
                                              out.end_points.end());
  for (size_t i = 0; i < g.num_sums; ++i) {
    const LogitsSums& s = g.sums[i];
    auto it = points.find(s.key);
    if (it == points.end()) {
      ADD_FAILURE() << g.net << ": no end point " << s.key;
      continue;
    }
    torch::Tensor d = ActivationToTf(it->second).to(torch::kFloat64);
    const double tol = 1e-6 + 1e-4 * s.abs_sum;
    EXPECT_NEAR(d.sum().item<double>(), s.sum, tol) << s.key << " sum";
    EXPECT_NEAR(d.abs().sum().item<double>(), s.abs_sum, tol)
        << s.key << " sum of |.|";
  }
}

std::string GoldenName(const ::testing::TestParamInfo<size_t>& info) {
  const auto all = AllGoldens();
  const NetLogitsGolden& g = *all[info.param];
  std::string name = g.net;
  bool variant = g.global_pool >= 0;
  for (size_t i = 0; i < info.param; ++i) {
    variant |= std::string(all[i]->net) == g.net;
  }
  if (variant) name += "_" + std::to_string(g.image_size);
  if (g.global_pool >= 0) {
    name += g.global_pool ? "_global_pool" : "_no_global_pool";
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    TensorFlow, NetLogitsTest,
    ::testing::Range<size_t>(0, AllGoldens().size()),
    GoldenName);

}  // namespace
}  // namespace slimtorch
