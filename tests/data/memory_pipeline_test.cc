#include "slimtorch/data/memory_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "slimtorch/core/error.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing::TempDir;
using testing::WriteTinyImageRecords;

// Batched identity to float NCHW; pixel (0, 0, 0) of each example is
// replaced by the first draw of its generator % 1000 (checks seeding).
torch::Tensor IdentityWithDraw(const torch::Tensor& images,
                               std::vector<std::mt19937_64>& rngs) {
  torch::Tensor x =
      images.to(torch::kFloat32).permute({0, 3, 1, 2}).contiguous();
  for (size_t i = 0; i < rngs.size(); ++i) {
    x[i][0][0][0] = static_cast<float>(rngs[i]() % 1000);
  }
  return x;
}

// Two files of 7 and 6 examples; example k's pixels equal k, labels cycle.
class MemoryPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteTinyImageRecords(dir_.Join("a.tfrecord"), 7, 0, {0, 1, 2});
    WriteTinyImageRecords(dir_.Join("b.tfrecord"), 6, 7, {3, 4});
  }

  DecodeSplitOptions SplitOptions() const {
    DecodeSplitOptions d;
    d.files = {dir_.Join("a.tfrecord"), dir_.Join("b.tfrecord")};
    d.height = 4;
    d.width = 4;
    d.decode_channels = 1;
    d.num_classes = 5;
    d.num_threads = 3;
    return d;
  }

  std::shared_ptr<const DecodedSplit> Split() const {
    return std::make_shared<const DecodedSplit>(DecodeSplit(SplitOptions()));
  }

  static MemoryPipelineOptions Options(bool training, int64_t batch,
                                       uint64_t seed = 42) {
    MemoryPipelineOptions o;
    o.batch_size = batch;
    o.training = training;
    o.seed = seed;
    o.preprocess = IdentityWithDraw;
    o.output_channels = 1;
    o.output_height = 4;
    o.output_width = 4;
    return o;
  }

  // (example id, draw) of every example of the next n batches.
  static std::vector<std::pair<int, int>> Take(MemoryPipeline& p, int n) {
    std::vector<std::pair<int, int>> out;
    for (int b = 0; b < n; ++b) {
      auto batch = p.Next();
      if (!batch) break;
      for (int64_t i = 0; i < batch->size(); ++i) {
        out.emplace_back(
            static_cast<int>(batch->images[i][0][1][1].item<float>()),
            static_cast<int>(batch->images[i][0][0][0].item<float>()));
      }
    }
    return out;
  }

  TempDir dir_;
};

TEST_F(MemoryPipelineTest, DecodeSplitKeepsRecordOrderPixelsAndLabels) {
  DecodedSplit s = DecodeSplit(SplitOptions());
  ASSERT_EQ(s.images.sizes(), (std::vector<int64_t>{13, 4, 4, 1}));
  ASSERT_EQ(s.images.dtype(), torch::kUInt8);
  const int64_t expected_labels[] = {0, 1, 2, 0, 1, 2, 0, 3, 4, 3, 4, 3, 4};
  for (int64_t k = 0; k < 13; ++k) {
    EXPECT_TRUE(s.images[k].eq(k).all().item<bool>()) << k;
    EXPECT_EQ(s.labels[k].item<int64_t>(), expected_labels[k]) << k;
  }
}

TEST_F(MemoryPipelineTest, DecodeSplitAppliesLabelsOffset) {
  DecodeSplitOptions d = SplitOptions();
  d.labels_offset = 1;
  d.files = {dir_.Join("b.tfrecord")};  // labels 3, 4
  d.num_classes = 4;
  DecodedSplit s = DecodeSplit(d);
  EXPECT_EQ(s.labels[0].item<int64_t>(), 2);
  EXPECT_EQ(s.labels[1].item<int64_t>(), 3);
}

