#include "compiler/cpu/packed_matmul.hpp"

#include <algorithm>
#include <cstring>
#include <dnnl.hpp>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "compiler/cpu/bf16_emulation.hpp"
#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/onednn_support.hpp"
#include "compiler/cpu/vector_math.hpp"
#include "compiler/cpu/weight_packs.hpp"
#include "core/str.hpp"
#include "kiln/core/cpu_isa.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {
namespace {

using kernel::broadcast_strides;
using kiln::detail::cat;
using Desc = dnnl::memory::desc;
using DataType = dnnl::memory::data_type;
using Tag = dnnl::memory::format_tag;
using onednn::cpu_engine;
using onednn::OneOpenMpThread;
using onednn::Step;
using onednn::user_scratchpad;

/// One post-op: an activation, or a binary op whose other operand is read at
/// `data[row * row_stride + col * col_stride]` (a stride of 0 broadcasts).
struct PostOp {
  bool binary = false;
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  float alpha = 0, beta = 0;
  const float* data = nullptr;
  std::int64_t row_stride = 0, col_stride = 0;
};

/// \p f as a oneDNN activation, or nullopt when it has none.
std::optional<PostOp> activation(vmath::Unary f) {
  using A = dnnl::algorithm;
  const auto eltwise = [](A algorithm, float alpha = 0) {
    return PostOp{false, algorithm, alpha, 0, nullptr, 0, 0};
  };
  switch (f) {
    // relu is not one: oneDNN's computes max(x, 0), which makes a NaN 0 (PyTorch and kiln
    // keep NaN); kiln's loop runs it on each tile after the GEMM instead.
    case vmath::Unary::gelu_tanh:
      // Without AVX-512, oneDNN 2.6's GEMM applies it far slower than kiln's loop on the
      // tile: GPT-2 (1 x 128 tokens, one thread, AMD EPYC) 9.7 -> 8.7 ms a call.
      if (std::string_view(vmath::instruction_set()) != "avx512") return std::nullopt;
      return eltwise(A::eltwise_gelu_tanh);
    case vmath::Unary::gelu_erf:
      return eltwise(A::eltwise_gelu_erf);
    case vmath::Unary::tanh:
      return eltwise(A::eltwise_tanh);
    case vmath::Unary::sigmoid:
      return eltwise(A::eltwise_logistic);
    case vmath::Unary::silu:  // x sigmoid(alpha x)
      return eltwise(A::eltwise_swish, 1);
    case vmath::Unary::exp:
      return eltwise(A::eltwise_exp);
    case vmath::Unary::neg:  // alpha x + beta
      return eltwise(A::eltwise_linear, -1);
    case vmath::Unary::abs:
      return eltwise(A::eltwise_abs);
    case vmath::Unary::sqrt:
      return eltwise(A::eltwise_sqrt);
    default:
      return std::nullopt;
  }
}

/// How an epilogue input of shape \p in, broadcast to the output \p out (rows: all dims
/// but the last), is read as rows and columns: {row stride, column stride}, or nullopt when
/// no such pair describes it.
std::optional<std::pair<std::int64_t, std::int64_t>> row_col_strides(Dims in, Dims out) {
  if (out.empty() || in.size() > out.size()) return std::nullopt;
  const std::size_t r = out.size();
  const Index st = broadcast_strides(in, out);
  const std::int64_t col = st[r - 1];
  for (const std::int64_t row : {std::int64_t{0}, col == 1 ? out[r - 1] : std::int64_t{1}}) {
    bool fits = true;
    std::int64_t rows_inside = 1;  // rows spanned by one step of dim d
    for (std::size_t d = r - 1; d-- > 0;) {
      if (out[d] > 1 && st[d] != row * rows_inside) fits = false;
      rows_inside *= out[d];
    }
    if (fits) return std::pair{row, col};
  }
  return std::nullopt;
}

/// The epilogue \p e of a matmul writing \p c as post-ops, or nullopt when it is not a
/// chain of them: each op reads the previous result (first the matmul's) and, for binary
/// ops, one input of the epilogue that is a row, a column, a scalar or a whole tensor.
std::optional<std::vector<PostOp>> post_ops_of(const Launch& e, const float* c) {
  if (!e.fused || !e.fused->f32 || e.out.size() != 1 || e.out[0].dtype != DType::f32 ||
      !e.out[0].strides.empty())
    return std::nullopt;
  const FusedProgram& p = *e.fused;
  std::optional<std::uint32_t> current;
  for (std::size_t k = 0; k < e.in.size(); ++k)
    if (reinterpret_cast<const float*>(e.in[k].data) == c) {
      if (current || !same_dims(e.in[k].shape, e.out[0].shape)) return std::nullopt;
      current = p.args[k];
    }
  if (!current) return std::nullopt;
  std::vector<PostOp> ops;
  for (const VectorOp& op : p.vector_ops) {
    if (!op.is_binary) {
      if (op.a != *current) return std::nullopt;
      if (op.unary != vmath::Unary::copy) {
        const std::optional<PostOp> post = activation(op.unary);
        if (!post) return std::nullopt;
        ops.push_back(*post);
      }
      current = op.result;
      continue;
    }
    const bool commutes = op.binary == vmath::Binary::add || op.binary == vmath::Binary::mul;
    std::uint32_t other = 0;
    if (op.a == *current && op.b != *current) {
      other = op.b;
    } else if (op.b == *current && op.a != *current && commutes) {
      other = op.a;
    } else {
      return std::nullopt;
    }
    PostOp post{true, dnnl::algorithm::undef, 0, 0, nullptr, 0, 0};
    switch (op.binary) {
      case vmath::Binary::add:
        post.algorithm = dnnl::algorithm::binary_add;
        break;
      case vmath::Binary::sub:
        post.algorithm = dnnl::algorithm::binary_sub;
        break;
      case vmath::Binary::mul:
        post.algorithm = dnnl::algorithm::binary_mul;
        break;
      case vmath::Binary::div:
        post.algorithm = dnnl::algorithm::binary_div;
        break;
      default:
        return std::nullopt;
    }
    const View* input = nullptr;
    for (std::size_t k = 0; k < e.in.size(); ++k)
      if (p.args[k] == other && reinterpret_cast<const float*>(e.in[k].data) != c) input = &e.in[k];
    if (input == nullptr || input->dtype != DType::f32 || !input->strides.empty())
      return std::nullopt;  // `other` is computed in the body, or a strided view
    const auto strides = row_col_strides(input->shape, e.out[0].shape);
    if (!strides) return std::nullopt;
    post.data = reinterpret_cast<const float*>(input->data);
    std::tie(post.row_stride, post.col_stride) = *strides;
    ops.push_back(post);
    current = op.result;
  }
  if (*current != p.result) return std::nullopt;
  return ops;
}

}  // namespace

