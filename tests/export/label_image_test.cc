// label_image's parts: image lists, labels files, the model input (TensorFlow
// label_image's resize + mean/std, or a net's eval preprocessing), top-k;
// and, built with OpenCV, every net of the zoo exported to ONNX and run by
// OpenCV's DNN module with LibTorch's logits.
#include "slimtorch/export/label_image.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <set>
#include <string>

#include "export/python_engines.h"
#include "io/io_test_util.h"
#include "nets/zoo_input.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/export/export.h"
#include "slimtorch/export/onnx_writer.h"
#include "slimtorch/io/image_codec.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/preprocessing/image_ops.h"
#include "slimtorch/preprocessing/preprocessing.h"
#include "test_util.h"
#ifdef SLIMTORCH_WITH_OPENCV
#include "slimtorch/export/opencv_model.h"
#endif

namespace slimtorch {
namespace {

using testing::TempDir;

// A w x h RGB PNG with a gradient, written to `path`.
torch::Tensor WritePng(const std::string& path, int h, int w, int seed) {
  const torch::Tensor img =
      (torch::arange(h * w * 3).reshape({h, w, 3}) * (7 + seed))
          .remainder(256)
          .to(torch::kUInt8)
          .contiguous();
  WriteFileAtomically(path, EncodePng(img.data_ptr<uint8_t>(), h, w, 3));
  return img;
}

TEST(LabelImageTest, ListsImagesLikeTheFlagSays) {
  TempDir dir;
  MakeDirs(dir.Join("f"));
  WritePng(dir.Join("f/b.png"), 4, 4, 0);
  WritePng(dir.Join("f/a.PNG"), 4, 4, 1);
  WriteFileAtomically(dir.Join("f/notes.txt"), "x");
  WritePng(dir.Join("c.png"), 4, 4, 2);
  EXPECT_EQ(
      ListImageFiles(dir.Join("f")),
      (std::vector<std::string>{dir.Join("f/a.PNG"), dir.Join("f/b.png")}));
  EXPECT_EQ(ListImageFiles(dir.Join("c.png") + "," + dir.Join("f")),
            (std::vector<std::string>{dir.Join("c.png"), dir.Join("f/a.PNG"),
                                      dir.Join("f/b.png")}));
  EXPECT_ERROR_CONTAINS(ListImageFiles(dir.Join("gone.jpg")), "gone.jpg");
  MakeDirs(dir.Join("empty"));
  EXPECT_ERROR_CONTAINS(ListImageFiles(dir.Join("empty")), "empty", "holds no");
}

TEST(LabelImageTest, ReadsBothLabelsFormats) {
  TempDir dir;
  WriteFileAtomically(dir.Join("slim.txt"), "0:daisy\n2:roses\n1:tulips\n\n");
  EXPECT_EQ(ReadClassNames(dir.Join("slim.txt")),
            (std::vector<std::string>{"daisy", "tulips", "roses"}));
  WriteFileAtomically(dir.Join("tf.txt"), "background\ntench\ngoldfish\n");
  EXPECT_EQ(ReadClassNames(dir.Join("tf.txt")),
            (std::vector<std::string>{"background", "tench", "goldfish"}));
  WriteFileAtomically(dir.Join("empty.txt"), "\n");
  EXPECT_ERROR_CONTAINS(ReadClassNames(dir.Join("empty.txt")), "empty.txt");
  const auto top = TopK(torch::tensor({0.1f, 0.5f, 0.2f, 0.05f}), 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 2);
  EXPECT_FLOAT_EQ(top[0].second, 0.5f);
}

TEST(LabelImageTest, InputIsTensorFlowLabelImagesOrTheEvalPreprocessing) {
  TempDir dir;
  const torch::Tensor img = WritePng(dir.Join("x.png"), 37, 53, 3);
  ImageInputOptions tf;
  tf.height = 29;
  tf.width = 31;
  tf.input_mean = 127.5;
  tf.input_std = 127.5;
  const torch::Tensor a = LoadModelInput(dir.Join("x.png"), tf);
  EXPECT_EQ(a.sizes(), torch::IntArrayRef({1, 29, 31, 3}));
  EXPECT_TRUE(torch::allclose(
      a, (image_ops::ResizeBilinearLegacy(img.unsqueeze(0), 29, 31) - 127.5) /
             127.5));

  ImageInputOptions eval = tf;
  eval.height = eval.width = 224;
  eval.preprocessing_name = "inception_v1";
  PreprocessingOptions p;
  p.output_height = p.output_width = 224;
  std::mt19937_64 rng(0);
  const torch::Tensor want =
      GetPreprocessing("inception_v1", p)(img, rng).permute({1, 2, 0});
  EXPECT_TRUE(torch::equal(LoadModelInput(dir.Join("x.png"), eval)[0], want));

  WriteFileAtomically(dir.Join("bad.png"), "\x89PNG\r\n\x1a\n truncated");
  EXPECT_ERROR_CONTAINS(LoadModelInput(dir.Join("bad.png"), tf), "bad.png");
}

#ifdef SLIMTORCH_WITH_OPENCV

class OpenCvZooTest : public ::testing::TestWithParam<std::string> {};

// OpenCV 4.6's DNN module runs the exported model with LibTorch's logits
// (within 1e-4 of the largest) and predictions; the video nets too (3-D
// Conv, MaxPool, AveragePool, their means as ReduceMean).
TEST_P(OpenCvZooTest, OpenCvGivesLibTorchsLogits) {
  torch::manual_seed(4);
  auto net = testing_export::ZooExportNet(GetParam());
  testing_export::ScrambleStatistics(*net, 4);
  net->module().eval();
  const int64_t s = testing_export::ZooExportSize(GetParam(), *net);
  TempDir dir;
  const std::string path = dir.Join("model.onnx");
  WriteOnnxModel(path, RecordInferenceGraph(*net, s, 0));
  const torch::Tensor images =
      torch::rand(testing::ZooInputShape(*net, 1, s)) * 2 - 1;
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = net->Forward(images).logits;
  }
  const torch::Tensor nhwc =
      (images.dim() == 5 ? images.permute({0, 2, 3, 4, 1})
                         : images.permute({0, 2, 3, 1}))
          .contiguous();
  OpenCvModel model(path);
  const torch::Tensor got =
      model.Run(nhwc, "input", testing_export::OutputName(*net, "Logits"));
  ASSERT_EQ(got.sizes(), logits.sizes());
  const double scale = logits.abs().max().item<double>();
  const double diff = (got - logits).abs().max().item<double>();
  std::printf("[ OpenCV DNN ] %-20s logits within %.2g of the largest\n",
              GetParam().c_str(), diff / scale);
  EXPECT_LE(diff, 1e-4 * scale);
  const torch::Tensor p =
      model.Run(nhwc, "input", testing_export::OutputName(*net, "Predictions"));
  EXPECT_LE((p - torch::softmax(logits, -1)).abs().max().item<double>(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Zoo, OpenCvZooTest,
                         ::testing::ValuesIn(GetNetRegistry().Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

#endif  // SLIMTORCH_WITH_OPENCV

}  // namespace
}  // namespace slimtorch
