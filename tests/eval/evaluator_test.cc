#include "slimtorch/eval/evaluator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "io/event_test_util.h"
#include "io/io_test_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/proto/event.pb.h"
#include "slimtorch/io/tfrecord.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// A 3-class dataset of 28x28x1 images, registered for this test only.
DatasetSpec TinySpec() {
  DatasetSpec s;
  s.name = "evaluator_test_tiny";
  s.splits_to_sizes = {{"test", 23}};
  s.num_classes = 3;
  s.file_pattern = "tiny_%s.tfrecord";
  s.image_height = 28;
  s.image_width = 28;
  s.image_channels = 1;
  return s;
}
SLIM_REGISTER_DATASET("evaluator_test_tiny", TinySpec);

// The tiny split in `dir` (23 images; image k has all pixels 10 + k and
// label kLabels[k % 4]) and a random lenet checkpoint of it (global step
// 77); `net` holds its weights, `options` evaluate it.
constexpr int64_t kLabels[4] = {0, 1, 2, 2};

struct TinyEval {
  std::shared_ptr<Net> net;
  EvalOptions options;
};

TinyEval MakeTinyEval(const testing::TempDir& dir, uint64_t seed) {
  testing::WriteTinyImageRecords(dir.Join("tiny_test.tfrecord"), 23, 10,
                                 {std::begin(kLabels), std::end(kLabels)}, 28,
                                 28, 1);
  torch::manual_seed(seed);
  TinyEval t;
  t.net = CreateNet("lenet", NetOptions().num_classes(3).input_channels(1));
  CheckpointData ckpt;
  ckpt.tensors = t.net->ModelVariables();
  ckpt.tensors.push_back({"global_step", torch::tensor(int64_t{77})});
  SaveCheckpoint(dir.Join("model.safetensors"), ckpt);
  t.net->module().eval();
  t.options.checkpoint_path = dir.Join("model.safetensors");
  t.options.eval_dir = dir.Join("eval");
  t.options.dataset_name = "evaluator_test_tiny";
  t.options.dataset_dir = dir.path();
  t.options.model_name = "lenet";
  t.options.batch_size = 5;  // 23 = 4 full batches + 3: no wrap-around
  t.options.num_preprocessing_threads = 2;
  return t;
}

// Image k as the net sees it: lenet preprocessing maps v to (v - 128) / 128.
torch::Tensor TinyImage(int64_t k) {
  return torch::full({1, 1, 28, 28}, (10.0 + k - 128.0) / 128.0);
}

TEST(EvaluatorTest, OnePassAccuracyMatchesTheNetAndSkipsRecall5) {
  testing::TempDir dir;
  TinyEval t = MakeTinyEval(dir, 5);
  // Expected accuracy computed directly.
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (int k = 0; k < 23; ++k) {
    correct += t.net->Forward(TinyImage(k)).logits.argmax(1).item<int64_t>() ==
               kLabels[k % 4];
  }
  EvalOptions& o = t.options;
  EvalResult r = Evaluate(o);
  EXPECT_EQ(r.global_step, 77);
  EXPECT_EQ(r.num_examples, 23);
  EXPECT_DOUBLE_EQ(r.accuracy, correct / 23.0);
  EXPECT_FALSE(r.recall_5.has_value());  // 3 classes < 5
  EXPECT_FALSE(Glob(dir.Join("eval/events.out.tfevents.*")).empty());

  o.max_num_batches = 2;
  EXPECT_EQ(Evaluate(o).num_examples, 10);
}

// A metric of one's own: the share of examples labelled `label`, which
// needs no net to compute.
class LabelShare : public MeanOverExamples {
 public:
  std::string name() const override { return "LabelShare_2"; }

 protected:
  double Hits(const torch::Tensor&,
              const torch::Tensor& labels) const override {
    return static_cast<double>(labels.eq(2).sum().item<int64_t>());
  }
};

