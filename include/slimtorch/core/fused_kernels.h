#pragma once
// The process-wide switch of the fused GPU kernels outside src/nets: the
// multi-tensor optimizer / moving-average updates (DeviceUpdate) and the
// counter-based CIFAR augmentation's draw-and-crop kernel. Each computes
// the same bits as the LibTorch ops it replaces; the switch is for A/B
// runs. On by default; SLIMTORCH_FUSED_KERNELS=0 turns it off (as it does
// nets' fused kernels, SetFusedBatchNorm).

namespace slimtorch {

// Whether the fused kernels may run (where the build has them).
bool FusedKernelsEnabled();

// Sets the switch; returns the previous setting.
bool SetFusedKernels(bool enabled);

}  // namespace slimtorch
