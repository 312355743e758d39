// The tools' command line before gflags: unknown flags named with their
// nearest, flagfiles read (nested, sections, errors) and the command line
// winning over them wherever it stands.
#include "cli/command_line.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "slimtorch/core/error.h"
#include "test_util.h"

namespace slimtorch {
namespace {

const std::vector<KnownFlag> kKnown = {
    {"learning_rate", false}, {"model_name", false},  {"batch_size", false},
    {"use_grayscale", true},  {"clone_on_cpu", true}, {"flagfile", false},
    {"fromenv", false},       {"tryfromenv", false},  {"undefok", false},
    {"help", true},           {"helpshort", true}};

ArrangedCommandLine Arrange(const std::vector<std::string>& args,
                            const std::string& program = "/bin/train") {
  return ArrangeCommandLine(args, kKnown, program);
}

// "name=value" for each setting in the order they are applied.
std::vector<std::string> Applied(const ArrangedCommandLine& line) {
  std::vector<std::string> out;
  for (const FlagSetting& s : line.Settings()) {
    out.push_back(s.name + "=" + s.value);
  }
  return out;
}

std::string ErrorOf(const std::vector<std::string>& args) {
  try {
    Arrange(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ArrangeCommandLineTest, ReadsEveryWayOfWritingAFlag) {
  const ArrangedCommandLine line = Arrange(
      {"--learning_rate=0.1", "-batch_size", "8", "--model-name=lenet",
       "--use_grayscale", "--noclone_on_cpu", "-", "--", "--not_a_flag"});
  EXPECT_EQ(Applied(line),
            (std::vector<std::string>{"learning_rate=0.1", "batch_size=8",
                                      "model_name=lenet", "use_grayscale=true",
                                      "clone_on_cpu=false"}));
  EXPECT_EQ(line.arguments, (std::vector<std::string>{"-", "--not_a_flag"}));
  EXPECT_TRUE(line.overrides.empty());
}

TEST(ArrangeCommandLineTest, UnknownFlagsNameTheNearest) {
  EXPECT_EQ(ErrorOf({"--model=lenet"}),
            "unknown flag --model (did you mean --model_name?)");
  EXPECT_EQ(ErrorOf({"--lerning_rate", "0.1"}),
            "unknown flag --lerning_rate (did you mean --learning_rate?)");
  EXPECT_EQ(ErrorOf({"-h"}), "unknown flag -h (did you mean --help?)");
  EXPECT_EQ(ErrorOf({"--zzz"}), "unknown flag --zzz");
  EXPECT_EQ(ErrorOf({"--nobatch_size"}),
            "--nobatch_size: --batch_size is not a true/false flag (write "
            "--batch_size=VALUE)");
  EXPECT_EQ(ErrorOf({"--batch_size"}),
            "--batch_size needs a value (--batch_size=VALUE)");
  // --undefok lets named unknown flags pass, wherever it stands.
  EXPECT_EQ(Applied(Arrange({"--zzz=1", "--undefok=zzz,yyy"})),
            (std::vector<std::string>{"undefok=zzz,yyy"}));
  // As in gflags, also the --no form of a name it lists.
  EXPECT_EQ(Applied(Arrange({"--noyyy", "--undefok=zzz,yyy"})),
            (std::vector<std::string>{"undefok=zzz,yyy"}));
  EXPECT_EQ(ErrorOf({"--noxxx", "--undefok=zzz"}), "unknown flag --noxxx");
}

TEST(ArrangeCommandLineTest, MissingFlagfileFailsWithOneMessage) {
  EXPECT_EQ(ErrorOf({"--flagfile=/nonexistent/x.flags"}),
            "--flagfile: cannot read '/nonexistent/x.flags' (No such file or "
            "directory)");
  testing::TempDir dir;
  EXPECT_EQ(ErrorOf({"--flagfile=" + dir.path()}),
            "--flagfile: cannot read '" + dir.path() + "' (Is a directory)");
}

TEST(ArrangeCommandLineTest, CommandLineWinsOverFlagfilesWhereverItStands) {
  testing::TempDir dir;
  const std::string f = dir.Join("x.flags");
  Write(f,
        "# a comment\n"
        "  --learning_rate=0.01  \r\n"
        "\n"
        "--batch_size=32\n"
        "--use_grayscale\n");
  for (const bool before : {true, false}) {
    std::vector<std::string> args = {"--learning_rate=0.05"};
    args.insert(before ? args.end() : args.begin(), "--flagfile=" + f);
    const ArrangedCommandLine line = Arrange(args);
    // The flagfile's first, then the command line's: the last set wins.
    EXPECT_EQ(Applied(line), (std::vector<std::string>{
                                 "learning_rate=0.01", "batch_size=32",
                                 "use_grayscale=true", "learning_rate=0.05"}));
    EXPECT_EQ(line.overrides,
              (std::vector<std::string>{"--learning_rate=0.05 from the command "
                                        "line overrides 0.01 from " +
                                        f}));
    EXPECT_EQ(line.from_flagfiles[0].Where(), f + ":2");
  }
  // The same value again is no override.
  EXPECT_TRUE(
      Arrange({"--batch_size=32", "--flagfile=" + f}).overrides.empty());
}

TEST(ArrangeCommandLineTest, NestedFlagfilesAreReadInPlace) {
  testing::TempDir dir;
  const std::string base = dir.Join("base.flags");
  const std::string top = dir.Join("top.flags");
  Write(base, "--learning_rate=0.01\n--batch_size=32\n");
  Write(top, "--flagfile=" + base + "\n--batch_size=64\n");
  const ArrangedCommandLine line =
      Arrange({"--batch_size=8", "--flagfile=" + top});
  EXPECT_EQ(Applied(line),
            (std::vector<std::string>{"learning_rate=0.01", "batch_size=32",
                                      "batch_size=64", "batch_size=8"}));
  EXPECT_EQ(line.overrides,
            (std::vector<std::string>{"--batch_size=8 from the command line "
                                      "overrides 64 from " +
                                      top}));
  // Comma-separated lists, in order.
  EXPECT_EQ(Applied(Arrange({"--flagfile=" + top + "," + base})).back(),
            "batch_size=32");
  // A missing nested file names where it was named; a loop fails.
  Write(top, "--flagfile=" + dir.Join("gone.flags") + "\n");
  EXPECT_EQ(ErrorOf({"--flagfile=" + top}),
            "--flagfile: cannot read '" + dir.Join("gone.flags") +
                "' (No such file or directory), named in " + top + ":1");
  Write(top, "--flagfile=" + top + "\n");
  EXPECT_EQ(
      ErrorOf({"--flagfile=" + top}),
      "--flagfile: '" + top + "' includes itself (named in " + top + ":1)");
}

TEST(ArrangeCommandLineTest, FlagfileErrorsNameTheLine) {
  testing::TempDir dir;
  const std::string f = dir.Join("x.flags");
  Write(f, "--batch_size=8\n--modle_name=lenet\n");
  EXPECT_EQ(
      ErrorOf({"--flagfile=" + f}),
      "unknown flag --modle_name in " + f + ":2 (did you mean --model_name?)");
  Write(f, "--batch_size\n");
  EXPECT_EQ(ErrorOf({"--flagfile=" + f}),
            "--batch_size needs a value (--batch_size=VALUE) in " + f + ":1");
}

TEST(ArrangeCommandLineTest, FlagfileProgramSectionsAsGflags) {
  testing::TempDir dir;
  const std::string f = dir.Join("x.flags");
  Write(f,
        "--batch_size=1\n"
        "eval*\n"
        "--batch_size=2\n"
        "--unknown_to_train=3\n"
        "other tra?n\n"
        "--learning_rate=0.5\n");
  EXPECT_EQ(Applied(Arrange({"--flagfile=" + f}, "/opt/bin/train")),
            (std::vector<std::string>{"batch_size=1", "learning_rate=0.5"}));
}

TEST(ArrangeCommandLineTest, FromenvReadsTheEnvironmentInPlace) {
  ::setenv("FLAGS_batch_size", "16", 1);
  ::unsetenv("FLAGS_model_name");
  EXPECT_EQ(
      Applied(Arrange({"--fromenv=batch_size", "--tryfromenv=model_name"})),
      (std::vector<std::string>{"fromenv=batch_size", "batch_size=16",
                                "tryfromenv=model_name"}));
  EXPECT_EQ(ErrorOf({"--fromenv=model_name"}),
            "--fromenv: $FLAGS_model_name is not set in the environment");
  ::unsetenv("FLAGS_batch_size");
}

}  // namespace
}  // namespace slimtorch
