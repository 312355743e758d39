// Checkpoints written by TensorFlow 2.21's own tf.compat.v1.train.Saver
// (tests/golden/tf_checkpoints/, made by scripts/golden/gen_tf_checkpoints.py
// with what TensorFlow's reader returns for them in
// tests/golden/tf_saver_checkpoint_goldens.inc): V1 and V2, every dtype, a
// 2-shard bundle, partitioned variables, and three nets (lenet V1, cifarnet
// V2, mobilenet_v1_025 V2 with moving averages and Momentum slots).
//
// Asserted: our reader lists and returns what TensorFlow's lists and returns,
// down to the table's raw keys; our table builder rebuilds TensorFlow's
// .index byte for byte; our writer, given the tensors read from a
// TensorFlow-written net bundle, writes TensorFlow's very files; the nets
// restored through --checkpoint_path's code give TensorFlow's logits (and,
// from the shadows, its moving-average logits); with TensorFlow present
// (label "tensorflow"), every tf_slim net's V1 and V2 checkpoint does too.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "nets/golden_util.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/archive.h"
#include "slimtorch/io/checkpoint.h"
#include "slimtorch/io/crc32c.h"
#include "slimtorch/io/sstable.h"
#include "slimtorch/io/tf_checkpoint.h"
#include "slimtorch/nets/net.h"
#include "slimtorch/train/variables.h"
#include "test_util.h"

