#include "slimtorch/train/train_hooks.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "slimtorch/core/cpu_allocator.h"
#include "slimtorch/core/error.h"

namespace slimtorch {
namespace {

TEST(ProgressHookTest, LineShowsStepRateAndEta) {
  // 150 steps left at 10 steps/s: 15 s.
  EXPECT_EQ(ProgressHook::Line(50, 200, 320.0, 10.0),
            "step 50/200 (25.0%), 320.0 examples/s, ETA 0:00:15");
  // 9000 steps at 2 a second: 1:15:00.
  EXPECT_EQ(ProgressHook::Line(1000, 10000, 64.0, 2.0),
            "step 1000/10000 (10.0%), 64.0 examples/s, ETA 1:15:00");
  EXPECT_EQ(ProgressHook::Line(7, 0, 12.5, 1.0), "step 7, 12.5 examples/s");
}

// Drawn in place (carriage return, erase line), cleared on the logging
// steps before the step log, ended when the loop ends.
TEST(ProgressHookTest, DrawsInPlaceAndClearsForTheStepLog) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    ProgressHook hook(out, 10, /*every_n=*/3, /*interval_secs=*/0.0);
    for (int64_t step = 1; step <= 4; ++step) {
      StepStats s;
      s.global_step = step;
      s.examples = 8;
      hook.AfterStep(s);
    }
    hook.LoopEnded(4);
  }
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  const std::string clear = "\r\033[K";
  EXPECT_EQ(text.rfind(clear + "step 1/10 (10.0%), ", 0), 0u) << text;
  EXPECT_NE(text.find(clear + "step 2/10 (20.0%)"), std::string::npos);
  EXPECT_EQ(text.find("step 3/10"), std::string::npos) << "a logging step";
  EXPECT_NE(text.find(clear + "step 4/10 (40.0%)"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - clear.size()), clear);
  EXPECT_EQ(text.find('\n'), std::string::npos);
}

TEST(ProgressHookTest, FlagValues) {
  EXPECT_TRUE(ProgressWanted("on"));
  EXPECT_FALSE(ProgressWanted("off"));
  EXPECT_THROW(ProgressWanted("yes"), Error);
}

// A block freed once and not reused is returned by the second trim after
// it (the first starts its idle round); with an interval of 0, never.
TEST(MemoryTrimHookTest, ReturnsIdleCachedBlocksEveryInterval) {
  if (!UseCachingCpuAllocator()) {
    GTEST_SKIP() << "SLIMTORCH_CPU_ALLOCATOR=system";
  }
  EmptyCpuAllocatorCache();
  const auto wait = [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  };
  { torch::Tensor once = torch::empty({5 << 20}, torch::kUInt8); }
  const int64_t cached = CachingCpuAllocatorStats().cached_bytes;
  ASSERT_GE(cached, int64_t{5} << 20);
  MemoryTrimHook never(0);
  MemoryTrimHook hourly(3600);
  MemoryTrimHook hook(0.01);
  StepStats step;
  wait();
  hourly.AfterStep(step);  // within its interval: nothing
  never.AfterStep(step);
  hook.AfterStep(step);  // the first trim: the block was freed in its round
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, cached);
  wait();
  never.AfterStep(step);
  hourly.AfterStep(step);
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, cached);
  hook.AfterStep(step);  // idle for a whole round: returned
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, 0);
}

}  // namespace
}  // namespace slimtorch
