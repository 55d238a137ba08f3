// Caps oneDNN's kernels at the instruction-set level kiln uses, so that KILN_CPU_ISA
// tests oneDNN's fallbacks too (AVX2 sgemm, no bf16 units) on any machine.

#include "compiler/cpu/onednn_support.hpp"

#include <mutex>

#include "kiln/core/cpu_isa.hpp"

namespace kiln::compiler::onednn {

void cap_isa() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (cpu_isa() == detected_cpu_isa()) return;  // oneDNN's own choice is the CPU's
    dnnl::cpu_isa cap = dnnl::cpu_isa::all;
    switch (cpu_isa()) {
      case CpuIsa::base:
        cap = dnnl::cpu_isa::sse41;
        break;
      case CpuIsa::avx2:
        cap = dnnl::cpu_isa::avx2;
        break;
      case CpuIsa::avx512:  // Ice Lake's set: VNNI for integers, no bfloat16
        cap = dnnl::cpu_isa::avx512_core_vnni;
        break;
      case CpuIsa::avx512_bf16:
        cap = dnnl::cpu_isa::avx512_core_bf16;
        break;
      case CpuIsa::amx:
        break;
    }
    // Fails only when oneDNN already picked kernels (then its choice stands).
    (void)dnnl_set_max_cpu_isa(static_cast<dnnl_cpu_isa_t>(cap));
  });
}

}  // namespace kiln::compiler::onednn
