#include "compiler/cpu/batched_bf16_matmul.hpp"

#include <algorithm>
#include <deque>
#include <string_view>
#include <utility>

#include "compiler/cpu/bf16_emulation.hpp"
#include "compiler/cpu/onednn_support.hpp"
#include "core/str.hpp"
#include "kiln/core/cpu_isa.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {
namespace {

using kiln::detail::cat;
using Desc = dnnl::memory::desc;
using DataType = dnnl::memory::data_type;
using Dims = dnnl::memory::dims;

using onednn::cpu_engine;
using onednn::Step;
using onednn::user_scratchpad;

/// \p op's dims with dim \p split replaced by \p count, and the view's strides, as a desc.
Desc view_desc(const StridedOperand& op, std::size_t split, std::int64_t count) {
  Dims dims(op.shape.begin(), op.shape.end()), strides(op.strides.begin(), op.strides.end());
  dims[split] = count;
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (dims[d] == 1) strides[d] = 1;  // any stride reads a dim of one
  return Desc(dims, DataType::f32, strides);
}

Desc dense_desc(Dims dims, DataType type) {
  Dims strides(dims.size(), 1);
  for (std::size_t d = dims.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
  return Desc(dims, type, strides);
}

/// \p dims laid out densely with its last two dims swapped: the matrices column-major.
Desc transposed_desc(Dims dims, DataType type) {
  const std::size_t r = dims.size();
  Dims strides(r, 1);
  strides[r - 1] = dims[r - 2];
  std::int64_t step = dims[r - 2] * dims[r - 1];
  for (std::size_t d = r - 2; d-- > 0;) {
    strides[d] = step;
    step *= dims[d];
  }
  return Desc(dims, type, strides);
}

/// Whether the matrices of \p op lie column by column (attention's K read as K^T): then
/// the emulated pass rounds it in that order, reading and writing contiguously.
bool column_major(const StridedOperand& op) {
  const std::size_t r = op.shape.size();
  return op.strides[r - 2] == 1 && op.strides[r - 1] != 1 && op.shape[r - 2] > 1;
}

}  // namespace

struct BatchedBf16Matmul::Impl {
  /// Entries [e0, e0 + count) of the split dim: rounded, then multiplied.
  struct Chunk {
    Step round_a, round_b, multiply;
    // Emulated (no bf16 units): the chunk's operands rounded in one pass each into the
    // tile's dense f32 buffers (A times the scale, read on each call).
    const float *a_from = nullptr, *b_from = nullptr;
    std::vector<std::int64_t> a_shape, b_shape;
  };
  struct Tile {
    dnnl::stream stream;
    std::vector<Chunk> chunks;  // one after another, through the tile's bf16 buffers
    dnnl::memory a_bf16, b_bf16;
    dnnl::memory a_f32, b_f32;  // emulated: the rounded operands, as f32
  };
  std::vector<Tile> tiles;
};

bool BatchedBf16Matmul::suits(const StridedOperand& a, const StridedOperand& b) {
  const std::size_t r = a.shape.size();
  if (r < 3 || b.shape.size() != r) return false;
  for (std::size_t d = 0; d + 2 < r; ++d)
    if (a.shape[d] != b.shape[d] || (a.shape[d] > 1 && (a.strides[d] == 0 || b.strides[d] == 0)))
      return false;
  return true;
}

BatchedBf16Matmul::BatchedBf16Matmul(const StridedOperand& a, const StridedOperand& b, float* c,
                                     std::int64_t tiles, const float* scale)
    : impl_(std::make_unique<Impl>()), scale_(scale), a_strides_(a.strides), b_strides_(b.strides) {
  const std::size_t rank = b.shape.size();
  const bool b_by_columns = column_major(b);
  if (b_by_columns) std::swap(b_strides_[rank - 2], b_strides_[rank - 1]);  // rounded as stored
  const onednn::OneOpenMpThread one_thread;  // each tile runs on the worker of its block
  a_data_ = a.data;
  a_dense_ = true;
  for (std::int64_t d = static_cast<std::int64_t>(a.shape.size()) - 1, step = 1; d >= 0; --d) {
    const auto u = static_cast<std::size_t>(d);
    if (a.shape[u] != 1 && a.strides[u] != step) a_dense_ = false;
    step *= a.shape[u];
  }

  const std::size_t r = a.shape.size();
  const std::int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  // Tiles split the first batch dim of more than one entry (attention at batch 1: the
  // heads); the dims before it are ones, so each tile's part of C is one contiguous range.
  split_ = 0;
  while (split_ + 3 < r && a.shape[split_] == 1) ++split_;
  split_dim_ = a.shape[split_];
  per_entry_ = m * n;
  for (std::size_t d = split_ + 1; d + 2 < r; ++d) per_entry_ *= a.shape[d];
  tiles_ = std::clamp<std::int64_t>(tiles, 1, split_dim_);
  // Each tile goes through its entries in chunks whose f32 operands and output fit in
  // 1 MiB, so that the rounded operands and the product stay in the core's L2 (a whole
  // batch-16 tile of attention's scores is 12 MiB).
  std::int64_t entry_bytes = (m * k + k * n + m * n) * 4;
  for (std::size_t d = split_ + 1; d + 2 < r; ++d) entry_bytes *= a.shape[d];
  const std::int64_t per_chunk =
      std::max<std::int64_t>(1, (std::int64_t{1} << 20) / std::max<std::int64_t>(1, entry_bytes));
  dnnl::engine& engine = cpu_engine();
  // Without bf16 units, f32 GEMMs over the operands rounded to bf16 and widened back: the
  // same products (two bf16 values multiply exactly in f32), at f32 speed.
  const bool emulated = !has_native_bf16();
  const DataType operands = emulated ? DataType::f32 : DataType::bf16;
  const auto dims_of = [&](const std::vector<std::int64_t>& shape, std::int64_t count) {
    Dims dims(shape.begin(), shape.end());
    dims[split_] = count;
    return dims;
  };
  const std::vector<std::int64_t> c_shape = [&] {
    std::vector<std::int64_t> shape(a.shape.begin(), a.shape.end() - 1);
    shape.push_back(n);
    return shape;
  }();
  // The primitive for chunks of \p count entries (at most two: the chunk and a rest).
  struct Kind {
    std::int64_t count;
    dnnl::matmul::primitive_desc pd;
  };
  std::deque<Kind> kinds;  // references stay valid as it grows
  const auto kind_for = [&](std::int64_t count) -> const dnnl::matmul::primitive_desc& {
    for (const Kind& kind : kinds)
      if (kind.count == count) return kind.pd;
    dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(
            dense_desc(dims_of(a.shape, count), operands),
            emulated ? (b_by_columns ? transposed_desc(dims_of(b.shape, count), operands)
                                     : dense_desc(dims_of(b.shape, count), operands))
                     : Desc(dims_of(b.shape, count), operands, dnnl::memory::format_tag::any),
            dense_desc(dims_of(c_shape, count), DataType::f32)),
        user_scratchpad(), engine);
    const std::string_view impl = pd.impl_info_str();
    if (emulated ? impl.starts_with("ref") : !impl.starts_with("brg"))
      throw DeviceError(cat("no fast bf16 kernel for a batched [", m, ", ", k, "] x [", k, ", ", n,
                            "] matmul (oneDNN offers ", pd.impl_info_str(), ")"));
    return kinds.emplace_back(Kind{count, std::move(pd)}).pd;
  };
  dnnl::primitive_attr round_attr = user_scratchpad();
  if (scale != nullptr) round_attr.set_output_scales(0, {DNNL_RUNTIME_F32_VAL});
  impl_->tiles.resize(static_cast<std::size_t>(tiles_));
  for (std::int64_t t = 0; t < tiles_; ++t) {
    const std::int64_t e0 = split_dim_ * t / tiles_, e1 = split_dim_ * (t + 1) / tiles_;
    Impl::Tile& tile = impl_->tiles[static_cast<std::size_t>(t)];
    tile.stream = dnnl::stream(engine);
    // The tile's bf16 buffers, sized for its largest chunk.
    const dnnl::matmul::primitive_desc& largest = kind_for(std::min(per_chunk, e1 - e0));
    if (emulated) {
      tile.a_f32 = dnnl::memory(largest.src_desc(), engine);
      tile.b_f32 = dnnl::memory(largest.weights_desc(), engine);
    } else {
      tile.a_bf16 = dnnl::memory(largest.src_desc(), engine);
      tile.b_bf16 = dnnl::memory(largest.weights_desc(), engine);
    }
    for (std::int64_t c0 = e0; c0 < e1; c0 += per_chunk) {
      const std::int64_t count = std::min(per_chunk, e1 - c0);
      const dnnl::matmul::primitive_desc& pd = kind_for(count);
      const auto view = [&](const StridedOperand& op) {
        return dnnl::memory(view_desc(op, split_, count), engine,
                            const_cast<float*>(op.data + c0 * op.strides[split_]));
      };
      Impl::Chunk chunk;
      dnnl::memory a_in, b_in;
      if (emulated) {
        a_in = dnnl::memory(pd.src_desc(), engine, tile.a_f32.get_data_handle());
        b_in = dnnl::memory(pd.weights_desc(), engine, tile.b_f32.get_data_handle());
        chunk.a_from = a.data + c0 * a.strides[split_];
        chunk.b_from = b.data + c0 * b.strides[split_];
        chunk.a_shape = a.shape;
        chunk.b_shape = b.shape;
        chunk.a_shape[split_] = chunk.b_shape[split_] = count;
        if (b_by_columns) std::swap(chunk.b_shape[rank - 2], chunk.b_shape[rank - 1]);
      } else {
        a_in = dnnl::memory(pd.src_desc(), engine, tile.a_bf16.get_data_handle());
        b_in = dnnl::memory(pd.weights_desc(), engine, tile.b_bf16.get_data_handle());
        chunk.round_a = onednn::reorder_step(view(a), a_in, round_attr);
        if (scale != nullptr)
          chunk.round_a.add(DNNL_ARG_ATTR_OUTPUT_SCALES,
                            dnnl::memory(Desc({1}, DataType::f32, dnnl::memory::format_tag::a),
                                         engine, const_cast<float*>(scale)));
        chunk.round_b = onednn::reorder_step(view(b), b_in);
      }
      chunk.multiply.primitive = dnnl::matmul(pd);
      chunk.multiply.add(DNNL_ARG_SRC, a_in);
      chunk.multiply.add(DNNL_ARG_WEIGHTS, b_in);
      chunk.multiply.add(DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), engine, c + c0 * per_entry_));
      chunk.multiply.add_scratchpad(pd.scratchpad_desc(), engine);
      tile.chunks.push_back(std::move(chunk));
    }
  }
}