TEST_F(MemoryPipelineTest, DecodeSplitNamesTheBadRecord) {
  // An image of another size in the middle of the second file.
  {
    TFRecordWriter w(dir_.Join("c.tfrecord"));
    for (int i = 0; i < 3; ++i) {
      const int side = i == 2 ? 5 : 4;
      std::vector<uint8_t> px(side * side, 9);
      ImageExample ex;
      ex.encoded = EncodePng(px.data(), side, side, 1);
      ex.format = "png";
      ex.label = 1;
      ex.height = side;
      ex.width = side;
      w.Write(EncodeImageExample(ex));
    }
    w.Close();
  }
  DecodeSplitOptions d = SplitOptions();
  d.files = {dir_.Join("a.tfrecord"), dir_.Join("c.tfrecord")};
  try {
    DecodeSplit(d);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.Join("c.tfrecord") + " record 2"),
              std::string::npos)
        << e.what();
  }
  // A label out of range.
  d = SplitOptions();
  d.num_classes = 4;
  try {
    DecodeSplit(d);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.Join("b.tfrecord") + " record 1"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("outside [0, 4)"), std::string::npos);
  }
  // More pixels than allowed.
  d = SplitOptions();
  d.max_bytes = 10 * 16;
  EXPECT_THROW(DecodeSplit(d), Error);
}

TEST_F(MemoryPipelineTest, EvalIsOneOrderedPassWithPartialLastBatch) {
  MemoryPipeline p(Split(), Options(/*training=*/false, 5));
  std::vector<int64_t> sizes;
  std::vector<int> ids;
  while (auto b = p.Next()) {
    sizes.push_back(b->size());
    for (int64_t i = 0; i < b->size(); ++i) {
      ids.push_back(static_cast<int>(b->images[i][0][1][1].item<float>()));
    }
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{5, 5, 3}));
  std::vector<int> expected(13);
  for (int i = 0; i < 13; ++i) expected[i] = i;
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(p.position(), 13);
  EXPECT_FALSE(p.Next().has_value());
}

TEST_F(MemoryPipelineTest, TrainingEpochsArePermutationsAcrossBatchBoundaries) {
  MemoryPipeline p(Split(), Options(/*training=*/true, 4));
  auto got = Take(p, 13);  // 52 examples = 4 epochs of 13
  ASSERT_EQ(got.size(), 52u);
  std::vector<std::vector<int>> epochs(4);
  for (size_t i = 0; i < got.size(); ++i) {
    epochs[i / 13].push_back(got[i].first);
  }
  for (auto& e : epochs) {
    std::vector<int> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    for (int k = 0; k < 13; ++k) EXPECT_EQ(sorted[k], k);
  }
  EXPECT_NE(epochs[0], epochs[1]);  // reshuffled every epoch
  // Each matches the published permutation.
  for (int e = 0; e < 4; ++e) {
    auto perm = MemoryPipeline::EpochPermutation(42, 13, e);
    EXPECT_EQ(std::vector<int>(perm.begin(), perm.end()), epochs[e]);
  }
}

TEST_F(MemoryPipelineTest, ExamplesGetTheirPositionsGenerator) {
  MemoryPipeline p(Split(), Options(/*training=*/true, 5, /*seed=*/9));
  auto got = Take(p, 3);
  for (size_t pos = 0; pos < got.size(); ++pos) {
    std::mt19937_64 rng(ExampleRngSeed(9, static_cast<int64_t>(pos)));
    EXPECT_EQ(got[pos].second, static_cast<int>(rng() % 1000)) << pos;
  }
}

TEST_F(MemoryPipelineTest, SameSeedSameBatchesOtherSeedOthers) {
  MemoryPipeline a(Split(), Options(true, 4, 1));
  MemoryPipeline b(Split(), Options(true, 4, 1));
  MemoryPipeline c(Split(), Options(true, 4, 2));
  auto ra = Take(a, 10);
  EXPECT_EQ(ra, Take(b, 10));
  EXPECT_NE(ra, Take(c, 10));
}

