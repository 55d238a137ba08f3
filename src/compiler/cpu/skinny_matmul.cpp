#include "compiler/cpu/skinny_matmul.hpp"

#include <algorithm>
#include <new>

namespace kiln::compiler {
namespace {

constexpr auto kPanel = static_cast<std::int64_t>(vmath::kPanel);
constexpr std::align_val_t kAlign{64};  // a cache line: panel rows never straddle two

}  // namespace

void SkinnyMatmul::AlignedFree::operator()(void* p) const noexcept {
  ::operator delete[](p, kAlign);
}

template <class T, class Convert>
void SkinnyMatmul::pack(Convert convert) {
  const auto size = static_cast<std::size_t>(panels_ * k_ * kPanel);
  packed_.reset(::operator new[](size * sizeof(T), kAlign));
  T* out = static_cast<T*>(packed_.get());
  for (std::int64_t p = 0; p < panels_; ++p) {
    const std::int64_t c0 = p * kPanel, cols = std::min(kPanel, n_ - c0);
    for (std::int64_t i = 0; i < k_; ++i, out += kPanel) {
      const float* row = b_.data + i * b_.row + c0 * b_.col;
      for (std::int64_t j = 0; j < cols; ++j) out[j] = convert(row[j * b_.col]);
      std::fill(out + cols, out + kPanel, T{});
    }
  }
}

SkinnyMatmul::SkinnyMatmul(MatrixRef a, MatrixRef b, float* c, std::int64_t m, std::int64_t k,
                           std::int64_t n, bool pack_b, bool bf16)
    : a_(a),
      b_(b),
      c_(c),
      m_(m),
      k_(k),
      n_(n),
      panels_((n + kPanel - 1) / kPanel),
      bf16_(pack_b && bf16) {
  if (!pack_b || k == 0) return;
  if (bf16_)
    pack<std::uint16_t>([](float x) { return vmath::to_bf16(x); });
  else
    pack<float>([](float x) { return x; });
}

std::int64_t SkinnyMatmul::blocks(int threads) const noexcept {
  // Elements of B per block: 128 KiB of them as read.
  const std::int64_t per_block = std::int64_t{1} << (bf16_ ? 16 : 15);
  const std::int64_t most = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, panels_));
  return std::clamp<std::int64_t>(k_ * n_ / per_block, 1, most);
}

std::int64_t SkinnyMatmul::first_column(std::int64_t p) const noexcept {
  return std::min(p * kPanel, n_);
}

void SkinnyMatmul::run(std::int64_t first, std::int64_t last) const {
  if (k_ == 0) {  // sums of nothing (B may have no storage at all)
    for (std::int64_t r = 0; r < m_; ++r)
      std::fill(c_ + r * n_ + first_column(first), c_ + r * n_ + first_column(last), 0.0f);
    return;
  }
  const auto a_row = static_cast<std::size_t>(a_.row), a_col = static_cast<std::size_t>(a_.col);
  const auto m = static_cast<std::size_t>(m_), k = static_cast<std::size_t>(k_),
             n = static_cast<std::size_t>(n_);
  for (std::int64_t p = first; p < last; ++p) {
    const std::int64_t c0 = p * kPanel;
    const auto cols = static_cast<std::size_t>(std::min(kPanel, n_ - c0));
    const std::int64_t panel = p * k_ * kPanel;
    if (bf16_) {
      vmath::matmul_panel_bf16(a_.data, a_row, a_col, m,
                               static_cast<const std::uint16_t*>(packed_.get()) + panel,
                               vmath::kPanel, k, c_ + c0, n, cols);
    } else if (packed_) {
      vmath::matmul_panel(a_.data, a_row, a_col, m,
                          static_cast<const float*>(packed_.get()) + panel, vmath::kPanel, k,
                          c_ + c0, n, cols);
    } else {
      vmath::matmul_panel(a_.data, a_row, a_col, m, b_.data + c0, static_cast<std::size_t>(b_.row),
                          k, c_ + c0, n, cols);
    }
  }
}

}  // namespace kiln::compiler
