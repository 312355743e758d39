#pragma once
// Streaming metrics of a classifier's outputs, TF's tf.metrics (an update
// per batch, a value over every batch since the start): the evaluator's
// eval/<name> summaries (eval/evaluator.h) and, through MetricHook
// (train/train_hooks.h), train/<name> of the training batches.
//
// A new metric is a Metric subclass and a MetricFactory that makes it;
// EvalOptions::metrics and MetricHook take the factories.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace slimtorch {

class Metric {
 public:
  virtual ~Metric() = default;
  // The summary tag's last part: eval writes "eval/<name>", MetricHook
  // "train/<name>".
  virtual std::string name() const = 0;
  // Counts a batch: `logits` [batch, classes] (any floating dtype, any
  // device); `labels` class ids [batch] or soft targets [batch, classes]
  // (mixup, cutmix: their argmax is the class counted).
  virtual void Update(const torch::Tensor& logits,
                      const torch::Tensor& labels) = 0;
  // The value over the examples counted since construction or Reset;
  // throws naming the metric when none were.
  virtual double Value() const = 0;
  // Examples counted since construction or Reset.
  virtual int64_t count() const = 0;
  virtual void Reset() = 0;
};

// How to make a metric, and the nets it applies to.
struct MetricFactory {
  // The made metric's name().
  std::string name;
  // Nets of fewer classes skip it (Recall_5: 5).
  int64_t min_classes = 1;
  std::function<std::unique_ptr<Metric>()> make;
};

// The mean over examples of a per-example score in [0, 1]; subclasses say
// what a batch scores (Hits).
class MeanOverExamples : public Metric {
 public:
  void Update(const torch::Tensor& logits,
              const torch::Tensor& labels) override;
  double Value() const override;
  int64_t count() const override { return count_; }
  void Reset() override;

 protected:
  // The sum of the batch's scores; `labels` are class ids [batch] (int64,
  // on the logits' device), `logits` float32.
  virtual double Hits(const torch::Tensor& logits,
                      const torch::Tensor& labels) const = 0;

 private:
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// slim.metrics.streaming_accuracy(argmax(logits), labels): "Accuracy".
class Accuracy : public MeanOverExamples {
 public:
  std::string name() const override { return "Accuracy"; }

 protected:
  double Hits(const torch::Tensor& logits,
              const torch::Tensor& labels) const override;
};

// slim.metrics.streaming_recall_at_k(logits, labels, k): the share of
// examples whose label is among the k highest logits (ties broken by
// torch::topk), "Recall_<k>". k >= 1.
class RecallAtK : public MeanOverExamples {
 public:
  explicit RecallAtK(int64_t k);
  std::string name() const override;

 protected:
  double Hits(const torch::Tensor& logits,
              const torch::Tensor& labels) const override;

 private:
  int64_t k_;
};

MetricFactory AccuracyMetric();
// Applies to nets of at least k classes.
MetricFactory RecallAtKMetric(int64_t k);
// TF-Slim's eval_image_classifier's: Accuracy, Recall_5.
std::vector<MetricFactory> ClassifierMetrics();

// The metrics of `factories` that apply to a net of `num_classes` classes,
// in order; logs "<prefix><name> skipped: the net has N classes (fewer
// than M)" for each that does not.
std::vector<std::unique_ptr<Metric>> MakeMetrics(
    const std::vector<MetricFactory>& factories, int64_t num_classes,
    const std::string& prefix);

}  // namespace slimtorch
