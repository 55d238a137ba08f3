#include "compiler/skinny_matmul.hpp"

#include <algorithm>
#include <new>

namespace kiln::compiler {
namespace {

constexpr auto kPanel = static_cast<std::int64_t>(vmath::kPanel);
constexpr std::align_val_t kAlign{64};  // a cache line: panel rows never straddle two

}  // namespace

void SkinnyMatmul::AlignedFree::operator()(float* p) const noexcept {
  ::operator delete[](p, kAlign);
}

SkinnyMatmul::SkinnyMatmul(MatrixRef a, MatrixRef b, float* c, std::int64_t m, std::int64_t k,
                           std::int64_t n, bool pack)
    : a_(a), b_(b), c_(c), m_(m), k_(k), n_(n), panels_((n + kPanel - 1) / kPanel) {
  if (!pack || k == 0) return;
  const auto size = static_cast<std::size_t>(panels_ * k * kPanel);
  packed_.reset(static_cast<float*>(::operator new[](size * sizeof(float), kAlign)));
  float* out = packed_.get();
  for (std::int64_t p = 0; p < panels_; ++p) {
    const std::int64_t c0 = p * kPanel, cols = std::min(kPanel, n - c0);
    for (std::int64_t i = 0; i < k; ++i, out += kPanel) {
      const float* row = b.data + i * b.row + c0 * b.col;
      for (std::int64_t j = 0; j < cols; ++j) out[j] = row[j * b.col];
      std::fill(out + cols, out + kPanel, 0.0f);
    }
  }
}

std::int64_t SkinnyMatmul::blocks(int threads) const noexcept {
  constexpr std::int64_t kPerBlock = std::int64_t{1} << 15;  // elements of B: 128 KiB
  const std::int64_t most = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, panels_));
  return std::clamp<std::int64_t>(k_ * n_ / kPerBlock, 1, most);
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
  for (std::int64_t p = first; p < last; ++p) {
    const std::int64_t c0 = p * kPanel, cols = std::min(kPanel, n_ - c0);
    const float* b = packed_ ? packed_.get() + p * k_ * kPanel : b_.data + c0;
    const std::int64_t ldb = packed_ ? kPanel : b_.row;
    vmath::matmul_panel(a_.data, static_cast<std::size_t>(a_.row), static_cast<std::size_t>(a_.col),
                        static_cast<std::size_t>(m_), b, static_cast<std::size_t>(ldb),
                        static_cast<std::size_t>(k_), c_ + c0, static_cast<std::size_t>(n_),
                        static_cast<std::size_t>(cols));
  }
}

}  // namespace kiln::compiler
