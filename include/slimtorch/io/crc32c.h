#pragma once
// CRC-32C (Castagnoli), as used by TFRecord framing.
//
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise;
// both give identical results (tested on the RFC 3720 vectors).

#include <cstddef>
#include <cstdint>
#include <string>

namespace slimtorch {
namespace crc32c {

// Extends `crc` (the CRC of some prefix) with `n` more bytes.
uint32_t Extend(uint32_t crc, const void* data, size_t n);
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(const std::string& s) { return Value(s.data(), s.size()); }

// The table implementation, exposed so tests can compare both paths.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);
// True when Extend() uses the hardware instruction.
bool HardwareAccelerated();

// TFRecord's masking: rotate right by 15 bits and add a constant.
// Persisted format: do not change.
constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace crc32c
}  // namespace slimtorch
