#include "slimtorch/train/profile.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

TEST(ProfileStepsTest, ParsesAStepOrARange) {
  EXPECT_TRUE(ParseProfileSteps("").empty());
  StepRange one = ParseProfileSteps("7");
  EXPECT_EQ(one.first, 7);
  EXPECT_EQ(one.last, 7);
  EXPECT_EQ(one.size(), 1);
  StepRange range = ParseProfileSteps("100,119");
  EXPECT_EQ(range.first, 100);
  EXPECT_EQ(range.last, 119);
  EXPECT_EQ(range.size(), 20);
  for (const char* bad : {"0", "5,4", "a", "3,", ",3", "-2", "1,2,3", "2 ,3",
                          "99999999999999999999"}) {
    try {
      ParseProfileSteps(bad);
      ADD_FAILURE() << "accepted --profile_steps=" << bad;
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find(std::string("--profile_steps=") + bad),
          std::string::npos)
          << e.what();
    }
  }
}

// Hand-worked: device kernels a (3 calls, 60 us), b (1 call, 30 us),
// c (10 us) over 2 steps of 100 us wall each; CPU ops kept apart.
TEST(ProfileTableTest, SumsByNamePerStepAndAgainstTheWallTime) {
  std::vector<ProfiledEvent> events = {
      {"a", true, 20}, {"b", true, 30}, {"a", true, 25},
      {"c", true, 10}, {"a", true, 15}, {"aten::mm", false, 500},
  };
  const std::string table = ProfileTable(events, /*device=*/true, /*steps=*/2,
                                         /*wall_secs=*/200e-6, /*rows=*/2);
  // a: 60 us / 2 steps = 30.0 us/step, 60% of 100 us, 1.5 calls a step.
  EXPECT_NE(table.find("     30.0   60.0%      1.5  a\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("     15.0   30.0%      0.5  b\n"), std::string::npos)
      << table;
  // c falls beyond the 2 rows.
  EXPECT_NE(table.find("      5.0   10.0%      0.5  (1 others)\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("aten::mm"), std::string::npos) << table;
  // 50 us/step of kernels (2.5 of them) in 100 us/step of wall: 50% busy.
  EXPECT_NE(table.find("50.0 us/step in 2.5 kernels a step; wall 100.0 "
                       "us/step, device busy 50.0%"),
            std::string::npos)
      << table;
  const std::string cpu = ProfileTable(events, false, 2, 200e-6);
  EXPECT_NE(cpu.find("aten::mm"), std::string::npos) << cpu;
  EXPECT_EQ(cpu.find("  a\n"), std::string::npos) << cpu;
}

// CPU ops by self time, worked by hand: on thread 1, step [0, 100) calls
// conv [10, 50), which calls mm [20, 40), then relu [60, 70); on thread 2
// an mm [30, 60) of its own. Self: step 100 - 40 - 10 = 50, conv 40 - 20 =
// 20, mm 20 + 30 = 50, relu 10: 130 us in one step.
TEST(ProfileTableTest, CpuOpsCountTheirOwnTime) {
  std::vector<ProfiledEvent> events = {
      {"relu", false, 10, 60, 1}, {"mm", false, 20, 20, 1},
      {"step", false, 100, 0, 1}, {"mm", false, 30, 30, 2},
      {"conv", false, 40, 10, 1},
  };
  const std::string table = ProfileTable(events, false, 1, 100e-6);
  EXPECT_NE(table.find("     50.0   38.5%      1.0  step\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("     50.0   38.5%      2.0  mm\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("     20.0   15.4%      1.0  conv\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("     10.0    7.7%      1.0  relu\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("130.0 us/step of CPU ops' own time in 5.0 ops"),
            std::string::npos)
      << table;
}

}  // namespace
}  // namespace slimtorch