// As the record pipeline's shards: the slices of 2 or 3 replicas together
// are the whole batches, each example with its position's draw.
TEST_F(MemoryPipelineTest, ShardsTogetherAreTheWholeBatch) {
  MemoryPipeline full(Split(), Options(true, 6));
  const auto all = Take(full, 9);
  for (int shards : {2, 3}) {
    const int64_t size = 6 / shards;
    std::vector<std::unique_ptr<MemoryPipeline>> parts;
    for (int k = 0; k < shards; ++k) {
      MemoryPipelineOptions o = Options(true, 6);
      o.shard_offset = k * size;
      o.shard_size = size;
      parts.push_back(std::make_unique<MemoryPipeline>(Split(), o));
    }
    std::vector<std::pair<int, int>> merged;
    for (int b = 0; b < 9; ++b) {
      for (auto& part : parts) {
        auto got = Take(*part, 1);
        EXPECT_EQ(got.size(), size_t(size));
        merged.insert(merged.end(), got.begin(), got.end());
      }
    }
    EXPECT_EQ(merged, all) << shards << " shards";
    EXPECT_EQ(parts.back()->position(), 54);
  }
  MemoryPipelineOptions bad = Options(false, 6);
  bad.shard_size = 3;
  EXPECT_THROW(MemoryPipeline(Split(), bad), Error);
}

TEST_F(MemoryPipelineTest, StartPositionResumesExactly) {
  MemoryPipeline full(Split(), Options(true, 4));
  auto all = Take(full, 8);
  MemoryPipelineOptions o = Options(true, 4);
  o.start_position = 12;  // mid-epoch, 3 batches in
  MemoryPipeline resumed(Split(), o);
  auto rest = Take(resumed, 5);
  std::vector<std::pair<int, int>> expected(all.begin() + 12, all.end());
  EXPECT_EQ(rest, expected);
  EXPECT_EQ(resumed.position(), 32);
}

// The positions a repeated stream shows, worked by hand: k copies at a
// stride, in blocks of k * stride positions.
TEST(ExampleRepeatTest, SourcePositionsWorkedByHand) {
  std::vector<int64_t> got;
  for (int64_t p = 0; p < 9; ++p) {
    got.push_back(ExampleRepeat{3, 1}.SourcePosition(p));
  }
  EXPECT_EQ(got, (std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2, 2}));
  got.clear();
  for (int64_t p = 0; p < 16; ++p) {
    got.push_back(ExampleRepeat{2, 4}.SourcePosition(p));
  }
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5,
                                       6, 7}));
  for (int64_t p = 0; p < 50; ++p) {
    EXPECT_EQ(ExampleRepeat{}.SourcePosition(p), p);
  }
}

// --repeated_augmentation=3 with one replica: every example three times in
// a row, each copy with its own position's draw; the examples run through
// the epochs' permutations at a third of the rate, so 3 epochs' positions
// show every example exactly 3 times.
TEST_F(MemoryPipelineTest, RepeatedExamplesComeInRunsWithTheirOwnDraws) {
  MemoryPipelineOptions o = Options(true, 6);
  o.repeat = {3, 1};
  MemoryPipeline p(Split(), o);
  const auto got = Take(p, 13);  // 78 positions = 6 epochs' worth
  ASSERT_EQ(got.size(), 78u);
  const auto perm0 = MemoryPipeline::EpochPermutation(42, 13, 0);
  const auto perm1 = MemoryPipeline::EpochPermutation(42, 13, 1);
  std::map<int, int> counts;
  for (size_t pos = 0; pos < got.size(); ++pos) {
    const size_t source = pos / 3;
    const int64_t expected = source < 13 ? perm0[source] : perm1[source - 13];
    EXPECT_EQ(got[pos].first, expected) << pos;
    std::mt19937_64 rng(ExampleRngSeed(42, static_cast<int64_t>(pos)));
    EXPECT_EQ(got[pos].second, static_cast<int>(rng() % 1000)) << pos;
    if (pos < 39) ++counts[got[pos].first];
  }
  ASSERT_EQ(counts.size(), 13u);
  for (const auto& kv : counts) EXPECT_EQ(kv.second, 3) << kv.first;
  // A resumed stream (mid-block) continues it.
  o.start_position = 31;
  MemoryPipeline resumed(Split(), o);
  const auto rest = Take(resumed, 2);
  const std::vector<std::pair<int, int>> expected(got.begin() + 31,
                                                  got.begin() + 43);
  EXPECT_EQ(rest, expected);
}

