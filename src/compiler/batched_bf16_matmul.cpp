#include "compiler/batched_bf16_matmul.hpp"

#include <algorithm>
#include <string_view>

#include "compiler/onednn_support.hpp"
#include "core/str.hpp"
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

}  // namespace

struct BatchedBf16Matmul::Impl {
  struct Tile {
    dnnl::stream stream;
    Step round_a, round_b, multiply;
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
    : impl_(std::make_unique<Impl>()) {
  const onednn::OneOpenMpThread one_thread;  // each tile runs on the worker of its block

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
  dnnl::engine& engine = cpu_engine();
  const Dims c_dims = [&] {
    Dims dims(a.shape.begin(), a.shape.end() - 1);
    dims.push_back(n);
    return dims;
  }();
  impl_->tiles.resize(static_cast<std::size_t>(tiles_));
  for (std::int64_t t = 0; t < tiles_; ++t) {
    const std::int64_t e0 = split_dim_ * t / tiles_, count = split_dim_ * (t + 1) / tiles_ - e0;
    Impl::Tile& tile = impl_->tiles[static_cast<std::size_t>(t)];
    tile.stream = dnnl::stream(engine);
    Dims a_dims(a.shape.begin(), a.shape.end()), b_dims(b.shape.begin(), b.shape.end()),
        out_dims = c_dims;
    a_dims[split_] = b_dims[split_] = out_dims[split_] = count;
    const Desc a16 = dense_desc(a_dims, DataType::bf16);
    const Desc out = dense_desc(out_dims, DataType::f32);
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(a16, Desc(b_dims, DataType::bf16, dnnl::memory::format_tag::any), out),
        user_scratchpad(), engine);
    if (!std::string_view(pd.impl_info_str()).starts_with("brg"))
      throw DeviceError(cat("no fast bf16 kernel for a batched [", m, ", ", k, "] x [", k, ", ", n,
                            "] matmul (oneDNN offers ", pd.impl_info_str(), ")"));
    dnnl::memory a_bf16(a16, engine), b_bf16(pd.weights_desc(), engine);

    dnnl::primitive_attr round_attr = user_scratchpad();
    if (scale != nullptr) round_attr.set_output_scales(0, {DNNL_RUNTIME_F32_VAL});
    const auto view = [&](const StridedOperand& op) {
      return dnnl::memory(view_desc(op, split_, count), engine,
                          const_cast<float*>(op.data + e0 * op.strides[split_]));
    };
    tile.round_a = onednn::reorder_step(view(a), a_bf16, round_attr);
    if (scale != nullptr)
      tile.round_a.add(DNNL_ARG_ATTR_OUTPUT_SCALES,
                       dnnl::memory(Desc({1}, DataType::f32, dnnl::memory::format_tag::a), engine,
                                    const_cast<float*>(scale)));
    tile.round_b = onednn::reorder_step(view(b), b_bf16);
    tile.multiply.primitive = dnnl::matmul(pd);
    tile.multiply.add(DNNL_ARG_SRC, a_bf16);
    tile.multiply.add(DNNL_ARG_WEIGHTS, b_bf16);
    tile.multiply.add(DNNL_ARG_DST, dnnl::memory(out, engine, c + e0 * per_entry_));
    tile.multiply.add_scratchpad(pd.scratchpad_desc(), engine);
  }
}

BatchedBf16Matmul::~BatchedBf16Matmul() = default;

std::int64_t BatchedBf16Matmul::first_element(std::int64_t t) const noexcept {
  return split_dim_ * t / tiles_ * per_entry_;
}

void BatchedBf16Matmul::run(std::int64_t t) const {
  const Impl::Tile& tile = impl_->tiles[static_cast<std::size_t>(t)];
  if (!tile.round_a.run(tile.stream) || !tile.round_b.run(tile.stream) ||
      !tile.multiply.run(tile.stream) || dnnl_stream_wait(tile.stream.get()) != dnnl_success)
    throw DeviceError(cat("oneDNN's batched bf16 matmul failed in tile ", t));
}

}  // namespace kiln::compiler
