#pragma once
// Reading back event files in tests: every event of a file, and the summary
// values of a file by (tag, step).

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/io/proto/event.pb.h"
#include "slimtorch/io/tfrecord.h"

namespace slimtorch {
namespace testing_io {

// Every event of the event file at `path`, in file order; a record that is
// not an Event fails the test.
inline std::vector<proto::Event> ReadEvents(const std::string& path) {
  TFRecordReader reader(path);
  std::vector<proto::Event> events;
  std::string record;
  while (reader.Read(&record)) {
    proto::Event e;
    EXPECT_TRUE(e.ParseFromString(record)) << path;
    events.push_back(e);
  }
  return events;
}

using SummaryValues =
    std::map<std::pair<std::string, int64_t>, proto::SummaryValue>;

// The summary values of the event file at `path` by (tag, step); a later
// value of the same tag and step replaces an earlier one.
inline SummaryValues ReadSummaryValues(const std::string& path) {
  SummaryValues values;
  for (const proto::Event& e : ReadEvents(path)) {
    for (const auto& v : e.summary().value()) values[{v.tag(), e.step()}] = v;
  }
  return values;
}

}  // namespace testing_io
}  // namespace slimtorch
