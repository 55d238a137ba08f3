// CPU matmul kernels: oneDNN's sgemm tiled over the launch's blocks, its packed, skinny
// and batched bf16 forms (prepare_matmul picks one per launch), the general path for other
// dtypes, and the bf16 hand-offs between matmuls.

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

#include "compiler/cpu/batched_bf16_matmul.hpp"
#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/kernels.hpp"
#include "compiler/cpu/packed_matmul.hpp"
#include "compiler/cpu/skinny_matmul.hpp"
#include "compiler/cpu/vector_math.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln::compiler {

using namespace kernel;  // the shared helpers and the kernels of the other files

namespace {

using kiln::detail::cat;

// Integer matmuls sum exactly, wrapping at 64 bits as two's complement (as the
// elementwise ops do, see ops/elementwise.cpp).
std::int64_t iadd(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(std::uint64_t(a) + std::uint64_t(b));
}
std::int64_t imul(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(std::uint64_t(a) * std::uint64_t(b));
}

// ---- linear algebra, reductions, normalisation ---------------------------------------------

/// Offset of batch \p index (row-major over \p shape) in an operand with \p strides.
std::int64_t batch_offset(std::int64_t index, Dims shape, Dims strides) {
  std::int64_t offset = 0;
  for (std::size_t d = shape.size(); d-- > 0;) {
    offset += (index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return offset;
}

/// The f32 matrices of one matmul operand: matrix `t` of the output's batch starts at
/// `data + batch_offset(t, batch, batch_strides)`, and its element (i, j) is at
/// `i * row + j * col`, with `row` or `col` 1 (plain or transposed for sgemm).
struct Matrices {
  const float* data = nullptr;
  Index batch_strides;
  std::int64_t row = 0, col = 0;
  char trans() const { return col == 1 ? 'N' : 'T'; }
  std::int64_t lead() const { return col == 1 ? row : col; }
};

/// \p v (rank >= 2, already padded for vectors) as matrices over the output \p batch.
Matrices matrices(const View& v, Dims shape, Dims batch) {
  const Index st = v.strides.empty() ? strides_of(shape) : to_index(v.strides);
  const std::size_t r = shape.size();
  Matrices out{reinterpret_cast<const float*>(v.data), Index(batch.size(), 0), st[r - 2],
               st[r - 1]};
  const std::size_t lead = batch.size() - (r - 2);
  for (std::size_t d = 0; d + 2 < r; ++d) out.batch_strides[lead + d] = shape[d] == 1 ? 0 : st[d];
  return out;
}

}  // namespace

/// An f32 matmul's operands as matrices over its output's batch, and its sizes.
struct MatmulLayout {
  Matrices a, b;
  Index batch;
  std::int64_t m = 0, k = 0, n = 0;
  std::shared_ptr<const PackedMatmul> packed;  // b packed once, for a plain 2-D GEMM
  std::shared_ptr<const SkinnyMatmul> skinny;  // a plain 2-D matmul of at most 4 rows
  // bf16 plans: a batched matmul of activations (attention), with `scaled` set when it
  // applies the epilogue's scale itself.
  std::shared_ptr<const BatchedBf16Matmul> batched_bf16;
  // An epilogue that only multiplies by a scalar (attention's 1/sqrt(d)): sgemm's alpha,
  // read from `scale` on each call, the product written straight to `scaled`, the
  // epilogue's output.
  const float* scale = nullptr;
  float* scaled = nullptr;
};

/// An f32 matmul launch's prepared state: its layout.
struct PreparedMatmul final : PreparedLaunch {
  static constexpr Kind kKind = Kind::matmul;
  explicit PreparedMatmul(MatmulLayout l) : PreparedLaunch(kKind), layout(std::move(l)) {}
  const MatmulLayout layout;
};

/// A scores matmul's attention kernel (see Launch::softmax): per batch entry and block of
/// `rows` query rows, S = Q Kᵀ in the worker's scratch, the epilogue, the softmax and the
/// probabilities' epilogue on S's rows there, then S V into the context's output.
struct PreparedAttention final : PreparedLaunch {
  static constexpr Kind kKind = Kind::attention;
  PreparedAttention() : PreparedLaunch(kKind) {}
  Matrices q, kt, v;
  Index batch;
  std::int64_t s = 0, t = 0, d = 0, dv = 0;       // query rows, keys, head dims of Q·K and of V
  std::int64_t rows = 0, row_blocks = 0;          // query rows a block, blocks a batch entry
  float* out = nullptr;                           // the context, [batch..., s, dv] dense
  std::vector<std::unique_ptr<float[]>> scratch;  // per block of the grid: rows x t floats
  // The epilogues vmath::softmax_rows applies itself (see additive_rows, nan_replacement):
  // the scores' rows plus those of `mask` (row stride mask.row), the NaNs of the
  // probabilities replaced by *nan_to.
  std::optional<Matrices> mask;
  const float* nan_to = nullptr;
};

/// The prepared layout of the f32 matmul launch \p l, else null.
const MatmulLayout* matmul_of(const Launch& l) {
  const PreparedMatmul* p = l.prepared_as<PreparedMatmul>();
  return p != nullptr ? &p->layout : nullptr;
}

namespace {

/// f32 matmul through oneDNN's sgemm. The grid's blocks split the work into tiles (batch
/// entries, then row bands, then column bands) and each tile is one single-threaded sgemm
/// on the worker that runs its block: one thread budget, the context's. An \p epilogue
/// runs on each tile right after its GEMM, while the tile is in this core's cache.
void matmul_f32(const Matrices& a, const Matrices& b, float* o, Dims batch, std::int64_t m,
                std::int64_t k, std::int64_t n, const Launch* epilogue, float alpha = 1.0f) {
  // This thread's OpenMP regions (oneDNN's) use this thread only: the blocks are the
  // parallelism. Checked per call, since the calling thread may be anyone's.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  const std::int64_t batches = elements(batch);
  if (batches == 0 || m == 0 || n == 0) return;  // an empty product: nothing to write
  const std::int64_t blocks = std::max<std::int64_t>(1, kiln::grid_dim().x);
  // Split batch entries first, then the larger of the two output dims: splitting N packs
  // only a slice of B (the weights, usually) per tile rather than all of it per tile.
  std::int64_t split_m = 1, split_n = 1;
  if (batches < blocks) {
    const std::int64_t want = (blocks + batches - 1) / batches;
    const std::int64_t most_m = std::max<std::int64_t>(1, m / 8),
                       most_n = std::max<std::int64_t>(1, n / 64);
    if (n >= m) {
      split_n = std::min(want, most_n);
      split_m = std::clamp<std::int64_t>((want + split_n - 1) / split_n, 1, most_m);
    } else {
      split_m = std::min(want, most_m);
      split_n = std::clamp<std::int64_t>((want + split_m - 1) / split_m, 1, most_n);
    }
  }
  const auto [first, last] = block_range(batches * split_m * split_n);
  for (std::int64_t t = first; t < last; ++t) {
    const std::int64_t bi = t / (split_m * split_n), r = t % (split_m * split_n);
    const std::int64_t r0 = m * (r / split_n) / split_m, r1 = m * (r / split_n + 1) / split_m;
    const std::int64_t c0 = n * (r % split_n) / split_n, c1 = n * (r % split_n + 1) / split_n;
    const std::int64_t at = bi * m * n + r0 * n + c0;
    float* c = o + at;
    if (r1 == r0 || c1 == c0) continue;
    if (k == 0) {
      for (std::int64_t i = r0; i < r1; ++i)
        std::fill(c + (i - r0) * n, c + (i - r0) * n + (c1 - c0), 0.0f);
    } else {
      const float* ap = a.data + batch_offset(bi, batch, a.batch_strides) + r0 * a.row;
      const float* bp = b.data + batch_offset(bi, batch, b.batch_strides) + c0 * b.col;
      if (dnnl_sgemm(a.trans(), b.trans(), r1 - r0, c1 - c0, k, alpha, ap, a.lead(), bp, b.lead(),
                     0.0f, c, n) != dnnl_success)
        throw DeviceError(cat("oneDNN sgemm failed for a [", r1 - r0, ", ", k, "] x [", k, ", ",
                              c1 - c0, "] tile"));
    }
    if (epilogue != nullptr) run_fused_f32_rows(*epilogue, at, r1 - r0, c1 - c0, n);
  }
}

MatmulLayout layout_of(Matrices a, Matrices b, Index batch, std::int64_t m, std::int64_t k,
                       std::int64_t n) {
  MatmulLayout layout;
  layout.a = std::move(a);
  layout.b = std::move(b);
  layout.batch = std::move(batch);
  layout.m = m, layout.k = k, layout.n = n;
  return layout;
}

/// The layout of launch \p l's f32 matmul, or nullopt when it is not an f32 matmul.
std::optional<MatmulLayout> matmul_layout(const Launch& l) {
  View a = l.in[0], b = l.in[1];
  const View& o = l.out[0];
  if (a.dtype != DType::f32 || b.dtype != DType::f32 || o.dtype != DType::f32) return std::nullopt;
  // Vectors as matrices: [k] as [1, k] on the left, [k, 1] on the right.
  Index a_shape = to_index(a.shape), a_strides = to_index(a.strides);
  Index b_shape = to_index(b.shape), b_strides = to_index(b.strides);
  if (a_shape.size() == 1) {
    if (!a_strides.empty()) a_strides = {a_shape[0] * a_strides[0], a_strides[0]};
    a_shape = {1, a_shape[0]};
  }
  if (b_shape.size() == 1) {
    if (!b_strides.empty()) b_strides = {b_strides[0], 1};
    b_shape = {b_shape[0], 1};
  }
  a.shape = a_shape, a.strides = a_strides, b.shape = b_shape, b.strides = b_strides;
  const std::int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  const Index batch(o.shape.begin(), o.shape.end() - static_cast<long>((l.in[0].shape.size() > 1) +
                                                                       (l.in[1].shape.size() > 1)));
  const Index abatch(a.shape.begin(), a.shape.end() - 2);
  if (l.in[1].shape.size() == 2 && abatch == batch && a.strides.empty()) {
    // x [..., m, k] @ w [k, n] (a Linear layer): one [Π..·m, k] x [k, n] GEMM, so that
    // the weights are packed once rather than once per batch entry.
    const Index rows{elements(abatch) * m, k};
    return layout_of(matrices(a, rows, {}), matrices(b, b.shape, {}), {}, rows[0], k, n);
  }
  return layout_of(matrices(a, a.shape, batch), matrices(b, b.shape, batch), batch, m, k, n);
}

/// A GEMM with its right operand packed: one tile (row band) per block; the epilogue
/// runs inside it (post-ops) or on each tile after it.
void packed_matmul(const PackedMatmul& packed, std::int64_t n, const Launch* epilogue) {
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);  // as in matmul_f32
  const auto [first, last] = block_range(packed.tiles());
  for (std::int64_t t = first; t < last; ++t) {
    packed.run(t);
    if (epilogue == nullptr || packed.fuses_epilogue()) continue;
    if (packed.by_columns()) {
      const std::int64_t c0 = packed.first_column(t);
      run_fused_f32_rows(*epilogue, c0, packed.first_row(packed.tiles()),
                         packed.first_column(t + 1) - c0, n);
    } else {
      const std::int64_t r0 = packed.first_row(t);
      run_fused_f32_rows(*epilogue, r0 * n, packed.first_row(t + 1) - r0, n, n);
    }
  }
}

/// A batched bf16 matmul: the block's tiles, each then the epilogue over its rows (unless
/// the matmul applied it: a scale).
void batched_bf16_matmul(const BatchedBf16Matmul& mm, std::int64_t n, const Launch* epilogue) {
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);  // as in matmul_f32
  const auto [first, last] = block_range(mm.tiles());
  for (std::int64_t t = first; t < last; ++t) {
    mm.run(t);
    const std::int64_t at = mm.first_element(t);
    if (epilogue != nullptr)
      run_fused_f32_rows(*epilogue, at, (mm.first_element(t + 1) - at) / n, n, n);
  }
}

/// A matmul of few rows: the block's panels, then the epilogue over their columns.
void skinny_matmul(const SkinnyMatmul& skinny, std::int64_t m, std::int64_t n,
                   const Launch* epilogue) {
  const auto [first, last] = block_range(skinny.panels());
  if (first == last) return;
  skinny.run(first, last);
  const std::int64_t c0 = skinny.first_column(first);
  if (epilogue != nullptr) run_fused_f32_rows(*epilogue, c0, m, skinny.first_column(last) - c0, n);
}

void run_attention(const Launch& l, const PreparedAttention& a);

void run_matmul(const Launch& l) {
  if (const PreparedAttention* a = l.prepared_as<PreparedAttention>()) {
    run_attention(l, *a);
    return;
  }
  if (const MatmulLayout* p = matmul_of(l)) {
    if (p->skinny != nullptr) {
      skinny_matmul(*p->skinny, p->m, p->n, l.epilogue);
    } else if (p->packed != nullptr) {
      packed_matmul(*p->packed, p->n, l.epilogue);
    } else if (p->batched_bf16 != nullptr) {
      batched_bf16_matmul(*p->batched_bf16, p->n, p->scaled != nullptr ? nullptr : l.epilogue);
    } else if (p->scale != nullptr) {
      matmul_f32(p->a, p->b, p->scaled, p->batch, p->m, p->k, p->n, nullptr, *p->scale);
    } else {
      matmul_f32(p->a, p->b, reinterpret_cast<float*>(l.out[0].data), p->batch, p->m, p->k, p->n,
                 l.epilogue);
    }
    return;
  }
  if (const std::optional<MatmulLayout> p = matmul_layout(l)) {
    matmul_f32(p->a, p->b, reinterpret_cast<float*>(l.out[0].data), p->batch, p->m, p->k, p->n,
               l.epilogue);
    return;
  }
  // Other dtypes (always contiguous): floats summed in double, integers exactly.
  const View &a = l.in[0], &b = l.in[1], &o = l.out[0];
  Index ashape = to_index(a.shape), bshape = to_index(b.shape);
  if (ashape.size() == 1) ashape = {1, ashape[0]};
  if (bshape.size() == 1) bshape = {bshape[0], 1};
  const std::int64_t m = ashape[ashape.size() - 2], k = ashape.back(), n = bshape.back();
  const Index batch(o.shape.begin(),
                    o.shape.end() - static_cast<long>((a.shape.size() > 1) + (b.shape.size() > 1)));
  const Index abatch(ashape.begin(), ashape.end() - 2), bbatch(bshape.begin(), bshape.end() - 2);
  // Floats sum in double; integers exactly, wrapping at 64 bits, then to the dtype's width.
  const bool ints = !is_floating(o.dtype);
  std::vector<Number> row(static_cast<std::size_t>(n));
  for_each_element(batch, {broadcast_strides(abatch, batch), broadcast_strides(bbatch, batch)},
                   [&](std::int64_t bi, const std::vector<std::int64_t>& off) {
                     for (std::int64_t i = 0; i < m; ++i) {
                       std::fill(row.begin(), row.end(), Number{});
                       for (std::int64_t p = 0; p < k; ++p) {
                         const Number av = load_number(a, (off[0] * m + i) * k + p);
                         for (std::int64_t j = 0; j < n; ++j) {
                           const Number bv = load_number(b, (off[1] * k + p) * n + j);
                           Number& acc = row[static_cast<std::size_t>(j)];
                           if (ints) {
                             acc.i = iadd(acc.i, imul(av.i, bv.i));
                           } else {
                             acc.f += av.f * bv.f;
                           }
                         }
                       }
                       for (std::int64_t j = 0; j < n; ++j)
                         store_number(o, (bi * m + i) * n + j, row[static_cast<std::size_t>(j)]);
                     }
                   });
}

}  // namespace

