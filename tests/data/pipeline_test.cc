#include "slimtorch/data/pipeline.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "slimtorch/core/error.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing::TempDir;
using testing::WriteTinyImageRecords;

// Three files of 7, 5 and 9 examples; example k's pixels equal k.
class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteTinyImageRecords(dir_.Join("a.tfrecord"), 7, 0, {0, 1, 2});
    WriteTinyImageRecords(dir_.Join("b.tfrecord"), 5, 7, {3});
    WriteTinyImageRecords(dir_.Join("c.tfrecord"), 9, 12, {4, 0});
  }

  PipelineOptions Options(bool training, int64_t batch) {
    PipelineOptions o;
    o.files = {dir_.Join("a.tfrecord"), dir_.Join("b.tfrecord"),
               dir_.Join("c.tfrecord")};
    o.batch_size = batch;
    o.training = training;
    o.num_readers = 2;
    o.num_preprocessing_threads = 3;
    o.shuffle_buffer_size = 6;
    o.seed = 42;
    o.decode_channels = 1;
    o.num_classes = 5;
    o.output_channels = 1;
    o.output_height = 4;
    o.output_width = 4;
    // Identity preprocessing to float CHW, plus one draw from the
    // example's RNG in pixel (0, 0) to check per-example seeding.
    o.preprocess = [](const torch::Tensor& img, std::mt19937_64& rng) {
      torch::Tensor x = img.to(torch::kFloat32).permute({2, 0, 1}).contiguous();
      x[0][0][0] = static_cast<float>(rng() % 1000);
      return x;
    };
    return o;
  }

  // Example ids (the pixel value at (1, 1)) of the next `n` batches.
  static std::vector<int> Ids(Pipeline& p, int n) {
    std::vector<int> ids;
    for (int b = 0; b < n; ++b) {
      auto batch = p.Next();
      if (!batch) break;
      for (int64_t i = 0; i < batch->size(); ++i) {
        ids.push_back(static_cast<int>(batch->images[i][0][1][1].item<float>()));
      }
    }
    return ids;
  }

  TempDir dir_;
};

TEST_F(PipelineTest, EvalIsOneOrderedPassWithPartialLastBatch) {
  Pipeline p(Options(/*training=*/false, 4));
  std::vector<int> ids;
  std::vector<int64_t> sizes;
  std::vector<int64_t> labels;
  while (auto batch = p.Next()) {
    sizes.push_back(batch->size());
    for (int64_t i = 0; i < batch->size(); ++i) {
      ids.push_back(static_cast<int>(batch->images[i][0][1][1].item<float>()));
      labels.push_back(batch->labels[i].item<int64_t>());
    }
  }
  std::vector<int> expected(21);
  for (int i = 0; i < 21; ++i) expected[i] = i;
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 4, 4, 4, 1}));
  EXPECT_EQ(labels[0], 0);
  EXPECT_EQ(labels[7], 3);
  EXPECT_EQ(labels[13], 0);
  EXPECT_EQ(p.position(), 21);
  EXPECT_FALSE(p.Next().has_value());
}

TEST_F(PipelineTest, TrainingRepeatsAndVisitsEveryExample) {
  Pipeline p(Options(/*training=*/true, 7));
  std::vector<int> ids = Ids(p, 30);  // 210 examples = 10 epochs
  ASSERT_EQ(ids.size(), 210u);
  std::map<int, int> counts;
  for (int id : ids) ++counts[id];
  ASSERT_EQ(counts.size(), 21u);
  for (const auto& kv : counts) {
    // The shuffle buffer holds 6 records, so an example is at most a few
    // positions away from its epoch: counts stay close to 10.
    EXPECT_GE(kv.second, 9) << kv.first;
    EXPECT_LE(kv.second, 11) << kv.first;
  }
  std::vector<int> first_epoch(ids.begin(), ids.begin() + 21);
  std::vector<int> sorted = first_epoch;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(first_epoch, sorted);  // shuffled
}