// With replicas (stride = a replica's slice) the copies of an example land
// on different replicas, in the same slot of their slices.
TEST_F(MemoryPipelineTest, RepeatedCopiesSpreadAcrossReplicas) {
  std::vector<std::unique_ptr<MemoryPipeline>> parts;
  for (int k = 0; k < 2; ++k) {
    MemoryPipelineOptions o = Options(true, 8);
    o.shard_offset = k * 4;
    o.shard_size = 4;
    o.repeat = {2, 4};
    parts.push_back(std::make_unique<MemoryPipeline>(Split(), o));
  }
  std::set<int> seen;
  for (int b = 0; b < 6; ++b) {
    const auto a = Take(*parts[0], 1);
    const auto c = Take(*parts[1], 1);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(a[i].first, c[i].first) << b << " " << i;
      EXPECT_NE(a[i].second, c[i].second) << b << " " << i;
    }
    std::set<int> ids;
    for (const auto& x : a) ids.insert(x.first);
    if (b == 0) EXPECT_EQ(ids.size(), 4u);  // distinct within a slice
    seen.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(seen.size(), 13u);  // 24 distinct draws cover the 13
  MemoryPipelineOptions bad = Options(false, 6);
  bad.repeat = {2, 1};
  EXPECT_THROW(MemoryPipeline(Split(), bad), Error);
}

TEST_F(MemoryPipelineTest, LabelsFollowTheirImages) {
  auto split = Split();
  MemoryPipeline p(split, Options(true, 6));
  for (int b = 0; b < 5; ++b) {
    auto batch = p.Next();
    for (int64_t i = 0; i < batch->size(); ++i) {
      int id = static_cast<int>(batch->images[i][0][1][1].item<float>());
      EXPECT_EQ(batch->labels[i].item<int64_t>(),
                split->labels[id].item<int64_t>());
    }
  }
}

TEST_F(MemoryPipelineTest, WrongPreprocessingShapeIsAnError) {
  MemoryPipelineOptions o = Options(true, 4);
  o.output_height = 3;
  MemoryPipeline p(Split(), o);
  EXPECT_THROW(p.Next(), Error);
}

}  // namespace
}  // namespace slimtorch