struct PackedMatmul::Impl {
  /// The primitive for GEMMs of `rows` x `cols` outputs.
  struct Kind {
    std::int64_t rows = 0, cols = 0;
    dnnl::matmul primitive;
    Desc scratchpad, weights;
  };
  /// B's columns from `c0` on, packed the way a kind reads them.
  struct PackedB {
    std::int64_t c0 = 0;
    dnnl::memory memory;
  };
  /// One GEMM of a tile: rows [r0, r0 + rows) of the tile's columns.
  struct Chunk {
    std::int64_t r0 = 0, rows = 0;
    Step multiply;  // memory[0] / args[0]: A; then C, B, scratchpad, post-op operands
  };
  struct Tile {
    dnnl::stream stream;
    std::int64_t c0 = 0, cols = 0;  // the tile's columns (all of them for a row band)
    // bf16: rounds the tile's rows of A into the chunks' A (empty otherwise).
    Step round_a;
    // Emulated (no bf16 units): the tile's rows of A rounded in one pass into f32 `dense`.
    const float* rows_from = nullptr;
    std::int64_t rows = 0;
    float* dense = nullptr;
    dnnl::memory kept_a;  // owns `dense`
    std::vector<Chunk> chunks;
    // Column bands: a chunk's dense output, copied into the band's columns of C after it
    // (oneDNN's fast kernels write dense outputs only).
    std::vector<std::byte> staging;
  };
  WeightPacks* packs = nullptr;  // the callable's, shared by its plans (or none)
  std::vector<Kind> kinds;       // a few: by chunk rows and band widths
  std::vector<PackedB> packed_b;
  std::vector<Tile> tiles;
  // What was built, for write_bf16 to build it again.
  MatrixRef a, b;
  std::byte* dst = nullptr;
  std::size_t out_size = 4;
  std::int64_t m = 0, k = 0, n = 0, count = 1;
  bool columns = false;
  std::vector<PostOp> post;
  bool bf16 = false;
  // bf16 on a CPU without bf16 units: f32 GEMMs over operands rounded to bf16 (the same
  // products: two bf16 values multiply exactly in f32), at f32 speed rather than oneDNN's
  // reference bf16 GEMM's.
  bool emulated = false;
  // Emulated `write_bf16`: each chunk's output rows are rounded to bf16 in place (while
  // they are in cache) for the next bf16 matmul to read as they are.
  bool round_out = false;

