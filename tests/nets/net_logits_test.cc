// Nets of the zoo against TensorFlow numerically: every variable filled by
// the generators' formula (in TensorFlow's layout, mapped to ours), the same
// input, inference mode: the logits must be TensorFlow's within 1e-4 of
// their largest magnitude, and every end point's sum and sum of |.| must
// agree. Goldens: scripts/golden/gen_net_logits_goldens.py (tf_slim.nets)
// and, for nets tf_slim lacks (inception_resnet_v2, mobilenet_v2 and its
// multipliers), scripts/golden/gen_keras_net_logits_goldens.py (their
// tf_keras.applications ports, renamed to TF-Slim's variables).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "nets/golden_util.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

using namespace golden;  // NOLINT(build/namespaces)

struct LogitsFill {
  const char* name;
  uint32_t stream;
  double scale;
  bool positive;  // 0.5 + |fill| (gamma, moving_variance)
  std::vector<int64_t> shape;  // TF layout
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

class NetLogitsTest : public ::testing::TestWithParam<size_t> {
 protected:
  const NetLogitsGolden& golden() const { return *AllGoldens()[GetParam()]; }
};

TEST_P(NetLogitsTest, LogitsMatchTensorFlow) {
  const NetLogitsGolden& g = golden();
  NetOptions options =
      NetOptions().num_classes(g.num_classes).image_size(g.image_size);
  if (g.global_pool >= 0) options.global_pool(g.global_pool == 1);
  auto net = CreateNet(g.net, options);
  std::map<std::string, const LogitsFill*> fills;
  for (size_t i = 0; i < g.num_fills; ++i) fills[g.fills[i].name] = &g.fills[i];
  {
    torch::NoGradGuard no_grad;
    for (auto& v : net->ModelVariables()) {
      auto it = fills.find(v.name);
      ASSERT_NE(it, fills.end()) << "TensorFlow has no variable " << v.name;
      const LogitsFill& f = *it->second;
      torch::Tensor tf = FillValue(f.shape, f);
      const std::string& n = v.name;
      const std::string dw = "depthwise_weights";
      torch::Tensor ours;
      if (tf.dim() == 4 && n.size() >= dw.size() &&
          n.compare(n.size() - dw.size(), dw.size(), dw) == 0) {
        // [kh, kw, in, mult] → [in * mult, 1, kh, kw].
        ours = tf.permute({2, 3, 0, 1});
        ours = ours.reshape({-1, 1, ours.size(2), ours.size(3)});
      } else {
        ours = VariableFromTf(tf);
      }
      ASSERT_EQ(ours.sizes(), v.tensor.sizes()) << n;
      v.tensor.copy_(ours);
    }
  }
  EXPECT_EQ(net->ModelVariables().size(), g.num_fills);
  net->module().eval();
  torch::NoGradGuard no_grad;
  torch::Tensor images = ActivationFromTf(
      FillValue({2, g.image_size, g.image_size, 3},
                LogitsFill{"images", 0, 1.0, false, {}}));
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