namespace {

/// When epilogue \p e only multiplies the matmul result (at \p c) by a scalar: where that
/// scalar is, with \p out set to the epilogue's output; else nullptr.
const float* scale_of(const Launch& e, const std::byte* c, float** out) {
  if (!e.fused || !e.fused->f32 || e.fused->vector_ops.size() != 1 || e.in.size() != 2 ||
      e.out[0].dtype != DType::f32 || !e.out[0].strides.empty())
    return nullptr;
  const VectorOp& op = e.fused->vector_ops[0];
  const std::size_t result = e.in[0].data == c ? 0 : 1;
  const View& scalar = e.in[1 - result];
  if (!op.is_binary || op.binary != vmath::Binary::mul || e.in[result].data != c ||
      scalar.data == c || scalar.dtype != DType::f32 || elements(scalar.shape) != 1 ||
      op.result != e.fused->result)
    return nullptr;
  *out = reinterpret_cast<float*>(e.out[0].data);
  return reinterpret_cast<const float*>(scalar.data);
}

/// The fewest rows per block for which a matmul is worth packing its right operand.
constexpr std::int64_t kPackedBandRows = 16;
/// \p m (matrices over \p batch, each \p rows x \p cols) as one strided operand.
StridedOperand strided(const Matrices& m, Dims batch, std::int64_t rows, std::int64_t cols) {
  StridedOperand out{m.data, to_index(batch), m.batch_strides};
  out.shape.insert(out.shape.end(), {rows, cols});
  out.strides.insert(out.strides.end(), {m.row, m.col});
  return out;
}

/// bf16 plans: runs a batched matmul of activations as a BatchedBf16Matmul when oneDNN
/// has a fast kernel for it (else it stays f32).
void prepare_batched_bf16(Launch& launch, MatmulLayout& layout) {
  const StridedOperand a = strided(layout.a, layout.batch, layout.m, layout.k),
                       b = strided(layout.b, layout.batch, layout.k, layout.n);
  if (!BatchedBf16Matmul::suits(a, b)) return;
  float* c = layout.scale != nullptr ? layout.scaled : reinterpret_cast<float*>(launch.out[0].data);
  try {
    layout.batched_bf16 =
        std::make_shared<const BatchedBf16Matmul>(a, b, c, launch.blocks, layout.scale);
    launch.blocks = static_cast<std::uint32_t>(layout.batched_bf16->tiles());
  } catch (const DeviceError&) {
    // No fast bf16 kernel on this CPU: f32, as planned.
  }
}

/// Scores a block of rows in scratch at most (so that they stay in the second-level cache
/// between the products and the softmax), and the fewest query rows a block.
constexpr std::int64_t kAttentionScores = 16384, kAttentionRows = 16;

/// The input of the elementwise launch \p l whose data is \p data, else -1.
int input_at(const Launch& l, const std::byte* data) {
  for (std::size_t k = 0; k < l.in.size(); ++k)
    if (l.in[k].data == data) return static_cast<int>(k);
  return -1;
}

/// The scores' epilogue \p e as rows that softmax_rows adds: x + M (or M + x), M an f32
/// input of rank 2 or more whose rows are the keys (last dim t, dense), broadcast over the
/// scores [batch..., s, t]; else nullopt (the epilogue runs as a fused launch).
std::optional<Matrices> additive_rows(const Launch& e, const View& scores, Dims batch) {
  const FusedProgram* p = e.fused.get();
  if (p == nullptr || !p->tiles || p->vector_ops.size() != 1 || e.in.size() != 2 ||
      !same_dims(e.out[0].shape, scores.shape))
    return {};
  const std::int64_t t = scores.shape.back();
  const VectorOp& op = p->vector_ops[0];
  const int x = input_at(e, scores.data);
  if (x < 0 || op.is_select || !op.is_binary || op.binary != vmath::Binary::add ||
      op.result != p->result)
    return {};
  const View& m = e.in[static_cast<std::size_t>(1 - x)];
  const std::uint32_t xv = p->args[static_cast<std::size_t>(x)],
                      mv = p->args[static_cast<std::size_t>(1 - x)];
  if (!((op.a == xv && op.b == mv) || (op.a == mv && op.b == xv)) || xv == mv) return {};
  if (m.dtype != DType::f32 || !m.strides.empty() || m.shape.size() < 2 ||
      m.shape.size() > batch.size() + 2 || m.shape.back() != t)
    return {};
  Matrices rows = matrices(m, m.shape, batch);
  if (m.shape[m.shape.size() - 2] == 1) rows.row = 0;  // one row for every query
  return rows;
}

/// The probabilities' epilogue \p e as softmax_rows' NaN replacement: where(p != p, c, p)
/// or where(p == p, p, c), c a one-element f32 input; its address, else null.
const float* nan_replacement(const Launch& e, const std::byte* probabilities) {
  const FusedProgram* p = e.fused.get();
  if (p == nullptr || !p->tiles || p->vector_ops.size() != 2 || e.in.size() != 2) return nullptr;
  const int x = input_at(e, probabilities);
  if (x < 0) return nullptr;
  const View& c = e.in[static_cast<std::size_t>(1 - x)];
  if (c.dtype != DType::f32 || elements(c.shape) != 1) return nullptr;
  const std::uint32_t xv = p->args[static_cast<std::size_t>(x)],
                      cv = p->args[static_cast<std::size_t>(1 - x)];
  const VectorOp &test = p->vector_ops[0], &pick = p->vector_ops[1];
  if (xv == cv || !test.is_binary || test.is_select || test.a != xv || test.b != xv ||
      !pick.is_select || pick.a != test.result || pick.result != p->result)
    return nullptr;
  const bool ne = test.binary == vmath::Binary::ne && pick.b == cv && pick.c == xv;
  const bool eq = test.binary == vmath::Binary::eq && pick.b == xv && pick.c == cv;
  return ne || eq ? reinterpret_cast<const float*>(c.data) : nullptr;
}

/// The attention kernel of the scores matmul \p launch, with its softmax and context
/// launches linked (absorb_attention checked their shapes and dtypes).
void prepare_attention(Launch& launch, int threads) {
  const Launch& context = *launch.context;
  auto a = std::make_unique<PreparedAttention>();
  const Dims scores = launch.out[0].shape;
  a->batch = Index(scores.begin(), scores.end() - 2);
  a->s = scores[scores.size() - 2], a->t = scores.back();
  a->d = launch.in[0].shape.back(), a->dv = context.out[0].shape.back();
  a->q = matrices(launch.in[0], launch.in[0].shape, a->batch);
  a->kt = matrices(launch.in[1], launch.in[1].shape, a->batch);
  a->v = matrices(context.in[1], context.in[1].shape, a->batch);
  a->out = reinterpret_cast<float*>(context.out[0].data);
  if (launch.epilogue != nullptr)
    a->mask = additive_rows(*launch.epilogue, launch.out[0], a->batch);
  if (launch.probs_epilogue != nullptr)
    a->nan_to = nan_replacement(*launch.probs_epilogue, launch.softmax->out[0].data);
  a->rows = std::clamp(kAttentionScores / std::max<std::int64_t>(a->t, 1), kAttentionRows, a->s);
  a->row_blocks = (a->s + a->rows - 1) / a->rows;
  const std::int64_t tasks = elements(a->batch) * a->row_blocks;
  launch.blocks = static_cast<std::uint32_t>(std::clamp<std::int64_t>(tasks, 1, threads));
  for (std::uint32_t b = 0; b < launch.blocks; ++b)
    a->scratch.push_back(std::make_unique<float[]>(static_cast<std::size_t>(a->rows * a->t)));
  launch.prepared = std::move(a);
}

void run_attention(const Launch& l, const PreparedAttention& a) {
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);  // as in matmul_f32
  float* scores = a.scratch[static_cast<std::size_t>(kiln::block_idx().x)].get();
  const auto [first, last] = block_range(elements(a.batch) * a.row_blocks);
  for (std::int64_t task = first; task < last; ++task) {
    const std::int64_t bi = task / a.row_blocks, r0 = task % a.row_blocks * a.rows;
    const std::int64_t rows = std::min(a.rows, a.s - r0);
    const float* q = a.q.data + batch_offset(bi, a.batch, a.q.batch_strides) + r0 * a.q.row;
    const float* kt = a.kt.data + batch_offset(bi, a.batch, a.kt.batch_strides);
    const float* v = a.v.data + batch_offset(bi, a.batch, a.v.batch_strides);
    const float* mask =
        a.mask ? a.mask->data + batch_offset(bi, a.batch, a.mask->batch_strides) + r0 * a.mask->row
               : nullptr;
    // The keys these rows see, the first `t` (all of them without a mask, or when the
    // probabilities' epilogue reads every score): the scores' rows are t apart.
    const bool whole_rows = l.probs_epilogue != nullptr && a.nan_to == nullptr;
    const std::int64_t t =
        mask != nullptr && !whole_rows ? live_keys(mask, rows, a.mask->row, a.t) : a.t;
    if (a.d == 0) {
      std::fill(scores, scores + rows * t, 0.0f);
    } else if (dnnl_sgemm(a.q.trans(), a.kt.trans(), rows, t, a.d, 1.0f, q, a.q.lead(), kt,
                          a.kt.lead(), 0.0f, scores, t) != dnnl_success) {
      throw DeviceError(cat("oneDNN sgemm failed for attention's scores, a [", rows, ", ", a.d,
                            "] x [", a.d, ", ", t, "] tile"));
    }
    const std::int64_t at = (bi * a.s + r0) * a.t;  // the rows' place in the scores
    if (l.epilogue != nullptr && !a.mask)
      run_fused_f32_rows(*l.epilogue, at, rows, a.t, a.t, RowsAt{l.out[0].data, at, scores});
    // Each row's mask, softmax and NaN replacement while the row is in the first-level
    // cache (a block's scores are not: a pass over them each was 3x slower).
    vmath::SoftmaxRows softmax{.x = scores,
                               .rows = static_cast<std::size_t>(rows),
                               .n = static_cast<std::size_t>(t),
                               .row = static_cast<std::size_t>(t),
                               .nan_to = a.nan_to};
    if (mask != nullptr) {
      softmax.add = mask;
      softmax.add_row = static_cast<std::size_t>(a.mask->row);
    }
    vmath::softmax_rows(softmax);
    if (l.probs_epilogue != nullptr && a.nan_to == nullptr)
      run_fused_f32_rows(*l.probs_epilogue, at, rows, a.t, a.t,
                         RowsAt{l.softmax->out[0].data, at, scores});
    if (dnnl_sgemm('N', a.v.trans(), rows, a.dv, t, 1.0f, scores, t, v, a.v.lead(), 0.0f,
                   a.out + (bi * a.s + r0) * a.dv, a.dv) != dnnl_success)
      throw DeviceError(cat("oneDNN sgemm failed for attention's context, a [", rows, ", ", t,
                            "] x [", t, ", ", a.dv, "] tile"));
  }
}

}  // namespace

