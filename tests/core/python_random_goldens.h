#pragma once
// CPython's random output (tests/golden/python_random_goldens.inc, written by
// scripts/golden/python_random_goldens.py).

#include <array>
#include <cstdint>

namespace slimtorch {
namespace testing_golden {

struct PythonRandomGolden {
  uint32_t seed;
  std::array<uint32_t, 5> words;  // getrandbits(32) x 5
  std::array<uint32_t, 4> bits;   // getrandbits(1, 7, 31, 32)
  std::array<double, 3> floats;   // random() x 3
  // _randbelow(1, 2, 3, 350, 3670, 1000000, 4294967295), one generator
  std::array<uint32_t, 7> below;
};

struct ShuffleGolden {
  uint32_t seed;
  int n;
  std::array<int, 10> first;  // shuffle(list(range(n)))[:10]
  uint64_t fnv;               // FNV-1a over the whole permutation
};

#include "golden/python_random_goldens.inc"

}  // namespace testing_golden
}  // namespace slimtorch
