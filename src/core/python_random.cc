#include "slimtorch/core/python_random.h"

namespace slimtorch {

PythonRandom::PythonRandom(uint32_t seed) {
  // init_genrand(19650218), then init_by_array with the one key word `seed`
  // (CPython's random_seed: the absolute value's 32-bit words; 0 is [0]).
  mt_[0] = 19650218u;
  for (int i = 1; i < kN; ++i) {
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) +
             static_cast<uint32_t>(i);
  }
  int i = 1;
  for (int k = kN; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + seed;
    if (++i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) -
             static_cast<uint32_t>(i);
    if (++i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  index_ = kN;
}

void PythonRandom::Twist() {
  constexpr int kM = 397;
  for (int i = 0; i < kN; ++i) {
    const uint32_t y =
        (mt_[i] & 0x80000000u) | (mt_[(i + 1) % kN] & 0x7fffffffu);
    mt_[i] = mt_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  }
  index_ = 0;
}

uint32_t PythonRandom::NextUint32() {
  if (index_ >= kN) Twist();
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

double PythonRandom::Random() {
  const uint32_t a = NextUint32() >> 5, b = NextUint32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint32_t PythonRandom::GetRandBits(int k) {
  SLIM_CHECK(k > 0 && k <= 32, "PythonRandom::GetRandBits: k = ", k,
             " is outside [1, 32]");
  return NextUint32() >> (32 - k);
}

uint32_t PythonRandom::RandBelow(uint32_t n) {
  SLIM_CHECK(n > 0, "PythonRandom::RandBelow: n must be positive");
  int k = 0;
  while (k < 32 && (n >> k) != 0) ++k;  // n.bit_length()
  uint32_t r = GetRandBits(k);
  while (r >= n) r = GetRandBits(k);
  return r;
}

}  // namespace slimtorch
