#include "little_endian.h"

#include <cstring>

namespace slimtorch {

std::string LittleEndianWords(const uint32_t* words, int64_t n) {
  std::string raw(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    for (int b = 0; b < 4; ++b) {
      raw[4 * i + b] = static_cast<char>((words[i] >> (8 * b)) & 0xff);
    }
  }
  return raw;
}

std::string LittleEndianFloats(const torch::Tensor& t) {
  const torch::Tensor c =
      t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  std::vector<uint32_t> words(static_cast<size_t>(c.numel()));
  std::memcpy(words.data(), c.data_ptr<float>(), words.size() * 4);
  return LittleEndianWords(words.data(), c.numel());
}

std::string LittleEndianInts(const std::vector<int32_t>& values) {
  std::vector<uint32_t> words(values.size());
  std::memcpy(words.data(), values.data(), values.size() * 4);
  return LittleEndianWords(words.data(), static_cast<int64_t>(values.size()));
}

}  // namespace slimtorch
