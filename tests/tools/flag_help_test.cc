// The tools' --help pieces: defaults as Python's repr writes them, the
// nearest-flag suggestions, and the grouped layout.
#include "cli/flag_help.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace slimtorch {
namespace {

TEST(ShortestDoubleTest, WritesWhatPythonsReprWrites) {
  // gflags' "%.17g" writes 0.94999999999999996 for 0.95.
  EXPECT_EQ(ShortestDouble(0.95), "0.95");
  EXPECT_EQ(ShortestDouble(0.9), "0.9");
  EXPECT_EQ(ShortestDouble(0.999), "0.999");
  EXPECT_EQ(ShortestDouble(0.01), "0.01");
  EXPECT_EQ(ShortestDouble(0.00004), "4e-05");
  EXPECT_EQ(ShortestDouble(0.0001), "0.0001");
  EXPECT_EQ(ShortestDouble(2.0), "2.0");
  EXPECT_EQ(ShortestDouble(255), "255.0");
  EXPECT_EQ(ShortestDouble(-0.5), "-0.5");
  EXPECT_EQ(ShortestDouble(0.0), "0.0");
  EXPECT_EQ(ShortestDouble(-0.0), "-0.0");
  EXPECT_EQ(ShortestDouble(123456789.0), "123456789.0");
  EXPECT_EQ(ShortestDouble(1e15), "1000000000000000.0");
  EXPECT_EQ(ShortestDouble(1e16), "1e+16");
  EXPECT_EQ(ShortestDouble(1.5e300), "1.5e+300");
  EXPECT_EQ(ShortestDouble(5e-324), "5e-324");
  EXPECT_EQ(ShortestDouble(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(ShortestDouble(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(ShortestDouble(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(ShortestDouble(std::numeric_limits<double>::quiet_NaN()), "nan");
}

TEST(ShortestDoubleTest, ReadsBackExactly) {
  std::srand(7);
  for (int i = 0; i < 20000; ++i) {
    // Random bit patterns over the whole range, and small decimals.
    double v;
    if (i % 2 == 0) {
      uint64_t bits = (uint64_t(std::rand()) << 33) ^
                      (uint64_t(std::rand()) << 11) ^ uint64_t(std::rand());
      std::memcpy(&v, &bits, sizeof v);
      if (!std::isfinite(v)) continue;
    } else {
      v = (std::rand() % 100000) / std::pow(10.0, std::rand() % 9);
    }
    const std::string s = ShortestDouble(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
    // No more significant digits than the fewest that read back.
    int fewest = 1;
    for (char buf[64];; ++fewest) {
      std::snprintf(buf, sizeof buf, "%.*e", fewest - 1, v);
      if (std::strtod(buf, nullptr) == v) break;
    }
    std::string digits;
    for (char c : s.substr(0, s.find('e'))) {
      if (c >= '0' && c <= '9') digits += c;
    }
    digits.erase(0, digits.find_first_not_of('0'));
    digits.erase(digits.find_last_not_of('0') + 1);
    EXPECT_LE(static_cast<int>(digits.size()), fewest) << s;
  }
}

TEST(DisplayFlagValueTest, QuotesStringsAndShortensDoubles) {
  EXPECT_EQ(DisplayFlagValue("double", "0.94999999999999996"), "0.95");
  EXPECT_EQ(DisplayFlagValue("double", "4.0000000000000003e-05"), "4e-05");
  EXPECT_EQ(DisplayFlagValue("string", "rmsprop"), "\"rmsprop\"");
  EXPECT_EQ(DisplayFlagValue("string", ""), "\"\"");
  EXPECT_EQ(DisplayFlagValue("string", "a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(DisplayFlagValue("int32", "32"), "32");
  EXPECT_EQ(DisplayFlagValue("bool", "false"), "false");
}

TEST(FlagEditDistanceTest, CountsSwapsAsOne) {
  EXPECT_EQ(FlagEditDistance("", ""), 0u);
  EXPECT_EQ(FlagEditDistance("abc", ""), 3u);
  EXPECT_EQ(FlagEditDistance("lerning_rate", "learning_rate"), 1u);
  EXPECT_EQ(FlagEditDistance("modle_name", "model_name"), 1u);
  EXPECT_EQ(FlagEditDistance("kitten", "sitting"), 3u);
}

const std::vector<std::string> kTrainFlags = {"model_name",
                                              "model_summary",
                                              "learning_rate",
                                              "learning_rate_decay_type",
                                              "learning_rate_decay_factor",
                                              "batch_size",
                                              "max_number_of_steps",
                                              "train_dir",
                                              "train_image_size",
                                              "dataset_dir",
                                              "dataset_name",
                                              "help",
                                              "helpshort",
                                              "v",
                                              "log_dir"};

std::string Suggest(const std::string& name) {
  return DidYouMean(NearestFlagNames(name, kTrainFlags));
}

TEST(NearestFlagNamesTest, SuggestsTheLikelyFlags) {
  EXPECT_EQ(Suggest("model"),
            " (did you mean --model_name or --model_summary?)");
  EXPECT_EQ(Suggest("lerning_rate"), " (did you mean --learning_rate?)");
  EXPECT_EQ(Suggest("learning_rat"), " (did you mean --learning_rate?)");
  EXPECT_EQ(Suggest("batchsize"), " (did you mean --batch_size?)");
  EXPECT_EQ(Suggest("Batch-Size"), " (did you mean --batch_size?)");
  EXPECT_EQ(Suggest("modle_name"), " (did you mean --model_name?)");
  EXPECT_EQ(Suggest("steps"), " (did you mean --max_number_of_steps?)");
  EXPECT_EQ(Suggest("datasetdir"), " (did you mean --dataset_dir?)");
  EXPECT_EQ(Suggest("dataset"),
            " (did you mean --dataset_dir or --dataset_name?)");
  EXPECT_EQ(Suggest("learning_rate_decay"),
            " (did you mean --learning_rate_decay_type, --learning_rate or "
            "--learning_rate_decay_factor?)");
  // Nothing near: no suggestion rather than a wild one.
  EXPECT_EQ(Suggest("lr"), "");
  EXPECT_EQ(Suggest("x"), "");
  EXPECT_EQ(Suggest("quux"), "");
}

TEST(NearestFlagNamesTest, KeepsAtMostMaxCountInCandidateOrder) {
  const std::vector<std::string> names = {"train_a", "train_b", "train_c",
                                          "train_d"};
  EXPECT_EQ(NearestFlagNames("train", names, 2),
            (std::vector<std::string>{"train_a", "train_b"}));
  EXPECT_TRUE(NearestFlagNames("", names).empty());
}

TEST(WrapTextTest, BreaksAtSpacesAndKeepsLongWords) {
  EXPECT_EQ(WrapText("aa bb cc dd", 5),
            (std::vector<std::string>{"aa bb", "cc dd"}));
  EXPECT_EQ(WrapText("a  verylongword b", 6),
            (std::vector<std::string>{"a", "verylongword", "b"}));
  EXPECT_EQ(WrapText("one\ntwo three", 20),
            (std::vector<std::string>{"one", "two three"}));
}

TEST(FormatFlagHelpTest, GroupsInColumns) {
  const std::string text = FormatFlagHelp(
      {{"Learning rate",
        {{"learning_rate", "0.01", "Initial learning rate."},
         {"learning_rate_decay_type", "\"exponential\"",
          "Specifies how the learning rate is decayed. One of \"fixed\", "
          "\"exponential\", or \"polynomial\""}}},
       {"Empty", {}},
       {"Devices", {{"clone_on_cpu", "false", ""}}}});
  EXPECT_EQ(text,
            "Learning rate:\n"
            "  --learning_rate=0.01          Initial learning rate.\n"
            "  --learning_rate_decay_type=\"exponential\"\n"
            "                                Specifies how the learning rate "
            "is decayed. One\n"
            "                                of \"fixed\", \"exponential\", or "
            "\"polynomial\"\n"
            "\n"
            "Devices:\n"
            "  --clone_on_cpu=false\n");
}

}  // namespace
}  // namespace slimtorch
