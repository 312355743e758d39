// TensorFlow's own checkpoint bytes (tests/golden/tf_checkpoints/*.tar.gz,
// written by TensorFlow 2.21's Saver through
// scripts/golden/gen_tf_checkpoint_goldens.py): every dtype, a string
// variable, a partitioned one, V1 and V2; and tf_slim's inception_v1 as a V1
// checkpoint, restored into our net: every variable equals the generator's
// fill mapped onto our layout, and the logits equal TensorFlow's.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

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

TEST(TfCheckpointGoldenTest, EveryDtypeAsTensorFlowWroteIt) {
  TempDir dir;
  Unpack("formats.tar.gz",
         {"v1/checkpoint", "v1/model.ckpt-7", "v2/checkpoint",
          "v2/model.ckpt-7.index", "v2/model.ckpt-7.data-00000-of-00001"},
         dir);
  const std::map<std::string, torch::Tensor> want = {
      {"scope/weights",
       torch::arange(72, torch::kFloat).reshape({3, 3, 2, 4}) / 8},
      {"scope/biases", torch::tensor({1.5f, -2.f, 0.f, 1e-30f})},
      {"f64", torch::tensor({{1.0, -2.5, 3e300}, {0.0, -0.0, 1e-300}},
                            torch::kDouble)},
      {"i32",
       torch::tensor({-1, 0, 2147483647, -2147483647 - 1, 5}, torch::kInt)},
      {"i64", torch::tensor({int64_t{1} << 40, -(int64_t{1} << 50)})},
      {"u8", torch::tensor({0, 1, 254, 255}, torch::kByte)},
      {"i8", torch::tensor({-128, -1, 0, 127}, torch::kChar)},
      {"i16", torch::tensor({-32768, 7, 32767}, torch::kShort)},
      {"b", torch::tensor({true, false, true})},
      {"h", torch::tensor({0.5f, -1.25f, 65504.f}).to(torch::kHalf)},
      {"bf", torch::tensor({0.5f, -1.25f, 3.f}).to(torch::kBFloat16)},
      {"scalar", torch::tensor(3.25f)},
      {"empty", torch::zeros({0, 3})},
      {"part", torch::arange(28, torch::kFloat).reshape({7, 4}) * 0.5},
      {"global_step", torch::tensor(int64_t{7})},
  };
  for (const std::string version : {"v1", "v2"}) {
    SCOPED_TRACE(version);
    // The directory resolves through TensorFlow's "checkpoint" file.
    const TfCheckpointReader reader(dir.Join(version));
    EXPECT_EQ(reader.prefix(), dir.Join(version + "/model.ckpt-7"));
    EXPECT_EQ(reader.format(), version == "v1" ? TfCheckpointFormat::kV1
                                               : TfCheckpointFormat::kV2);
    std::vector<std::string> skipped;
    const NamedTensors all = reader.ReadAll(&skipped);
    EXPECT_EQ(skipped, std::vector<std::string>{"s"});
    EXPECT_EQ(reader.Find("s")->tf_dtype, 7);  // DT_STRING, listed
    // TensorFlow's V1 writer cannot save bfloat16.
    EXPECT_EQ(all.size(), want.size() - (version == "v1" ? 1 : 0));
    for (const NamedTensor& t : all) {
      auto it = want.find(t.name);
      ASSERT_NE(it, want.end()) << t.name;
      EXPECT_EQ(t.tensor.scalar_type(), it->second.scalar_type()) << t.name;
      EXPECT_TRUE(torch::equal(t.tensor, it->second)) << t.name << "\n"
                                                      << t.tensor;
    }
    // Through our writer and back: the same values.
    SaveTfCheckpoint(dir.Join("ours_" + version), all);
    const NamedTensors again =
        TfCheckpointReader(dir.Join("ours_" + version)).ReadAll();
    ASSERT_EQ(again.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_TRUE(torch::equal(again[i].tensor, all[i].tensor)) << all[i].name;
    }
  }
  // A damaged byte in TensorFlow's V2 data file: the tensor is named.
  const std::string data = dir.Join("v2/model.ckpt-7.data-00000-of-00001");
  std::string bytes = ReadFileToString(data);
  bytes[bytes.size() - 1] ^= 0x10;
  WriteFileAtomically(data, bytes);
  const TfCheckpointReader reader(dir.Join("v2"));
  int failures = 0;
  for (const TfTensorInfo& t : reader.tensors()) {
    if (!t.supported) continue;
    try {
      reader.Read(t.name);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("CRC mismatch for tensor"),
                std::string::npos)
          << e.what();
      ++failures;
    }
  }
  EXPECT_EQ(failures, 1);
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
  if (!PathExists(python) || !PathExists("/opt/tfenv/.ready")) {
    GTEST_SKIP() << "no TensorFlow venv at /opt/tfenv";
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