std::int64_t kernel::live_keys(const float* mask, std::int64_t rows, std::int64_t row,
                               std::int64_t t) {
  constexpr float kMasked = std::numeric_limits<float>::lowest(), kVisible = -1e30f;
  if (row == 0) rows = 1;
  // A row that sees the last key (the last block of a causal mask, any padding mask
  // without padding) makes the scan below pointless.
  if (t == 0) return t;
  for (std::int64_t r = 0; r < rows; ++r)
    if (!(mask[r * row + t - 1] <= kMasked)) return t;
  std::int64_t live = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* m = mask + r * row;
    std::int64_t end = t;
    while (end > 0 && m[end - 1] <= kMasked) --end;
    std::int64_t between = 0;  // counted without branches (vectorized)
    for (std::int64_t j = 0; j < end; ++j) between += m[j] > kMasked && m[j] < kVisible ? 1 : 0;
    if (end == 0 || between != 0) return t;  // end 0: a row that sees nothing (NaNs)
    live = std::max(live, end);
  }
  return live;
}

void kernel::matmul(const Launch& l) { run_matmul(l); }

void kernel::prepare_matmul(Launch& launch, int threads) {
  if (launch.softmax != nullptr) {
    prepare_attention(launch, threads);
    return;
  }
  if (std::optional<MatmulLayout> layout = matmul_layout(launch)) {
    const MatrixRef a{layout->a.data, layout->a.row, layout->a.col},
        b{layout->b.data, layout->b.row, layout->b.col};
    if (layout->batch.empty() && SkinnyMatmul::suits(layout->m, b, launch.pack_rhs)) {
      layout->skinny = std::make_shared<const SkinnyMatmul>(
          a, b, reinterpret_cast<float*>(launch.out[0].data), layout->m, layout->k, layout->n,
          launch.pack_rhs, launch.bf16);
      launch.blocks = static_cast<std::uint32_t>(layout->skinny->blocks(threads));
    } else if (launch.pack_rhs && layout->batch.empty() &&
               (launch.bf16 || PackedMatmul::worth_packing(layout->m, layout->k, layout->n))) {
      // One row band per block. Each band reads all of B, so with fewer rows than that
      // per block (a batch-16 Linear layer on 2 threads) column bands instead: each block
      // reads its part of B, packed (1.27x sgemm's column tiles for [16, 512] x [512,
      // 256], interleaved, its output's copy included). In bf16 (several times faster than
      // f32) fewer, taller row bands instead.
      const bool bands = launch.blocks == 1 || layout->m >= kPackedBandRows * launch.blocks;
      if (launch.bf16 && !bands)
        launch.blocks =
            static_cast<std::uint32_t>(std::max<std::int64_t>(1, layout->m / kPackedBandRows));
      const bool columns = !bands && !launch.bf16;
      try {
        layout->packed = std::make_shared<const PackedMatmul>(
            a, b, reinterpret_cast<float*>(launch.out[0].data), layout->m, layout->k, layout->n,
            launch.blocks, launch.epilogue, launch.bf16, columns, launch.packs);
      } catch (const DeviceError&) {
        // No primitive for it on this CPU: the sgemm tiles compute it, in f32.
        launch.blocks = blocks_for(launch, threads);
      }
    }
    if (!layout->packed && !layout->skinny && launch.epilogue != nullptr)
      layout->scale = scale_of(*launch.epilogue, launch.out[0].data, &layout->scaled);
    if (launch.bf16 && !launch.pack_rhs && !layout->batch.empty())
      prepare_batched_bf16(launch, *layout);
    launch.prepared = std::make_unique<PreparedMatmul>(std::move(*layout));
  }
}

