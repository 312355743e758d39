#include "slimtorch/train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/event_test_util.h"
#include "io/io_test_util.h"
#include "slimtorch/core/error.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/datasets/dataset.h"
#include "slimtorch/eval/evaluator.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/event_writer.h"
#include "slimtorch/io/example.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/io/proto/event.pb.h"
#include "slimtorch/io/tf_checkpoint.h"
#include "slimtorch/io/tfrecord.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/nets/quantize.h"
#include "slimtorch/train/loss.h"
#include "slimtorch/train/train_hooks.h"
#include "slimtorch/train/variables.h"
#include "test_util.h"

namespace slimtorch {
namespace {

// 48 CIFAR-shaped images of noise, 10 classes, registered for this test.
DatasetSpec NoiseSpec() {
  DatasetSpec s;
  s.name = "trainer_test_noise";
  s.splits_to_sizes = {{"train", 48}, {"test", 48}};
  s.num_classes = 10;
  s.file_pattern = "noise_%s.tfrecord";
  s.image_height = 32;
  s.image_width = 32;
  s.image_channels = 3;
  return s;
}
SLIM_REGISTER_DATASET("trainer_test_noise", NoiseSpec);

void WriteNoiseRecords(const std::string& path, int n, unsigned seed) {
  TFRecordWriter writer(path);
  std::mt19937 rng(seed);
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> px(32 * 32 * 3);
    for (auto& p : px) p = static_cast<uint8_t>(rng() % 256);
    ImageExample ex;
    ex.encoded = EncodePng(px.data(), 32, 32, 3);
    ex.format = "png";
    ex.label = i % 10;
    ex.height = 32;
    ex.width = 32;
    writer.Write(EncodeImageExample(ex));
  }
  writer.Close();
}

// Both splits of trainer_test_noise in `dir`.
void WriteNoiseSplits(const testing::TempDir& dir) {
  WriteNoiseRecords(dir.Join("noise_train.tfrecord"), 48, 1);
  WriteNoiseRecords(dir.Join("noise_test.tfrecord"), 48, 2);
}

// cifarnet_tutorial has no dropout: with the same seed a step on any device
// sees the same initial weights, batches and augmentation.
TrainOptions TutorialOptions(const testing::TempDir& dir,
                             const std::string& name) {
  TrainOptions o;
  o.train_dir = dir.Join(name);
  o.dataset_name = "trainer_test_noise";
  o.dataset_dir = dir.path();
  o.model_name = "cifarnet_tutorial";
  o.batch_size = 16;
  o.weight_decay = 0;
  o.optimizer = "sgd";
  o.learning_rate_decay_type = "fixed";
  o.learning_rate.learning_rate = 0.1;
  o.max_number_of_steps = 6;
  o.log_every_n_steps = 100;
  o.save_interval_secs = 1e9;
  o.save_summaries_secs = 1e9;
  o.moving_average_decay = 0.9;
  o.seed = 3;
  o.num_preprocessing_threads = 2;
  return o;
}

std::map<std::string, torch::Tensor> Floats(const CheckpointData& c) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& t : c.tensors) {
    if (t.tensor.scalar_type() == torch::kFloat) out[t.name] = t.tensor;
  }
  return out;
}

// Trains `o` to `stop` steps, then on in the same train_dir to
// o.max_number_of_steps: the second run's result.
TrainResult TrainInTwoRuns(TrainOptions o, int64_t stop) {
  const int64_t steps = o.max_number_of_steps;
  o.max_number_of_steps = stop;
  Train(o);
  o.max_number_of_steps = steps;
  return Train(o);
}

// Every float tensor of checkpoint `got` equals `want`'s.
void ExpectSameFloats(const std::map<std::string, torch::Tensor>& want,
                      const std::string& got_path) {
  const auto got = Floats(LoadCheckpoint(got_path));
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    EXPECT_TRUE(torch::equal(got.at(name), t)) << name << " after resume";
  }
}

// The variables a run of `o` starts from.
std::map<std::string, torch::Tensor> InitialVariables(const TrainOptions& o) {
  torch::manual_seed(o.seed);
  auto net = CreateNet(o.model_name, NetOptions().num_classes(10));
  std::map<std::string, torch::Tensor> out;
  for (const auto& v : net->ModelVariables()) out[v.name] = v.tensor.detach();
  return out;
}

// For every variable (and its moving average) of `init`, how far the
// change training made in b is from the change in a, relative to a's:
// the worst ratio. Fails the test on a variable that did not train.
double WorstChangeRatio(const std::map<std::string, torch::Tensor>& init,
                        const TrainResult& a, const TrainResult& b,
                        std::string* worst_name) {
  const auto va = Floats(LoadCheckpoint(a.checkpoint));
  const auto vb = Floats(LoadCheckpoint(b.checkpoint));
  double worst = 0;
  int compared = 0;
  for (const auto& [name, ta] : va) {
    std::string var = name;
    const std::string ema = "/ExponentialMovingAverage";
    if (var.size() > ema.size() &&
        var.compare(var.size() - ema.size(), ema.size(), ema) == 0) {
      var.resize(var.size() - ema.size());
    }
    if (!init.count(var) || !vb.count(name)) continue;
    const torch::Tensor da = ta - init.at(var);
    const torch::Tensor db = vb.at(name) - init.at(var);
    const double change = da.norm().item<double>();
    EXPECT_GT(change, 0) << name << " did not train";
    const double ratio = (db - da).norm().item<double>() / (change + 1e-12);
    if (ratio > worst) {
      worst = ratio;
      *worst_name = name;
    }
    ++compared;
  }
  EXPECT_EQ(compared, 2 * static_cast<int>(init.size()));
  return worst;
}

// --accumulate_gradients=2 with batches of 8 is one batch of 16: the same
// examples (the stream does not depend on the batch size), the mean loss,
// one update per step, the same learning rate schedule (its epochs count
// updates), the same moving averages; cifarnet_tutorial has neither batch
// norm nor dropout, so the weights agree within float32 rounding.
TEST(TrainerTest, AccumulatedMicroBatchesEqualOneLargeBatch) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions large = TutorialOptions(dir, "large");
  large.optimizer = "momentum";
  large.learning_rate_decay_type = "exponential";
  large.learning_rate.num_epochs_per_decay = 0.5;  // 24 examples: a step
  large.learning_rate.learning_rate_decay_factor = 0.5;
  large.max_number_of_steps = 4;
  TrainOptions micro = large;
  micro.train_dir = dir.Join("micro");
  micro.batch_size = 8;
  micro.accumulate_gradients = 2;
  const TrainResult a = Train(large);
  const TrainResult b = Train(micro);
  EXPECT_EQ(a.global_step, 4);
  EXPECT_EQ(b.global_step, 4);
  EXPECT_NEAR(a.last_loss, b.last_loss, 1e-5 * std::abs(a.last_loss));
  const auto va = Floats(LoadCheckpoint(a.checkpoint));
  const auto vb = Floats(LoadCheckpoint(b.checkpoint));
  ASSERT_EQ(va.size(), vb.size());
  int compared = 0;
  for (const auto& [name, ta] : va) {
    ASSERT_TRUE(vb.count(name)) << name;
    EXPECT_LE((ta - vb.at(name)).abs().max().item<double>(), 1e-6) << name;
    ++compared;
  }
  EXPECT_GT(compared, 10);
  // Both read 4 x 16 examples of the stream.
  const CheckpointData ca = LoadCheckpoint(a.checkpoint);
  const CheckpointData cb = LoadCheckpoint(b.checkpoint);
  for (const auto& t : ca.tensors) {
    if (t.tensor.scalar_type() == torch::kFloat) continue;
    const auto it =
        std::find_if(cb.tensors.begin(), cb.tensors.end(),
                     [&](const NamedTensor& u) { return u.name == t.name; });
    ASSERT_NE(it, cb.tensors.end()) << t.name;
    if (t.name.find("rng") != std::string::npos) continue;  // generator state
    EXPECT_TRUE(torch::equal(t.tensor, it->tensor)) << t.name;
  }
}

