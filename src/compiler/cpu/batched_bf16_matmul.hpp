#pragma once
// Internal: f32 matmuls of activations over a batch (attention's scores and context:
// [b, h, m, k] x [b, h, k, n]) computed in bfloat16 when the plan asks for bf16
// (`MatmulPrecision::bf16`). Each tile takes a range of the first batch dim with more than
// one entry (the heads when the batch is one) and goes through it in chunks of at most
// 1 MiB of f32 operands and output (so that what it rounds stays in the core's L2): each
// chunk rounds its part of A into a dense bf16 buffer and its part of B into the blocked
// layout oneDNN's bf16 kernels read (both reorders read the operands as the strided views
// they are), then runs a batched bf16 matmul (AMX where the CPU has it) writing f32. A
// scalar epilogue (attention's 1/sqrt(d)) is applied as A is rounded, read from memory on
// each call. Everything is made when the plan is prepared. On a CPU without bf16 units the
// chunks round their operands into dense f32 buffers instead (one pass each, the scale
// applied to A as it is rounded) and run an f32 batched GEMM: the same products.

#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::compiler {

/// One f32 operand: dims `shape` (batch dims, then rows and columns), element at
/// Σ index[d] · strides[d] from `data`.
struct StridedOperand {
  const float* data = nullptr;
  std::vector<std::int64_t> shape, strides;
};

class BatchedBf16Matmul {
 public:
  /// C = A B over the batch (A [batch..., m, k], B [batch..., k, n], both with the same
  /// batch dims, none broadcast), C dense row-major at \p c; with \p scale, C = scale A B
  /// (the scalar read on each call). Cut into at most \p tiles tiles along the first batch
  /// dim of more than one entry (the heads when the batch is one). \throws DeviceError when oneDNN
  /// has no fast bf16 kernel for it (the caller keeps f32).
  BatchedBf16Matmul(const StridedOperand& a, const StridedOperand& b, float* c, std::int64_t tiles,
                    const float* scale);
  ~BatchedBf16Matmul();
  BatchedBf16Matmul(const BatchedBf16Matmul&) = delete;
  BatchedBf16Matmul& operator=(const BatchedBf16Matmul&) = delete;

  std::int64_t tiles() const noexcept { return tiles_; }
  /// The offset (in elements of C) where tile \p t's output starts (of `tiles() + 1`).
  std::int64_t first_element(std::int64_t t) const noexcept;
  /// Computes tile \p t on the calling thread; tiles may run at once on different threads.
  void run(std::int64_t t) const;

  /// Whether `read_rounded_a(a)` may be called: the matmul is emulated (no bf16 units),
  /// A is dense at \p a, and there is no scale to apply to it.
  bool can_read_rounded_a(const float* a) const;
  /// After `can_read_rounded_a` said yes: reads A where it is, already rounded to bf16 (a
  /// softmax's output written so: attention's probabilities), instead of rounding it into
  /// a buffer on each call.
  void read_rounded_a();

  /// Whether operands of these shapes and strides suit this path: a batch, none of its
  /// dims broadcast.
  static bool suits(const StridedOperand& a, const StridedOperand& b);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::size_t split_ = 0;                                   // the batch dim the tiles split
  std::int64_t tiles_ = 1, split_dim_ = 1, per_entry_ = 0;  // C elements per entry of it
  const float* scale_ = nullptr;                            // emulated: read on each call
  const float* a_data_ = nullptr;
  bool a_dense_ = false;  // A's view is dense row-major
  // Emulated: the operands' views as they are rounded (B's last two dims swapped when its
  // matrices lie column by column: it is rounded, and read by the GEMM, in that order).
  std::vector<std::int64_t> a_strides_, b_strides_;
};

}  // namespace kiln::compiler