// EvalOptions::metrics chooses what the pass computes: each one's value is
// in the result, in order, and in the event file as eval/<name>; one the
// net has too few classes for is skipped.
TEST(EvaluatorTest, ComputesTheMetricsItIsGiven) {
  testing::TempDir dir;
  TinyEval t = MakeTinyEval(dir, 5);
  const double accuracy = Evaluate(t.options).accuracy;
  t.options.eval_dir = dir.Join("mine");
  t.options.metrics = {
      {"LabelShare_2", 1, [] { return std::make_unique<LabelShare>(); }},
      RecallAtKMetric(4),
      RecallAtKMetric(3),
      AccuracyMetric()};
  const EvalResult r = Evaluate(t.options);
  ASSERT_EQ(r.metrics.size(), 3u);
  EXPECT_EQ(r.metrics[0].first, "LabelShare_2");
  // Labels 0, 1, 2, 2 repeat over 23 images: 11 of them are 2.
  EXPECT_DOUBLE_EQ(r.metrics[0].second, 11.0 / 23);
  EXPECT_EQ(r.metrics[1].first, "Recall_3");
  EXPECT_DOUBLE_EQ(r.metrics[1].second, 1.0);  // 3 classes: always
  EXPECT_EQ(r.metrics[2].first, "Accuracy");
  EXPECT_DOUBLE_EQ(r.accuracy, accuracy);
  EXPECT_FALSE(r.MetricValue("Recall_4").has_value());

  const std::vector<std::string> files =
      Glob(dir.Join("mine/events.out.tfevents.*"));
  ASSERT_EQ(files.size(), 1u);
  std::map<std::string, float> scalars;
  for (const auto& [key, value] : testing_io::ReadSummaryValues(files[0])) {
    EXPECT_EQ(key.second, 77) << key.first;
    scalars[key.first] = value.simple_value();
  }
  EXPECT_EQ(scalars.size(), 3u);
  EXPECT_FLOAT_EQ(scalars["eval/LabelShare_2"], 11.0f / 23);
  EXPECT_FLOAT_EQ(scalars["eval/Recall_3"], 1.0f);
  EXPECT_FLOAT_EQ(scalars["eval/Accuracy"], static_cast<float>(accuracy));
}

// The evaluator's phases one at a time: set-up resolves the input (the
// net's default image size), Restore loads the checkpoint's weights, each
// Step counts one batch until the pass has them all (here 2 of 5), and a
// batch of one's own counts as the pass's next examples.
TEST(EvaluatorTest, PhasesRunOneAtATime) {
  testing::TempDir dir;
  TinyEval t = MakeTinyEval(dir, 5);
  t.options.max_num_batches = 2;
  Evaluator evaluator(t.options);
  EXPECT_EQ(evaluator.input_options().image_size, 28);
  EXPECT_FALSE(evaluator.input_options().training);
  evaluator.Restore();
  EXPECT_TRUE(torch::equal(evaluator.net().ModelVariables().front().tensor,
                           t.net->ModelVariables().front().tensor));
  evaluator.Start();
  EXPECT_TRUE(evaluator.Step());
  EXPECT_TRUE(evaluator.Step());
  EXPECT_FALSE(evaluator.Step());
  Batch batch;
  batch.images = torch::cat({TinyImage(0), TinyImage(1)});
  batch.labels = torch::tensor({kLabels[0], kLabels[1]});
  evaluator.EvaluateBatch(batch);
  const EvalResult r = evaluator.Finish();
  EXPECT_EQ(r.global_step, 77);
  EXPECT_EQ(r.num_examples, 12);
}