// Resume stays exact with the modern recipe flags on (accumulation,
// mixup and cutmix with label smoothing, a warm-up then cosine,
// RandAugment, random erasing and repeated augmentation): 2 + 2 steps
// equal 4, byte for byte.
TEST(TrainerTest, ModernRecipeFlagsResumeExactly) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions whole = TutorialOptions(dir, "whole");
  whole.batch_size = 8;
  whole.accumulate_gradients = 3;
  whole.max_number_of_steps = 4;
  whole.mix.mixup_alpha = 0.4;
  whole.mix.cutmix_alpha = 1.0;
  whole.label_smoothing = 0.1;
  whole.learning_rate_decay_type = "cosine";
  whole.learning_rate.num_epochs_per_decay = 1.0;
  whole.learning_rate.warmup_epochs = 0.5;  // one step of 24 examples
  whole.learning_rate.warmup_learning_rate = 0.01;
  whole.auto_augment = "rand-m9-n2";
  whole.random_erase = 0.5;
  // 5 copies: the split resumes at position 48, mid-block.
  whole.repeat.repeats = 5;
  TrainOptions split = whole;
  split.train_dir = dir.Join("split");
  const TrainResult b = TrainInTwoRuns(split, 2);
  const auto va = Floats(LoadCheckpoint(Train(whole).checkpoint));
  ExpectSameFloats(va, b.checkpoint);
  // The mixing, the augmentation and the repeats took part: without any
  // of them the weights differ.
  TrainOptions unmixed = whole;
  unmixed.train_dir = dir.Join("unmixed");
  unmixed.mix = MixOptions();
  const auto vc = Floats(LoadCheckpoint(Train(unmixed).checkpoint));
  EXPECT_FALSE(torch::equal(va.begin()->second, vc.at(va.begin()->first)));
  TrainOptions plain = whole;
  plain.train_dir = dir.Join("plain");
  plain.auto_augment = "";
  plain.random_erase = 0;
  const auto vd = Floats(LoadCheckpoint(Train(plain).checkpoint));
  EXPECT_FALSE(torch::equal(va.begin()->second, vd.at(va.begin()->first)));
  TrainOptions unrepeated = whole;
  unrepeated.train_dir = dir.Join("unrepeated");
  unrepeated.repeat = ExampleRepeat();
  const auto ve = Floats(LoadCheckpoint(Train(unrepeated).checkpoint));
  EXPECT_FALSE(torch::equal(va.begin()->second, ve.at(va.begin()->first)));
}

// Repeats of 0 are refused, and the device-side draws (whose order is the
// permutations') with repeats, naming the flags.
TEST(TrainerTest, RepeatedAugmentationRefusesZeroAndDeviceDraws) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  for (int variant = 0; variant < 2; ++variant) {
    TrainOptions o = TutorialOptions(dir, "repeat" + std::to_string(variant));
    o.repeat.repeats = variant == 0 ? 0 : 2;
    if (variant == 1) o.augmentation_draws = AugmentationDraws::kDevice;
    const std::string want = variant == 0
                                 ? "--repeated_augmentation must be >= 1"
                                 : "--augmentation_draws=device with "
                                   "--repeated_augmentation";
    try {
      Train(o);
      FAIL() << "trained with variant " << variant;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos)
          << e.what();
    }
  }
}

TEST(TrainerTest, AccumulateGradientsRefusesZero) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions o = TutorialOptions(dir, "zero");
  o.accumulate_gradients = 0;
  try {
    Train(o);
    FAIL() << "trained with --accumulate_gradients=0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--accumulate_gradients must be >= 1"),
              std::string::npos)
        << e.what();
  }
}

// --data_format=channels_last trains as NCHW does (cifarnet_tutorial has no
// batch norm, so float32 rounding stays small), writes the same checkpoint
// layout, and resumes exactly: 3 + 3 steps equal 6.
TEST(TrainerTest, ChannelsLastTrainsAndResumesLikeNchw) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions nchw = TutorialOptions(dir, "nchw");
  nchw.optimizer = "momentum";
  nchw.data_format = DataFormat::kChannelsFirst;
  TrainOptions cl = nchw;
  cl.train_dir = dir.Join("cl");
  cl.data_format = DataFormat::kChannelsLast;
  const TrainResult a = Train(nchw);
  const TrainResult b = Train(cl);
  std::string worst_name;
  EXPECT_LE(WorstChangeRatio(InitialVariables(nchw), a, b, &worst_name), 1e-4)
      << worst_name;
  const CheckpointData cb = LoadCheckpoint(b.checkpoint);
  for (const auto& t : cb.tensors) {
    if (t.name == "cifarnet_tutorial/conv1/weights") {
      EXPECT_EQ(t.tensor.sizes(), (std::vector<int64_t>{64, 3, 5, 5}));
    }
  }

  TrainOptions resumed = cl;
  resumed.train_dir = dir.Join("cl_resumed");
  ExpectSameFloats(Floats(cb), TrainInTwoRuns(resumed, 3).checkpoint);
}

// nasnet_cifar trains with drop path from step 1 (keep below 1:
// the schedule reads the global step the trainer sets) and the aux head's
// loss: a finite loss, and 2 + 2 steps resumed from the
// checkpoint (global step and RNG state restored) equal 4 in one run.
TEST(TrainerTest, NasnetCifarResumesExactlyWithDropPath) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions a = TutorialOptions(dir, "nasnet");
  a.model_name = "nasnet_cifar";
  a.batch_size = 4;
  a.max_number_of_steps = 4;
  a.learning_rate.learning_rate = 0.01;
  a.moving_average_decay = 0;
  const TrainResult ra = Train(a);
  EXPECT_TRUE(std::isfinite(ra.last_loss));

  TrainOptions b = a;
  b.train_dir = dir.Join("nasnet_resumed");
  b.max_number_of_steps = 2;
  Train(b);
  b.max_number_of_steps = 4;
  const TrainResult rb = Train(b);
  const auto want = Floats(LoadCheckpoint(ra.checkpoint));
  const auto got = Floats(LoadCheckpoint(rb.checkpoint));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_GT(want.count("aux_11/aux_logits/FC/weights"), 0u);
  for (const auto& [name, t] : want) {
    EXPECT_TRUE(torch::equal(got.at(name), t)) << name << " after resume";
  }
}