bool packed(const Launch& launch) {
  return matmul_of(launch) != nullptr && matmul_of(launch)->packed != nullptr;
}

bool skinny(const Launch& launch) {
  return matmul_of(launch) != nullptr && matmul_of(launch)->skinny != nullptr;
}

namespace {

/// The bf16 GEMM of \p consumer when its left operand is \p out read densely as
/// [rows, n] (so it can read bf16 rows there instead), else nullptr. Prepared, not yet
/// recorded: the plan still owns it exclusively.
PackedMatmul* reads_bf16_rows(const Launch& consumer, const std::byte* out, std::int64_t rows,
                              std::int64_t n) {
  if (matmul_of(consumer) == nullptr) return nullptr;
  const MatmulLayout& reader = *matmul_of(consumer);
  if (reader.packed == nullptr || !reader.packed->bf16() ||
      reinterpret_cast<const std::byte*>(reader.a.data) != out || reader.a.col != 1 ||
      reader.a.row != reader.k || reader.m != rows || reader.k != n)
    return nullptr;
  return const_cast<PackedMatmul*>(reader.packed.get());
}

/// Without bf16 units: a softmax over f32 rows read only by emulated batched bf16 matmuls
/// as their dense left operand (attention's probabilities) writes its rows rounded, and
/// the matmuls read them where they are (no rounding pass over the largest operand).
bool hand_off_rounded_softmax(Launch& softmax, const std::vector<Launch*>& consumers) {
  if (consumers.empty() || softmax.out.size() != 1 || softmax.in[0].shape.empty() ||
      !f32_last_axis_rows(
          softmax, axis_of(softmax.view().find("axis")->as_int(), softmax.in[0].shape.size())))
    return false;
  const auto* out = reinterpret_cast<const float*>(softmax.out[0].data);
  std::vector<BatchedBf16Matmul*> readers;
  for (const Launch* consumer : consumers) {
    if (matmul_of(*consumer) == nullptr || matmul_of(*consumer)->batched_bf16 == nullptr ||
        consumer->in[0].data != softmax.out[0].data)
      return false;
    // Prepared, not yet recorded: the plan still owns it exclusively.
    readers.push_back(const_cast<BatchedBf16Matmul*>(matmul_of(*consumer)->batched_bf16.get()));
  }
  for (const BatchedBf16Matmul* reader : readers)
    if (!reader->can_read_rounded_a(out)) return false;
  for (BatchedBf16Matmul* reader : readers) reader->read_rounded_a();
  softmax.out_bf16 = true;
  return true;
}

}  // namespace

