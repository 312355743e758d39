#include "slimtorch/core/python_random.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/python_random_goldens.h"

namespace slimtorch {
namespace {

using namespace testing_golden;  // NOLINT: golden tables

uint64_t Fnv(const std::vector<int>& values) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int v : values) h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ULL;
  return h;
}

TEST(PythonRandomTest, MatchesCPython) {
  for (const PythonRandomGolden* g :
       {&kPythonRandom0, &kPythonRandom12345, &kPythonRandom4294967295}) {
    SCOPED_TRACE(g->seed);
    PythonRandom words(g->seed);
    for (uint32_t w : g->words) EXPECT_EQ(words.GetRandBits(32), w);
    PythonRandom bits(g->seed);
    const int ks[4] = {1, 7, 31, 32};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(bits.GetRandBits(ks[i]), g->bits[i]);
    PythonRandom floats(g->seed);
    for (double f : g->floats) EXPECT_EQ(floats.Random(), f);
    PythonRandom below(g->seed);
    const uint32_t ns[7] = {1, 2, 3, 350, 3670, 1000000, 4294967295u};
    for (int i = 0; i < 7; ++i) EXPECT_EQ(below.RandBelow(ns[i]), g->below[i]);
  }
}

// random.seed(0); random.shuffle(...) is how TF-Slim splits flowers.
TEST(PythonRandomTest, ShuffleMatchesCPython) {
  for (const ShuffleGolden* g : {&kShuffle0_3670, &kShuffle0_10,
                                 &kShuffle12345_1000}) {
    std::vector<int> x(g->n);
    std::iota(x.begin(), x.end(), 0);
    PythonRandom(g->seed).Shuffle(&x);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(x[i], g->first[i]) << g->n;
    EXPECT_EQ(Fnv(x), g->fnv) << g->n;
  }
}

}  // namespace
}  // namespace slimtorch