// The trainer draws from its own CPU generator (initial weights, dropout):
// the caller's draws between its phases change nothing of the run, and the
// caller's sequence goes on as if no training had run.
TEST(TrainerTest, DrawsFromItsOwnGenerator) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions a = TutorialOptions(dir, "own_rng");
  a.model_name = "cifarnet";  // dropout, keep 0.5
  a.batch_size = 4;
  a.max_number_of_steps = 3;
  a.learning_rate.learning_rate = 0.01;
  a.moving_average_decay = 0;
  torch::manual_seed(11);
  const torch::Tensor caller = torch::rand({8});
  torch::manual_seed(11);
  const TrainResult ra = Train(a);
  EXPECT_TRUE(torch::equal(torch::rand({8}), caller))
      << "training moved the caller's generator";

  TrainOptions b = a;
  b.train_dir = dir.Join("own_rng_with_draws");
  Trainer trainer(b);
  torch::rand({1000});  // the caller's own draws, between the phases
  trainer.Restore();
  trainer.Start();
  StepStats stats;
  while (!trainer.Done()) {
    ASSERT_TRUE(trainer.RunStep(&stats));
    torch::rand({1000});
  }
  const auto want = Floats(LoadCheckpoint(ra.checkpoint));
  const auto got = Floats(LoadCheckpoint(trainer.Save()));
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    EXPECT_TRUE(torch::equal(got.at(name), t)) << name;
  }
}

// A captured step would freeze drop path's schedule at the step it was
// captured at: refused before anything else (the device included), while
// the NASNets without drop path (keep 1) are not.
TEST(TrainerTest, CudaGraphRefusesAScheduledDropPath) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions o = TutorialOptions(dir, "nasnet");
  o.cuda_graph = true;
  for (const char* name : {"nasnet_cifar", "nasnet_large", "pnasnet_large"}) {
    o.model_name = name;
    EXPECT_ERROR_CONTAINS(Train(o), "its drop path");
  }
  o.model_name = "pnasnet_mobile";
  EXPECT_ERROR_CONTAINS(Train(o), "--cuda_graph needs a CUDA device");
}

// The same for an 8-bit net: its fake quantization and batch norm freeze
// start at a global step, which a captured step would never see change.
TEST(TrainerTest, CudaGraphRefusesQuantizationDelays) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions o = TutorialOptions(dir, "quantized");
  o.cuda_graph = true;
  o.quantize = nets::QuantizeOptions();
  EXPECT_ERROR_CONTAINS(Train(o), "--cuda_graph with --quantize_delay");
}

// --precision=bf16 on the CPU: the forward pass in bfloat16, the variables
// float32 (a checkpoint of float32 tensors), and training takes nearly the
// steps float32 takes: the loss within 2%, every variable's change within
// 25% of float32's over 6 steps (the first convolution's is the farthest,
// 17%: its input images are rounded to bfloat16's 8 bits of mantissa).
TEST(TrainerTest, Bf16TrainsCloseToFloat32) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions fp32 = TutorialOptions(dir, "fp32");
  TrainOptions bf16 = fp32;
  bf16.train_dir = dir.Join("bf16");
  bf16.precision = Precision::kBFloat16;
  const TrainResult a = Train(fp32);
  const TrainResult b = Train(bf16);
  EXPECT_NEAR(b.last_loss, a.last_loss, 0.02 * std::abs(a.last_loss));
  std::string worst_name;
  const double worst =
      WorstChangeRatio(InitialVariables(fp32), a, b, &worst_name);
  EXPECT_LE(worst, 0.25) << worst_name;
  EXPECT_GT(worst, 1e-5) << "bf16 took float32's steps exactly: not in effect";
  for (const auto& t : LoadCheckpoint(b.checkpoint).tensors) {
    if (t.tensor.is_floating_point()) {
      EXPECT_EQ(t.tensor.scalar_type(), torch::kFloat) << t.name;
    }
  }
  TrainOptions fp16 = fp32;
  fp16.precision = Precision::kFloat16;
  try {
    Train(fp16);
    FAIL() << "fp16 accepted on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--precision=bf16"), std::string::npos)
        << e.what();
  }
}

// --input_mode=synthetic reads no record: training runs on a fixed random
// batch (here in a dataset folder without any file).
TrainOptions SyntheticOptions(const testing::TempDir& dir,
                              const std::string& name) {
  TrainOptions o = TutorialOptions(dir, name);
  o.dataset_name = "cifar10";
  o.dataset_dir = dir.Join("empty");
  o.input_mode = InputMode::kSynthetic;
  return o;
}

TEST(TrainerTest, SyntheticInputTrainsWithoutRecords) {
  testing::TempDir dir;
  TrainOptions o = SyntheticOptions(dir, "synthetic");
  o.max_number_of_steps = 3;
  TrainResult r = Train(o);
  EXPECT_EQ(r.global_step, 3);
  EXPECT_TRUE(std::isfinite(r.last_loss));
  // Evaluation has no synthetic input; --cuda_graph needs a GPU.
  o.train_dir = dir.Join("graph");
  o.cuda_graph = true;
  try {
    Train(o);
    FAIL() << "--cuda_graph accepted on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--cuda_graph needs a CUDA device"),
              std::string::npos)
        << e.what();
  }
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

// --profile_steps: a trace of exactly the steps asked for (each one a
// train_step scope, which Kineto mirrors on the GPU's timeline), cut at the
// last step run when training ends inside the range; on a GPU with the device's
// kernels, captured steps included.
TEST(TrainerTest, ProfileStepsTracesTheStepsAskedFor) {
  testing::TempDir dir;
  TrainOptions o = SyntheticOptions(dir, "profiled");
  o.max_number_of_steps = 5;
  o.profile_steps = ParseProfileSteps("2,3");
  ASSERT_TRUE(ProfilerAvailable());
  const std::string step =
      "\"cat\": \"user_annotation\", \"name\": \"train_step\"";
  EXPECT_EQ(Train(o).global_step, 5);
  const std::string trace =
      ReadFileToString(o.train_dir + "/profile/steps_2-3.pt.trace.json");
  EXPECT_EQ(Occurrences(trace, step), 2);
  // Ends inside the range: steps 4-5 of 4-9.
  o.train_dir = dir.Join("cut");
  o.profile_steps = ParseProfileSteps("4,9");
  Train(o);
  EXPECT_EQ(Occurrences(ReadFileToString(o.train_dir +
                                         "/profile/steps_4-5.pt.trace.json"),
                        step),
            2);
  if (!torch::cuda::is_available()) return;
  o.train_dir = dir.Join("cuda");
  o.device = torch::Device(torch::kCUDA, 0);
  o.cuda_graph = true;
  o.max_number_of_steps = 9;
  o.profile_steps = ParseProfileSteps("7,8");  // replays
  Train(o);
  const std::string cuda =
      ReadFileToString(o.train_dir + "/profile/steps_7-8.pt.trace.json");
  EXPECT_EQ(Occurrences(cuda, step), 2);
  EXPECT_GT(Occurrences(cuda, "\"cat\": \"kernel\""), 20);
}

using testing::FullFloat32;

