#include "kiln/core/cpu_isa.hpp"

#include <gtest/gtest.h>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

TEST(CpuIsa, ALevelIsCappedAtTheCpus) {
  EXPECT_EQ(parse_cpu_isa("avx2", CpuIsa::amx), CpuIsa::avx2);
  EXPECT_EQ(parse_cpu_isa("base", CpuIsa::avx512), CpuIsa::base);
  EXPECT_EQ(parse_cpu_isa("amx", CpuIsa::avx512), CpuIsa::avx512);  // Ice Lake has no AMX
  EXPECT_EQ(parse_cpu_isa("avx512_bf16", CpuIsa::avx2), CpuIsa::avx2);
  EXPECT_EQ(parse_cpu_isa("", CpuIsa::avx512_bf16), CpuIsa::avx512_bf16);
}

TEST(CpuIsa, AnUnknownLevelIsNamedWithTheChoices) {
  KILN_EXPECT_THROW_MSG(parse_cpu_isa("avx512bf16", CpuIsa::amx), UserError,
                        "KILN_CPU_ISA='avx512bf16' is not an instruction-set level: use base, "
                        "avx2, avx512, avx512_bf16 or amx");
}

TEST(CpuIsa, TheLevelInUseIsNeverAboveTheCpusAndNamesRoundTrip) {
  EXPECT_LE(cpu_isa(), detected_cpu_isa());
  EXPECT_EQ(has_native_bf16(), cpu_isa() >= CpuIsa::avx512_bf16);
  for (CpuIsa level :
       {CpuIsa::base, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16, CpuIsa::amx})
    EXPECT_EQ(parse_cpu_isa(name(level), CpuIsa::amx), level);
}

}  // namespace
}  // namespace kiln
