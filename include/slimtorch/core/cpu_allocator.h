#pragma once
// A caching allocator for LibTorch's CPU tensors.
//
// A training step allocates the same buffers in the same sizes every step
// (activations, their gradients, scratch) and frees most of them before
// the next. glibc maps blocks above its mmap threshold (128 KiB, rising to
// at most 32 MiB) fresh from the kernel and unmaps them when freed, and
// trims its heap, so each step pays page faults and zeroed pages again for
// buffers it had a step ago. The caching allocator keeps freed large
// blocks and hands them out again to requests of the same size class, so
// a steady loop reuses its memory from the second step on.
//
// Blocks of at least kMinCachedBytes are rounded up to a size class (at
// most 1/8 more), mapped from the kernel (never from malloc's heap) and
// cached when freed. The cache holds at most the most ever in use at once
// (so it at most doubles the footprint of the worst step; at least 256 MiB
// may be cached): a freed block that does not fit evicts the least
// recently freed blocks, which are unmapped, so the blocks of the steady
// loop stay cached after a step that needed other sizes (a summary, a
// save). Smaller blocks go to malloc and free. A failed allocation
// releases the whole cache and tries again. Thread-safe. Memory is 64-byte
// aligned, as LibTorch's own allocator's.

#include <cstddef>
#include <cstdint>

namespace slimtorch {

struct CpuAllocatorStats {
  int64_t allocations = 0;   // large blocks handed out
  int64_t cache_hits = 0;    // ... of them from the cache
  int64_t bytes_in_use = 0;  // large blocks handed out and not yet freed
  int64_t peak_bytes_in_use = 0;
  int64_t cached_bytes = 0;  // freed large blocks kept for reuse
};

// Makes the caching allocator LibTorch's CPU allocator for every tensor
// allocated from now on (tensors allocated before keep their own deleter).
// Idempotent. The tools call it first thing; SLIMTORCH_CPU_ALLOCATOR=system
// in the environment keeps LibTorch's own allocator (and the call returns
// false).
bool UseCachingCpuAllocator();

// The caching allocator's counters (zeros until it is in use).
CpuAllocatorStats CachingCpuAllocatorStats();

// Frees every cached block back to the system.
void EmptyCpuAllocatorCache();

// Frees the cached blocks that were freed before the previous call and not
// handed out again since: blocks idle for at least one interval between
// calls. A loop that calls it now and then keeps the blocks it reuses and
// returns those of a one-off step.
void TrimCpuAllocatorCache();

// Returns the C heap's free pages to the system (glibc's malloc_trim(0);
// nothing elsewhere). A process that lives for hours calls it now and then:
// glibc raises its mmap threshold to the size of each mapped block it
// frees, so later blocks of that size come from the heap, whose free pages
// in between are otherwise kept (docs/soak.md).
void ReleaseFreeHeapMemory();

// Seconds between the trainer's ReleaseFreeHeapMemory() calls:
// SLIMTORCH_HEAP_TRIM_SECS (default 60; 0: never). Another value logs a
// warning and the default is used. Read once.
double HeapTrimIntervalSeconds();

namespace internal {
// Size classes start here (exposed for tests).
constexpr size_t kMinCachedBytes = size_t{128} << 10;
// The size class of a large request of n bytes: n rounded up to a multiple
// of the smallest power of two of at least 4 KiB whose 16 multiples reach
// n (so at most 1/8 more than n).
size_t CpuAllocatorSizeClass(size_t n);
}  // namespace internal

}  // namespace slimtorch