// --predictions_file: one CSV line per example, in record order, holding the
// softmax of the net's logits on that example (computed here directly).
TEST(EvaluatorTest, PredictionsFileHoldsEveryExamplesProbabilities) {
  testing::TempDir dir;
  TinyEval t = MakeTinyEval(dir, 6);
  EvalOptions& o = t.options;
  o.predictions_file = dir.Join("out/predictions.csv");
  const EvalResult r = Evaluate(o);

  std::istringstream lines(ReadFileToString(o.predictions_file));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "index,label,prediction,p_0,p_1,p_2");
  torch::NoGradGuard no_grad;
  int64_t k = 0;
  int64_t right = 0;
  for (; std::getline(lines, line); ++k) {
    SCOPED_TRACE(line);
    int64_t index = -1, label = -1, prediction = -1;
    float p[3] = {0, 0, 0};
    ASSERT_EQ(std::sscanf(line.c_str(), "%ld,%ld,%ld,%f,%f,%f", &index, &label,
                          &prediction, &p[0], &p[1], &p[2]),
              6);
    EXPECT_EQ(index, k);
    EXPECT_EQ(label, kLabels[k % 4]);
    const torch::Tensor want =
        torch::softmax(t.net->Forward(TinyImage(k)).logits, 1)[0];
    EXPECT_EQ(prediction, want.argmax().item<int64_t>());
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(p[c], want[c].item<float>(), 1e-6) << "class " << c;
    }
    right += prediction == label;
  }
  EXPECT_EQ(k, 23);
  EXPECT_DOUBLE_EQ(r.accuracy, right / 23.0);

  // A directory for a file fails before the pass; a failed evaluation
  // (no checkpoint) leaves no predictions file.
  o.predictions_file = dir.path();
  EXPECT_ERROR_CONTAINS(Evaluate(o), "--predictions_file '" + dir.path(),
                        "is a directory");
  o.predictions_file = dir.Join("never.csv");
  o.checkpoint_path = dir.Join("missing.safetensors");
  EXPECT_THROW(Evaluate(o), Error);
  EXPECT_FALSE(PathExists(o.predictions_file));
}

// The accuracy of lenet with the variables of `net` on the tiny split.
double TinyAccuracy(Net& net) {
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (int k = 0; k < 23; ++k) {
    correct += net.Forward(TinyImage(k)).logits.argmax(1).item<int64_t>() ==
               kLabels[k % 4];
  }
  return correct / 23.0;
}

// The evaluation loop against a "training run" played by its own callback:
// checkpoints written while an evaluation runs are skipped except the
// latest, one rotated away before it could be read is skipped with the loop
// going on, and the loop ends after --timeout without a new one.
TEST(EvaluatorTest, LoopEvaluatesEachNewLatestCheckpointUntilTimeout) {
  testing::TempDir dir;
  TinyEval t = MakeTinyEval(dir, 7);
  CheckpointManager manager(dir.Join("train"), /*max_to_keep=*/2);
  // Checkpoint of step `step`: a lenet seeded by the step.
  std::map<int64_t, double> accuracy;
  auto save = [&](int64_t step) {
    torch::manual_seed(1000 + step);
    auto net =
        CreateNet("lenet", NetOptions().num_classes(3).input_channels(1));
    net->module().eval();
    accuracy[step] = TinyAccuracy(*net);
    CheckpointData ckpt;
    ckpt.tensors = net->ModelVariables();
    ckpt.tensors.push_back({"global_step", torch::tensor(step)});
    return manager.Save(step, ckpt);
  };
  save(1);
  EvalOptions o = t.options;
  o.checkpoint_path = dir.Join("train");
  EvalLoopOptions loop;
  loop.eval_interval_secs = 0.05;
  loop.poll_secs = 0.05;
  loop.timeout_secs = 1.0;
  std::vector<EvalResult> seen;
  const EvalLoopResult r = EvaluationLoop(o, loop, [&](const EvalResult& e) {
    seen.push_back(e);
    if (e.global_step == 1) {
      save(2);
      save(3);  // 1 rotates away; 2 is never the latest while the loop looks
    } else if (e.global_step == 3) {
      // The index names step 5, whose file is gone when the loop reads it
      // (training rotated it away in between).
      const std::string five = save(5);
      ASSERT_TRUE(std::filesystem::remove(five));
    }
  });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].global_step, 1);
  EXPECT_EQ(seen[1].global_step, 3);
  EXPECT_DOUBLE_EQ(seen[0].accuracy, accuracy[1]);
  EXPECT_DOUBLE_EQ(seen[1].accuracy, accuracy[3]);
  EXPECT_EQ(r.evaluations, 2);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.stopped);

  // max_number_of_evaluations ends it after one; a stop request ends the
  // waiting at once.
  loop.max_number_of_evaluations = 1;
  loop.timeout_secs = 0;  // forever, but for the limit
  save(6);
  int calls = 0;
  EXPECT_EQ(
      EvaluationLoop(o, loop, [&](const EvalResult&) { ++calls; }).evaluations,
      1);
  EXPECT_EQ(calls, 1);
  std::atomic<bool> stop{true};
  loop.stop_requested = &stop;
  EXPECT_TRUE(EvaluationLoop(o, loop, [](const EvalResult&) {}).stopped);

  // A checkpoint that is there but bad is an error, not a skip; a file for
  // the directory is refused.
  loop.stop_requested = nullptr;
  WriteFileAtomically(save(7), "not a checkpoint");
  EXPECT_THROW(EvaluationLoop(o, loop, [](const EvalResult&) {}), Error);
  o.checkpoint_path = t.options.checkpoint_path;
  EXPECT_ERROR_CONTAINS(EvaluationLoop(o, loop, [](const EvalResult&) {}),
                        "is not a directory");
}