  /// Builds the kinds and tiles for C = A B (then \p post) into \p dst (bf16 values with
  /// \p dst_bf16, else f32), in bfloat16 with \p bf16, as \p count row bands or, with
  /// \p columns, column bands. B packed as a tile needs it is taken from \p packed when
  /// there, else packed now.
  void build(MatrixRef a, MatrixRef b, void* dst, bool dst_bf16, std::int64_t m, std::int64_t k,
             std::int64_t n, std::int64_t count, bool columns, const std::vector<PostOp>& post,
             bool bf16, const std::vector<PackedB>& packed = {});
  /// Points every chunk's A at bf16 rows from \p a (dense [m, k]) and drops the rounding.
  void read_bf16(const void* a);
  /// Runs tile \p t on the calling thread; false when oneDNN fails.
  bool run(std::int64_t t) const;
};

void PackedMatmul::Impl::build(MatrixRef a_in, MatrixRef b_in, void* dst_in, bool dst_bf16,
                               std::int64_t m_in, std::int64_t k_in, std::int64_t n_in,
                               std::int64_t count_in, bool columns_in,
                               const std::vector<PostOp>& post_in, bool bf16_in,
                               const std::vector<PackedB>& packed) {
  a = a_in, b = b_in, m = m_in, k = k_in, n = n_in, count = count_in, columns = columns_in;
  post = post_in, bf16 = bf16_in;
  emulated = bf16 && !has_native_bf16();
  dst = static_cast<std::byte*>(dst_in);
  const DataType out_type = dst_bf16 ? DataType::bf16 : DataType::f32;
  out_size = dst_bf16 ? 2 : 4;
  const DataType operands = bf16 && !emulated ? DataType::bf16 : DataType::f32;
  // oneDNN 2.6's bf16 GEMMs lose their speed when A's rows do not fit the core's L2 next
  // to B: a tile's rows run as chunks of at most 256 KiB of bf16 A (256 rows of 512),
  // each its own GEMM (interleaved with the whole: 1.3-1.5x for the transformer's layers
  // at batch 16; cutting the columns too gained nothing over the copies it needs). f32
  // GEMMs run one chunk per tile.
  const std::int64_t chunk_rows =
      bf16 && !emulated ? std::max<std::int64_t>(16, (std::int64_t{256} << 10) /
                                                         std::max<std::int64_t>(1, 2 * k) / 16 * 16)
                        : m;
  // The primitive's A: as given, or the tile's dense bf16 copy (its rounded f32 copy when
  // emulated).
  const auto a_desc = [&](std::int64_t rows) {
    return bf16 ? Desc({rows, k}, operands, Tag::ab)
                : Desc({rows, k}, DataType::f32, {a.row, a.col});
  };
  dnnl::engine& engine = cpu_engine();
  dnnl::stream stream(engine);
  const auto operand_desc = [&](const PostOp& op, std::int64_t rows, std::int64_t cols) {
    // [rows, cols] of a tensor (rows n apart), [1, cols] of a row, [rows, 1] of a column,
    // [1, 1]. (oneDNN's fast kernels take a tensor's part only when it is dense: column
    // bands then run such an epilogue after the GEMM.)
    if (op.row_stride != 0 && op.col_stride != 0)
      return Desc({rows, cols}, DataType::f32, {op.row_stride, 1});
    return Desc({op.row_stride != 0 ? rows : 1, op.col_stride != 0 ? cols : 1}, DataType::f32,
                Tag::ab);
  };
  const auto kind_for = [&](std::int64_t rows, std::int64_t cols) -> const Kind& {
    for (const Kind& kind : kinds)
      if (kind.rows == rows && kind.cols == cols) return kind;
    dnnl::post_ops ops;
    for (const PostOp& op : post) {
      if (op.binary) {
        ops.append_binary(op.algorithm, operand_desc(op, rows, cols));
      } else {
        ops.append_eltwise(1.0f, op.algorithm, op.alpha, op.beta);
      }
    }
    dnnl::primitive_attr attr = user_scratchpad();
    attr.set_post_ops(ops);
    const auto make = [&](const Desc& weights) {
      return dnnl::matmul::primitive_desc(
          dnnl::matmul::desc(a_desc(rows), weights, Desc({rows, cols}, out_type, Tag::ab)), attr,
          engine);
    };
    dnnl::matmul::primitive_desc pd = make(Desc({k, cols}, operands, Tag::any));
    // Where oneDNN keeps B plain (its GEMM packs it again on each call, down the columns)
    // rows of a multiple of 1 KiB fall into the same few cache sets: such B is kept with 16
    // floats more a row. GPT-2's 256 x 1024 up-projection on an AMD EPYC (AVX2): 46 -> 85
    // GFLOP/s, the 256 x 768 one's speed.
    if (!bf16 && cols % 256 == 0 && pd.weights_desc() == Desc({k, cols}, operands, Tag::ab)) {
      try {
        dnnl::matmul::primitive_desc padded = make(Desc({k, cols}, operands, {cols + 16, 1}));
        if (!std::string_view(padded.impl_info_str()).starts_with("ref")) pd = std::move(padded);
      } catch (const dnnl::error&) {  // kept as oneDNN chose
      }
    }
    // oneDNN falls back to its reference kernels (`ref:any`, orders of magnitude slower)
    // for combinations its optimised ones do not cover: then the caller's fallbacks
    // (without post-ops, then sgemm) do better.
    if (std::string_view(pd.impl_info_str()).starts_with("ref"))
      throw dnnl::error(dnnl_unimplemented, "only oneDNN's reference matmul");
    return kinds.emplace_back(
        Kind{rows, cols, dnnl::matmul(pd), pd.scratchpad_desc(), pd.weights_desc()});
  };
  // B's columns from c0 on as \p kind reads them: packed already (for another tile, or
  // before write_bf16 built this again), else now.
  const auto packed_for = [&](const Kind& kind, std::int64_t c0) {
    for (const std::vector<PackedB>* made :
         {static_cast<const std::vector<PackedB>*>(&packed_b), &packed})
      for (const PackedB& p : *made)
        if (p.c0 == c0 && p.memory.get_desc() == kind.weights) {
          if (made != &packed_b) packed_b.push_back(p);
          return p.memory;
        }
    const Desc source({k, kind.cols}, DataType::f32, {b.row, b.col});
    const float* from = b.data + c0 * b.col;
    const auto pack = [&] {
      dnnl::memory given(source, engine, const_cast<float*>(from));  // read only
      dnnl::memory out(kind.weights, engine);
      if (emulated) {  // rounded to bf16, then packed as f32
        dnnl::memory rounded(Desc({k, kind.cols}, DataType::bf16, Tag::ab), engine);
        dnnl::reorder(given, rounded).execute(stream, given, rounded);
        given = rounded;
      }
      dnnl::reorder(given, out).execute(stream, given, out);
      stream.wait();
      return out;
    };
    const dnnl::memory out =
        packs != nullptr ? packs->find_or_pack(from, source, kind.weights, emulated, pack) : pack();
    packed_b.push_back(PackedB{c0, out});
    return out;
  };
  kinds.clear();
  packed_b.clear();
  tiles.assign(static_cast<std::size_t>(count), Tile{});
  const std::int64_t groups = (n + 15) / 16;  // column bands take whole groups of 16
  for (std::int64_t t = 0; t < count; ++t) {
    Tile& tile = tiles[static_cast<std::size_t>(t)];
    const std::int64_t t0 = columns ? 0 : m * t / count,
                       band = columns ? m : m * (t + 1) / count - t0;
    tile.c0 = columns ? std::min(n, groups * t / count * 16) : 0;
    tile.cols = columns ? std::min(n, groups * (t + 1) / count * 16) - tile.c0 : n;
    tile.stream = dnnl::stream(engine);
    if (tile.cols == 0 || band == 0) continue;
    const bool staged = tile.cols < n;
    if (staged)
      tile.staging.resize(static_cast<std::size_t>(std::min(chunk_rows, band) * tile.cols) *
                          out_size);
    dnnl::memory rounded;
    if (bf16) {
      dnnl::memory given_a(Desc({band, k}, DataType::f32, {a.row, a.col}), engine,
                           const_cast<float*>(a.data + t0 * a.row));
      rounded = dnnl::memory(a_desc(band), engine);
      if (emulated) {
        tile.rows_from = a.data + t0 * a.row;
        tile.rows = band;
        tile.dense = static_cast<float*>(rounded.get_data_handle());
        tile.kept_a = rounded;
      } else {
        tile.round_a = onednn::reorder_step(given_a, rounded);
      }
    }
    for (std::int64_t r = 0; r < band; r += chunk_rows) {
      Chunk chunk{t0 + r, std::min(chunk_rows, band - r), {}};
      const Kind& kind = kind_for(chunk.rows, tile.cols);
      Step& mm = chunk.multiply;
      mm.primitive = kind.primitive;
      if (bf16) {
        mm.add(DNNL_ARG_SRC, dnnl::memory(a_desc(chunk.rows), engine,
                                          static_cast<std::byte*>(rounded.get_data_handle()) +
                                              r * k * (emulated ? 4 : 2)));
      } else {
        mm.add(DNNL_ARG_SRC, dnnl::memory(a_desc(chunk.rows), engine,
                                          const_cast<float*>(a.data + chunk.r0 * a.row)));
      }
      mm.add(DNNL_ARG_DST,
             dnnl::memory(Desc({chunk.rows, tile.cols}, out_type, Tag::ab), engine,
                          staged ? tile.staging.data()
                                 : dst + static_cast<std::size_t>(chunk.r0 * n) * out_size));
      mm.add(DNNL_ARG_WEIGHTS, packed_for(kind, tile.c0));
      mm.add_scratchpad(kind.scratchpad, engine);
      for (std::size_t i = 0; i < post.size(); ++i)
        if (post[i].binary)
          mm.add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1,
                 dnnl::memory(operand_desc(post[i], chunk.rows, tile.cols), engine,
                              const_cast<float*>(post[i].data + chunk.r0 * post[i].row_stride +
                                                 tile.c0 * post[i].col_stride)));
      tile.chunks.push_back(std::move(chunk));
    }
  }
}

