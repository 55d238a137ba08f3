#pragma once
// Internal: bfloat16 matmuls on CPUs without bf16 units (`kiln::has_native_bf16()` false):
// the operands are rounded to bf16 values held as f32, for an f32 GEMM over them, which
// gives the same products (two bf16 values multiply exactly in f32) at f32's speed. One
// pass per operand, reading it as the strided view it is.

#include <cstdint>
#include <span>

namespace kiln::compiler {

/// Writes `scale * x` rounded to bfloat16 (ties to even), as f32 values, densely
/// (row-major) to \p dst, for the operand x with dims \p shape whose element at index i
/// is `data[Σ i[d] · strides[d]]`. Allocates nothing.
void round_dense_bf16(const float* data, std::span<const std::int64_t> shape,
                      std::span<const std::int64_t> strides, float* dst, float scale = 1.0f);

}  // namespace kiln::compiler
