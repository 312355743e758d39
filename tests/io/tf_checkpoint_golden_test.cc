// tf_slim's inception_v1 as a V1 checkpoint written by TensorFlow 2.21's
// Saver (tests/golden/tf_checkpoints/inception_v1_v1.tar.gz, from
// scripts/golden/gen_tf_checkpoint_goldens.py), restored into our net: every
// variable equals the generator's fill mapped onto our layout, and the logits
// equal TensorFlow's. And TensorFlow reading our checkpoints. (Every dtype,
// shards, partitions: tf_saver_checkpoint_test.cc.)
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "export/python_engines.h"
#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/archive.h"
#include "slimtorch/io/tf_checkpoint.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/variables.h"
#include "test_util.h"

namespace slimtorch {
namespace {

#include "golden/tf_checkpoint_goldens.inc"

using testing::TempDir;
using testing_io::GoldenPath;

// Unpacks members of tests/golden/tf_checkpoints/<name> into `dir`.
void Unpack(const std::string& name, const std::vector<std::string>& members,
            const TempDir& dir) {
  const std::string archive = GoldenPath("tf_checkpoints/" + name);
  for (const auto& m : ReadArchiveMembers(archive, members)) {
    MakeDirs(std::filesystem::path(dir.Join(m.first)).parent_path().string());
    WriteFileAtomically(dir.Join(m.first), m.second);
  }
}

// The generator's fill of a variable, in TensorFlow's layout.
torch::Tensor PeriodicFill(const std::string& name,
                           const std::vector<int64_t>& tf_shape) {
  int64_t n = 1;
  for (int64_t d : tf_shape) n *= d;
  const int64_t h =
      static_cast<int64_t>(crc32(0, reinterpret_cast<const Bytef*>(name.data()),
                                 static_cast<uInt>(name.size())) %
                           61);
  auto ends = [&](const char* s) {
    const std::string suffix = s;
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  };
  double scale = 1;
  if (!(ends("gamma") || ends("moving_variance") || ends("biases") ||
        ends("beta") || ends("moving_mean"))) {
    int64_t fan_in = 1;
    for (size_t i = 0; i + 1 < tf_shape.size(); ++i) fan_in *= tf_shape[i];
    scale = std::pow(2.0, std::floor(std::log2(std::sqrt(6.0 / fan_in))));
  }
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double base = static_cast<double>((i * 7 + h) % 61 - 30) / 64.0;
    if (ends("gamma") || ends("moving_variance")) {
      v[i] = static_cast<float>(0.5 + std::abs(base));
    } else if (ends("biases") || ends("beta") || ends("moving_mean")) {
      v[i] = static_cast<float>(base / 8);
    } else {
      v[i] = static_cast<float>(base * scale);
    }
  }
  return torch::tensor(v).reshape(tf_shape);
}

TEST(TfCheckpointGoldenTest, InceptionV1FromTensorFlowsV1Checkpoint) {
  TempDir dir;
  Unpack("inception_v1_v1.tar.gz", {"inception_v1.ckpt"}, dir);
  auto net = CreateNet("inception_v1", NetOptions().num_classes(10));
  const RestoredCheckpoint r =
      RestoreCheckpointFor(dir.Join("inception_v1.ckpt"), *net, {}, false);
  EXPECT_TRUE(r.tensorflow);
  EXPECT_EQ(r.restored, kInceptionV1Variables);
  EXPECT_EQ(r.global_step.value_or(-1), 7);
  const auto tf_shapes = net->TfVariableShapes();
  for (const NamedTensor& v : net->ModelVariables()) {
    EXPECT_TRUE(torch::equal(
        v.tensor,
        FromTfLayout(v.name, PeriodicFill(v.name, tf_shapes.at(v.name)))))
        << v.name;
  }
  const int64_t s = kInceptionV1ImageSize;
  const torch::Tensor idx = torch::arange(2 * 3 * s * s).reshape({2, 3, s, s});
  const torch::Tensor n = idx.div(3 * s * s, "floor");
  const torch::Tensor c = idx.div(s * s, "floor").remainder(3);
  const torch::Tensor y = idx.div(s, "floor").remainder(s);
  const torch::Tensor x = idx.remainder(s);
  const torch::Tensor images =
      ((n * 131 + y * 31 + x * 17 + c * 7).remainder(23).to(torch::kFloat) /
           11 -
       1);
  net->module().eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = net->Forward(images).logits;
  const torch::Tensor want =
      torch::from_blob(const_cast<float*>(kInceptionV1Logits), {2, 10}).clone();
  const double tol = 1e-4 * want.abs().max().item<double>();
  EXPECT_LE((logits - want).abs().max().item<double>(), tol) << logits << "\n"
                                                             << want;
}

// TensorFlow reads our checkpoint (tf.train.load_checkpoint, and tf_slim's
// assign_from_checkpoint_fn for the float variables) and gets every tensor
// byte for byte: a net in TensorFlow's layout, every dtype, global_step.
TEST(TfCheckpointGoldenTest, TensorFlowReadsOurCheckpoint) {
  const char* python = "/opt/tfenv/bin/python";
  if (!testing_export::HavePythonModules("tensorflow, tf_slim")) {
    GTEST_SKIP() << "no TensorFlow + tf_slim in /opt/tfenv";
  }
  TempDir dir;
  auto net = CreateNet("mobilenet_v1_025", NetOptions().num_classes(7));
  NamedTensors tensors = net->TfModelVariables();
  for (NamedTensor& t : tensors) t.tensor = torch::randn_like(t.tensor);
  tensors.push_back({"global_step", torch::tensor(int64_t{42})});
  tensors.push_back({"h", torch::tensor({0.5f, -1.25f}).to(torch::kHalf)});
  tensors.push_back({"bf", torch::tensor({0.5f, 3.f}).to(torch::kBFloat16)});
  tensors.push_back({"b", torch::tensor({true, false})});
  tensors.push_back({"i8", torch::tensor({-128, 127}, torch::kChar)});
  tensors.push_back({"u8", torch::tensor({0, 255}, torch::kByte)});
  tensors.push_back({"i16", torch::tensor({-32768, 1}, torch::kShort)});
  tensors.push_back({"i32", torch::tensor({-5, 1 << 30}, torch::kInt)});
  tensors.push_back({"f64", torch::tensor({1e300, -0.5}, torch::kDouble)});
  tensors.push_back({"empty", torch::zeros({0, 2})});
  SaveTfCheckpoint(dir.Join("model.ckpt-42"), tensors);
  const std::string report = dir.Join("tf.txt");
  const std::string cmd = StrCat(python, " ", SLIMTORCH_TEST_DATA_DIR,
                                 "/../scripts/golden/check_tf_checkpoint.py ",
                                 dir.Join("model.ckpt-42"), " > ", report,
                                 " 2>", dir.Join("tf.err"));
  ASSERT_EQ(std::system(cmd.c_str()), 0)
      << ReadFileToString(dir.Join("tf.err"));
  std::map<std::string, std::string> want;
  for (const NamedTensor& t : tensors) {
    const torch::Tensor c = t.tensor.contiguous();
    std::string shape;
    for (int64_t d : c.sizes())
      shape += (shape.empty() ? "" : "x") + std::to_string(d);
    const uLong crc = crc32(0, static_cast<const Bytef*>(c.data_ptr()),
                            static_cast<uInt>(c.numel() * c.element_size()));
    want[t.name] = StrCat(shape.empty() ? "-" : shape, " ", crc);
  }
  std::istringstream lines(ReadFileToString(report));
  std::string name, dtype, shape, crc;
  int seen = 0;
  while (lines >> name >> dtype >> shape >> crc) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_EQ(shape + " " + crc, want[name]) << name << " (" << dtype << ")";
    ++seen;
  }
  EXPECT_EQ(seen, static_cast<int>(tensors.size()));
}

}  // namespace
}  // namespace slimtorch
