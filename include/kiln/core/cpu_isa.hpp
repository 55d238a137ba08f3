#pragma once
/// \file
/// `CpuIsa`: the instruction-set levels kiln's CPU kernels choose between, what this CPU
/// has, and the level kiln uses (lowered with `KILN_CPU_ISA`, to test every fallback on
/// any machine).

#include <cstdint>
#include <string_view>

namespace kiln {

/// Instruction-set levels of x86-64 CPUs, lowest first. Each includes the ones below it.
enum class CpuIsa : std::uint8_t {
  base,         ///< SSE2: the portable loops
  avx2,         ///< AVX2 with FMA
  avx512,       ///< AVX-512 F, DQ, BW and VL (Skylake-SP, Ice Lake): no bfloat16 units
  avx512_bf16,  ///< AVX-512 with AVX512_BF16 (Cooper Lake; Sapphire Rapids without AMX)
  amx,          ///< AMX-BF16 tiles with AVX512_BF16 (Sapphire Rapids)
};

/// The highest level this CPU (and the operating system) supports. Cheap after the first
/// call.
CpuIsa detected_cpu_isa() noexcept;

/// The level kiln's kernels use: `detected_cpu_isa()`, lowered by the environment variable
/// `KILN_CPU_ISA` (`base`, `avx2`, `avx512`, `avx512_bf16` or `amx`) when it is set. A
/// level above the CPU's is capped at the CPU's. Read once per process, at the first call;
/// the CPU kernels (kiln's own and oneDNN's) are chosen for this level.
/// \throws UserError when `KILN_CPU_ISA` holds another value (naming it and the choices).
CpuIsa cpu_isa();

/// The level that `KILN_CPU_ISA=text` selects on a CPU whose own level is \p detected:
/// the named level capped at \p detected; \p detected for an empty text.
/// \throws UserError when \p text names no level (naming it and the choices).
CpuIsa parse_cpu_isa(std::string_view text, CpuIsa detected);

/// True when the kernels multiply bfloat16 natively (`cpu_isa()` is `avx512_bf16` or
/// `amx`); otherwise `MatmulPrecision::bf16` runs f32 GEMMs over operands rounded to
/// bfloat16, which gives the same products (a product of two bf16 values is exact in f32).
bool has_native_bf16();

/// `base`, `avx2`, `avx512`, `avx512_bf16`, `amx`.
std::string_view name(CpuIsa isa) noexcept;

}  // namespace kiln
