// export_inference_graph's library side: every net of the zoo, exported with
// its checkpoint's weights, runs in onnxruntime with LibTorch's logits (where
// /opt/tfenv has onnx + onnxruntime); the flags' rules and bad input.
#include "slimtorch/export/export.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <string>

#include "export/python_engines.h"
#include "io/io_test_util.h"
#include "nets/zoo_input.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/export/graphdef_writer.h"
#include "slimtorch/export/onnx_writer.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/nets/net.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing::TempDir;

class OnnxZooTest : public ::testing::TestWithParam<std::string> {};

// The exported model in onnxruntime (after onnx.checker's full check) gives
// LibTorch's logits and predictions within 1e-4 of the largest, on a batch
// of 2 through the dynamic batch dimension.
TEST_P(OnnxZooTest, OnnxRuntimeGivesLibTorchsLogits) {
  SKIP_WITHOUT_ONNXRUNTIME();
  auto net = testing_export::ZooExportNet(GetParam());
  testing_export::ScrambleStatistics(*net, 5);
  net->module().eval();
  const int64_t s = testing_export::ZooExportSize(GetParam(), *net);
  TempDir dir;
  const std::string model = dir.Join("model.onnx");
  WriteOnnxModel(model, RecordInferenceGraph(*net, s, 1));
  torch::manual_seed(9);
  const torch::Tensor images =
      torch::rand(testing::ZooInputShape(*net, 2, s)) * 2 - 1;
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = net->Forward(images).logits;
  }
  std::map<std::string, torch::Tensor> out;
  ASSERT_NO_FATAL_FAILURE(
      testing_export::RunOnnxRuntime(model, images, dir, &out));
  const torch::Tensor got = out[testing_export::OutputName(*net, "Logits")];
  ASSERT_TRUE(got.defined())
      << "no output " << testing_export::OutputName(*net, "Logits");
  const double scale = logits.abs().max().item<double>();
  const double diff = (got - logits).abs().max().item<double>();
  std::printf("[ onnxruntime ] %-20s logits within %.2g of the largest\n",
              GetParam().c_str(), diff / scale);
  EXPECT_LE(diff, 1e-4 * scale);
  // Softmax moves no output by more than half the largest change of its
  // inputs (its Jacobian's infinity norm is max 2p(1-p) <= 1/2), plus its
  // own rounding: logits of ~100 (scrambled statistics) that differ by 1e-6
  // relative move the predictions by up to ~5e-5.
  EXPECT_LE((out[testing_export::OutputName(*net, "Predictions")] -
             torch::softmax(logits, -1))
                .abs()
                .max()
                .item<double>(),
            0.5 * diff + 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Zoo, OnnxZooTest,
                         ::testing::ValuesIn(GetNetRegistry().Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// A lenet checkpoint of ours for the flag tests: 10 classes, 1 channel (as
// trained on mnist).
std::string LenetCheckpoint(const TempDir& dir, std::shared_ptr<Net>* net) {
  *net = CreateNet("lenet", NetOptions().num_classes(10).input_channels(1));
  testing_export::ScrambleStatistics(**net, 1);
  CheckpointData data;
  data.tensors = (*net)->ModelVariables();
  data.tensors.push_back({"global_step", torch::tensor(int64_t{42})});
  const std::string path = dir.Join("model.ckpt-42.safetensors");
  SaveCheckpoint(path, data);
  return path;
}

// Options exporting lenet for mnist from `ckpt` to dir/<output>.
ExportOptions LenetOptions(const TempDir& dir, const std::string& ckpt,
                           const std::string& output) {
  ExportOptions o;
  o.model_name = "lenet";
  o.dataset_name = "mnist";
  o.checkpoint_path = ckpt;
  o.output_file = dir.Join(output);
  return o;
}

TEST(ExportTest, WritesTheCheckpointsNetForTheDataset) {
  TempDir dir;
  std::shared_ptr<Net> net;
  const std::string ckpt = LenetCheckpoint(dir, &net);
  ExportOptions o = LenetOptions(dir, ckpt, "lenet.onnx");
  const ExportResult r = ExportInferenceGraph(o);
  EXPECT_EQ(r.format, ExportFormat::kOnnx);
  EXPECT_EQ(r.checkpoint, ckpt);
  EXPECT_EQ(r.global_step, 42);
  EXPECT_EQ(r.num_classes, 10);
  EXPECT_EQ(r.image_size, 28);
  EXPECT_TRUE(PathExists(o.output_file));
  // The file is the graph of the checkpoint's weights.
  EXPECT_TRUE(ReadFileToString(o.output_file) ==
              OnnxModelBytes(RecordInferenceGraph(*net, 28, 0)));
  if (testing_export::HaveOnnxRuntime()) {
    const torch::Tensor images = torch::rand({3, 1, 28, 28});
    std::map<std::string, torch::Tensor> out;
    testing_export::RunOnnxRuntime(o.output_file, images, dir, &out);
    torch::NoGradGuard no_grad;
    net->module().eval();
    const torch::Tensor want = net->Forward(images).logits;
    EXPECT_LE((out["LeNet/Logits"] - want).abs().max().item<double>(),
              1e-4 * want.abs().max().item<double>());
  }
  // The directory's latest checkpoint, by the same rules as eval.
  WriteFileAtomically(dir.Join("checkpoint"),
                      "model_checkpoint_path: \"model.ckpt-42.safetensors\"\n");
  o.checkpoint_path = dir.path();
  o.output_file = dir.Join("from_dir.onnx");
  EXPECT_EQ(ExportInferenceGraph(o).checkpoint, ckpt);
}

TEST(ExportTest, BadInputIsAClearErrorAndWritesNothing) {
  TempDir dir;
  std::shared_ptr<Net> net;
  const std::string ckpt = LenetCheckpoint(dir, &net);
  const ExportOptions o = LenetOptions(dir, ckpt, "out.onnx");
  auto fails = [&](const ExportOptions& bad) {
    EXPECT_THROW(ExportInferenceGraph(bad), Error);
    EXPECT_FALSE(PathExists(bad.output_file)) << bad.output_file;
  };
  ExportOptions x = o;
  x.output_file = "";
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "--output_file");
  x = o;
  x.model_name = "lenet_v9";
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "lenet_v9", "inception_v3");
  fails(x);
  x = o;
  x.image_size = 32;  // lenet's fc3 is sized for 28x28
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "28");
  fails(x);
  x = o;
  x.dataset_name = "cifar10";  // 3 channels: conv1 does not fit
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), ckpt, "LeNet/conv1/weights",
                        "its first layer takes images of 1 channel where "
                        "--model_name=lenet takes 3",
                        "Check --dataset_name, --dataset_dir and "
                        "--use_grayscale.");
  fails(x);
  // Another net (the default inception_v3) is named by the
  // checkpoint's, in a few lines, with no flag export_inference_graph lacks.
  x = o;
  x.model_name = ExportOptions().model_name;
  const std::string msg = testing_io::ErrorMessage(
      [&] { ExportInferenceGraph(x); });
  EXPECT_NE(msg.find("does not fit --model_name=inception_v3: it looks like "
                     "a checkpoint of lenet (its variables are under LeNet/)"),
            std::string::npos)
      << msg;
  EXPECT_LE(std::count(msg.begin(), msg.end(), '\n'), 4) << msg;
  EXPECT_EQ(msg.find("--checkpoint_exclude_scopes"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("--ignore_missing_vars"), std::string::npos) << msg;
  fails(x);
  x = o;
  x.checkpoint_path = "";
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "--checkpoint_path");
  fails(x);
  x = o;
  x.output_file = dir.Join("graph.pb");  // every format needs the weights
  x.checkpoint_path = "";
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "--checkpoint_path");
  fails(x);
  x = o;
  x.output_file = dir.Join("no/such/dir/out.onnx");
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "no/such/dir");
  fails(x);
  // Nothing but the checkpoint was left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  // A .pb output is a frozen TensorFlow GraphDef of the checkpoint's weights.
  x = o;
  x.output_file = dir.Join("graph.pb");
  EXPECT_EQ(ExportInferenceGraph(x).format, ExportFormat::kGraphDef);
  EXPECT_TRUE(ReadFileToString(x.output_file) ==
              GraphDefBytes(RecordInferenceGraph(*net, 28, 0)));
}