// The captured step (--cuda_graph) trains as the eager step does: the same
// variables, slots and moving averages after 12 steps (3 eager, then
// replays, with a learning rate that changes every step and momentum), on
// both input paths; and a loss that turns non-finite is reported at the same
// step as in eager mode, with no checkpoint written after it.
TEST(TrainerTest, CudaGraphStepEqualsTheEagerStep) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  FullFloat32 full_float32;
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  // momentum and adam (its beta powers on the device, copied back for the
  // checkpoint) on the in-memory input (its batches made inside the graph),
  // rmsprop on streamed records (each batch copied into the graph's input).
  for (const char* optimizer : {"momentum", "rmsprop", "adam"}) {
    TrainOptions eager =
        TutorialOptions(dir, std::string("eager_") + optimizer);
    eager.device = torch::Device(torch::kCUDA, 0);
    eager.optimizer = optimizer;
    eager.input_mode = std::string(optimizer) == "rmsprop"
                           ? InputMode::kStreaming
                           : InputMode::kInMemory;
    eager.learning_rate_decay_type = "exponential";
    eager.learning_rate.learning_rate = 0.05;
    eager.learning_rate.learning_rate_decay_factor = 0.5;
    eager.learning_rate.num_epochs_per_decay = 0.5;
    eager.max_number_of_steps = 12;
    eager.augmentation_draws =
        AugmentationDraws::kDevice;  // as the graph's (auto there)
    eager.log_every_n_steps = 5;
    eager.weight_decay = 0.004;
    TrainOptions graph = eager;
    graph.train_dir = dir.Join(std::string("graph_") + optimizer);
    graph.cuda_graph = true;
    TrainResult a = Train(eager);
    TrainResult b = Train(graph);
    EXPECT_EQ(b.global_step, 12);
    EXPECT_NEAR(b.last_loss, a.last_loss, 1e-4 * std::abs(a.last_loss))
        << optimizer;
    auto va = Floats(LoadCheckpoint(a.checkpoint));
    auto vb = Floats(LoadCheckpoint(b.checkpoint));
    ASSERT_EQ(va.size(), vb.size());
    for (const auto& [name, ta] : va) {
      ASSERT_TRUE(vb.count(name)) << name;
      EXPECT_LE((vb.at(name) - ta).abs().max().item<double>(),
                1e-4 * (1 + ta.abs().max().item<double>()))
          << optimizer << " " << name;
    }
  }
  // Blow up: a learning rate growing 10x a step (from 0.01) makes the loss
  // non-finite some steps after the eager warm-up; both modes stop at the
  // same step and write nothing.
  std::string messages[2];
  for (int graph : {0, 1}) {
    TrainOptions o =
        TutorialOptions(dir, std::string("nan_") + char('0' + graph));
    o.device = torch::Device(torch::kCUDA, 0);
    o.learning_rate_decay_type = "exponential";
    o.learning_rate.learning_rate = 0.01;
    o.learning_rate.learning_rate_decay_factor = 10;
    o.learning_rate.num_epochs_per_decay = 1.0 / 3;  // every step
    o.max_number_of_steps = 60;
    o.cuda_graph = graph == 1;
    try {
      Train(o);
      ADD_FAILURE() << "no error for a non-finite loss";
    } catch (const Error& e) {
      messages[graph] = e.what();
    }
    EXPECT_FALSE(CheckpointManager(o.train_dir, 5).Latest().has_value());
  }
  auto step_of = [](const std::string& m) {
    const size_t at = m.find("at global step ");
    return at == std::string::npos ? std::string("?")
                                   : m.substr(at, m.find(';', at) - at);
  };
  EXPECT_EQ(step_of(messages[1]), step_of(messages[0])) << messages[0] << "\n"
                                                        << messages[1];
  EXPECT_NE(messages[1].find("loss is"), std::string::npos) << messages[1];
}

// Records every step's total loss.
struct LossLog : TrainHook {
  std::vector<double> losses;
  void AfterStep(const StepStats& s) override { losses.push_back(s.loss); }
  std::string Joined() const {
    std::string out;
    char buf[32];
    for (double l : losses) {
      std::snprintf(buf, sizeof(buf), "%s%.7g", out.empty() ? "" : " ", l);
      out += buf;
    }
    return out;
  }
};

// Training on CUDA takes the same steps as on the CPU: for every variable
// and moving average, what training changed agrees within 1% (cuDNN and
// the CPU sum in different orders; TF32 is off here), and the checkpoint
// evaluates the same on both devices.
TEST(TrainerTest, CudaTrainsLikeTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  FullFloat32 full_float32;
  testing::TempDir dir;
  WriteNoiseSplits(dir);

  torch::manual_seed(3);
  auto net = CreateNet("cifarnet_tutorial", NetOptions().num_classes(10));
  std::map<std::string, torch::Tensor> init;
  for (const auto& v : net->ModelVariables()) init[v.name] = v.tensor.detach();

  for (const char* mode : {"in_memory", "streaming"}) {
    TrainOptions cpu = TutorialOptions(dir, std::string("cpu_") + mode);
    cpu.input_mode = ParseInputMode(mode, /*training=*/true);
    TrainOptions gpu = cpu;
    gpu.train_dir = dir.Join(std::string("gpu_") + mode);
    // The same draws as the CPU's.
    gpu.augmentation_draws = AugmentationDraws::kHost;
    gpu.device = torch::Device(torch::kCUDA, 0);
    // Every step's loss on both, shown with any failure below (where the two
    // runs part).
    LossLog cpu_losses, gpu_losses;
    cpu.hooks = {&cpu_losses};
    gpu.hooks = {&gpu_losses};
    TrainResult a = Train(cpu);
    TrainResult b = Train(gpu);
    SCOPED_TRACE(StrCat(mode, " losses by step, cpu: ", cpu_losses.Joined(),
                        "; gpu: ", gpu_losses.Joined()));
    EXPECT_EQ(b.global_step, 6);
    EXPECT_NEAR(b.last_loss, a.last_loss, 1e-3 * std::abs(a.last_loss)) << mode;

    auto va = Floats(LoadCheckpoint(a.checkpoint));
    auto vb = Floats(LoadCheckpoint(b.checkpoint));
    ASSERT_EQ(va.size(), vb.size()) << mode;
    int compared = 0;
    for (const auto& [name, ta] : va) {
      ASSERT_TRUE(vb.count(name)) << name;
      const torch::Tensor& tb = vb.at(name);
      ASSERT_TRUE(tb.device().is_cpu()) << name;
      std::string var = name;
      const std::string ema = "/ExponentialMovingAverage";
      if (var.size() > ema.size() &&
          var.compare(var.size() - ema.size(), ema.size(), ema) == 0) {
        var.resize(var.size() - ema.size());
      }
      if (!init.count(var)) continue;  // e.g. optimizer slots
      torch::Tensor da = ta - init.at(var);
      torch::Tensor db = tb - init.at(var);
      const double change = da.norm().item<double>();
      EXPECT_GT(change, 0) << mode << " " << name << " did not train";
      EXPECT_LE((db - da).norm().item<double>(), 0.01 * change + 1e-7)
          << mode << " " << name;
      ++compared;
    }
    EXPECT_EQ(compared, 2 * static_cast<int>(init.size())) << mode;

    EvalOptions e;
    e.checkpoint_path = b.checkpoint;
    e.eval_dir = dir.Join(std::string("eval_") + mode);
    e.dataset_name = "trainer_test_noise";
    e.dataset_dir = dir.path();
    e.model_name = "cifarnet_tutorial";
    e.batch_size = 20;
    e.moving_average_decay = 0.9;
    EvalResult on_cpu = Evaluate(e);
    e.device = torch::Device(torch::kCUDA, 0);
    EvalResult on_gpu = Evaluate(e);
    EXPECT_EQ(on_gpu.num_examples, 48);
    EXPECT_NEAR(on_gpu.accuracy, on_cpu.accuracy, 1.0 / 48 + 1e-9) << mode;
  }
}

