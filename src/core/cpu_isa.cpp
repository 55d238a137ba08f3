#include "kiln/core/cpu_isa.hpp"

#include <cstdlib>
#include <string>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kiln {
namespace {

constexpr CpuIsa kLevels[] = {CpuIsa::base, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16,
                              CpuIsa::amx};

#if defined(__x86_64__)
/// The OS-enabled state components (XCR0): the registers the kernel saves on a switch.
std::uint64_t enabled_state() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (std::uint64_t{hi} << 32) | lo;
}

CpuIsa detect() {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return CpuIsa::base;
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")))
    return CpuIsa::avx2;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0 || (eax & (1u << 5)) == 0)
    return CpuIsa::avx512;  // no AVX512_BF16
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return CpuIsa::avx512_bf16;
  const bool amx_bf16 = (edx & (1u << 22)) != 0, amx_tile = (edx & (1u << 24)) != 0;
  const std::uint64_t tiles = (std::uint64_t{1} << 17) | (std::uint64_t{1} << 18);  // XTILE*
  if (amx_bf16 && amx_tile && (enabled_state() & tiles) == tiles) return CpuIsa::amx;
  return CpuIsa::avx512_bf16;
}
#else
CpuIsa detect() { return CpuIsa::base; }
#endif

CpuIsa from_environment() {
  const char* wanted = std::getenv("KILN_CPU_ISA");
  return parse_cpu_isa(wanted == nullptr ? "" : wanted, detected_cpu_isa());
}

}  // namespace

CpuIsa detected_cpu_isa() noexcept {
  static const CpuIsa isa = detect();
  return isa;
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = from_environment();
  return isa;
}

CpuIsa parse_cpu_isa(std::string_view text, CpuIsa detected) {
  if (text.empty()) return detected;
  for (CpuIsa level : kLevels)
    if (name(level) == text) return level < detected ? level : detected;
  throw UserError(detail::cat("KILN_CPU_ISA='", text,
                              "' is not an instruction-set level: use base, avx2, avx512, "
                              "avx512_bf16 or amx (or unset it for the CPU's own, ",
                              name(detected), ")"));
}

bool has_native_bf16() { return cpu_isa() >= CpuIsa::avx512_bf16; }

std::string_view name(CpuIsa isa) noexcept {
  switch (isa) {
    case CpuIsa::base:
      return "base";
    case CpuIsa::avx2:
      return "avx2";
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::avx512_bf16:
      return "avx512_bf16";
    case CpuIsa::amx:
      return "amx";
  }
  return "?";
}

}  // namespace kiln