// The user's eval without --model_name (inception_v3, the
// default) of a lenet checkpoint: a short error naming the checkpoint's
// net, suggesting no flag eval_image_classifier lacks.
TEST(EvaluatorTest, WrongModelNameSaysWhichNetTheCheckpointHolds) {
  testing::TempDir dir;
  TinyEval t = MakeTinyEval(dir, 8);
  EvalOptions& o = t.options;
  o.model_name = EvalOptions().model_name;
  ASSERT_EQ(o.model_name, "inception_v3");
  std::string msg;
  try {
    Evaluate(o);
    FAIL() << "evaluated lenet's checkpoint as inception_v3";
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_LE(std::count(msg.begin(), msg.end(), '\n'), 4) << msg;
  EXPECT_NE(msg.find("does not fit --model_name=inception_v3: it looks like a "
                     "checkpoint of lenet (its variables are under LeNet/)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Check --model_name (--model_name=lenet builds that "
                     "net) and --checkpoint_path."),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("--checkpoint_exclude_scopes"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("--ignore_missing_vars"), std::string::npos) << msg;
}

// mobilenet_v1_025 on the tiny split (1 channel, 3 classes) with its
// batch-norm statistics as `set` leaves them, saved at global step 200.
EvalResult EvaluateMobilenet(const testing::TempDir& dir,
                             const std::function<void(Net&)>& set) {
  TinyEval t = MakeTinyEval(dir, 9);
  torch::manual_seed(9);
  auto net = CreateNet("mobilenet_v1_025",
                       NetOptions().num_classes(3).input_channels(1));
  set(*net);
  CheckpointData ckpt;
  ckpt.tensors = net->ModelVariables();
  ckpt.tensors.push_back({"global_step", torch::tensor(int64_t{200})});
  SaveCheckpoint(dir.Join("mobilenet.safetensors"), ckpt);
  EvalOptions o = t.options;
  o.checkpoint_path = dir.Join("mobilenet.safetensors");
  o.model_name = "mobilenet_v1_025";
  o.image_size = 64;
  return Evaluate(o);
}

// 200 steps from scratch leave the moving statistics (decay
// 0.9997) at their start values: eval says so, why and what to do.
TEST(EvaluatorTest, WarnsWhenBatchNormStatisticsAreAtTheirStart) {
  testing::TempDir dir;
  const EvalResult fresh = EvaluateMobilenet(dir, [](Net&) {});
  const std::string& w = fresh.batch_norm_warning;
  EXPECT_EQ(std::count(w.begin(), w.end(), '\n'), 0) << w;
  for (const char* part :
       {"batch-norm moving statistics have barely moved from their start "
        "values",
        "in 27 of 27 layers", "decay 0.9997", "~3333 steps",
        "this checkpoint is at step 200", "--max_number_of_steps",
        "--checkpoint_path"}) {
    EXPECT_NE(w.find(part), std::string::npos) << part << "\n" << w;
  }
  EXPECT_EQ(w.find("batch_norm_decay"), std::string::npos) << w;

  // Statistics of data (a training pass whose moving averages take the
  // batch's statistics whole, as a long run's do): no warning.
  const EvalResult trained = EvaluateMobilenet(dir, [](Net& net) {
    for (const auto& m : net.module().modules()) {
      if (auto* bn = dynamic_cast<nets::BatchNormImpl*>(m.get())) {
        bn->options.decay(0.0);
      }
    }
    net.module().train();
    torch::NoGradGuard no_grad;
    net.Forward(torch::rand({16, 1, 64, 64}) * 2 - 1);
    net.module().eval();
  });
  EXPECT_EQ(trained.batch_norm_warning, "");
  // A net without batch norm: never.
  EXPECT_EQ(Evaluate(MakeTinyEval(dir, 10).options).batch_norm_warning, "");
}

// Logits weights of 0: every example gets the biases' softmax.
void ZeroLogitsWeights(Net& net) {
  torch::NoGradGuard no_grad;
  for (NamedTensor& v : net.ModelVariables()) {
    if (v.name.find("Logits/Conv2d_1c_1x1/weights") != std::string::npos ||
        v.name == "LeNet/fc4/weights") {
      v.tensor.zero_();
    }
  }
}

// The same scores for every example are said (here: logits that ignore
// their input, and moving statistics 70% of the way to the data's, so no
// start warning), with the share of the data's statistics moving averages
// of decay 0.9997 hold at the checkpoint's step (200: 6%).
TEST(EvaluatorTest, WarnsWhenEveryExampleGetsTheSameScores) {
  testing::TempDir dir;
  const EvalResult r = EvaluateMobilenet(dir, [](Net& net) {
    for (const auto& m : net.module().modules()) {
      if (auto* bn = dynamic_cast<nets::BatchNormImpl*>(m.get())) {
        bn->options.decay(0.3);  // 70% data, 30% start values
      }
    }
    net.module().train();
    torch::NoGradGuard no_grad;
    net.Forward(torch::rand({16, 1, 64, 64}) * 2 - 1);
    net.module().eval();
    ZeroLogitsWeights(net);
  });
  EXPECT_EQ(r.batch_norm_warning, "");
  const std::string& w = r.predictions_warning;
  EXPECT_EQ(std::count(w.begin(), w.end(), '\n'), 0) << w;
  for (const char* part :
       {"all 23 examples got nearly the same scores",
        "hold only 6% of the data's statistics at step 200",
        "1/(1-decay) = 3333 steps", "--max_number_of_steps"}) {
    EXPECT_NE(w.find(part), std::string::npos) << part << "\n" << w;
  }
  // Without batch norm the training run is what to check.
  TinyEval t = MakeTinyEval(dir, 11);
  ZeroLogitsWeights(*t.net);
  CheckpointData ckpt;
  ckpt.tensors = t.net->ModelVariables();
  SaveCheckpoint(t.options.checkpoint_path, ckpt);
  const std::string lenet = Evaluate(t.options).predictions_warning;
  EXPECT_NE(lenet.find("Check the training run"), std::string::npos) << lenet;
  // A net whose output follows its input: none.
  EXPECT_EQ(Evaluate(MakeTinyEval(dir, 12).options).predictions_warning, "");
}

}  // namespace
}  // namespace slimtorch