TEST_F(PipelineTest, DeterministicAcrossThreadCountsAndSeeds) {
  PipelineOptions a = Options(true, 5);
  PipelineOptions b = Options(true, 5);
  b.num_preprocessing_threads = 1;
  b.prefetch_batches = 7;
  Pipeline pa(a), pb(b);
  for (int i = 0; i < 12; ++i) {
    auto x = pa.Next();
    auto y = pb.Next();
    ASSERT_TRUE(torch::equal(x->images, y->images)) << i;
    ASSERT_TRUE(torch::equal(x->labels, y->labels)) << i;
  }
  PipelineOptions c = Options(true, 5);
  c.seed = 43;
  Pipeline pc(c);
  Pipeline pd(Options(true, 5));
  EXPECT_NE(Ids(pc, 6), Ids(pd, 6));
}

// Replicas' shards: each hands out its slice of every batch (images with
// their position's augmentation, labels), positions advance by the whole
// batch, and the slices together are the whole batch. A shard outside the
// batch, or in evaluation, is refused.
TEST_F(PipelineTest, ShardsTogetherAreTheWholeBatch) {
  Pipeline whole(Options(true, 6));
  std::vector<Batch> batches;
  for (int b = 0; b < 8; ++b) batches.push_back(*whole.Next());
  for (int shards : {2, 3}) {
    const int64_t size = 6 / shards;
    std::vector<std::unique_ptr<Pipeline>> parts;
    for (int k = 0; k < shards; ++k) {
      PipelineOptions o = Options(true, 6);
      o.shard_offset = k * size;
      o.shard_size = size;
      o.num_preprocessing_threads = 1 + k;  // timing does not matter
      parts.push_back(std::make_unique<Pipeline>(o));
    }
    for (int b = 0; b < 8; ++b) {
      for (int k = 0; k < shards; ++k) {
        SCOPED_TRACE(StrCat(shards, " shards, batch ", b, ", shard ", k));
        const Batch got = *parts[k]->Next();
        ASSERT_EQ(got.size(), size);
        EXPECT_EQ(got.first_position, b * 6 + k * size);
        EXPECT_EQ(got.end_position, (b + 1) * 6);
        EXPECT_TRUE(torch::equal(got.images,
                                 batches[b].images.narrow(0, k * size, size)));
        EXPECT_TRUE(torch::equal(got.labels,
                                 batches[b].labels.narrow(0, k * size, size)));
      }
    }
    EXPECT_EQ(parts[0]->position(), 48);
  }
  PipelineOptions bad = Options(true, 6);
  bad.shard_offset = 4;
  bad.shard_size = 3;
  EXPECT_THROW(Pipeline p(bad), Error);
  bad = Options(false, 6);
  bad.shard_size = 3;
  EXPECT_THROW(Pipeline p(bad), Error);
}

TEST_F(PipelineTest, StartPositionResumesTheSameStream) {
  Pipeline whole(Options(true, 4));
  std::vector<torch::Tensor> images;
  for (int i = 0; i < 15; ++i) images.push_back(whole.Next()->images);
  PipelineOptions o = Options(true, 4);
  o.start_position = 6 * 4;
  Pipeline resumed(o);
  for (int i = 6; i < 15; ++i) {
    auto batch = resumed.Next();
    EXPECT_EQ(batch->first_position, i * 4);
    EXPECT_TRUE(torch::equal(batch->images, images[i])) << i;
  }
}

