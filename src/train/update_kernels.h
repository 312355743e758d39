#pragma once
// The multi-tensor update kernels of DeviceUpdate (device_update.cc): plain
// gradient descent, momentum and the moving averages of every variable in
// one launch each (per 40 tensors), where LibTorch's _foreach ops take two
// to five launches of a few blocks each (the CIFAR-10 tutorial's 1M
// parameters: ~70 us of a 0.6 ms step on an H100); and a step's loss
// readout in one launch instead of ~14.
//
// Each kernel computes exactly what DeviceUpdate's _foreach ops compute, in
// the same float32 operations rounded one at a time (no fused multiply-add),
// so the two paths give the same bits:
//   sgd:            var = var - g * lr
//   momentum:       accum = accum * momentum + g;  var = var - accum * lr
//   moving average: c = 1 - min(decay, (1 + n) / (10 + n)), n = float(step)
//                   shadow = shadow - (shadow - var) * c
//
// The kernel body is a host-device function of (block, thread) with no
// shared memory or barriers, so the CPU tests run it block by block as the
// GPU would (UpdateKernelTest in tests/train/device_update_test.cc);
// update_kernels.cu only launches it. No LibTorch here.

#include <cstdint>
#include <vector>

#include "../core/host_device.h"

namespace slimtorch {
namespace train_internal {

using host_device::AddRn;
using host_device::DivRn;
using host_device::MulRn;
using host_device::SubRn;

enum class UpdateKind : int { kSgd, kMomentum, kMovingAverage };

constexpr int kUpdateThreads = 256;
constexpr int kUpdatePerThread = 8;
// Elements a block updates: thread t takes t, t + 256, ... of its chunk.
constexpr int64_t kUpdateChunk = int64_t{kUpdateThreads} * kUpdatePerThread;
// Tensors per launch (the pack is a kernel argument: ~1.5 KB of 4).
constexpr int kUpdateMaxTensors = 40;

// One launch's tensors, all float32 and dense, of `size` elements each:
// tensor t owns blocks [first_block[t], first_block[t + 1]).
//   a: the updated variable (sgd, momentum) or shadow (moving average)
//   b: the gradient (sgd, momentum) or the averaged variable
//   c: the momentum accumulator (momentum), else unused
struct UpdatePack {
  int count = 0;
  int first_block[kUpdateMaxTensors + 1] = {};
  int64_t size[kUpdateMaxTensors] = {};
  float* a[kUpdateMaxTensors] = {};
  const float* b[kUpdateMaxTensors] = {};
  float* c[kUpdateMaxTensors] = {};

