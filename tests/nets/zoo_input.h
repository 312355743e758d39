#pragma once
// The input the tests that walk the whole zoo feed a net: images
// [N, C, S, S] at its default size, or, for the video nets (i3d, s3dg),
// clips [N, C, kZooTestFrames, 64, 64]: their defaults (64 frames of
// 224x224, ~100 G multiply-adds a clip for i3d) are too slow for unit
// tests, and every op of theirs runs at this size too.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "slimtorch/nets/net.h"

namespace slimtorch {
namespace testing {

inline constexpr int64_t kZooTestFrames = 8;
inline constexpr int64_t kZooTestVideoSize = 64;

// `options` with the video nets' test frames (image nets ignore them).
inline NetOptions ZooTestOptions(NetOptions options) {
  return options.num_frames(kZooTestFrames);
}

// The height = width the zoo tests feed `net`.
inline int64_t ZooTestSize(const Net& net) {
  return net.num_frames() > 0 ? kZooTestVideoSize : net.default_image_size();
}

// [batch, C, size, size], or [batch, C, T, size, size] for a video net.
inline std::vector<int64_t> ZooInputShape(const Net& net, int64_t batch,
                                          int64_t size) {
  std::vector<int64_t> shape = {batch, net.input_channels(), size, size};
  if (net.num_frames() > 0) shape.insert(shape.begin() + 2, net.num_frames());
  return shape;
}

}  // namespace testing
}  // namespace slimtorch