// --checkpoint_format=tensorflow: the train_dir holds TensorFlow V2 bundles
// (TF-Slim's names, TensorFlow's layouts); 3 + 3 resumed steps equal 6 in
// safetensors exactly, slots and moving averages included; rotation removes
// both files of a bundle; evaluation reads the directory as it is.
TEST(TrainerTest, TensorFlowCheckpointFormatResumesExactly) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions a = TutorialOptions(dir, "safetensors");
  a.optimizer = "momentum";
  const TrainResult ra = Train(a);

  TrainOptions b = TutorialOptions(dir, "tensorflow");
  b.optimizer = "momentum";
  b.checkpoint_format = CheckpointFormat::kTensorFlow;
  b.max_checkpoints_to_keep = 1;
  b.max_number_of_steps = 3;
  Train(b);
  EXPECT_TRUE(PathExists(dir.Join("tensorflow/model.ckpt-3.index")));
  b.max_number_of_steps = 6;
  const TrainResult rb = Train(b);
  EXPECT_EQ(rb.checkpoint, dir.Join("tensorflow/model.ckpt-6"));
  EXPECT_FALSE(PathExists(dir.Join("tensorflow/model.ckpt-3.index")));
  EXPECT_TRUE(Glob(dir.Join("tensorflow/model.ckpt-3.*")).empty());

  const TfCheckpointReader reader(rb.checkpoint);
  // TensorFlow's layout on disk: the conv kernel is [kh, kw, in, out].
  EXPECT_EQ(reader.Find("cifarnet_tutorial/conv1/weights")->shape,
            (std::vector<int64_t>{5, 5, 3, 64}));
  EXPECT_NE(reader.Find("cifarnet_tutorial/conv1/weights/Momentum"), nullptr);
  EXPECT_NE(
      reader.Find("cifarnet_tutorial/conv1/weights/ExponentialMovingAverage"),
      nullptr);
  auto net = CreateNet("cifarnet_tutorial", NetOptions().num_classes(10));
  CheckpointData from_tf;
  from_tf.tensors = FromTfLayouts(reader.ReadAll(), *net);
  const auto want = Floats(LoadCheckpoint(ra.checkpoint));
  const auto got = Floats(from_tf);
  EXPECT_EQ(got.size(), want.size());
  for (const auto& kv : want) {
    auto it = got.find(kv.first);
    ASSERT_NE(it, got.end()) << kv.first;
    EXPECT_TRUE(torch::equal(it->second, kv.second)) << kv.first;
  }
  EXPECT_EQ(from_tf.Find("global_step").item<int64_t>(), 6);

  EvalOptions e;
  e.checkpoint_path = dir.Join("tensorflow");
  e.eval_dir = dir.Join("eval_tf");
  e.dataset_name = "trainer_test_noise";
  e.dataset_dir = dir.path();
  e.model_name = "cifarnet_tutorial";
  e.batch_size = 20;
  e.moving_average_decay = 0.9;
  const EvalResult on_tf = Evaluate(e);
  e.checkpoint_path = ra.checkpoint;
  const EvalResult on_safetensors = Evaluate(e);
  EXPECT_EQ(on_tf.global_step, 6);
  EXPECT_EQ(on_tf.accuracy, on_safetensors.accuracy);
}

// The trainer's seams: a hook sees every step and can raise the stop flag
// (training ends after that step with its checkpoint, stopped); a gradient
// exchange sits between backward and update (one that zeroes the gradients
// leaves sgd's weights as they were); --clip_gradient_norm bounds each
// variable's step (sgd, lr 1: the change of each variable has L2 norm <=
// the bound, and is not zero).
class StopAtStep : public TrainHook {
 public:
  StopAtStep(int64_t at, std::atomic<bool>* stop) : at_(at), stop_(stop) {}
  void AfterStep(const StepStats& s) override {
    steps.push_back(s.global_step);
    EXPECT_TRUE(std::isfinite(s.loss));
    EXPECT_EQ(s.examples, 16);
    if (s.global_step == at_) stop_->store(true);
  }
  void End(const StepStats& last) override { end = last.global_step; }
  std::vector<int64_t> steps;
  int64_t end = -1;

 private:
  int64_t at_;
  std::atomic<bool>* stop_;
};

class ZeroGradients : public GradientExchange {
 public:
  void Exchange(const NamedTensors& trainable) override {
    ++calls;
    for (const auto& v : trainable) v.tensor.grad().zero_();
  }
  int calls = 0;
};