  int blocks() const { return first_block[count]; }
};

struct UpdateScalars {
  UpdateKind kind = UpdateKind::kSgd;
  const float* learning_rate = nullptr;  // on the device, float32
  float momentum = 0;
  const int64_t* step = nullptr;  // on the device: the step after this one
  float decay = 0;                // the moving averages' decay
};

// The tensors (`count`, with `a`, `b`, `c` (may be null) and `sizes`) in
// launches of at most kUpdateMaxTensors and 2^30 blocks; empty tensors are
// left out.
inline std::vector<UpdatePack> PackUpdateTensors(size_t count, float* const* a,
                                                 const float* const* b,
                                                 float* const* c,
                                                 const int64_t* sizes) {
  std::vector<UpdatePack> packs;
  constexpr int64_t kMaxBlocks = int64_t{1} << 30;
  for (size_t i = 0; i < count; ++i) {
    const int64_t blocks = (sizes[i] + kUpdateChunk - 1) / kUpdateChunk;
    if (blocks == 0) continue;
    if (packs.empty() || packs.back().count == kUpdateMaxTensors ||
        packs.back().blocks() + blocks > kMaxBlocks) {
      packs.emplace_back();
    }
    UpdatePack& p = packs.back();
    const int t = p.count++;
    p.size[t] = sizes[i];
    p.a[t] = a[i];
    p.b[t] = b[i];
    p.c[t] = c != nullptr ? c[i] : nullptr;
    p.first_block[t + 1] = p.first_block[t] + static_cast<int>(blocks);
  }
  return packs;
}

// 1 - min(decay, (1 + n) / (10 + n)) for n = float(step), as DeviceUpdate's
// tensor ops compute it.
SLIMTORCH_HOST_DEVICE inline float MovingAverageComplement(int64_t step,
                                                           float decay) {
  const float n = static_cast<float>(step);
  const float ratio = DivRn(AddRn(n, 1.0f), AddRn(n, 10.0f));
  return SubRn(1.0f, ratio < decay ? ratio : decay);
}

// The tensor of pack `p` that owns `block`.
SLIMTORCH_HOST_DEVICE inline int UpdateTensorOf(const UpdatePack& p,
                                                int block) {
  int lo = 0;
  int hi = p.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.first_block[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Thread `thread` of block `block`: its elements of the block's chunk.
SLIMTORCH_HOST_DEVICE inline void UpdateBlock(const UpdatePack& p,
                                              const UpdateScalars& s, int block,
                                              int thread) {
  const int t = UpdateTensorOf(p, block);
  const int64_t first =
      int64_t{block - p.first_block[t]} * kUpdateChunk + thread;
  const int64_t size = p.size[t];
  float* a = p.a[t];
  const float* b = p.b[t];
  float* c = p.c[t];
  // Loads first, then the arithmetic and the stores: the loads of a thread
  // are in flight together.
  float va[kUpdatePerThread];
  float vb[kUpdatePerThread];
  float vc[kUpdatePerThread];
  const bool momentum = s.kind == UpdateKind::kMomentum;
  for (int k = 0; k < kUpdatePerThread; ++k) {
    const int64_t i = first + int64_t{k} * kUpdateThreads;
    if (i < size) {
      va[k] = a[i];
      vb[k] = b[i];
      vc[k] = momentum ? c[i] : 0.0f;
    }
  }
  switch (s.kind) {
    case UpdateKind::kSgd: {
      const float lr = *s.learning_rate;
      for (int k = 0; k < kUpdatePerThread; ++k) {
        const int64_t i = first + int64_t{k} * kUpdateThreads;
        if (i < size) a[i] = SubRn(va[k], MulRn(vb[k], lr));
      }
      break;
    }
    case UpdateKind::kMomentum: {
      const float lr = *s.learning_rate;
      for (int k = 0; k < kUpdatePerThread; ++k) {
        const int64_t i = first + int64_t{k} * kUpdateThreads;
        if (i < size) {
          const float accum = AddRn(MulRn(vc[k], s.momentum), vb[k]);
          c[i] = accum;
          a[i] = SubRn(va[k], MulRn(accum, lr));
        }
      }
      break;
    }
    case UpdateKind::kMovingAverage: {
      const float complement = MovingAverageComplement(*s.step, s.decay);
      for (int k = 0; k < kUpdatePerThread; ++k) {
        const int64_t i = first + int64_t{k} * kUpdateThreads;
        if (i < size)
          a[i] = SubRn(va[k], MulRn(SubRn(va[k], vb[k]), complement));
      }
      break;
    }
  }
}

// A training step's losses into `readout` (float64 [5]): the total loss
// total + reg (rounded in float32, as the tensor add), the cross entropy,
// the regularization, and the first time the total loss is not finite, that
// loss and the step (readout[4] stays 0 until then).
SLIMTORCH_HOST_DEVICE inline void RecordStepLosses(const float* total,
                                                   const float* ce,
                                                   const float* reg,
                                                   const int64_t* step,
                                                   double* readout) {
  const float loss = AddRn(*total, *reg);
  readout[0] = loss;
  readout[1] = *ce;
  readout[2] = *reg;
  // loss - loss is NaN for a NaN or an infinity, 0 for every finite value.
  const bool finite = SubRn(loss, loss) == 0.0f;
  if (!finite && readout[4] == 0.0) {
    readout[3] = loss;
    readout[4] = static_cast<double>(*step);
  }
}

// Launches UpdateBlock over every pack on `stream` (a cudaStream_t of
// `device`, where the pointers live). nullptr on success, else CUDA's
// error string. Defined only where the CUDA kernels are built.
const char* MultiTensorUpdateCuda(const UpdateScalars& s,
                                  const std::vector<UpdatePack>& packs,
                                  void* stream);

// RecordStepLosses as a one-thread kernel on `stream`; the pointers on its
// device.
const char* RecordStepLossesCuda(const float* total, const float* ce,
                                 const float* reg, const int64_t* step,
                                 double* readout, void* stream);

}  // namespace train_internal
}  // namespace slimtorch
