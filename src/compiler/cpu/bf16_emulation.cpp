#include "compiler/cpu/bf16_emulation.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>

#include "compiler/cpu/vector_math.hpp"

namespace kiln::compiler {
namespace {

float rounded(float x, float scale) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(vmath::to_bf16(x * scale)) << 16);
}

/// The dims of a view with the trailing ones that lie contiguously merged into one (a
/// dense [8, 128, 64] is one row of 65536), so that a pass runs over long rows. At most
/// kMaxDims dims, which is all a pass over a view needs to know without allocating.
struct Merged {
  static constexpr std::size_t kMaxDims = 8;
  std::array<std::int64_t, kMaxDims> shape{}, strides{};
  std::size_t rank = 0;
};

bool merge(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, Merged& m) {
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // any stride reads a dim of one
    if (m.rank > 0 && m.strides[m.rank - 1] == strides[d] * shape[d]) {
      m.shape[m.rank - 1] *= shape[d];  // the previous dim steps over this one exactly
      m.strides[m.rank - 1] = strides[d];
      continue;
    }
    if (m.rank == Merged::kMaxDims) return false;
    m.shape[m.rank] = shape[d];
    m.strides[m.rank] = strides[d];
    ++m.rank;
  }
  if (m.rank == 0) m.shape[m.rank++] = 1;  // one element
  return true;
}

/// Rows [rows] x [n] (element (i, j) at src[i * row + j * col]) into dense dst.
void round_matrix(const float* src, std::int64_t rows, std::int64_t n, std::int64_t row,
                  std::int64_t col, float* dst, float scale) {
  if (col == 1) {
    for (std::int64_t i = 0; i < rows; ++i)
      vmath::round_bf16_f32(src + i * row, dst + i * n, static_cast<std::size_t>(n), scale);
    return;
  }
  if (row == 1) {  // a transposed view: round 16 source rows at a time, write them as columns
    constexpr std::int64_t kBlock = 16;
    std::array<float, kBlock * kBlock> block;
    for (std::int64_t j0 = 0; j0 < n; j0 += kBlock) {
      const std::int64_t cols = std::min(kBlock, n - j0);
      for (std::int64_t i0 = 0; i0 < rows; i0 += kBlock) {
        const std::int64_t height = std::min(kBlock, rows - i0);
        for (std::int64_t j = 0; j < cols; ++j)  // contiguous in i: one vectorised pass each
          vmath::round_bf16_f32(src + (j0 + j) * col + i0, block.data() + j * kBlock,
                                static_cast<std::size_t>(height), scale);
        for (std::int64_t i = 0; i < height; ++i)
          for (std::int64_t j = 0; j < cols; ++j)
            dst[(i0 + i) * n + j0 + j] = block[static_cast<std::size_t>(j * kBlock + i)];
      }
    }
    return;
  }
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < n; ++j) dst[i * n + j] = rounded(src[i * row + j * col], scale);
}

}  // namespace

void round_dense_bf16(const float* data, std::span<const std::int64_t> shape,
                      std::span<const std::int64_t> strides, float* dst, float scale) {
  for (std::int64_t d : shape)
    if (d == 0) return;
  Merged m;
  if (!merge(shape, strides, m)) {  // more dims than a pass tracks: one element at a time
    const std::size_t rank = shape.size();
    std::int64_t total = 1;
    for (std::int64_t d : shape) total *= d;
    for (std::int64_t flat = 0; flat < total; ++flat) {
      std::int64_t offset = 0;
      for (std::int64_t rest = flat, d = static_cast<std::int64_t>(rank) - 1; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        offset += rest % shape[u] * strides[u];
        rest /= shape[u];
      }
      dst[flat] = rounded(data[offset], scale);
    }
    return;
  }
  // The last two merged dims are matrices; an odometer steps over the dims before them.
  const std::size_t r = m.rank;
  const std::int64_t n = m.shape[r - 1], col = m.strides[r - 1];
  const std::int64_t rows = r >= 2 ? m.shape[r - 2] : 1, row = r >= 2 ? m.strides[r - 2] : 0;
  const std::size_t outer = r >= 2 ? r - 2 : 0;
  std::array<std::int64_t, Merged::kMaxDims> index{};
  std::int64_t offset = 0;
  for (float* out = dst;; out += rows * n) {
    round_matrix(data + offset, rows, n, row, col, out, scale);
    std::size_t d = outer;
    for (; d-- > 0;) {
      offset += m.strides[d];
      if (++index[d] < m.shape[d]) break;
      offset -= m.strides[d] * m.shape[d];
      index[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

}  // namespace kiln::compiler
