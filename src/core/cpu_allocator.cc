#include "slimtorch/core/cpu_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <glog/logging.h>
#include <malloc.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

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

  void EmptyCache() {
    std::multimap<size_t, void*> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      stats_.cached_bytes = 0;
    }
    for (auto& [size, block] : blocks) std::free(block);
  }

  static CachingCpuAllocator& Get() {
    static CachingCpuAllocator* instance = new CachingCpuAllocator();
    return *instance;
  }

 private:
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
      auto it = free_.find(size);
      if (it != free_.end()) {
        block = it->second;
        free_.erase(it);
        ++stats_.cache_hits;
        stats_.cached_bytes -= static_cast<int64_t>(size);
      }
      stats_.bytes_in_use += static_cast<int64_t>(size);
      stats_.peak_bytes_in_use =
          std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    }
    if (block == nullptr) {
      block = SystemAlloc(size + kHeader);
      if (block == nullptr) {
        EmptyCache();
        block = SystemAlloc(size + kHeader);
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

  void Release(void* data) {
    if (data == nullptr) return;
    void* block = static_cast<char*>(data) - kHeader;
    const size_t size = *static_cast<size_t*>(block);
    if (size == 0) {
      std::free(block);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_in_use -= static_cast<int64_t>(size);
      const int64_t limit = std::max(kMinCacheLimit, stats_.peak_bytes_in_use);
      if (stats_.cached_bytes + static_cast<int64_t>(size) <= limit) {
        free_.emplace(size, block);
        stats_.cached_bytes += static_cast<int64_t>(size);
        return;
      }
    }
    std::free(block);
  }

  static void Delete(void* data) { Get().Release(data); }

  std::mutex mu_;
  // Cached blocks by size class.
  std::multimap<size_t, void*> free_;
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

void ReleaseFreeHeapMemory() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

double HeapTrimIntervalSeconds() {
  static const double secs = [] {
    constexpr double kDefault = 60;
    const char* v = std::getenv("SLIMTORCH_HEAP_TRIM_SECS");
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