// Resume at ImageNet scale: 2N batches equal N batches, then N more from a
// pipeline handed the reader state saved with batch N, which reads no
// record before that point (the buffer's records are read back by
// location). Across epochs, several open files and a full shuffle buffer.
TEST_F(PipelineTest, SavedReaderStateResumesWithoutReplay) {
  for (int64_t buffer : {6, 21, 1}) {
    for (int n : {1, 4, 9}) {
      SCOPED_TRACE("buffer " + std::to_string(buffer) + " n " + std::to_string(n));
      PipelineOptions o = Options(true, 4);
      o.shuffle_buffer_size = buffer;
      Pipeline whole(o);
      std::vector<Batch> batches;
      for (int i = 0; i < 2 * n; ++i) batches.push_back(*whole.Next());
      const Batch& last = batches[n - 1];
      ASSERT_NE(last.input_state, nullptr);
      PipelineOptions r = o;
      r.start_position = last.first_position + last.size();
      r.resume_state = *last.input_state;
      Pipeline resumed(r);
      for (int i = n; i < 2 * n; ++i) {
        auto batch = resumed.Next();
        EXPECT_EQ(batch->first_position, batches[i].first_position);
        EXPECT_TRUE(torch::equal(batch->images, batches[i].images)) << i;
        EXPECT_TRUE(torch::equal(batch->labels, batches[i].labels)) << i;
        // The resumed stream's states equal the uninterrupted one's.
        EXPECT_EQ(*batch->input_state, *batches[i].input_state) << i;
      }
      EXPECT_EQ(resumed.replayed_records(), 0);
    }
  }
}

// A state saved for other files or options is not used: the pipeline
// replays instead (still exact), and a damaged state changes nothing.
TEST_F(PipelineTest, MismatchedReaderStateFallsBackToReplay) {
  PipelineOptions o = Options(true, 4);
  Pipeline whole(o);
  std::vector<Batch> batches;
  for (int i = 0; i < 6; ++i) batches.push_back(*whole.Next());
  for (int variant = 0; variant < 4; ++variant) {
    PipelineOptions r = o;
    r.start_position = 12;
    r.resume_state = *batches[2].input_state;
    if (variant == 0) r.shuffle_buffer_size = 7;  // another stream...
    if (variant == 1) r.seed = 43;                // ...so no state
    if (variant == 2) r.resume_state.resize(r.resume_state.size() - 3);
    if (variant == 3) r.resume_state[0] = 'X';
    Pipeline resumed(r);
    auto batch = resumed.Next();
    EXPECT_EQ(resumed.replayed_records(), 12) << variant;
    if (variant >= 2) {
      EXPECT_TRUE(torch::equal(batch->images, batches[3].images)) << variant;
    }
  }
  // A file rewritten since the checkpoint (another size) changes the
  // fingerprint too.
  WriteTinyImageRecords(dir_.Join("b.tfrecord"), 6, 7, {3});
  PipelineOptions r = o;
  r.start_position = 12;
  r.resume_state = *batches[2].input_state;
  Pipeline resumed(r);
  ASSERT_TRUE(resumed.Next().has_value());
  EXPECT_EQ(resumed.replayed_records(), 12);
}

