#include "slimtorch/train/metrics.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "slimtorch/core/error.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// Four examples of three classes: argmax 0, 1, 2, 1; the second-highest
// class 1, 2, 0, 0.
torch::Tensor FourLogits() {
  return torch::tensor({{3.0f, 1.0f, 0.0f},
                        {0.0f, 2.0f, 1.0f},
                        {1.0f, 0.0f, 5.0f},
                        {4.0f, 4.5f, 0.0f}});
}

TEST(MetricsTest, AccuracyCountsArgmaxHitsOverEveryBatch) {
  Accuracy accuracy;
  EXPECT_EQ(accuracy.name(), "Accuracy");
  accuracy.Update(FourLogits(), torch::tensor({0, 2, 2, 1}));
  EXPECT_EQ(accuracy.count(), 4);
  EXPECT_DOUBLE_EQ(accuracy.Value(), 3.0 / 4);  // the second misses
  accuracy.Update(torch::tensor({{0.0f, 0.0f, 1.0f}}), torch::tensor({0}));
  EXPECT_DOUBLE_EQ(accuracy.Value(), 3.0 / 5);
  accuracy.Reset();
  EXPECT_EQ(accuracy.count(), 0);
  EXPECT_ERROR_CONTAINS(accuracy.Value(), "Accuracy has counted no examples");
}

TEST(MetricsTest, RecallAtKCountsLabelsAmongTheKHighest) {
  const torch::Tensor labels = torch::tensor({1, 0, 0, 2});
  RecallAtK top1(1), top2(2), top3(3);
  top1.Update(FourLogits(), labels);
  top2.Update(FourLogits(), labels);
  top3.Update(FourLogits(), labels);
  EXPECT_EQ(top2.name(), "Recall_2");
  EXPECT_DOUBLE_EQ(top1.Value(), 0.0);      // no argmax is its label
  EXPECT_DOUBLE_EQ(top2.Value(), 2.0 / 4);  // examples 0 and 2
  EXPECT_DOUBLE_EQ(top3.Value(), 1.0);      // every class is in the top 3
  RecallAtK top4(4);
  EXPECT_ERROR_CONTAINS(top4.Update(FourLogits(), labels),
                        "Recall_4: the logits have 3 classes, fewer than 4");
  EXPECT_ERROR_CONTAINS(RecallAtK(0), "k >= 1");
}

// Mixed targets count as their larger share's class.
TEST(MetricsTest, SoftTargetsCountAsTheirArgmax) {
  Accuracy accuracy;
  accuracy.Update(FourLogits(), torch::tensor({{0.7f, 0.3f, 0.0f},
                                               {0.0f, 0.4f, 0.6f},
                                               {0.1f, 0.0f, 0.9f},
                                               {0.2f, 0.8f, 0.0f}}));
  EXPECT_DOUBLE_EQ(accuracy.Value(), 3.0 / 4);
}

TEST(MetricsTest, BadShapesNameTheMetric) {
  Accuracy accuracy;
  EXPECT_ERROR_CONTAINS(accuracy.Update(torch::zeros({4}), torch::zeros({4})),
                        "Accuracy: expected logits [batch, classes]");
  EXPECT_ERROR_CONTAINS(accuracy.Update(FourLogits(), torch::tensor({0, 1})),
                        "Accuracy: 2 labels for 4 examples");
}

TEST(MetricsTest, MakeMetricsSkipsThoseTheNetHasTooFewClassesFor) {
  const std::vector<MetricFactory> factories = ClassifierMetrics();
  std::vector<std::unique_ptr<Metric>> three =
      MakeMetrics(factories, 3, "eval/");
  ASSERT_EQ(three.size(), 1u);
  EXPECT_EQ(three[0]->name(), "Accuracy");
  std::vector<std::unique_ptr<Metric>> five = MakeMetrics(factories, 5, "");
  ASSERT_EQ(five.size(), 2u);
  EXPECT_EQ(five[1]->name(), "Recall_5");

  MetricFactory wrong = AccuracyMetric();
  wrong.name = "Precision";
  EXPECT_ERROR_CONTAINS(MakeMetrics({wrong}, 3, ""),
                        "the metric factory 'Precision' made 'Accuracy'");
}

}  // namespace
}  // namespace slimtorch
