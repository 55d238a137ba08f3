#pragma once
// Internal: f32 matmuls with few rows (a batch-1 Linear layer, x [m, k] @ w [k, n] with
// m <= kMaxRows), whose time is the reading of B, not the multiply-adds: sgemm reads such
// a B at a fraction of the memory's speed, on one thread. Here B is read in column panels
// of vmath::kPanel columns, each panel once, while the sums of all m rows stay in
// registers; the panels are split over the launch's blocks, so that each worker reads its
// own slice of B (and, replay after replay, finds it in its own cache). When B stays the
// same for the plan's life (a weight), its panels are packed once, each contiguous, zero
// padded to a whole panel, optionally rounded to bfloat16 (half the bytes to read; the
// products and sums stay f32).

#include <cstdint>
#include <memory>

#include "compiler/cpu/packed_matmul.hpp"
#include "compiler/cpu/vector_math.hpp"

namespace kiln::compiler {

class SkinnyMatmul {
 public:
  /// The most rows of A: the rows one panel keeps in registers.
  static constexpr auto kMaxRows = static_cast<std::int64_t>(vmath::kPanelRows);

  /// C = A B with A \p m x \p k (m <= kMaxRows), B \p k x \p n and C \p m x \p n row-major
  /// at \p c. With \p pack, B's panels are copied now (\p bf16: rounded to bfloat16) and
  /// B must not change while this object lives; without, B is read in place and must have
  /// unit column stride.
  SkinnyMatmul(MatrixRef a, MatrixRef b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
               bool pack, bool bf16 = false);

  /// Whether this path computes such a matmul: few rows, and B packed or row-major.
  static bool suits(std::int64_t m, MatrixRef b, bool pack) {
    return m >= 1 && m <= kMaxRows && (pack || b.col == 1);
  }
  /// How many blocks the panels are worth on \p threads workers: one per 128 KiB of B
  /// (as read: packed bfloat16 is half the bytes), at most one per worker and per panel.
  std::int64_t blocks(int threads) const noexcept;

  std::int64_t panels() const noexcept { return panels_; }
  /// True when B's panels are bfloat16.
  bool bf16() const noexcept { return bf16_; }
  /// The first column of panel \p p (of `panels() + 1`: the last is n).
  std::int64_t first_column(std::int64_t p) const noexcept;
  /// Computes panels [first, last) of every row on the calling thread. Allocates nothing;
  /// disjoint ranges may run at once on different threads.
  void run(std::int64_t first, std::int64_t last) const;

 private:
  struct AlignedFree {
    void operator()(void* p) const noexcept;
  };
  template <class T, class Convert>
  void pack(Convert convert);

  MatrixRef a_, b_;
  float* c_ = nullptr;
  std::int64_t m_ = 0, k_ = 0, n_ = 0, panels_ = 0;
  bool bf16_ = false;
  std::unique_ptr<void, AlignedFree> packed_;  // panels_ x k x kPanel f32 or bf16, or null
};

}  // namespace kiln::compiler