TEST(TrainerTest, HooksStopSignalGradientExchangeAndClipping) {
  testing::TempDir dir;
  WriteNoiseRecords(dir.Join("noise_train.tfrecord"), 48, 1);
  std::atomic<bool> stop{false};
  StopAtStep hook(2, &stop);
  TrainOptions a = TutorialOptions(dir, "stop");
  a.moving_average_decay = 0;
  a.stop_requested = &stop;
  a.hooks = {&hook};
  const TrainResult ra = Train(a);
  EXPECT_TRUE(ra.stopped);
  EXPECT_EQ(ra.global_step, 2);
  EXPECT_EQ(hook.steps, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(hook.end, 2);
  EXPECT_EQ(LoadCheckpoint(ra.checkpoint).Find("global_step").item<int64_t>(),
            2);

  const auto initial = InitialVariables(a);
  ZeroGradients zero;
  TrainOptions b = TutorialOptions(dir, "exchange");
  b.moving_average_decay = 0;
  b.max_number_of_steps = 2;
  b.gradient_exchange = &zero;
  const auto after_zero = Floats(LoadCheckpoint(Train(b).checkpoint));
  EXPECT_EQ(zero.calls, 2);
  for (const auto& kv : initial) {
    // Only the L2 terms, added after the exchange, move the variables:
    // cifarnet_tutorial's own weight decay of 0.004 on local3 and local4.
    const bool decayed = kv.first.find("local3/weights") != std::string::npos ||
                         kv.first.find("local4/weights") != std::string::npos;
    if (decayed) {
      const double keep = (1 - 0.1 * 0.004) * (1 - 0.1 * 0.004);
      EXPECT_TRUE(torch::allclose(after_zero.at(kv.first), kv.second * keep,
                                  1e-6, 1e-8))
          << kv.first;
      EXPECT_FALSE(torch::equal(after_zero.at(kv.first), kv.second));
    } else {
      EXPECT_TRUE(torch::equal(after_zero.at(kv.first), kv.second)) << kv.first;
    }
  }

  TrainOptions c = TutorialOptions(dir, "clip");
  c.moving_average_decay = 0;
  c.max_number_of_steps = 1;
  c.learning_rate.learning_rate = 1.0;
  c.clip_gradient_norm = 1e-3;
  const auto after_clip = Floats(LoadCheckpoint(Train(c).checkpoint));
  int at_bound = 0;  // variables whose gradient was clipped
  for (const auto& kv : initial) {
    // Float rounding of w - g on weights ~0.1 adds ~1e-8 to the norm.
    const double moved =
        (after_clip.at(kv.first) - kv.second).norm().item<double>();
    EXPECT_GT(moved, 0) << kv.first;
    EXPECT_LE(moved, 1e-3 * (1 + 1e-4)) << kv.first;
    at_bound += moved > 1e-3 * (1 - 1e-4);
  }
  EXPECT_GT(at_bound, 0);
  c.clip_gradient_norm = -1;
  EXPECT_THROW(Train(c), Error);
}

// Shares made-up replica losses, as two replicas would (gradients kept).
class TwoReplicaLosses : public GradientExchange {
 public:
  void Exchange(const NamedTensors&) override {}
  void ShareLoss(const torch::Tensor& loss) override {
    shared.push_back(loss.item<double>());
  }
  std::vector<double> ReplicaLosses() const override { return {1.0, 3.0}; }
  std::vector<double> shared;
};

// The summaries of every save_summaries_secs (here every step) as TF-Slim
// writes them: scalars, the replicas' clone losses scaled by 1/N and
// total_loss as their mean + the L2 terms, a histogram per model variable
// (TensorFlow's buckets) and per end point with its sparsity.
TEST(TrainerTest, SummariesHoldHistogramsSparsityAndCloneLosses) {
  testing::TempDir dir;
  WriteNoiseRecords(dir.Join("noise_train.tfrecord"), 48, 1);
  TwoReplicaLosses exchange;
  TrainOptions o = TutorialOptions(dir, "summaries");
  o.moving_average_decay = 0;
  o.max_number_of_steps = 2;
  o.save_summaries_secs = 0;
  o.gradient_exchange = &exchange;
  const TrainResult r = Train(o);
  ASSERT_EQ(exchange.shared.size(), 2u);
  EXPECT_GT(exchange.shared[0], 0);

  const std::vector<std::string> files =
      Glob(JoinPath(o.train_dir, "events.out.tfevents.*"));
  ASSERT_EQ(files.size(), 1u);
  const testing_io::SummaryValues seen =
      testing_io::ReadSummaryValues(files[0]);
  torch::manual_seed(o.seed);
  auto net = CreateNet(o.model_name, NetOptions().num_classes(10));
  for (int64_t step : {1, 2}) {
    SCOPED_TRACE(step);
    const auto at = [&](const std::string& tag) -> const proto::SummaryValue& {
      auto it = seen.find({tag, step});
      static const proto::SummaryValue kMissing;
      EXPECT_TRUE(it != seen.end()) << tag;
      return it == seen.end() ? kMissing : it->second;
    };
    EXPECT_FLOAT_EQ(at("Losses/clone_0/clone_loss").simple_value(), 0.5f);
    EXPECT_FLOAT_EQ(at("Losses/clone_1/clone_loss").simple_value(), 1.5f);
    EXPECT_FLOAT_EQ(at("total_loss").simple_value(),
                    2.0f + at("regularization_loss").simple_value());
    EXPECT_FLOAT_EQ(at("learning_rate").simple_value(), 0.1f);
    for (const auto& v : net->ModelVariables()) {
      const proto::SummaryValue& h = at(v.name);
      EXPECT_TRUE(h.has_histo()) << v.name;
      EXPECT_EQ(h.histo().num(), v.tensor.numel()) << v.name;
    }
    // The net's end points as its forward pass names them.
    const NetOutput out = net->Forward(torch::zeros({1, 3, 24, 24}));
    ASSERT_FALSE(out.end_points.empty());
    for (const auto& [name, t] : out.end_points) {
      const proto::SummaryValue& h = at("activations/" + name);
      EXPECT_TRUE(h.has_histo()) << name;
      // 16 examples of the step.
      EXPECT_EQ(h.histo().num(), 16 * t.numel() / t.size(0)) << name;
      const float sparsity = at("sparsity/" + name).simple_value();
      EXPECT_GE(sparsity, 0.0f);
      EXPECT_LE(sparsity, 1.0f);
    }
  }
  // The weights' histogram at the end is that of the final checkpoint's.
  const CheckpointData ckpt = LoadCheckpoint(r.checkpoint);
  const NamedTensor first = net->ModelVariables().front();
  const Histogram want = MakeHistogram(ckpt.Find(first.name), first.name);
  const auto& got = seen.at({first.name, 2}).histo();
  EXPECT_EQ(got.sum(), want.sum);
  EXPECT_EQ(std::vector<double>(got.bucket().begin(), got.bucket().end()),
            want.bucket);
}

// A train_dir of mobilenet_v1_050 resumed as mobilenet_v1_025 is
// a short error naming the net the checkpoint holds and the flags to check
// (--model_name, a new --train_dir), not the scope flags of a warm start.
TEST(TrainerTest, ResumingAnotherWidthSaysWhichNetTheTrainDirHolds) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions o = TutorialOptions(dir, "run");
  o.model_name = "mobilenet_v1_050";
  o.image_size = 32;
  o.moving_average_decay = 0;
  o.max_number_of_steps = 1;
  Train(o);
  o.model_name = "mobilenet_v1_025";
  o.max_number_of_steps = 2;
  std::string msg;
  try {
    Train(o);
    FAIL() << "resumed another width";
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_LE(std::count(msg.begin(), msg.end(), '\n'), 4) << msg;
  EXPECT_NE(msg.find("in --train_dir does not fit --model_name="
                     "mobilenet_v1_025: it looks like a checkpoint of "
                     "mobilenet_v1_050, but --model_name=mobilenet_v1_025 "
                     "builds another variant of MobilenetV1/"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("or train in a new --train_dir"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("--checkpoint_exclude_scopes"), std::string::npos) << msg;
}

// A dataset of one class (or with an empty split) would train a constant
// loss: refused before any step, naming the dataset and its labels. Here a
// described one (dataset_description.txt, as written by hand).
TEST(TrainerTest, RefusesOneClassAndEmptySplits) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  WriteFileAtomically(dir.Join("labels.txt"), "0:cats\n");
  WriteFileAtomically(dir.Join(kDatasetDescriptionFilename),
                      "name: image_folder\n"
                      "file_pattern: noise_%s.tfrecord\n"
                      "num_classes: 1\n"
                      "split: train 48\n"
                      "split: empty 0\n");
  TrainOptions o = TutorialOptions(dir, "one");
  o.dataset_name = "image_folder";
  EXPECT_ERROR_CONTAINS(Train(o), "dataset 'image_folder' has 1 class",
                        "labels file " + dir.Join("labels.txt") + ": 0:cats",
                        "a classifier needs at least 2 classes",
                        "Give each class its own sub-folder");
  o.split_name = "empty";
  EXPECT_ERROR_CONTAINS(Train(o),
                        "split 'empty' of dataset 'image_folder' has 0 "
                        "examples (" +
                            dir.Join(kDatasetDescriptionFilename) + ")");
  std::remove(dir.Join(kDatasetDescriptionFilename).c_str());
  // --labels_offset can leave one class of ten.
  o.dataset_name = "trainer_test_noise";
  o.split_name = "train";
  o.labels_offset = 9;
  EXPECT_ERROR_CONTAINS(Train(o), "has 10 classes (1 after --labels_offset=9)");
  EXPECT_FALSE(PathExists(dir.Join("one/checkpoint")));
}

// Records the steps the trainer shows its hooks; asks to stop before
// `stop_at`.
class StepRecorder : public TrainHook {
 public:
  void BeforeStep(StepPlan* plan) override {
    before.push_back(plan->global_step);
    if (plan->global_step == stop_at) plan->stop = true;
  }
  void AfterStep(const StepStats& s) override {
    after.push_back(s.global_step);
  }
  std::vector<int64_t> before, after;
  int64_t stop_at = -1;
};

// Asks for the outputs of every second step and keeps what it gets.
class OutputRecorder : public TrainHook {
 public:
  void BeforeStep(StepPlan* plan) override {
    plan->keep_outputs = plan->global_step % 2 == 0;
  }
  void AfterStep(const StepStats& s) override { steps.push_back(s); }
  std::vector<StepStats> steps;
};

// A hook that asks for a step's outputs gets the logits and labels its loss
// was computed from (their cross entropy is the step's, cifarnet_tutorial
// having no auxiliary head), and only on the steps it asked.
TEST(TrainerTest, HooksGetTheOutputsTheyAskFor) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  OutputRecorder recorder;
  TrainOptions o = TutorialOptions(dir, "outputs");
  o.max_number_of_steps = 4;
  o.hooks = {&recorder};
  Train(o);
  ASSERT_EQ(recorder.steps.size(), 4u);
  for (const StepStats& s : recorder.steps) {
    if (s.global_step % 2 != 0) {
      EXPECT_FALSE(s.logits.defined()) << s.global_step;
      EXPECT_FALSE(s.labels.defined()) << s.global_step;
      continue;
    }
    ASSERT_TRUE(s.logits.defined()) << s.global_step;
    EXPECT_EQ(s.logits.sizes().vec(), (std::vector<int64_t>{16, 10}));
    EXPECT_EQ(s.labels.sizes().vec(), (std::vector<int64_t>{16}));
    EXPECT_FALSE(s.logits.requires_grad());
    const double ce =
        SoftmaxCrossEntropy(s.logits.to(torch::kFloat32), s.labels, 0.0)
            .item<double>();
    EXPECT_NEAR(ce, s.cross_entropy, 1e-6) << s.global_step;
  }
}

// Keeps what every step gives it and writes one scalar of its own per step
// to the summary writer the trainer shares.
class SharedWriterHook : public TrainHook {
 public:
  void Begin(const HookContext& context) override {
    events = context.summaries;
  }
  void AfterStep(const StepStats& s) override {
    steps.push_back(s);
    if (events != nullptr)
      events->AddScalar("mine/step", s.global_step, s.global_step);
  }
  EventWriter* events = nullptr;
  std::vector<StepStats> steps;
};

// --summarize_train_metrics: on every summary step, train/Accuracy and
// train/Recall_5 of the step's logits and labels (as a hook sees them,
// computed here directly), in the run's one event file beside TF-Slim's
// summaries and a hook's own scalars.
TEST(TrainerTest, TrainMetricsAndHooksShareTheSummaryWriter) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  SharedWriterHook hook;
  TrainOptions o = TutorialOptions(dir, "metrics");
  o.max_number_of_steps = 3;
  o.save_summaries_secs = 0;
  o.train_metrics = ClassifierMetrics();
  o.hooks = {&hook};
  Train(o);
  ASSERT_NE(hook.events, nullptr);
  ASSERT_EQ(hook.steps.size(), 3u);

  const std::vector<std::string> files =
      Glob(JoinPath(o.train_dir, "events.out.tfevents.*"));
  ASSERT_EQ(files.size(), 1u);
  const testing_io::SummaryValues seen =
      testing_io::ReadSummaryValues(files[0]);
  for (const StepStats& s : hook.steps) {
    SCOPED_TRACE(s.global_step);
    ASSERT_TRUE(s.logits.defined());
    const torch::Tensor top5 = std::get<1>(s.logits.topk(5, 1));
    const double accuracy = s.logits.argmax(1)
                                .eq(s.labels)
                                .to(torch::kDouble)
                                .mean()
                                .item<double>();
    const double recall5 = top5.eq(s.labels.unsqueeze(1))
                               .any(1)
                               .to(torch::kDouble)
                               .mean()
                               .item<double>();
    const int64_t step = s.global_step;
    const auto at = [&](const std::string& tag) {
      const auto it = seen.find(std::make_pair(tag, step));
      return it == seen.end() ? -1.0f : it->second.simple_value();
    };
    EXPECT_FLOAT_EQ(at("train/Accuracy"), accuracy);
    EXPECT_FLOAT_EQ(at("train/Recall_5"), recall5);
    EXPECT_NE(at("total_loss"), -1.0f);
    EXPECT_FLOAT_EQ(at("mine/step"), step);
  }
}