bool hand_off_bf16(Launch& producer, Launch& consumer) {
  if (matmul_of(producer) == nullptr) return false;
  auto* p = const_cast<PackedMatmul*>(matmul_of(producer)->packed.get());  // see reads_bf16_rows
  if (p == nullptr || !p->bf16()) return false;
  if (producer.epilogue != nullptr && !p->fuses_epilogue()) return false;
  std::byte* out =
      producer.epilogue != nullptr ? producer.epilogue->out[0].data : producer.out[0].data;
  PackedMatmul* c = reads_bf16_rows(consumer, out, matmul_of(producer)->m, matmul_of(producer)->n);
  if (c == nullptr || !p->write_bf16(out)) return false;
  c->read_bf16(out);
  return true;
}

bool hand_off_bf16(Launch& norm, const std::vector<Launch*>& consumers) {
  const KernelDef* def = find_kernel_def(norm.view().def());
  if (def == nullptr || def->grid != KernelGrid::rows) return false;
  if (def->variant == variant::softmax) return hand_off_rounded_softmax(norm, consumers);
  const bool is_norm = def->variant == variant::layer_norm || def->variant == variant::rms_norm;
  if (!is_norm || consumers.empty() || norm.out.size() != 1 || norm.out[0].shape.empty() ||
      !f32_rows_norm(norm, def->variant == variant::rms_norm))
    return false;
  const std::int64_t n = norm.out[0].shape.back(), rows = elements(norm.out[0].shape) / n;
  const std::byte* out = norm.out[0].data;
  std::vector<PackedMatmul*> readers;
  for (const Launch* consumer : consumers) {
    readers.push_back(reads_bf16_rows(*consumer, out, rows, n));
    if (readers.back() == nullptr) return false;
  }
  norm.out_bf16 = true;
  for (PackedMatmul* reader : readers) reader->read_bf16(out);
  return true;
}

bool in_bf16(const Launch& launch) {
  if (kernel::conv_in_bf16(launch)) return true;
  if (matmul_of(launch) == nullptr) return false;
  const MatmulLayout& m = *matmul_of(launch);
  return (m.skinny != nullptr && m.skinny->bf16()) || (m.packed != nullptr && m.packed->bf16()) ||
         m.batched_bf16 != nullptr;
}

bool epilogue_in_gemm(const Launch& launch) {
  return matmul_of(launch) != nullptr &&
         (matmul_of(launch)->scale != nullptr ||
          (matmul_of(launch)->packed != nullptr && matmul_of(launch)->packed->fuses_epilogue()));
}

}  // namespace kiln::compiler
