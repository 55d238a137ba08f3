#include "compiler/bf16_emulation.hpp"

#include <bit>
#include <cstddef>

#include "compiler/vector_math.hpp"

namespace kiln::compiler {

void round_dense_bf16(const float* data, std::span<const std::int64_t> shape,
                      std::span<const std::int64_t> strides, float* dst, float scale) {
  if (shape.empty()) {
    vmath::round_bf16_f32(data, dst, 1, scale);
    return;
  }
  const std::size_t rank = shape.size();
  const std::int64_t n = shape[rank - 1], step = strides[rank - 1];
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < rank; ++d) rows *= shape[d];
  if (n == 0) return;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t offset = 0;  // of row r: its index over the outer dims, last dim fastest
    for (std::int64_t rest = r, d = static_cast<std::int64_t>(rank) - 2; d >= 0; --d) {
      const auto u = static_cast<std::size_t>(d);
      offset += rest % shape[u] * strides[u];
      rest /= shape[u];
    }
    const float* src = data + offset;
    float* out = dst + r * n;
    if (step == 1) {
      vmath::round_bf16_f32(src, out, static_cast<std::size_t>(n), scale);
    } else {
      for (std::int64_t j = 0; j < n; ++j)
        out[j] = std::bit_cast<float>(
            static_cast<std::uint32_t>(vmath::to_bf16(src[j * step] * scale)) << 16);
    }
  }
}

}  // namespace kiln::compiler
