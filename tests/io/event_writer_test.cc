#include "slimtorch/io/event_writer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "io/event_test_util.h"
#include "io/io_test_util.h"
#include "slimtorch/core/file_util.h"
#include "slimtorch/io/proto/event.pb.h"
#include "slimtorch/io/tfrecord.h"
#include "test_util.h"

namespace slimtorch {
namespace {

using testing_io::GoldenOutPath;
using testing_io::ReadEvents;
using testing_io::ScratchDir;

double Now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

TEST(EventWriterTest, FileNameAndVersionRecord) {
  ScratchDir scratch;
  const std::string logdir = JoinPath(scratch.path(), "a/b");
  const double before = Now();
  EventWriter writer(logdir, ".eval");
  const std::string name = std::filesystem::path(writer.path()).filename();
  EXPECT_EQ(std::filesystem::path(writer.path()).parent_path().string(),
            logdir);
  ASSERT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  const std::string rest = name.substr(20);
  const size_t dot = rest.find('.');
  ASSERT_EQ(dot, 10u) << name;
  const long long secs = std::stoll(rest.substr(0, dot));
  EXPECT_NEAR(static_cast<double>(secs), before, 2.0);
  EXPECT_EQ(rest.substr(dot + 1), Hostname() + ".eval");

  // The version record is on disk before any Flush().
  const std::vector<proto::Event> events = ReadEvents(writer.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_NEAR(events[0].wall_time(), before, 2.0);
  EXPECT_EQ(events[0].step(), 0);
  EXPECT_FALSE(events[0].has_summary());
}

TEST(EventWriterTest, ScalarsReadBackAfterFlushAndDestruction) {
  ScratchDir dir;
  std::string path;
  {
    EventWriter writer(dir.path());
    path = writer.path();
    writer.AddScalar("loss", 2.5f, 1);
    writer.AddScalar("learning_rate", 0.01f, 1);
    writer.Flush();
    std::vector<proto::Event> events = ReadEvents(path);
    ASSERT_EQ(events.size(), 3u);
    writer.AddScalar("loss", -1e-3f, int64_t(1) << 33);
  }
  const std::vector<proto::Event> events = ReadEvents(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  struct Want {
    std::string tag;
    float value;
    int64_t step;
  };
  const std::vector<Want> want = {{"loss", 2.5f, 1},
                                  {"learning_rate", 0.01f, 1},
                                  {"loss", -1e-3f, int64_t(1) << 33}};
  for (size_t i = 0; i < want.size(); ++i) {
    const proto::Event& e = events[i + 1];
    EXPECT_EQ(e.step(), want[i].step);
    EXPECT_GE(e.wall_time(), events[0].wall_time());
    ASSERT_EQ(e.summary().value_size(), 1);
    EXPECT_EQ(e.summary().value(0).tag(), want[i].tag);
    EXPECT_EQ(e.summary().value(0).simple_value(), want[i].value);
    EXPECT_TRUE(e.file_version().empty());
  }
}

TEST(EventWriterTest, TwoWritersNeverShareAFile) {
  ScratchDir dir;
  EventWriter a(dir.path());
  EventWriter b(dir.path());
  EXPECT_NE(a.path(), b.path());
  a.AddScalar("x", 1.0f, 0);
  a.Flush();
  EXPECT_EQ(ReadEvents(a.path()).size(), 2u);
  EXPECT_EQ(ReadEvents(b.path()).size(), 1u);
}

TEST(EventWriterTest, UnwritableLogdirIsAnError) {
  ScratchDir dir;
  WriteFileAtomically(dir.File("file"), "x");
  EXPECT_ERROR_CONTAINS(EventWriter(dir.File("file")), dir.File("file"));
}

// Leaves one event file in <build>/golden_out/events/ for
// scripts/golden/check_events.py (scalars, and a histogram TensorBoard must
// read as TensorFlow's own).
// A disk that fills during a flush: the error names the file, which is cut
// back to the records of the flushes before (TensorBoard reads it whole).
TEST(EventWriterTest, FullDiskLeavesWholeRecords) {
  ScratchDir dir;
  testing::ScopedFileFaults faults("write:*/events.out.tfevents.*:300:ENOSPC");
  EventWriter writer(dir.path());
  writer.AddScalar("loss", 1.0f, 1);
  writer.Flush();
  const uint64_t size = std::filesystem::file_size(writer.path());
  ASSERT_LT(size, 300u);
  for (int step = 2; step < 40; ++step) writer.AddScalar("loss", 2.0f, step);
  EXPECT_ERROR_CONTAINS(writer.Flush(),
                        "error writing event file '" + writer.path() + "'",
                        "No space left on device",
                        "keeps its first " + std::to_string(size) + " bytes");
  EXPECT_EQ(std::filesystem::file_size(writer.path()), size);
  const std::vector<proto::Event> events = ReadEvents(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 1.0f);
}

// An event file whose directory was removed while training: the next
// flush says so, instead of writing into a file nobody can open.
TEST(EventWriterTest, RemovedFileIsAnError) {
  ScratchDir dir;
  EventWriter writer(JoinPath(dir.path(), "train"));
  testing::RemoveTree(JoinPath(dir.path(), "train"));
  writer.AddScalar("loss", 1.0f, 1);
  EXPECT_ERROR_CONTAINS(writer.Flush(), "event file '" + writer.path() +
                                            "' was removed");
}

TEST(EventWriterTest, WritesFileForPythonCheck) {
  const std::string logdir = GoldenOutPath("events");
  testing::RemoveTree(logdir);
  EventWriter writer(logdir);
  for (int64_t step : {0, 10, 20}) {
    writer.AddScalar("loss", static_cast<float>(1.5 / (step + 1)), step);
    writer.AddScalar("eval/accuracy", static_cast<float>(0.25 * step), step);
  }
  // k / 50 - 1 for k < 101 in double, then float32, as the script makes
  // them for TensorFlow.
  writer.AddHistogram(
      "weights",
      MakeHistogram(
          (torch::arange(101, torch::kDouble) / 50 - 1).to(torch::kFloat),
          "weights"),
      20);
  writer.Flush();
  EXPECT_EQ(ReadEvents(writer.path()).size(), 8u);
}

struct HistogramGolden {
  std::string name;
  torch::Dtype dtype;
  std::vector<double> values;
  double min, max, num, sum, sum_squares;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
  double zero_fraction;
};
#include "golden/histogram_goldens.inc"

// tf.compat.v1.summary.histogram's HistogramProto and tf.nn.zero_fraction
// as TensorFlow computes them (the bucket edges, the merged empty runs,
// integers, an empty tensor), and a histogram event read back whole.
TEST(EventWriterTest, HistogramsAreTensorFlows) {
  ASSERT_FALSE(HistogramGoldens().empty());
  for (const HistogramGolden& g : HistogramGoldens()) {
    SCOPED_TRACE(g.name);
    const torch::Tensor t =
        torch::tensor(g.values, torch::kDouble).to(g.dtype).view({-1});
    const Histogram h = MakeHistogram(t, g.name);
    EXPECT_EQ(h.min, g.min);
    EXPECT_EQ(h.max, g.max);
    EXPECT_EQ(h.num, g.num);
    // Sums in the same order as TensorFlow's loop: exact.
    EXPECT_EQ(h.sum, g.sum);
    EXPECT_EQ(h.sum_squares, g.sum_squares);
    EXPECT_EQ(h.bucket_limit, g.bucket_limit);
    EXPECT_EQ(h.bucket, g.bucket);
    EXPECT_NEAR(ZeroFraction(t), g.zero_fraction, 1e-7);
  }
  // Shape does not matter, only the values.
  const HistogramGolden& normal = HistogramGoldens()[1];
  ASSERT_EQ(normal.name, "normal");
  const torch::Tensor w = torch::tensor(normal.values).view({40, 5, 10});
  EXPECT_EQ(MakeHistogram(w, "w").bucket, normal.bucket);

  ScratchDir dir;
  EventWriter writer(dir.path());
  writer.AddHistogram("LeNet/conv1/weights", MakeHistogram(w, "w"), 12);
  writer.Flush();
  const std::vector<proto::Event> events = ReadEvents(writer.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step(), 12);
  const proto::SummaryValue& v = events[1].summary().value(0);
  EXPECT_EQ(v.tag(), "LeNet/conv1/weights");
  ASSERT_TRUE(v.has_histo());
  EXPECT_EQ(v.histo().num(), 2000);
  EXPECT_EQ(
      std::vector<double>(v.histo().bucket().begin(), v.histo().bucket().end()),
      normal.bucket);
  EXPECT_EQ(std::vector<double>(v.histo().bucket_limit().begin(),
                                v.histo().bucket_limit().end()),
            normal.bucket_limit);

  // TensorFlow refuses NaN and infinity, naming the summary.
  EXPECT_ERROR_CONTAINS(MakeHistogram(torch::tensor({1.0f, NAN}), "act/x"),
                        "Nan in summary histogram for: act/x");
  EXPECT_ERROR_CONTAINS(MakeHistogram(torch::tensor({INFINITY}), "act/y"),
                        "Infinity in summary histogram for: act/y");
}

}  // namespace
}  // namespace slimtorch
