#pragma once
// The instruction set slimtorch's own CPU kernels run in.
//
// The hot loops of the fused kernels (batch norm + activation, ...) are
// compiled once per x86-64 instruction set — the baseline every x86-64 CPU
// has (SSE2), AVX2, and AVX-512 (F, BW, DQ, VL) — and the widest one the CPU
// and the operating system support is used. Every variant computes the same
// float operations in the same order, so they give the same bits; only the
// speed differs. Elsewhere than x86-64 there is only the baseline.
//
// SLIMTORCH_CPU_ISA=baseline|avx2|avx512 in the environment caps the choice
// (to compare the variants; a cap above what the CPU has is lowered to it).

namespace slimtorch {

enum class CpuIsa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The widest instruction set this CPU and this build can run.
CpuIsa SupportedCpuIsa();

// The one the kernels use now: SupportedCpuIsa(), capped by
// SLIMTORCH_CPU_ISA (read once) or by SetActiveCpuIsa.
CpuIsa ActiveCpuIsa();

// Caps the active instruction set at `isa` (lowered to SupportedCpuIsa())
// from now on; returns the previous one. For tests and benchmarks.
CpuIsa SetActiveCpuIsa(CpuIsa isa);

// "baseline", "avx2", "avx512".
const char* CpuIsaName(CpuIsa isa);

}  // namespace slimtorch
