#pragma once
// Internal: an f32 GEMM whose right operand stays the same for the life of a plan (a
// weight or a constant), through oneDNN's matmul primitive with that operand reordered
// once, when the plan is prepared, into the blocked layout oneDNN's kernels read
// ("prepacked"), so that no call packs it again. The output is cut into row bands
// (tiles) or, when there are too few rows for a band per block (a batch-16 Linear layer on
// 2 threads), column bands (each its own part of B packed, its output written densely and
// copied into its columns); each tile is single-threaded primitives run by the worker that
// runs its block, as the sgemm tiles are: one thread budget, the context's.
//
// When the matmul has an epilogue (see `Launch::epilogue`) that is a chain of oneDNN
// post-ops (activations, and adds or multiplies by a bias row, a scalar or a tensor of the
// output's shape: bias, GELU, residual add), the primitive applies it to each block of the
// output while it is in registers and writes the epilogue's output directly.
//
// In bfloat16 (`CompileOptions::matmul_precision`), B is rounded to bf16 as it is packed,
// and each tile rounds its rows of A to bf16 into a buffer of its own before the GEMM,
// which accumulates in f32 (AMX or AVX512-BF16 where the CPU has them) and writes f32.
// On a CPU without bf16 units (`kiln::has_native_bf16()`), B is rounded to bf16 and packed as
// f32, and each tile rounds its rows of A to bf16 and widens them back into an f32 buffer:
// f32 GEMMs give the same products (two bf16 values multiply exactly in f32) at f32 speed;
// a hand-off (`write_bf16`, `read_bf16`) then passes f32 values already rounded.
// A bf16 tile runs as GEMMs of at most 256 KiB of A's rows each (oneDNN's bf16 kernels
// slow down when A's rows do not fit the core's L2 next to B).

#include <cstdint>
#include <memory>

namespace kiln::compiler {

struct Launch;
class WeightPacks;

/// One f32 operand matrix: element (i, j) at `data[i * row + j * col]`.
struct MatrixRef {
  const float* data = nullptr;
  std::int64_t row = 0, col = 0;
};

class PackedMatmul {
 public:
  /// C = A B with A \p m x \p k, B \p k x \p n and C \p m x \p n row-major at \p c, cut
  /// into \p tiles row bands. Packs B now: B must not change while this object lives.
  /// With an \p epilogue (a bound f32 elementwise launch over C, C's only reader) that
  /// has the form of post-ops, the primitive computes the epilogue's output instead of C
  /// (`fuses_epilogue()`).
  /// \throws DeviceError when oneDNN has no primitive for it (the caller falls back).
  /// With \p bf16, A and B are multiplied as bfloat16 (see above). With \p columns the
  /// tiles are column bands (whole groups of 16 columns) rather than row bands. With
  /// \p packs, B's packings come from (and go to) the callable's shared ones.
  PackedMatmul(MatrixRef a, MatrixRef b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
               std::int64_t tiles, const Launch* epilogue = nullptr, bool bf16 = false,
               bool columns = false, WeightPacks* packs = nullptr);
  ~PackedMatmul();
  PackedMatmul(const PackedMatmul&) = delete;
  PackedMatmul& operator=(const PackedMatmul&) = delete;

  std::int64_t tiles() const noexcept { return tiles_; }
  /// True when the epilogue runs inside the GEMM (as post-ops): the caller skips it.
  bool fuses_epilogue() const noexcept { return fuses_epilogue_; }
  /// True when the product is computed in bfloat16.
  bool bf16() const noexcept { return bf16_; }
  /// True when it is computed by bf16 units (not emulated by f32 GEMMs).
  bool native_bf16() const noexcept;
  /// True when the tiles are column bands.
  bool by_columns() const noexcept;
  /// Row bands: the first row of tile \p t (of `tiles() + 1`: the last is m).
  std::int64_t first_row(std::int64_t t) const noexcept { return m_ * t / tiles_; }
  /// Column bands: the first column of tile \p t (of `tiles() + 1`: the last is n).
  std::int64_t first_column(std::int64_t t) const noexcept;
  /// Computes tile \p t on the calling thread. Allocates nothing; tiles may run at once on
  /// different threads.
  void run(std::int64_t t) const;

  /// `bf16()` only: writes the output (C, or the fused epilogue's) at \p out already
  /// rounded to bf16, dense row-major, for another bf16 matmul to read with `read_bf16`:
  /// natively as bf16 values (the primitives built again; half the bytes), emulated as f32
  /// values rounded in place after each chunk (\p out must be where the output goes).
  /// \returns false, unchanged, when it cannot (oneDNN has no such primitive).
  bool write_bf16(void* out);
  /// `bf16()` only: reads A as it is, dense row-major [m, k] at \p a (another matmul's or a
  /// norm's output written rounded: bf16 values natively, bf16-exact f32 values emulated),
  /// instead of rounding the f32 A on each call.
  void read_bf16(const void* a);

  /// Whether a GEMM of this size is worth a primitive of its own: packing costs a
  /// primitive's creation (code generation, once per shape) and a copy of B.
  static bool worth_packing(std::int64_t m, std::int64_t k, std::int64_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::int64_t m_ = 0, tiles_ = 1;
  bool fuses_epilogue_ = false;
  bool bf16_ = false;
  const void* reads_bf16_ = nullptr;
};

}  // namespace kiln::compiler
