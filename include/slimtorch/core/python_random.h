#pragma once
// CPython's random module, exactly: the Mersenne Twister with CPython's
// seeding (init_by_array over the seed's 32-bit words), random(),
// getrandbits() and Python 3's shuffle (through _randbelow), so that
// converters pick the same examples as TF-Slim's Python scripts
// (download_and_convert_flowers.py: random.seed(0); random.shuffle(...)).
// Checked against CPython's own output (tests/core/python_random_test.cc).

#include <cstdint>
#include <utility>
#include <vector>

#include "slimtorch/core/error.h"

namespace slimtorch {

class PythonRandom {
 public:
  // random.seed(seed) for a non-negative integer below 2^32.
  explicit PythonRandom(uint32_t seed);

  // The next 32-bit output of the generator (genrand_uint32).
  uint32_t NextUint32();
  // random.random(): 53 bits in [0, 1) (the same in Python 2 and 3).
  double Random();
  // random.getrandbits(k) for 0 < k <= 32.
  uint32_t GetRandBits(int k);
  // random._randbelow(n) of Python 3 (getrandbits(n.bit_length()), drawn
  // again while >= n), for 0 < n < 2^32.
  uint32_t RandBelow(uint32_t n);

  // random.shuffle(x) of Python 3.
  template <typename T>
  void Shuffle(std::vector<T>* x) {
    SLIM_CHECK(x->size() < (uint64_t{1} << 32), "PythonRandom::Shuffle: ",
               x->size(), " items are too many");
    for (size_t i = x->size(); i-- > 1;) {
      std::swap((*x)[i], (*x)[RandBelow(static_cast<uint32_t>(i + 1))]);
    }
  }

  // random.shuffle(x) of Python 2.7: j = int(random() * (i + 1)).
  template <typename T>
  void ShufflePython2(std::vector<T>* x) {
    for (size_t i = x->size(); i-- > 1;) {
      std::swap((*x)[i], (*x)[static_cast<size_t>(Random() * (i + 1))]);
    }
  }

 private:
  void Twist();

  static constexpr int kN = 624;
  uint32_t mt_[kN];
  int index_ = kN;
};

}  // namespace slimtorch