BatchedBf16Matmul::~BatchedBf16Matmul() = default;

std::int64_t BatchedBf16Matmul::first_element(std::int64_t t) const noexcept {
  return split_dim_ * t / tiles_ * per_entry_;
}

bool BatchedBf16Matmul::can_read_rounded_a(const float* a) const {
  if (a != a_data_ || !a_dense_ || scale_ != nullptr) return false;
  for (const Impl::Tile& tile : impl_->tiles)
    for (const Impl::Chunk& chunk : tile.chunks)
      if (chunk.a_from == nullptr) return false;  // bf16 units (reorders read A), or done
  return true;
}

void BatchedBf16Matmul::read_rounded_a() {
  for (Impl::Tile& tile : impl_->tiles) {
    for (Impl::Chunk& chunk : tile.chunks) {
      // The GEMM's A: the chunk's part of A itself (dense, as the buffer was).
      chunk.multiply.memory[0].set_data_handle(const_cast<float*>(chunk.a_from));
      chunk.a_from = nullptr;
    }
    tile.a_f32 = {};
  }
}

void BatchedBf16Matmul::run(std::int64_t t) const {
  const Impl::Tile& tile = impl_->tiles[static_cast<std::size_t>(t)];
  for (const Impl::Chunk& chunk : tile.chunks) {
    // Emulated: round in one pass each (A unless it is read as it is), then an f32 GEMM.
    if (chunk.a_from != nullptr)
      round_dense_bf16(chunk.a_from, chunk.a_shape, a_strides_,
                       static_cast<float*>(tile.a_f32.get_data_handle()),
                       scale_ != nullptr ? *scale_ : 1.0f);
    if (chunk.b_from != nullptr)
      round_dense_bf16(chunk.b_from, chunk.b_shape, b_strides_,
                       static_cast<float*>(tile.b_f32.get_data_handle()));
    if (!chunk.round_a.run(tile.stream) || !chunk.round_b.run(tile.stream) ||
        !chunk.multiply.run(tile.stream))
      throw DeviceError(cat("oneDNN's batched bf16 matmul failed in tile ", t));
  }
  if (dnnl_stream_wait(tile.stream.get()) != dnnl_success)
    throw DeviceError(cat("oneDNN's batched bf16 matmul failed in tile ", t));
}

}  // namespace kiln::compiler