void PackedMatmul::Impl::read_bf16(const void* rows) {
  dnnl::engine& engine = cpu_engine();
  // Natively bf16 values (2 bytes each); emulated f32 values already rounded to bf16.
  const DataType type = emulated ? DataType::f32 : DataType::bf16;
  const std::int64_t size = emulated ? 4 : 2;
  for (Tile& tile : tiles) {
    tile.round_a = {};
    tile.rows_from = nullptr;  // emulated: nothing left to round
    tile.dense = nullptr;
    tile.kept_a = {};
    for (Chunk& chunk : tile.chunks) {
      Step& mm = chunk.multiply;  // memory[0] / args[0]: the GEMM's A, dense [rows, k]
      mm.memory[0] = dnnl::memory(
          Desc({chunk.rows, k}, type, Tag::ab), engine,
          const_cast<std::byte*>(static_cast<const std::byte*>(rows)) + chunk.r0 * k * size);
      mm.args[0].memory = mm.memory[0].get();
    }
  }
}

bool PackedMatmul::Impl::run(std::int64_t t) const {
  const Tile& tile = tiles[static_cast<std::size_t>(t)];
  if (tile.rows_from != nullptr) {
    const std::int64_t shape[] = {tile.rows, k}, strides[] = {a.row, a.col};
    round_dense_bf16(tile.rows_from, shape, strides, tile.dense);
  }
  if (!tile.round_a.run(tile.stream)) return false;
  for (const Chunk& chunk : tile.chunks) {
    if (!chunk.multiply.run(tile.stream)) return false;
    if (tile.staging.empty() && !round_out) continue;
    if (dnnl_stream_wait(tile.stream.get()) != dnnl_success) return false;  // then read it
    const auto row_bytes = static_cast<std::size_t>(tile.cols) * out_size;
    for (std::int64_t i = 0; i < chunk.rows; ++i) {
      std::byte* row = dst + static_cast<std::size_t>((chunk.r0 + i) * n + tile.c0) * out_size;
      if (!tile.staging.empty())
        std::memcpy(row, tile.staging.data() + static_cast<std::size_t>(i) * row_bytes, row_bytes);
      if (round_out) {  // emulated write_bf16: f32 rounded to bf16 in place, while in cache
        auto* values = reinterpret_cast<float*>(row);
        vmath::round_bf16_f32(values, values, static_cast<std::size_t>(tile.cols), 1.0f);
      }
    }
  }
  return dnnl_stream_wait(tile.stream.get()) == dnnl_success;
}

