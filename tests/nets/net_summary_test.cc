// SummarizeNet (--model_summary): every parameter is attributed to exactly
// one end point, and the multiply-adds meet the published figures:
//  * MobileNet v1 1.0/224: 567 716 352 in the base (the docstring of
//    TF-Slim's nets/mobilenet_v1.py), plus the logits' 1024 * 1001;
//  * MobileNet v2 (research/slim/nets/mobilenet/README.md, millions of
//    MACs): 1.0/224: 300, 1.4/224: 582, 0.35/224: 59.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "nets/zoo_input.h"
#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace {

int64_t Attributed(const NetSummary& s) {
  int64_t n = 0;
  for (const auto& e : s.end_points) n += e.parameters;
  return n;
}

// Each net at the smallest of a few sizes it takes (the property does not
// depend on the size; small keeps the test quick). vgg_16 / vgg_19 share
// vgg_a's code and are left out for time.
TEST(NetSummaryTest, EveryParameterBelongsToOneEndPoint) {
  for (const std::string& name : GetNetRegistry().Names()) {
    if (name == "vgg_16" || name == "vgg_19") continue;
    int64_t size = 0;
    {
      auto probe = CreateNet(name, NetOptions().num_classes(7));
      for (int64_t s : {32, 64, 75, 107, 128, 160, 224, 299}) {
        try {
          probe->CheckImageSize(s);
          size = s;
          break;
        } catch (const std::exception&) {
        }
      }
      if (size == 0) size = probe->default_image_size();
    }
    auto net = CreateNet(name, testing::ZooTestOptions(
                                   NetOptions().num_classes(7).image_size(size)));
    net->module().train();
    NetSummary s = SummarizeNet(*net, size);
    EXPECT_EQ(Attributed(s), s.parameters) << name << " at " << size;
    EXPECT_EQ(s.parameters, net->NumParameters()) << name;
    EXPECT_GT(s.multiply_adds, 0) << name;
    EXPECT_TRUE(net->module().is_training()) << name << ": mode not restored";
    ASSERT_FALSE(s.end_points.empty()) << name;
    EXPECT_EQ(s.end_points.front().shape.front(), 1) << name;
  }
}

TEST(NetSummaryTest, MobileNetMultiplyAdds) {
  auto v1 = CreateNet("mobilenet_v1", NetOptions().num_classes(1001));
  NetSummary s = SummarizeNet(*v1, 224);
  int64_t logits = 0;
  for (const auto& e : s.end_points) {
    if (e.name == "Logits") logits = e.multiply_adds;
  }
  EXPECT_EQ(logits, 1024 * 1001);
  EXPECT_EQ(s.multiply_adds - logits, 567716352);

  const struct {
    const char* name;
    int64_t millions;
  } v2[] = {{"mobilenet_v2", 300}, {"mobilenet_v2_140", 582},
            {"mobilenet_v2_035", 59}};
  for (const auto& c : v2) {
    auto net = CreateNet(c.name, NetOptions().num_classes(1001));
    const double macs = SummarizeNet(*net, 224).multiply_adds / 1e6;
    EXPECT_NEAR(macs, c.millions, 0.5 + 0.01 * c.millions) << c.name;
  }
}

TEST(NetSummaryTest, TableListsEveryEndPointAndTotals) {
  auto net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  NetSummary s = SummarizeNet(*net, 28);
  const std::string table = s.ToString();
  // conv1: 5x5x1x32 weights + 32 biases; 28*28 outputs of 800 MACs each.
  EXPECT_NE(table.find("conv1"), std::string::npos) << table;
  EXPECT_NE(table.find("[1, 32, 28, 28]"), std::string::npos) << table;
  EXPECT_NE(table.find("832"), std::string::npos) << table;
  EXPECT_NE(table.find("627,200"), std::string::npos) << table;
  EXPECT_NE(table.find("total"), std::string::npos) << table;
  EXPECT_EQ(s.end_points.front().name, "conv1");
  EXPECT_EQ(s.end_points.front().parameters, 832);
  EXPECT_EQ(s.end_points.front().multiply_adds, 627200);
}

TEST(NetSummaryTest, SizesTheNetCannotTakeAreClearErrors) {
  auto net = CreateNet("inception_v3", NetOptions().num_classes(10));
  try {
    SummarizeNet(*net, 64);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("at least 75x75"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace slimtorch
