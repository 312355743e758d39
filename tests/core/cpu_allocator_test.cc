#include "slimtorch/core/cpu_allocator.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <torch/torch.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace slimtorch {
namespace {

using internal::CpuAllocatorSizeClass;

// Installs the caching allocator for the rest of this test process (the
// tools run with it), or skips where the environment opts out.
#define REQUIRE_CACHING_ALLOCATOR()                                      \
  if (!UseCachingCpuAllocator()) {                                       \
    GTEST_SKIP() << "SLIMTORCH_CPU_ALLOCATOR=system in the environment"; \
  }

torch::Tensor Bytes(int64_t n) { return torch::empty({n}, torch::kUInt8); }

TEST(CpuAllocatorTest, SizeClassesByHand) {
  // 128 KiB: steps of 8 KiB (16 of them reach it); one byte more needs
  // steps of 16 KiB, 9 of them.
  EXPECT_EQ(CpuAllocatorSizeClass(131072), 131072u);
  EXPECT_EQ(CpuAllocatorSizeClass(131073), 147456u);
  // 10^6: steps of 64 KiB, 16 of them.
  EXPECT_EQ(CpuAllocatorSizeClass(1000000), 1048576u);
  // 3 MiB + 1: steps of 256 KiB, 13 of them.
  EXPECT_EQ(CpuAllocatorSizeClass(3145729), 3407872u);
  EXPECT_EQ(CpuAllocatorSizeClass(3407872), 3407872u);
  // Never short, a whole number of pages, at most 1/8 more.
  for (size_t n = internal::kMinCachedBytes; n < (size_t{1} << 31);
       n = n * 5 / 3 + 7) {
    const size_t c = CpuAllocatorSizeClass(n);
    EXPECT_GE(c, n);
    EXPECT_EQ(c % 4096, 0u) << n;
    EXPECT_LE(c - n, n / 8) << n;
  }
}

TEST(CpuAllocatorTest, ReusesAFreedBlockOfTheSameSizeClass) {
  REQUIRE_CACHING_ALLOCATOR();
  EmptyCpuAllocatorCache();
  const int64_t n = 3 << 20;
  void* first = nullptr;
  {
    torch::Tensor t = Bytes(n);
    first = t.data_ptr();
    t.fill_(7);
  }
  const CpuAllocatorStats before = CachingCpuAllocatorStats();
  torch::Tensor again = Bytes(n - 1000);  // the same class
  EXPECT_EQ(again.data_ptr(), first);
  const CpuAllocatorStats after = CachingCpuAllocatorStats();
  EXPECT_EQ(after.allocations, before.allocations + 1);
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.bytes_in_use - before.bytes_in_use,
            static_cast<int64_t>(CpuAllocatorSizeClass(n)));
  EXPECT_EQ(before.cached_bytes - after.cached_bytes,
            static_cast<int64_t>(CpuAllocatorSizeClass(n)));
  // A block of another class is not handed out for it.
  torch::Tensor other = Bytes(2 * n);
  EXPECT_NE(other.data_ptr(), first);
}