// The public trainer's phases one at a time: set-up resolves the input
// (the net's default image size), Restore starts at step 0 without a
// checkpoint, an eager Step on a batch of one's own trains (and runs no
// hook), Start + RunStep run the hooks before and after the step, a hook's
// stop runs nothing, and Save writes the state of the last step.
TEST(TrainerTest, PhasesRunOneAtATime) {
  testing::TempDir dir;
  WriteNoiseRecords(dir.Join("noise_train.tfrecord"), 48, 1);
  StepRecorder recorder;
  TrainOptions o = TutorialOptions(dir, "phases");
  o.hooks = {&recorder};
  Trainer trainer(o);
  const int64_t size = trainer.input_options().image_size;
  EXPECT_EQ(size, trainer.net().default_image_size());
  ASSERT_FALSE(trainer.trainable_variables().empty());
  trainer.Restore();
  EXPECT_EQ(trainer.global_step(), 0);

  Batch batch;
  batch.images = torch::rand({16, 3, size, size}) * 2 - 1;
  batch.labels = torch::arange(16, torch::kInt64).remainder(10);
  batch.end_position = 16;
  const torch::Tensor before =
      trainer.trainable_variables().front().tensor.detach().clone();
  const StepStats s = trainer.Step(batch, /*summarize=*/true);
  EXPECT_EQ(s.global_step, 1);
  EXPECT_EQ(trainer.global_step(), 1);
  EXPECT_TRUE(std::isfinite(s.loss));
  EXPECT_FALSE(s.end_points.empty());
  EXPECT_FALSE(
      torch::equal(before, trainer.trainable_variables().front().tensor));
  EXPECT_TRUE(recorder.before.empty());

  trainer.Start();
  StepStats t;
  ASSERT_TRUE(trainer.RunStep(&t));
  EXPECT_EQ(t.global_step, 2);
  EXPECT_TRUE(t.end_points.empty());
  EXPECT_EQ(recorder.before, (std::vector<int64_t>{2}));
  EXPECT_EQ(recorder.after, (std::vector<int64_t>{2}));
  recorder.stop_at = 3;
  EXPECT_FALSE(trainer.RunStep(&t));
  EXPECT_EQ(trainer.global_step(), 2);
  EXPECT_EQ(recorder.before, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(recorder.after, (std::vector<int64_t>{2}));

  const CheckpointData saved = LoadCheckpoint(trainer.Save());
  EXPECT_EQ(saved.Find("global_step").item<int64_t>(), 2);
}

// ------------------------------------------------------- storage faults

// The message of the slimtorch::Error that training with `o` throws.
std::string TrainError(const TrainOptions& o) {
  try {
    Train(o);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "training into " << o.train_dir << " did not fail";
  return "";
}

void ExpectContains(const std::string& message,
                    const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message: " << message << "\nmissing: " << part;
  }
}

// No temporary file and no file of a checkpoint after `last_step`.
void ExpectOnlyWholeCheckpoints(const std::string& dir, int64_t last_step) {
  for (const std::string& name : testing::ListDir(dir)) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
    if (name.rfind("model.ckpt-", 0) != 0) continue;
    EXPECT_LE(std::stoll(name.substr(11)), last_step) << name;
  }
  EXPECT_EQ(LatestCheckpoint(dir),
            JoinPath(dir, StrCat("model.ckpt-", last_step, ".safetensors")));
}

