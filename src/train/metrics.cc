#include "slimtorch/train/metrics.h"

#include <glog/logging.h>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

// Class ids [batch] from class ids or soft targets [batch, classes].
torch::Tensor ClassIds(const torch::Tensor& labels,
                       const torch::Tensor& logits) {
  torch::Tensor ids = labels.dim() == 2 ? labels.argmax(1) : labels;
  return ids.to(logits.device(), torch::kLong);
}

}  // namespace

void MeanOverExamples::Update(const torch::Tensor& logits,
                              const torch::Tensor& labels) {
  SLIM_CHECK(logits.dim() == 2, name(),
             ": expected logits [batch, classes], got ", logits.sizes());
  SLIM_CHECK(labels.size(0) == logits.size(0), name(), ": ", labels.size(0),
             " labels for ", logits.size(0), " examples");
  torch::NoGradGuard no_grad;
  const torch::Tensor scores = logits.detach().to(torch::kFloat32);
  sum_ += Hits(scores, ClassIds(labels, scores));
  count_ += logits.size(0);
}

double MeanOverExamples::Value() const {
  SLIM_CHECK(count_ > 0, name(), " has counted no examples");
  return sum_ / static_cast<double>(count_);
}

void MeanOverExamples::Reset() {
  sum_ = 0.0;
  count_ = 0;
}

double Accuracy::Hits(const torch::Tensor& logits,
                      const torch::Tensor& labels) const {
  return static_cast<double>(logits.argmax(1).eq(labels).sum().item<int64_t>());
}

RecallAtK::RecallAtK(int64_t k) : k_(k) {
  SLIM_CHECK(k >= 1, "Recall_k needs k >= 1, got ", k);
}

std::string RecallAtK::name() const { return StrCat("Recall_", k_); }

double RecallAtK::Hits(const torch::Tensor& logits,
                       const torch::Tensor& labels) const {
  SLIM_CHECK(logits.size(1) >= k_, name(), ": the logits have ", logits.size(1),
             " classes, fewer than ", k_);
  const torch::Tensor top = std::get<1>(logits.topk(k_, 1));
  return static_cast<double>(
      top.eq(labels.unsqueeze(1)).any(1).sum().item<int64_t>());
}

MetricFactory AccuracyMetric() {
  return {"Accuracy", 1, [] { return std::make_unique<Accuracy>(); }};
}

MetricFactory RecallAtKMetric(int64_t k) {
  SLIM_CHECK(k >= 1, "Recall_k needs k >= 1, got ", k);
  return {StrCat("Recall_", k), k,
          [k] { return std::make_unique<RecallAtK>(k); }};
}

std::vector<MetricFactory> ClassifierMetrics() {
  return {AccuracyMetric(), RecallAtKMetric(5)};
}

std::vector<std::unique_ptr<Metric>> MakeMetrics(
    const std::vector<MetricFactory>& factories, int64_t num_classes,
    const std::string& prefix) {
  std::vector<std::unique_ptr<Metric>> metrics;
  for (const MetricFactory& f : factories) {
    if (num_classes < f.min_classes) {
      LOG(INFO) << prefix << f.name << " skipped: the net has " << num_classes
                << " classes (fewer than " << f.min_classes << ")";
      continue;
    }
    metrics.push_back(f.make());
    SLIM_CHECK(metrics.back() != nullptr && metrics.back()->name() == f.name,
               "the metric factory '", f.name, "' made ",
               metrics.back() ? "'" + metrics.back()->name() + "'"
                              : std::string("nothing"));
  }
  return metrics;
}

}  // namespace slimtorch