namespace slimtorch {
namespace {

// A counter-based "preprocessing" that writes each example's position hash
// into pixel (0, 0): the pipeline must hand every example its own stream
// position, in the same order as the host path.
torch::Tensor IdentityWithCounter(const torch::Tensor& images,
                                  const torch::Tensor& positions,
                                  uint64_t seed) {
  torch::Tensor x =
      images.to(torch::kFloat32).permute({0, 3, 1, 2}).contiguous();
  x.select(1, 0).select(1, 0).select(1, 0).copy_(
      CounterUniformInt(CounterHash(positions, seed, 0), 999)
          .to(torch::kFloat32));
  return x;
}

TEST_F(MemoryPipelineTest, CounterDrawsFollowPositionsAndTheSameOrder) {
  MemoryPipeline host(Split(), Options(true, 5, 9));
  MemoryPipelineOptions o = Options(true, 5, 9);
  o.counter_preprocess = IdentityWithCounter;
  MemoryPipeline counter(Split(), o);
  auto a = Take(host, 8);  // 40 examples: three epoch boundaries crossed
  auto b = Take(counter, 8);
  ASSERT_EQ(a.size(), b.size());
  torch::Tensor positions = torch::arange(40, torch::kInt64);
  torch::Tensor draws = CounterUniformInt(CounterHash(positions, 9, 0), 999);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].first, a[i].first) << i;  // the same example order
    EXPECT_EQ(b[i].second, draws[i].item<int64_t>()) << i;
  }
  // Resumed mid-epoch: what the uninterrupted stream had.
  o.start_position = 17;
  MemoryPipeline resumed(Split(), o);
  auto rest = Take(resumed, 4);
  const std::vector<std::pair<int, int>> expected(b.begin() + 17,
                                                  b.begin() + 37);
  EXPECT_EQ(rest, expected);
  // A batch larger than the split spans several epochs.
  MemoryPipelineOptions big = Options(true, 30, 9);
  big.counter_preprocess = IdentityWithCounter;
  MemoryPipeline large(Split(), big);
  auto first = Take(large, 1);
  ASSERT_EQ(first.size(), 30u);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].first, a[i].first) << i;
  }
  // Two replicas' slices of batches of 6, together the whole batches.
  MemoryPipelineOptions whole = Options(true, 6, 9);
  whole.counter_preprocess = IdentityWithCounter;
  MemoryPipeline all(Split(), whole);
  const auto want = Take(all, 5);
  std::vector<std::unique_ptr<MemoryPipeline>> halves;
  for (int k = 0; k < 2; ++k) {
    MemoryPipelineOptions half = whole;
    half.shard_offset = 3 * k;
    half.shard_size = 3;
    halves.push_back(std::make_unique<MemoryPipeline>(Split(), half));
  }
  std::vector<std::pair<int, int>> merged;
  for (int b = 0; b < 5; ++b) {
    for (auto& h : halves) {
      auto got = Take(*h, 1);
      merged.insert(merged.end(), got.begin(), got.end());
    }
  }
  EXPECT_EQ(merged, want);
}

}  // namespace
}  // namespace slimtorch

namespace slimtorch {
namespace {

// The in-memory path on a GPU hands out the CPU's batches: the same
// examples, labels and augmentation (cifarnet_tutorial's batched form with
// the host draws, and the counter-based form on both devices).
TEST(MemoryPipelineCudaTest, CudaBatchesEqualCpuBatches) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(4);
  auto split = std::make_shared<DecodedSplit>();
  split->images = torch::randint(0, 256, {40, 32, 32, 3}, torch::kUInt8);
  split->labels = torch::randint(0, 10, {40}, torch::kInt64);
  PreprocessingOptions pre;
  pre.output_height = 24;
  pre.output_width = 24;
  pre.is_training = true;
  for (bool counter : {false, true}) {
    auto options = [&](torch::Device device) {
      MemoryPipelineOptions o;
      o.batch_size = 16;
      o.seed = 3;
      o.preprocess = GetBatchPreprocessing("cifarnet_tutorial", pre);
      if (counter) {
        o.counter_preprocess =
            GetCounterBatchPreprocessing("cifarnet_tutorial", pre);
      }
      o.output_height = 24;
      o.output_width = 24;
      o.device = device;
      return o;
    };
    MemoryPipeline cpu(split, options(torch::kCPU));
    MemoryPipeline gpu(split, options(torch::Device(torch::kCUDA, 0)));
    for (int b = 0; b < 6; ++b) {  // 96 examples: two epoch boundaries
      auto x = cpu.Next();
      auto y = gpu.Next();
      ASSERT_TRUE(y->images.is_cuda());
      EXPECT_TRUE(torch::equal(x->labels, y->labels.cpu()))
          << "counter " << counter << " batch " << b;
      EXPECT_LE((x->images - y->images.cpu()).abs().max().item<float>(), 1e-4)
          << "counter " << counter << " batch " << b;
    }
  }
}

}  // namespace
}  // namespace slimtorch