// --repeated_augmentation on the record stream: position p shows the
// record the plain stream shows at SourcePosition(p), with p's own draw;
// resuming from the state saved with any batch (mid-block or not, across
// epochs) or by replay continues it exactly.
TEST_F(PipelineTest, RepeatedRecordsFollowThePlainStreamAndResume) {
  PipelineOptions plain_options = Options(true, 5);
  Pipeline plain(plain_options);
  const std::vector<int> plain_ids = Ids(plain, 12);
  for (ExampleRepeat repeat : {ExampleRepeat{3, 1}, ExampleRepeat{2, 5}}) {
    SCOPED_TRACE(StrCat("repeats ", repeat.repeats, " stride ", repeat.stride));
    PipelineOptions o = Options(true, 5);
    o.repeat = repeat;
    Pipeline whole(o);
    std::vector<Batch> batches;
    for (int i = 0; i < 12; ++i) batches.push_back(*whole.Next());
    for (int i = 0; i < 12; ++i) {
      for (int j = 0; j < 5; ++j) {
        const int64_t pos = i * 5 + j;
        EXPECT_EQ(batches[i].images[j][0][1][1].item<float>(),
                  plain_ids[repeat.SourcePosition(pos)])
            << pos;
        std::mt19937_64 rng(ExampleRngSeed(42, pos));
        EXPECT_EQ(batches[i].images[j][0][0][0].item<float>(),
                  static_cast<float>(rng() % 1000))
            << pos;
      }
    }
    for (int n : {1, 2, 5}) {
      for (bool with_state : {true, false}) {
        PipelineOptions r = o;
        r.start_position = batches[n - 1].end_position;
        if (with_state) r.resume_state = *batches[n - 1].input_state;
        Pipeline resumed(r);
        for (int i = n; i < 12; ++i) {
          auto batch = resumed.Next();
          ASSERT_TRUE(torch::equal(batch->images, batches[i].images))
              << n << " " << with_state << " " << i;
          EXPECT_EQ(*batch->input_state, *batches[i].input_state);
        }
        EXPECT_EQ(resumed.replayed_records(), with_state ? 0 : n * 5);
      }
    }
    // A plain stream's state is not a repeated one's: replay.
    PipelineOptions r = o;
    r.start_position = 10;
    Pipeline other(Options(true, 5));
    other.Next();
    r.resume_state = *other.Next()->input_state;
    Pipeline resumed(r);
    resumed.Next();
    EXPECT_EQ(resumed.replayed_records(), 10);
  }
  PipelineOptions bad = Options(false, 5);
  bad.repeat = {2, 1};
  EXPECT_THROW(Pipeline p(bad), Error);
}

TEST_F(PipelineTest, ErrorsSurfaceInStreamOrderWhateverTheTiming) {
  PipelineOptions o = Options(false, 4);
  o.num_classes = 4;  // label 4 in c.tfrecord records 0, 2, 4, ... is bad
  o.num_preprocessing_threads = 4;
  for (int attempt = 0; attempt < 20; ++attempt) {
    Pipeline p(o);
    int64_t delivered = 0;
    try {
      while (auto batch = p.Next()) delivered += batch->size();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      // The first bad record is example 12 (a: 7, b: 5): batches 0-2 come
      // out whole, then batch 3 fails, naming c.tfrecord's record 0, even
      // when a later bad batch was decoded first.
      std::string msg = e.what();
      EXPECT_EQ(delivered, 12);
      EXPECT_NE(msg.find("c.tfrecord record 0:"), std::string::npos) << msg;
      EXPECT_NE(msg.find("outside [0, 4)"), std::string::npos) << msg;
    }
    EXPECT_THROW(p.Next(), Error);  // and again on later calls
  }
}

TEST_F(PipelineTest, LabelsOffsetShiftsLabels) {
  PipelineOptions o = Options(false, 21);
  o.files = {dir_.Join("b.tfrecord")};  // all labels 3
  o.labels_offset = 1;
  o.num_classes = 4;
  Pipeline p(o);
  auto batch = p.Next();
  EXPECT_EQ(batch->labels.min().item<int64_t>(), 2);
  EXPECT_EQ(batch->labels.max().item<int64_t>(), 2);
}

TEST_F(PipelineTest, CorruptRecordErrorReachesTheCaller) {
  std::string path = dir_.Join("b.tfrecord");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x5a');
  }
  Pipeline p(Options(false, 4));
  try {
    while (p.Next()) {
    }
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("b.tfrecord"), std::string::npos)
        << e.what();
  }
}

TEST_F(PipelineTest, RejectsBadOptions) {
  PipelineOptions o = Options(true, 0);
  EXPECT_THROW(Pipeline p(o), Error);
  o = Options(true, 4);
  o.files.clear();
  EXPECT_THROW(Pipeline p(o), Error);
}

TEST_F(PipelineTest, DestroyingMidStreamDoesNotHang) {
  for (int i = 0; i < 5; ++i) {
    Pipeline p(Options(true, 3));
    p.Next();
  }
}

}  // namespace
}  // namespace slimtorch