// Video nets: TF-Slim's --is_video_model --num_frames export, input
// [batch, frames, size, size, channels]; the flags' misuse is a clear error
// before the checkpoint is read.
TEST(ExportTest, VideoNetsExportClipsWithIsVideoModel) {
  TempDir dir;
  torch::manual_seed(2);
  auto net = CreateNet("s3dg", NetOptions().num_classes(10).num_frames(4));
  testing_export::ScrambleStatistics(*net, 2);
  CheckpointData data;
  data.tensors = net->ModelVariables();
  const std::string ckpt = dir.Join("s3dg.safetensors");
  SaveCheckpoint(ckpt, data);
  ExportOptions o;
  o.model_name = "s3dg";
  o.dataset_name = "cifar10";  // 10 classes
  o.checkpoint_path = ckpt;
  o.output_file = dir.Join("s3dg.onnx");
  o.image_size = 32;
  o.is_video_model = true;
  o.num_frames = 4;
  const ExportResult r = ExportInferenceGraph(o);
  EXPECT_EQ(r.num_frames, 4);
  EXPECT_EQ(r.image_size, 32);
  if (testing_export::HaveOnnxRuntime()) {
    const torch::Tensor clips = torch::rand({2, 3, 4, 32, 32}) * 2 - 1;
    std::map<std::string, torch::Tensor> out;
    testing_export::RunOnnxRuntime(o.output_file, clips, dir, &out);
    torch::NoGradGuard no_grad;
    net->module().eval();
    const torch::Tensor want = net->Forward(clips).logits;
    ASSERT_TRUE(out["InceptionV1/Logits"].defined());
    EXPECT_LE((out["InceptionV1/Logits"] - want).abs().max().item<double>(),
              1e-4 * want.abs().max().item<double>());
  }
  ExportOptions x = o;
  x.output_file = dir.Join("bad.onnx");
  x.num_frames = 0;
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x),
                        "Number of frames must be specified for video models "
                        "with --num_frames");
  x = o;
  x.output_file = dir.Join("bad.onnx");
  x.is_video_model = false;
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "--num_frames applies to "
                                                 "video models only");
  x.num_frames = 0;
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "s3dg is a video net",
                        "--is_video_model");
  x = o;
  x.output_file = dir.Join("bad.onnx");
  x.model_name = "lenet";
  x.image_size = 0;
  EXPECT_ERROR_CONTAINS(ExportInferenceGraph(x), "lenet is an image net");
  EXPECT_FALSE(PathExists(dir.Join("bad.onnx")));
}

}  // namespace
}  // namespace slimtorch