namespace slimtorch {
namespace {

struct TfCkptKey {
  const char* name;
  int dtype;
  std::vector<int64_t> shape;
};
struct TfCkptValues {
  const char* name;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};
struct TfCkptStats {
  const char* name;
  int64_t count;
  double sum;
  double abs_sum;
  std::vector<double> first;
};
struct TfCkptRawKey {
  const char* bytes;
  int size;
};
struct TfCkptGolden {
  const char* archive;
  const char* dir;
  const char* prefix;
  int format;
  int num_shards;
  const char* checkpoint_path;
  const TfCkptKey* keys;
  int num_keys;
  const TfCkptValues* values;
  int num_values;
  const TfCkptStats* stats;
  int num_stats;
  const TfCkptRawKey* raw_keys;
  int num_raw_keys;
};
struct TfCkptNetGolden {
  const char* archive;
  const char* net;
  int image_size;
  int channels;
  int num_classes;
  int64_t global_step;
  const float* logits;
  const float* ema_logits;
  int num_frames = 0;  // video nets: the clip's frames; 0: images
};

#include "golden/tf_saver_checkpoint_goldens.inc"

using testing::TempDir;
using testing_io::GoldenPath;

std::string DataFile(const std::string& prefix, int shard, int num_shards) {
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".data-%05d-of-%05d", shard,
                num_shards);
  return prefix + suffix;
}

// The files of golden `g` (relative to its archive's root).
std::vector<std::string> Files(const TfCkptGolden& g) {
  std::vector<std::string> files = {std::string(g.dir) + "/checkpoint"};
  if (g.format == 1) {
    files.push_back(g.prefix);
  } else {
    files.push_back(std::string(g.prefix) + ".index");
    for (int i = 0; i < g.num_shards; ++i) {
      files.push_back(DataFile(g.prefix, i, g.num_shards));
    }
  }
  return files;
}

// Unpacks golden `g`'s files into `dir`.
void Unpack(const TfCkptGolden& g, const TempDir& dir) {
  const std::string archive =
      GoldenPath(std::string("tf_checkpoints/") + g.archive);
  for (const auto& m : ReadArchiveMembers(archive, Files(g))) {
    MakeDirs(std::filesystem::path(dir.Join(m.first)).parent_path().string());
    WriteFileAtomically(dir.Join(m.first), m.second);
  }
}

const TfCkptGolden& GoldenOf(const std::string& archive) {
  for (const TfCkptGolden& g : kTfCkptGoldens) {
    if (archive == g.archive) return g;
  }
  throw Error("no golden for " + archive);
}

// The table file of a checkpoint: V2's .index, V1's single file.
std::string TableFile(const TfCkptGolden& g, const TempDir& dir) {
  return dir.Join(g.prefix) + (g.format == 2 ? ".index" : "");
}

std::vector<std::pair<std::string, std::string>> TableEntries(
    const std::string& path) {
  const std::string bytes = ReadFileToString(path);
  std::vector<std::pair<std::string, std::string>> entries;
  sstable::ForEachEntry(bytes.data(), bytes.size(), path,
                        [&](std::string_view key, std::string_view value) {
                          entries.emplace_back(std::string(key),
                                               std::string(value));
                        });
  return entries;
}

// Bitwise equality of two doubles (so that -0 differs from 0).
bool SameBits(double a, double b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

void ExpectValues(const TfCheckpointReader& reader, const TfCkptValues& want) {
  SCOPED_TRACE(want.name);
  if (!want.strings.empty()) {
    // Strings are listed but not read (no LibTorch dtype holds them).
    ASSERT_NE(reader.Find(want.name), nullptr);
    EXPECT_FALSE(reader.Find(want.name)->supported);
    std::vector<std::string> skipped;
    reader.ReadAll(&skipped);
    EXPECT_NE(std::find(skipped.begin(), skipped.end(), want.name),
              skipped.end());
    return;
  }
  const torch::Tensor t = reader.Read(want.name).contiguous();
  if (!want.floats.empty() || (want.ints.empty() && t.is_floating_point())) {
    ASSERT_TRUE(t.is_floating_point());
    const torch::Tensor d = t.to(torch::kDouble).reshape({-1});
    ASSERT_EQ(d.numel(), static_cast<int64_t>(want.floats.size()));
    for (int64_t i = 0; i < d.numel(); ++i) {
      EXPECT_TRUE(SameBits(d[i].item<double>(), want.floats[i]))
          << i << ": " << d[i].item<double>() << " vs " << want.floats[i];
    }
  } else {
    ASSERT_FALSE(t.is_floating_point());
    const torch::Tensor l = t.to(torch::kLong).reshape({-1});
    ASSERT_EQ(l.numel(), static_cast<int64_t>(want.ints.size()));
    for (int64_t i = 0; i < l.numel(); ++i) {
      EXPECT_EQ(l[i].item<int64_t>(), want.ints[i]) << i;
    }
  }
}

void ExpectStats(const TfCheckpointReader& reader, const TfCkptStats& want) {
  SCOPED_TRACE(want.name);
  const torch::Tensor d =
      reader.Read(want.name).to(torch::kDouble).contiguous().reshape({-1});
  ASSERT_EQ(d.numel(), want.count);
  // Float64 sums of float32 values: exact to a few ulps whatever the order.
  EXPECT_NEAR(d.sum().item<double>(), want.sum, 1e-12 * want.abs_sum + 1e-12);
  EXPECT_NEAR(d.abs().sum().item<double>(), want.abs_sum,
              1e-12 * want.abs_sum + 1e-12);
  for (size_t i = 0; i < want.first.size(); ++i) {
    EXPECT_TRUE(SameBits(d[i].item<double>(), want.first[i]))
        << i << ": " << d[i].item<double>() << " vs " << want.first[i];
  }
}

class TfSaverCheckpointTest : public ::testing::TestWithParam<size_t> {
 protected:
  const TfCkptGolden& golden() const { return kTfCkptGoldens[GetParam()]; }
};

TEST_P(TfSaverCheckpointTest, ReadsWhatTensorFlowReads) {
  const TfCkptGolden& g = golden();
  TempDir dir;
  Unpack(g, dir);
  // The directory resolves through TensorFlow's `checkpoint` file, whose
  // absolute path (the generator's, long gone) falls back to the directory.
  const TfCheckpointReader reader(dir.Join(g.dir));
  EXPECT_EQ(reader.prefix(), dir.Join(g.prefix));
  EXPECT_EQ(reader.format(),
            g.format == 1 ? TfCheckpointFormat::kV1 : TfCheckpointFormat::kV2);
  // The prefix and each file of the bundle resolve to the same checkpoint.
  for (const std::string& f : Files(g)) {
    if (f == std::string(g.dir) + "/checkpoint") continue;
    EXPECT_EQ(TfCheckpointReader(dir.Join(f)).prefix(), dir.Join(g.prefix))
        << f;
  }
  // Listed as tf.train.list_variables lists them.
  ASSERT_EQ(reader.tensors().size(), static_cast<size_t>(g.num_keys));
  for (int i = 0; i < g.num_keys; ++i) {
    const TfTensorInfo& t = reader.tensors()[i];
    EXPECT_EQ(t.name, g.keys[i].name);
    EXPECT_EQ(t.tf_dtype, g.keys[i].dtype) << t.name;
    EXPECT_EQ(t.shape, g.keys[i].shape) << t.name;
  }
  for (int i = 0; i < g.num_values; ++i) ExpectValues(reader, g.values[i]);
  for (int i = 0; i < g.num_stats; ++i) ExpectStats(reader, g.stats[i]);
  // Through our writer and back: the same bytes in every tensor read.
  std::vector<std::string> skipped;
  const NamedTensors all = reader.ReadAll(&skipped);
  EXPECT_EQ(all.size() + skipped.size(), static_cast<size_t>(g.num_keys));
  SaveTfCheckpoint(dir.Join("ours/model"), all);
  const NamedTensors again =
      TfCheckpointReader(dir.Join("ours/model")).ReadAll();
  ASSERT_EQ(again.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(again[i].name, all[i].name);
    EXPECT_EQ(again[i].tensor.scalar_type(), all[i].tensor.scalar_type());
    EXPECT_EQ(again[i].tensor.sizes(), all[i].tensor.sizes()) << all[i].name;
    const torch::Tensor a = all[i].tensor.contiguous();
    const torch::Tensor b = again[i].tensor.contiguous();
    EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()), 0)
        << all[i].name;
  }
  if (g.num_raw_keys > 0) {
    const auto entries = TableEntries(TableFile(g, dir));
    ASSERT_EQ(entries.size(), static_cast<size_t>(g.num_raw_keys));
    for (int i = 0; i < g.num_raw_keys; ++i) {
      EXPECT_EQ(entries[i].first,
                std::string(g.raw_keys[i].bytes, g.raw_keys[i].size))
          << "key " << i;
    }
  }
}

