#pragma once
// Tensor bytes for the writers' constants, little-endian whatever the host's
// byte order: ONNX's TensorProto.raw_data is little-endian by definition,
// and TensorFlow writes tensor_content in its host's order, little-endian
// everywhere it runs. Private to export/.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace slimtorch {

// `n` 4-byte words, each least significant byte first.
std::string LittleEndianWords(const uint32_t* words, int64_t n);

// `t` (any device and dtype) as float32, row-major.
std::string LittleEndianFloats(const torch::Tensor& t);

std::string LittleEndianInts(const std::vector<int32_t>& values);

}  // namespace slimtorch