TEST(CpuAllocatorTest, SmallBlocksBypassTheCache) {
  REQUIRE_CACHING_ALLOCATOR();
  const CpuAllocatorStats before = CachingCpuAllocatorStats();
  for (int i = 0; i < 10; ++i) {
    torch::Tensor t = torch::ones({1000});
    EXPECT_EQ(t.sum().item<float>(), 1000.0f);
  }
  const CpuAllocatorStats after = CachingCpuAllocatorStats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

TEST(CpuAllocatorTest, BlocksAre64ByteAlignedAndHoldTheirData) {
  REQUIRE_CACHING_ALLOCATOR();
  std::vector<torch::Tensor> kept;
  for (int64_t n : {1, 100, 4096, 131071, 131072, 200000, 1 << 22}) {
    torch::Tensor t =
        torch::full({n}, static_cast<int>(n % 251), torch::kUInt8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << n;
    kept.push_back(t);
  }
  // Every block is its own: writing one does not touch another.
  for (const torch::Tensor& t : kept) {
    const int64_t n = t.numel();
    EXPECT_TRUE(t.eq(static_cast<int>(n % 251)).all().item<bool>()) << n;
  }
}

TEST(CpuAllocatorTest, TheCacheHoldsNoMoreThanThePeakInUse) {
  REQUIRE_CACHING_ALLOCATOR();
  EmptyCpuAllocatorCache();
  // 400 distinct classes of ~1-3 MiB, one at a time: ~800 MiB freed in all.
  for (int i = 0; i < 400; ++i) {
    torch::Tensor t = Bytes((1 << 20) + i * (5 << 12) + 1);
    (void)t;
  }
  const CpuAllocatorStats s = CachingCpuAllocatorStats();
  EXPECT_GT(s.cached_bytes, 0);
  EXPECT_LE(s.cached_bytes,
            std::max<int64_t>(int64_t{256} << 20, s.peak_bytes_in_use));
  EmptyCpuAllocatorCache();
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, 0);
}

TEST(CpuAllocatorTest, AFullCacheEvictsItsOldestBlocksForTheLatest) {
  REQUIRE_CACHING_ALLOCATOR();
  EmptyCpuAllocatorCache();
  // A one-off step: blocks of distinct ~8 MiB classes held at once until
  // more is in use than ever before (and than the 256 MiB the cache may
  // always hold), then freed: the cache is then full.
  {
    const int64_t target =
        std::max<int64_t>(int64_t{256} << 20,
                          CachingCpuAllocatorStats().peak_bytes_in_use) +
        (int64_t{16} << 20);
    std::vector<torch::Tensor> once;
    for (int i = 0; CachingCpuAllocatorStats().bytes_in_use < target; ++i) {
      once.push_back(Bytes((8 << 20) + i * (1 << 19)));
    }
  }
  // The steady loop's block, of a class the one-off step did not use: its
  // first free evicts old blocks, and from its second round on it is reused.
  const int64_t n = 11 << 20;
  void* first = nullptr;
  {
    torch::Tensor t = Bytes(n);
    first = t.data_ptr();
  }
  for (int round = 0; round < 3; ++round) {
    const CpuAllocatorStats before = CachingCpuAllocatorStats();
    torch::Tensor t = Bytes(n);
    EXPECT_EQ(t.data_ptr(), first) << round;
    EXPECT_EQ(CachingCpuAllocatorStats().cache_hits, before.cache_hits + 1);
  }
  EXPECT_LE(CachingCpuAllocatorStats().cached_bytes,
            std::max<int64_t>(int64_t{256} << 20,
                              CachingCpuAllocatorStats().peak_bytes_in_use));
}

TEST(CpuAllocatorTest, TrimmingFreesOnlyBlocksIdleSinceThePreviousTrim) {
  REQUIRE_CACHING_ALLOCATOR();
  EmptyCpuAllocatorCache();
  const int64_t busy_n = 3 << 20, idle_n = 5 << 20;
  const auto busy = static_cast<int64_t>(CpuAllocatorSizeClass(busy_n));
  const auto idle = static_cast<int64_t>(CpuAllocatorSizeClass(idle_n));
  { torch::Tensor a = Bytes(busy_n), b = Bytes(idle_n); }
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, busy + idle);
  TrimCpuAllocatorCache();  // both were freed in this round: kept
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, busy + idle);
  { torch::Tensor a = Bytes(busy_n); }  // reused: freed again in a new round
  TrimCpuAllocatorCache();  // the idle block goes, the reused one stays
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, busy);
  TrimCpuAllocatorCache();
  EXPECT_EQ(CachingCpuAllocatorStats().cached_bytes, 0);
}

TEST(CpuAllocatorTest, LargeBlocksDoNotComeFromMallocsHeapOrMaps) {
  REQUIRE_CACHING_ALLOCATOR();
  EmptyCpuAllocatorCache();
  // glibc counts what malloc has mapped (hblkhd) and what its heaps span
  // (arena): a 20 MiB tensor raises neither, so freeing it cannot move
  // glibc's mmap threshold.
  const struct mallinfo2 before = mallinfo2();
  torch::Tensor t = Bytes(20 << 20);
  t.fill_(1);
  const struct mallinfo2 during = mallinfo2();
  EXPECT_LT(during.hblkhd, before.hblkhd + (size_t{1} << 20));
  EXPECT_LT(during.arena, before.arena + (size_t{1} << 20));
  EXPECT_EQ(t.sum().item<int64_t>(), int64_t{20} << 20);
}

TEST(CpuAllocatorTest, ThreadsAllocatingAndFreeingBalance) {
  REQUIRE_CACHING_ALLOCATOR();
  const int64_t in_use = CachingCpuAllocatorStats().bytes_in_use;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([k] {
      for (int i = 0; i < 200; ++i) {
        torch::Tensor a = Bytes((256 << 10) * (1 + (i + k) % 5));
        torch::Tensor b = Bytes(1 << 20);
        a.fill_(k);
        b.fill_(i % 256);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(CachingCpuAllocatorStats().bytes_in_use, in_use);
}

}  // namespace
}  // namespace slimtorch