// Our table builder, given TensorFlow's entries, writes TensorFlow's .index.
TEST(TfSaverCheckpointV2Test, TableBuilderRebuildsTensorFlowsIndex) {
  int checked = 0;
  for (const TfCkptGolden& g : kTfCkptGoldens) {
    if (g.format != 2) continue;
    SCOPED_TRACE(g.dir);
    TempDir dir;
    Unpack(g, dir);
    const std::string index = TableFile(g, dir);
    sstable::Builder builder;
    for (const auto& e : TableEntries(index)) builder.Add(e.first, e.second);
    EXPECT_TRUE(builder.Finish() == ReadFileToString(index));
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutFixed32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t Varint(const char** p, const char* end) {
  uint64_t v = 0;
  EXPECT_TRUE(sstable::DecodeVarint64(p, end, &v));
  return v;
}

// `raw` as a valid snappy stream written by hand from the format: the
// uncompressed length as a varint, then literals of at most 64 KiB, each a
// tag byte 61 << 2 (a literal whose length - 1 follows in 2 bytes), the
// length - 1 and the bytes.
std::string SnappyOf(const std::string& raw) {
  std::string out;
  PutVarint(&out, raw.size());
  for (size_t at = 0; at < raw.size(); at += 65536) {
    const size_t n = std::min<size_t>(65536, raw.size() - at);
    out.push_back(static_cast<char>(61 << 2));
    out.push_back(static_cast<char>((n - 1) & 0xFF));
    out.push_back(static_cast<char>((n - 1) >> 8));
    out.append(raw, at, n);
  }
  return out;
}

// TensorFlow's TableBuilder compresses blocks with snappy when asked (its
// checkpoints do not, but other writers of the format may): TensorFlow's
// cifarnet .index with its data block snappy-compressed reads the same
// entries, and the bundle the same tensors; broken snappy data is named.
TEST(TfSaverCheckpointV2Test, SnappyCompressedBlocksRead) {
  if (!sstable::HasSnappy()) GTEST_SKIP() << "built without libsnappy";
  const TfCkptGolden& g = GoldenOf("cifarnet_v2.tar.gz");
  TempDir dir;
  Unpack(g, dir);
  const std::string index_path = TableFile(g, dir);
  const std::string table = ReadFileToString(index_path);
  // Footer: metaindex and index handles.
  const char* p = table.data() + table.size() - sstable::kFooterSize;
  const char* end = table.data() + table.size();
  const uint64_t meta_off = Varint(&p, end), meta_size = Varint(&p, end);
  const uint64_t index_off = Varint(&p, end), index_size = Varint(&p, end);
  // TensorFlow wrote one data block: the index has one entry.
  p = table.data() + index_off;
  const char* index_end = p + index_size;
  ASSERT_EQ(Varint(&p, index_end), 0u);  // shared
  const uint64_t key_len = Varint(&p, index_end);
  const uint64_t value_len = Varint(&p, index_end);
  const std::string last_key(p, key_len);
  const char* handle = p + key_len;
  ASSERT_EQ(Varint(&handle, index_end), 0u);  // data block at 0
  const uint64_t data_size = Varint(&handle, index_end);
  ASSERT_EQ(handle, p + key_len + value_len);
  ASSERT_EQ(data_size + 5, meta_off);

  auto with_trailer = [](std::string contents, char type) {
    contents.push_back(type);
    std::string out = contents;
    PutFixed32(&out, crc32c::Mask(crc32c::Value(contents)));
    return out;
  };
  const std::string data = table.substr(0, data_size);
  const std::string snappy = SnappyOf(data);
  auto build = [&](const std::string& compressed) {
    std::string out = with_trailer(compressed, 1);
    const uint64_t new_meta = out.size();
    out += table.substr(meta_off, meta_size + 5);  // unchanged, own CRC
    std::string index;
    std::string h;
    PutVarint(&h, 0);
    PutVarint(&h, compressed.size());
    PutVarint(&index, 0);
    PutVarint(&index, last_key.size());
    PutVarint(&index, h.size());
    index += last_key + h;
    PutFixed32(&index, 0);  // restart at 0
    PutFixed32(&index, 1);  // one restart
    const uint64_t new_index = out.size();
    out += with_trailer(index, 0);
    std::string footer;
    PutVarint(&footer, new_meta);
    PutVarint(&footer, meta_size);
    PutVarint(&footer, new_index);
    PutVarint(&footer, index.size());
    footer.resize(40, '\0');
    for (int i = 0; i < 8; ++i) {
      footer.push_back(static_cast<char>(sstable::kTableMagic >> (8 * i)));
    }
    return out + footer;
  };
  const auto want = TableEntries(index_path);
  const NamedTensors tensors = TfCheckpointReader(dir.Join(g.dir)).ReadAll();
  WriteFileAtomically(index_path, build(snappy));
  EXPECT_EQ(TableEntries(index_path), want);
  const NamedTensors again = TfCheckpointReader(dir.Join(g.dir)).ReadAll();
  ASSERT_EQ(again.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_TRUE(torch::equal(again[i].tensor, tensors[i].tensor))
        << tensors[i].name;
  }
  // A stream that claims one byte more than it holds (its CRC made right).
  std::string lying;
  PutVarint(&lying, data.size() + 1);
  const char* q = snappy.data();
  Varint(&q, snappy.data() + snappy.size());
  lying.append(q, snappy.data() + snappy.size() - q);
  WriteFileAtomically(index_path, build(lying));
  EXPECT_ERROR_CONTAINS(TableEntries(index_path), index_path,
                        "corrupt snappy data in the data block at byte 0");
}

// Tensors that fail to read after one byte of a data file is flipped; every
// failure must be a CRC mismatch naming its tensor.
int DamagedTensors(const TfCkptGolden& g, const TempDir& dir) {
  const TfCheckpointReader reader(dir.Join(g.dir));
  int failures = 0;
  for (const TfTensorInfo& t : reader.tensors()) {
    if (!t.supported) continue;
    try {
      reader.Read(t.name);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("CRC mismatch for tensor '" + t.name + "'"),
                std::string::npos)
          << what;
      ++failures;
    }
  }
  return failures;
}

// One flipped byte in a V2 data file: exactly the tensor it lies in fails,
// named; the others still read. (V1 values carry no CRC.) A byte inside a
// string tensor, which is not read, breaks nothing; every shard has a
// position that hits a read tensor.
TEST(TfSaverCheckpointV2Test, DamagedDataNamesTheTensor) {
  for (const TfCkptGolden& g : kTfCkptGoldens) {
    if (g.format != 2) continue;
    SCOPED_TRACE(g.dir);
    TempDir dir;
    Unpack(g, dir);
    for (int shard = 0; shard < g.num_shards; ++shard) {
      SCOPED_TRACE(shard);
      const std::string data =
          DataFile(dir.Join(g.prefix), shard, g.num_shards);
      const std::string good = ReadFileToString(data);
      if (good.empty()) continue;
      bool hit = false;
      for (size_t at :
           {good.size() / 2, good.size() / 3, good.size() - 1, size_t{0}}) {
        std::string bad = good;
        bad[at] ^= 0x10;
        WriteFileAtomically(data, bad);
        const int failures = DamagedTensors(g, dir);
        EXPECT_LE(failures, 1) << "byte " << at;
        hit = hit || failures == 1;
      }
      WriteFileAtomically(data, good);
      EXPECT_TRUE(hit);
      EXPECT_EQ(DamagedTensors(g, dir), 0);
    }
  }
}

std::string GoldenName(const ::testing::TestParamInfo<size_t>& info) {
  const TfCkptGolden& g = kTfCkptGoldens[info.param];
  std::string name = g.dir;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Goldens, TfSaverCheckpointTest,
    ::testing::Range<size_t>(0, sizeof(kTfCkptGoldens) /
                                    sizeof(kTfCkptGoldens[0])),
    GoldenName);

// TF → us → TF: the tensors read from TensorFlow's V2 net bundles, written by
// our writer, give TensorFlow's files byte for byte (index and data), so
// every tensor is byte-identical.
TEST(TfSaverCheckpointNetTest, OurWriterWritesTensorFlowsFiles) {
  int checked = 0;
  for (const TfCkptGolden& g : kTfCkptGoldens) {
    if (g.format != 2 || g.num_stats == 0) continue;
    SCOPED_TRACE(g.dir);
    TempDir dir;
    Unpack(g, dir);
    const NamedTensors tensors = TfCheckpointReader(dir.Join(g.dir)).ReadAll();
    const std::string ours = dir.Join("ours/model");
    SaveTfCheckpoint(ours, tensors);
    EXPECT_TRUE(ReadFileToString(ours + ".index") ==
                ReadFileToString(dir.Join(g.prefix) + ".index"));
    EXPECT_TRUE(ReadFileToString(DataFile(ours, 0, 1)) ==
                ReadFileToString(DataFile(dir.Join(g.prefix), 0, 1)));
    ++checked;
  }
  EXPECT_EQ(checked, 2);  // cifarnet, mobilenet_v1_025
}

// Returns the largest |difference| over the largest |logit|.
double ExpectLogits(Net& net, const TfCkptNetGolden& g,
                    const float* want_data) {
  net.module().eval();
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> shape =
      g.num_frames > 0
          ? std::vector<int64_t>{2, g.num_frames, g.image_size, g.image_size,
                                 g.channels}
          : std::vector<int64_t>{2, g.image_size, g.image_size, g.channels};
  const torch::Tensor images = golden::ActivationFromTf(
      golden::Fill(shape, golden::GoldenFill{"images", 0, 1.0}));
  const torch::Tensor logits = net.Forward(images).logits;
  const torch::Tensor want =
      torch::from_blob(const_cast<float*>(want_data), {2, g.num_classes})
          .clone();
  const double scale = want.abs().max().item<double>();
  const double diff = (logits - want).abs().max().item<double>();
  EXPECT_LE(diff, 1e-4 * scale) << logits << "\n" << want;
  return diff / scale;
}

std::shared_ptr<Net> NetFor(const TfCkptNetGolden& g) {
  return CreateNet(g.net, NetOptions()
                              .num_classes(g.num_classes)
                              .image_size(g.image_size)
                              .input_channels(g.channels));
}

// --checkpoint_path's restore (and eval's, with --moving_average_decay, from
// the shadows) on TensorFlow's bytes gives TensorFlow's logits.
TEST(TfSaverCheckpointNetTest, NetsGiveTensorFlowsLogits) {
  for (const TfCkptNetGolden& n : kTfCkptNetGoldens) {
    SCOPED_TRACE(n.net);
    const TfCkptGolden& g = GoldenOf(n.archive);
    TempDir dir;
    Unpack(g, dir);
    auto net = NetFor(n);
    const RestoredCheckpoint r =
        RestoreCheckpointFor(dir.Join(g.dir), *net, {}, false);
    EXPECT_TRUE(r.tensorflow);
    EXPECT_EQ(r.path, dir.Join(g.prefix));
    EXPECT_EQ(r.restored, static_cast<int>(net->ModelVariables().size()));
    EXPECT_EQ(r.global_step.value_or(-1), n.global_step);
    ExpectLogits(*net, n, n.logits);
    if (n.ema_logits != nullptr) {
      auto averaged = NetFor(n);
      RestoreCheckpointFor(dir.Join(g.dir), *averaged, {}, true);
      ExpectLogits(*averaged, n, n.ema_logits);
    }
  }
}

// TensorFlow's Momentum slots and moving averages come through the trainer's
// layout mapping: each equals its variable's TensorFlow tensor mapped as the
// variable is.
TEST(TfSaverCheckpointNetTest, SlotsAndAveragesMapLikeTheirVariables) {
  const TfCkptNetGolden& n = kTfCkptNetGoldens[2];
  ASSERT_STREQ(n.net, "mobilenet_v1_025");
  const TfCkptGolden& g = GoldenOf(n.archive);
  TempDir dir;
  Unpack(g, dir);
  auto net = NetFor(n);
  const TfCheckpointReader reader(dir.Join(g.dir));
  const NamedTensors tf = reader.ReadAll();
  const NamedTensors ours = FromTfLayouts(tf, *net);
  std::map<std::string, torch::Tensor> by_name;
  for (const NamedTensor& t : ours) by_name[t.name] = t.tensor;
  int slots = 0, averages = 0;
  for (const NamedTensor& v : net->ModelVariables()) {
    for (const std::string suffix :
         {"/Momentum", "/ExponentialMovingAverage"}) {
      auto it = by_name.find(v.name + suffix);
      if (it == by_name.end()) continue;
      EXPECT_EQ(it->second.sizes(), v.tensor.sizes()) << v.name << suffix;
      EXPECT_TRUE(torch::equal(
          it->second, FromTfLayout(v.name, reader.Read(v.name + suffix))))
          << v.name << suffix;
      (suffix == "/Momentum" ? slots : averages)++;
    }
  }
  // Every model variable has a shadow; every trainable one a slot.
  EXPECT_EQ(averages, static_cast<int>(net->ModelVariables().size()));
  EXPECT_EQ(slots, static_cast<int>(net->TrainableVariables().size()));
  // And back: ToTfLayouts gives TensorFlow's tensors bit for bit.
  const NamedTensors back = ToTfLayouts(ours, *net);
  ASSERT_EQ(back.size(), tf.size());
  for (size_t i = 0; i < tf.size(); ++i) {
    EXPECT_EQ(back[i].name, tf[i].name);
    EXPECT_TRUE(torch::equal(back[i].tensor, tf[i].tensor)) << tf[i].name;
  }
}

// Every tf_slim net (and lenet, cifarnet, mobilenet_v1_025) restored from V1
// and V2 checkpoints TensorFlow wrote at test time: run by
// tests/tf/tf_checkpoints_all_nets.sh (CTest label "tensorflow"), which sets
// SLIMTORCH_TF_ALL_NETS_DIR to gen_tf_checkpoints.py --all-nets' output.
TEST(TfSaverCheckpointAllNetsTest, EveryNetGivesTensorFlowsLogits) {
  const char* root = std::getenv("SLIMTORCH_TF_ALL_NETS_DIR");
  if (root == nullptr || *root == '\0') {
    GTEST_SKIP() << "run through tests/tf/tf_checkpoints_all_nets.sh "
                    "(needs TensorFlow + tf_slim)";
  }
  std::istringstream manifest(ReadFileToString(JoinPath(root, "manifest.txt")));
  int nets = 0;
  // "net size classes channels [frames]": research/slim's nets add the
  // frame count (0 for images).
  for (std::string line; std::getline(manifest, line);) {
    std::istringstream fields(line);
    std::string name;
    int size = 0, classes = 0, channels = 0, frames = 0;
    if (!(fields >> name >> size >> classes >> channels)) continue;
    fields >> frames;
    SCOPED_TRACE(name);
    if (!GetNetRegistry().Has(name)) {
      std::printf("%-20s not built yet: passed by\n", name.c_str());
      continue;
    }
    std::vector<float> want;
    std::istringstream lines(
        ReadFileToString(JoinPath(root, name + "/logits.txt")));
    for (float x; lines >> x;) want.push_back(x);
    ASSERT_EQ(want.size(), static_cast<size_t>(2 * classes));
    const TfCkptNetGolden n{"",      name.c_str(), size,        channels,
                            classes, 1000,         want.data(), nullptr,
                            frames};
    for (const std::string version : {"v1", "v2"}) {
      SCOPED_TRACE(version);
      auto net = NetFor(n);
      const RestoredCheckpoint r = RestoreCheckpointFor(
          JoinPath(root, name + "/" + version), *net, {}, false);
      EXPECT_EQ(r.restored, static_cast<int>(net->ModelVariables().size()));
      EXPECT_EQ(r.global_step.value_or(-1), 1000);
      const double rel = ExpectLogits(*net, n, want.data());
      std::printf("%-20s %s: %d variables, logits within %.2g of the largest\n",
                  name.c_str(), version.c_str(), r.restored, rel);
    }
    ++nets;
  }
  EXPECT_GT(nets, 0);
}

}  // namespace
}  // namespace slimtorch