bool PackedMatmul::worth_packing(std::int64_t m, std::int64_t k, std::int64_t n) {
  return k >= 16 && n >= 16 && m * k * n >= (std::int64_t{1} << 20);
}

PackedMatmul::PackedMatmul(MatrixRef a, MatrixRef b, float* c, std::int64_t m, std::int64_t k,
                           std::int64_t n, std::int64_t tiles, const Launch* epilogue, bool bf16,
                           bool columns, WeightPacks* packs)
    : impl_(std::make_unique<Impl>()),
      m_(m),
      tiles_(std::max<std::int64_t>(1, tiles)),
      bf16_(bf16) {
  const OneOpenMpThread one_thread;
  impl_->packs = packs;
  const std::optional<std::vector<PostOp>> post =
      epilogue ? post_ops_of(*epilogue, c) : std::nullopt;
  if (post) {
    try {
      impl_->build(a, b, epilogue->out[0].data, false, m, k, n, tiles_, columns, *post, bf16);
      fuses_epilogue_ = true;
      return;
    } catch (const dnnl::error&) {
      // No primitive with these post-ops: the epilogue runs after each tile instead.
    }
  }
  try {
    impl_->build(a, b, c, false, m, k, n, tiles_, columns, {}, bf16);
  } catch (const dnnl::error& e) {
    throw DeviceError(cat("oneDNN has no packed ", bf16 ? "bf16 " : "", "matmul for [", m, ", ", k,
                          "] x [", k, ", ", n, "]: ", e.what()));
  }
}

