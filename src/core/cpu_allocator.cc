#include "slimtorch/core/cpu_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <glog/logging.h>
#include <malloc.h>
#include <sys/mman.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "slimtorch/core/environment.h"
#include "slimtorch/core/kernel_switches.h"

namespace slimtorch {
namespace internal {

size_t CpuAllocatorSizeClass(size_t n) {
  size_t step = 4096;
  while ((step << 4) < n) step <<= 1;
  return (n + step - 1) / step * step;
}

}  // namespace internal

namespace {

// LibTorch's alignment for CPU tensors (c10::gAlignment).
constexpr size_t kAlignment = 64;
// Each block starts with a header this long holding its size class (0 for a
// small block), so that the deleter needs no lookup.
constexpr size_t kHeader = kAlignment;
constexpr int64_t kMinCacheLimit = int64_t{256} << 20;

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define SLIMTORCH_ALLOCATE_CONST
#define SLIMTORCH_ALLOCATOR_COPY_DATA 1
#else
#define SLIMTORCH_ALLOCATE_CONST const
#define SLIMTORCH_ALLOCATOR_COPY_DATA 0
#endif

void* SystemAlloc(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kAlignment, bytes) != 0) return nullptr;
  return p;
}

// Large blocks are mapped from the kernel and unmapped when evicted, never
// taken from malloc: freeing them through glibc would raise its mmap
// threshold and leave later blocks of their size on a heap that fragments
// (docs/soak.md).
void* MapBlock(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void UnmapBlock(void* block, size_t size) { ::munmap(block, size + kHeader); }

class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) SLIMTORCH_ALLOCATE_CONST override {
    void* data = Get().Allocate(n);
    return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

#if SLIMTORCH_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src,
                 std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

  CpuAllocatorStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void EmptyCache() { Unmap(TakeCached(/*all=*/true)); }

  void TrimIdle() { Unmap(TakeCached(/*all=*/false)); }

  static CachingCpuAllocator& Get() {
    static CachingCpuAllocator* instance = new CachingCpuAllocator();
    return *instance;
  }

 private:
  // A freed block kept for reuse; `round` is the trim round it was freed in.
  struct Cached {
    size_t size;
    void* block;
    uint64_t round;
  };
  using Lru = std::list<Cached>;
  using Victims = std::vector<std::pair<void*, size_t>>;

  void* Allocate(size_t n) {
    if (n < internal::kMinCachedBytes) {
      void* block = SystemAlloc(n + kHeader);
      TORCH_CHECK(block != nullptr, "CPU allocator: out of memory allocating ",
                  n, " bytes");
      *static_cast<size_t*>(block) = 0;
      return static_cast<char*>(block) + kHeader;
    }
    const size_t size = internal::CpuAllocatorSizeClass(n);
    void* block = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.allocations;
      block = TakeLocked(size);
      if (block != nullptr) ++stats_.cache_hits;
      stats_.bytes_in_use += static_cast<int64_t>(size);
      stats_.peak_bytes_in_use =
          std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    }
    if (block == nullptr) {
      block = MapBlock(size + kHeader);
      if (block == nullptr) {
        EmptyCache();
        block = MapBlock(size + kHeader);
      }
      if (block == nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.bytes_in_use -= static_cast<int64_t>(size);
      }
      TORCH_CHECK(block != nullptr, "CPU allocator: out of memory allocating ",
                  n, " bytes");
    }
    *static_cast<size_t*>(block) = size;
    return static_cast<char*>(block) + kHeader;
  }

  // The most recently freed cached block of this size class, or null.
  void* TakeLocked(size_t size) {
    auto hi = by_size_.upper_bound(size);
    if (hi == by_size_.begin() || std::prev(hi)->first != size) return nullptr;
    const auto it = std::prev(hi);
    void* block = it->second->block;
    lru_.erase(it->second);
    by_size_.erase(it);
    stats_.cached_bytes -= static_cast<int64_t>(size);
    return block;
  }

  // Removes the least recently freed cached block from the cache.
  std::pair<void*, size_t> EvictOldestLocked() {
    const Cached oldest = lru_.front();
    auto range = by_size_.equal_range(oldest.size);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == lru_.begin()) {
        by_size_.erase(it);
        break;
      }
    }
    lru_.pop_front();
    stats_.cached_bytes -= static_cast<int64_t>(oldest.size);
    return {oldest.block, oldest.size};
  }

  // Takes every cached block (all) or those freed before the last trim and
  // not reused since (then a new trim round starts).
  Victims TakeCached(bool all) {
    Victims victims;
    std::lock_guard<std::mutex> lock(mu_);
    while (!lru_.empty() && (all || lru_.front().round < round_)) {
      victims.push_back(EvictOldestLocked());
    }
    if (!all) ++round_;
    return victims;
  }

  static void Unmap(const Victims& victims) {
    for (const auto& [block, size] : victims) UnmapBlock(block, size);
  }

  void Release(void* data) {
    if (data == nullptr) return;
    void* block = static_cast<char*>(data) - kHeader;
    const size_t size = *static_cast<size_t*>(block);
    if (size == 0) {
      std::free(block);
      return;
    }
    Victims victims;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(size);
      const int64_t limit = std::max(kMinCacheLimit, stats_.peak_bytes_in_use);
      const auto bytes = static_cast<int64_t>(size);
      if (bytes <= limit) {
        // The block just freed is the likeliest to be asked for again (the
        // next step's): room is made by evicting the least recently freed.
        while (stats_.cached_bytes + bytes > limit) {
          victims.push_back(EvictOldestLocked());
        }
        lru_.push_back({size, block, round_});
        by_size_.emplace(size, std::prev(lru_.end()));
        stats_.cached_bytes += bytes;
        block = nullptr;
      }
    }
    Unmap(victims);
    if (block != nullptr) UnmapBlock(block, size);
  }

  static void Delete(void* data) { Get().Release(data); }

  std::mutex mu_;
  // Cached blocks, least recently freed first, and indexed by size class.
  Lru lru_;
  std::multimap<size_t, Lru::iterator> by_size_;
  uint64_t round_ = 0;
  CpuAllocatorStats stats_;
};

}  // namespace

bool UseCachingCpuAllocator() {
  if (!StartKernelSwitches().caching_cpu_allocator) return false;
  static const bool installed = [] {
    c10::SetCPUAllocator(&CachingCpuAllocator::Get(), /*priority=*/1);
    return true;
  }();
  return installed;
}

CpuAllocatorStats CachingCpuAllocatorStats() {
  return CachingCpuAllocator::Get().Stats();
}

void EmptyCpuAllocatorCache() { CachingCpuAllocator::Get().EmptyCache(); }

void TrimCpuAllocatorCache() { CachingCpuAllocator::Get().TrimIdle(); }

void ReleaseFreeHeapMemory() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

double HeapTrimIntervalSeconds() {
  static const double secs = [] {
    constexpr double kDefault = 60;
    const char* v = SlimtorchVariable("SLIMTORCH_HEAP_TRIM_SECS");
    if (v == nullptr || *v == '\0') return kDefault;
    char* end = nullptr;
    const double d = std::strtod(v, &end);
    if (*end != '\0' || !(d >= 0)) {
      LOG(WARNING) << "SLIMTORCH_HEAP_TRIM_SECS='" << v
                   << "' is not a number of seconds >= 0; using " << kDefault;
      return kDefault;
    }
    return d;
  }();
  return secs;
}

}  // namespace slimtorch