// A save that fails (the disk full) stops training: the error names the
// file, the step and the last good checkpoint; the index still names that
// one and nothing partial is left; the same run then resumes from it and
// ends byte for byte as an uninterrupted run.
TEST(TrainerTest, FailedSaveStopsCleanlyAndTheSameRunResumes) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  const TrainResult want = Train(TutorialOptions(dir, "reference"));
  TrainOptions o = TutorialOptions(dir, "full");
  o.save_interval_secs = 0;
  const std::string ckpt = JoinPath(o.train_dir, "model.ckpt-");
  {
    testing::ScopedFileFaults faults("write:" + ckpt +
                                     "4.safetensors:99:ENOSPC");
    ExpectContains(TrainError(o),
                   {"cannot save the checkpoint of global step 4",
                    "'" + ckpt + "4.safetensors'", std::strerror(ENOSPC),
                    "training stopped at global step 4",
                    "the last good checkpoint is " + ckpt + "3.safetensors",
                    "the same command resumes from it"});
  }
  ExpectOnlyWholeCheckpoints(o.train_dir, 3);
  const TrainResult r = Train(o);
  EXPECT_EQ(r.global_step, 6);
  EXPECT_EQ(ReadFileToString(r.checkpoint), ReadFileToString(want.checkpoint));
}

// Calls `fn` after step `at` (after the trainer's own hooks: its save).
class AfterStepHook : public TrainHook {
 public:
  AfterStepHook(int64_t at, std::function<void()> fn)
      : at_(at), fn_(std::move(fn)) {}
  void AfterStep(const StepStats& s) override {
    if (s.global_step == at_) fn_();
  }

 private:
  int64_t at_;
  std::function<void()> fn_;
};

// train_dir removed during the run: the next save stops training and the
// directory is not created again; train_dir made read-only: the next
// file stops it.
TEST(TrainerTest, VanishedOrReadOnlyTrainDirStopsTraining) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions o = TutorialOptions(dir, "vanished");
  o.save_interval_secs = 0;
  AfterStepHook remove(3, [&] { testing::RemoveTree(o.train_dir); });
  o.hooks = {&remove};
  ExpectContains(TrainError(o),
                 {"cannot save the checkpoint of global step 4",
                  "checkpoint directory '" + o.train_dir + "' no longer exists",
                  "training stopped at global step 4"});
  EXPECT_FALSE(PathExists(o.train_dir));

  TrainOptions ro = TutorialOptions(dir, "read_only");
  ro.save_interval_secs = 0;
  std::unique_ptr<testing::ScopedFileFaults> faults;
  AfterStepHook read_only(2, [&] {
    faults = std::make_unique<testing::ScopedFileFaults>(
        "open:" + ro.train_dir + "/*:0:EROFS");
  });
  ro.hooks = {&read_only};
  ExpectContains(
      TrainError(ro),
      {"'" + JoinPath(ro.train_dir, "model.ckpt-3.safetensors") + "'",
       std::strerror(EROFS), "training stopped at global step 3",
       "the last good checkpoint is " +
           JoinPath(ro.train_dir, "model.ckpt-2.safetensors")});
  faults.reset();
  ExpectOnlyWholeCheckpoints(ro.train_dir, 2);
}

// An event file that cannot be written stops training too, naming it; the
// file keeps whole records only.
TEST(TrainerTest, FailedEventFileStopsTraining) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions o = TutorialOptions(dir, "events");
  o.save_interval_secs = 0;
  o.save_summaries_secs = 0;
  testing::ScopedFileFaults faults("write:*/events.out.tfevents.*:100000:EIO");
  const std::string e = TrainError(o);
  ExpectContains(
      e, {"error writing event file '" + o.train_dir + "/events.out.tfevents.",
          std::strerror(EIO), "training stopped at global step"});
  const std::vector<std::string> events =
      Glob(JoinPath(o.train_dir, "events.out.tfevents.*"));
  ASSERT_EQ(events.size(), 1u);
  TFRecordReader reader(events[0]);
  std::string record;
  int records = 0;
  while (reader.Read(&record)) ++records;  // throws on a partial record
  EXPECT_GE(records, 1);                   // the version record at least
}

// A latest checkpoint damaged after it was written (a bit flipped): resuming
// refuses it, naming it and the exact way back to the one before; once it is
// removed, training resumes from that one and ends as an uninterrupted run.
TEST(TrainerTest, DamagedLatestCheckpointNamesTheWayBack) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  const TrainResult want = Train(TutorialOptions(dir, "reference"));
  TrainOptions o = TutorialOptions(dir, "damaged");
  o.save_interval_secs = 0;
  o.max_number_of_steps = 4;
  Train(o);
  const std::string ckpt3 = JoinPath(o.train_dir, "model.ckpt-3.safetensors");
  const std::string ckpt4 = JoinPath(o.train_dir, "model.ckpt-4.safetensors");
  std::string bytes = ReadFileToString(ckpt4);
  bytes[bytes.size() / 2] ^= 0x10;
  WriteFileAtomically(ckpt4, bytes);
  o.max_number_of_steps = 6;
  ExpectContains(
      TrainError(o),
      {"cannot resume from the latest checkpoint '" + ckpt4 + "'", "is damaged",
       "To resume from the checkpoint before it, '" + ckpt3 + "', remove '" +
           ckpt4 + "' and run again"});
  std::remove(ckpt4.c_str());
  const TrainResult r = Train(o);
  EXPECT_EQ(r.global_step, 6);
  EXPECT_EQ(ReadFileToString(r.checkpoint), ReadFileToString(want.checkpoint));
}

// The same in --checkpoint_format=tensorflow: a bit flipped in the latest
// bundle's data file fails its tensor's CRC-32C; the error names the bundle
// and its two files to remove, and training then resumes from the one before.
TEST(TrainerTest, DamagedLatestTensorFlowCheckpointNamesTheWayBack) {
  testing::TempDir dir;
  WriteNoiseSplits(dir);
  TrainOptions o = TutorialOptions(dir, "damaged_tf");
  o.checkpoint_format = CheckpointFormat::kTensorFlow;
  o.save_interval_secs = 0;
  o.max_number_of_steps = 4;
  Train(o);
  const std::string ckpt3 = JoinPath(o.train_dir, "model.ckpt-3");
  const std::string ckpt4 = JoinPath(o.train_dir, "model.ckpt-4");
  const std::vector<std::string> data4 = Glob(ckpt4 + ".data-*");
  ASSERT_EQ(data4.size(), 1u);
  std::string bytes = ReadFileToString(data4[0]);
  bytes[bytes.size() / 2] ^= 0x10;
  WriteFileAtomically(data4[0], bytes);
  TrainOptions more = o;
  more.max_number_of_steps = 6;
  ExpectContains(
      TrainError(more),
      {"cannot resume from the latest checkpoint '" + ckpt4 + "'",
       "CRC mismatch for tensor",
       "To resume from the checkpoint before it, '" + ckpt3 + "', remove '" +
           ckpt4 + ".index' and '" + ckpt4 + ".data-*' and run again"});
  std::remove(data4[0].c_str());
  std::remove((ckpt4 + ".index").c_str());
  const TrainResult r = Train(more);
  EXPECT_EQ(r.global_step, 6);
  TrainOptions straight = TutorialOptions(dir, "straight_tf");
  straight.checkpoint_format = CheckpointFormat::kTensorFlow;
  straight.max_number_of_steps = 6;
  const TrainResult want = Train(straight);
  auto net = CreateNet("cifarnet_tutorial", NetOptions().num_classes(10));
  const auto read = [&](const std::string& prefix) {
    CheckpointData c;
    c.tensors = FromTfLayouts(TfCheckpointReader(prefix).ReadAll(), *net);
    return Floats(c);
  };
  const auto got = read(r.checkpoint);
  const auto expected = read(want.checkpoint);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& kv : expected) {
    auto it = got.find(kv.first);
    ASSERT_NE(it, got.end()) << kv.first;
    EXPECT_TRUE(torch::equal(it->second, kv.second)) << kv.first;
  }
}

}  // namespace
}  // namespace slimtorch