PackedMatmul::~PackedMatmul() = default;

bool PackedMatmul::native_bf16() const noexcept { return bf16_ && !impl_->emulated; }

bool PackedMatmul::write_bf16(void* out) {
  if (!bf16_) return false;
  if (impl_->emulated) {  // f32 values rounded in place: the output stays where it is
    if (out != impl_->dst) return false;
    impl_->round_out = true;
    return true;
  }
  const OneOpenMpThread one_thread;
  auto fresh = std::make_unique<Impl>();
  try {
    fresh->build(impl_->a, impl_->b, out, true, impl_->m, impl_->k, impl_->n, impl_->count,
                 impl_->columns, impl_->post, true, impl_->packed_b);  // B as already packed
  } catch (const dnnl::error&) {
    return false;  // no such primitive: the output stays f32
  }
  impl_ = std::move(fresh);
  if (reads_bf16_ != nullptr) impl_->read_bf16(reads_bf16_);
  return true;
}

void PackedMatmul::read_bf16(const void* a) {
  reads_bf16_ = a;
  impl_->read_bf16(a);
}

bool PackedMatmul::by_columns() const noexcept { return impl_->columns; }

std::int64_t PackedMatmul::first_column(std::int64_t t) const noexcept {
  return t < tiles_ ? impl_->tiles[static_cast<std::size_t>(t)].c0 : impl_->n;
}

void PackedMatmul::run(std::int64_t t) const {
  if (!impl_->run(t))
    throw DeviceError(cat("oneDNN matmul failed on ", by_columns() ? "column" : "row", " band ", t,
                          " of ", tiles_, " (a [", m_, ", ", impl_->k, "] x [", impl_->k, ", ",
                          impl_->n, "] GEMM)"));
}

}  // namespace kiln::compiler
