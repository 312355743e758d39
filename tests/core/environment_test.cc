#include "slimtorch/core/environment.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace slimtorch {
namespace {

using Kind = SlimtorchVariableInfo::Kind;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(EnvironmentTest, TheListIsTheDocsTable) {
  // The variables of docs/runtime_switches.md's table, in its order.
  const std::string docs = ReadFile(std::string(SLIMTORCH_TEST_DATA_DIR) +
                                    "/../docs/runtime_switches.md");
  ASSERT_FALSE(docs.empty());
  std::vector<std::string> table;
  const std::regex row(R"(\n\| `(SLIMTORCH_[A-Z0-9_]+)` \|)");
  for (auto it = std::sregex_iterator(docs.begin(), docs.end(), row);
       it != std::sregex_iterator(); ++it) {
    table.push_back((*it)[1]);
  }
  std::vector<std::string> listed;
  std::set<std::string> unique;
  for (const SlimtorchVariableInfo& v : SlimtorchVariables()) {
    listed.push_back(v.name);
    unique.insert(v.name);
    EXPECT_NE(std::string(v.what), "") << v.name;
  }
  EXPECT_EQ(unique.size(), listed.size());
  EXPECT_EQ(listed, table);
}

TEST(EnvironmentTest, SlimtorchVariablesAreReadOnce) {
  // The first read takes the start values; a later setenv does not change
  // what the process reads.
  const char* start = SlimtorchVariable("SLIMTORCH_QUANTIZED_EXPORT_DIR");
  const std::string before = start == nullptr ? "<unset>" : start;
  ::setenv("SLIMTORCH_QUANTIZED_EXPORT_DIR", "/changed/later", 1);
  const char* now = SlimtorchVariable("SLIMTORCH_QUANTIZED_EXPORT_DIR");
  EXPECT_EQ(now == nullptr ? "<unset>" : std::string(now), before);
  if (start == nullptr) {
    ::unsetenv("SLIMTORCH_QUANTIZED_EXPORT_DIR");
  } else {
    ::setenv("SLIMTORCH_QUANTIZED_EXPORT_DIR", before.c_str(), 1);
  }
}

TEST(EnvironmentTest, OverridesReplaceAndClearRestores) {
  const char* name = "SLIMTORCH_WINOGRAD";
  const char* start = SlimtorchVariable(name);
  OverrideSlimtorchVariable(name, "0");
  ASSERT_NE(SlimtorchVariable(name), nullptr);
  EXPECT_STREQ(SlimtorchVariable(name), "0");
  EXPECT_NE(DescribeSlimtorchSwitches().find("SLIMTORCH_WINOGRAD=0"),
            std::string::npos);
  OverrideSlimtorchVariable(name, nullptr);
  EXPECT_EQ(SlimtorchVariable(name), nullptr);
  EXPECT_EQ(DescribeSlimtorchSwitches().find("SLIMTORCH_WINOGRAD"),
            std::string::npos);
  ClearSlimtorchVariableOverride(name);
  EXPECT_EQ(SlimtorchVariable(name), start);
}

TEST(EnvironmentTest, TheStartLineNamesSwitchesOnly) {
  // A script's variable (set while the tests run under scripts/test.sh)
  // is not a switch of the run.
  OverrideSlimtorchVariable("SLIMTORCH_TF_TESTS", "1");
  OverrideSlimtorchVariable("SLIMTORCH_HEAP_TRIM_SECS", "30");
  const std::string line = DescribeSlimtorchSwitches();
  EXPECT_NE(line.find("SLIMTORCH_HEAP_TRIM_SECS=30"), std::string::npos)
      << line;
  EXPECT_EQ(line.find("SLIMTORCH_TF_TESTS"), std::string::npos) << line;
  ClearSlimtorchVariableOverride("SLIMTORCH_TF_TESTS");
  ClearSlimtorchVariableOverride("SLIMTORCH_HEAP_TRIM_SECS");
}

TEST(EnvironmentTest, UnknownNamesAreFoundWithTheNameTheyMisspell) {
  // Names no program reads, spelt in pieces (docs_check takes a whole
  // quoted SLIMTORCH_ name for a variable something reads).
  const std::string ours = "SLIMTORCH_";
  const std::vector<UnknownVariable> unknown = internal::UnknownVariablesIn({
      {ours + "WINOGARD", "0"},       // two letters swapped: 2 edits
      {ours + "HEAP_TRIM_SEC", "5"},  // one letter short
      {ours + "SOMETHING_ELSE", "1"},
      {"SLIMTORCH_WINOGRAD", "0"},  // known
      {"PATH", "/bin"},             // not ours
  });
  ASSERT_EQ(unknown.size(), 3u);
  EXPECT_EQ(unknown[0].name, ours + "HEAP_TRIM_SEC");
  EXPECT_EQ(unknown[0].closest, "SLIMTORCH_HEAP_TRIM_SECS");
  EXPECT_EQ(unknown[1].name, ours + "SOMETHING_ELSE");
  EXPECT_EQ(unknown[1].closest, "");
  EXPECT_EQ(unknown[2].name, ours + "WINOGARD");
  EXPECT_EQ(unknown[2].closest, "SLIMTORCH_WINOGRAD");
}

TEST(EnvironmentTest, AToolWarnsOfAMisspeltSwitchAndNamesTheSetOnes) {
  const std::string tool =
      std::string(SLIMTORCH_BINARY_DIR) + "/eval_image_classifier";
  const std::string command =
      "env SLIMTORCH_WINOGARD=0 SLIMTORCH_DEPTHWISE=0 " + tool +
      " --dataset_dir=/nonexistent/slimtorch-environment-test"
      " --checkpoint_path=/nonexistent/slimtorch-environment-test 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) {
    out.append(buf.data(), n);
  }
  const int status = ::pclose(pipe);
  EXPECT_NE(status, 0) << out;  // no such dataset
  EXPECT_NE(out.find("SLIMTORCH_WINOGARD is set but no slimtorch program "
                     "reads it; did you mean SLIMTORCH_WINOGRAD?"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("environment: SLIMTORCH_DEPTHWISE=0"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace slimtorch
