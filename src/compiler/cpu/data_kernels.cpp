// The copies: reshape, transpose, broadcast_to, slice, concat, split and gather, each a
// contiguous run (or a strided run) at a time, the runs split over the launch's blocks.

#include <cstring>

#include "compiler/cpu/kernel_support.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler::kernel {

using kiln::detail::cat;

void copy_all(const Launch& l) {  // reshape: same elements, same order
  const auto bytes = static_cast<std::int64_t>(elements(l.out[0].shape)) * size_of(l.out[0].dtype);
  const auto [first, last] = block_range(bytes, 64);  // this block's share, in cache lines
  std::memcpy(l.out[0].data + first, l.in[0].data + first, static_cast<std::size_t>(last - first));
}

namespace {

/// dst[i] = src[i * step] for i < n, elements of \p es bytes (typed loops for the usual
/// sizes: a memcpy call per element would cost more than the copy).
void copy_strided(std::byte* dst, const std::byte* src, std::int64_t n, std::int64_t step,
                  std::size_t es) {
  const auto typed = [&](auto element) {
    using T = decltype(element);
    auto* d = reinterpret_cast<T*>(dst);
    const auto* s = reinterpret_cast<const T*>(src);
    for (std::int64_t i = 0; i < n; ++i) d[i] = s[i * step];
  };
  switch (es) {
    case 1:
      return typed(std::uint8_t{});
    case 2:
      return typed(std::uint16_t{});
    case 4:
      return typed(std::uint32_t{});
    case 8:
      return typed(std::uint64_t{});
    default:
      for (std::int64_t i = 0; i < n; ++i)
        std::memcpy(dst + static_cast<std::size_t>(i) * es,
                    src + static_cast<std::ptrdiff_t>(i * step) * static_cast<std::ptrdiff_t>(es),
                    es);
  }
}

/// o[i] = x[base + Σ index·strides]: broadcasts, transposes, slices and splits are all this.
/// Same dtypes (always, for these ops) copy bytes, a run of the innermost dim at a time;
/// the launch's blocks split the runs.
void strided_read(const View& x, const View& o, Dims strides, std::int64_t base = 0) {
  if (x.dtype == o.dtype && !o.shape.empty() && elements(o.shape) > 0) {
    const std::size_t es = size_of(o.dtype), rank = o.shape.size();
    const std::int64_t inner = o.shape.back(), step = strides.back();
    const auto [first, last] = block_range(elements(o.shape) / inner);
    IndexScratch idx(rank);  // the index of run `first`
    std::fill(idx.data(), idx.data() + rank, 0);
    for (std::int64_t rest = first, d = static_cast<std::int64_t>(rank) - 1; d-- > 0;) {
      idx[static_cast<std::size_t>(d)] = rest % o.shape[static_cast<std::size_t>(d)];
      rest /= o.shape[static_cast<std::size_t>(d)];
    }
    std::byte* dst = o.data + static_cast<std::size_t>(first * inner) * es;
    for (std::int64_t r = first; r < last; ++r) {
      std::int64_t offset = base;
      for (std::size_t d = 0; d + 1 < rank; ++d) offset += idx[d] * strides[d];
      const std::byte* src = x.data + static_cast<std::size_t>(offset) * es;
      if (step == 1) {
        std::memcpy(dst, src, static_cast<std::size_t>(inner) * es);
      } else {
        copy_strided(dst, src, inner, step, es);
      }
      dst += static_cast<std::size_t>(inner) * es;
      for (std::size_t d = rank - 1; d-- > 0;) {
        if (++idx[d] < o.shape[d]) break;
        idx[d] = 0;
      }
    }
    return;
  }
  if (kiln::block_idx().x != 0) return;  // the general path runs on one block
  for_each_element(o.shape, {to_index(strides)},
                   [&](std::int64_t i, const std::vector<std::int64_t>& off) {
                     copy_element(o, i, x, base + off[0]);
                   });
}

}  // namespace

namespace {

Index broadcast_read_strides(const Launch& l) {
  return broadcast_strides(l.in[0].shape, l.out[0].shape);
}

Index transpose_read_strides(const Launch& l) {
  const View& x = l.in[0];
  const Index perm = l.view().find("perm")->as_int_array();
  const Index own = strides_of(x.shape);
  Index st(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) st[d] = own[axis_of(perm[d], x.shape.size())];
  return st;
}

/// \p l's output read from its input through prepare's strides (else \p strides_of's).
void read_through(const Launch& l, Index (*strides_of_launch)(const Launch&)) {
  if (const ReadStrides* prepared = l.prepared_as<ReadStrides>()) {
    strided_read(l.in[0], l.out[0], prepared->strides[0]);
  } else {
    strided_read(l.in[0], l.out[0], strides_of_launch(l));
  }
}

}  // namespace

void prepare_broadcast_to(Launch& launch, int) {
  launch.prepared =
      std::make_unique<ReadStrides>(std::vector<Index>{broadcast_read_strides(launch)});
}

void prepare_transpose(Launch& launch, int) {
  launch.prepared =
      std::make_unique<ReadStrides>(std::vector<Index>{transpose_read_strides(launch)});
}

void broadcast_to(const Launch& l) { read_through(l, broadcast_read_strides); }
void transpose(const Launch& l) { read_through(l, transpose_read_strides); }

void slice(const Launch& l) {
  const View &x = l.in[0], &o = l.out[0];
  const ir::OpView op = l.view();
  const Index starts = op.find("starts")->as_int_array(), steps = op.find("steps")->as_int_array();
  const Index own = strides_of(x.shape);
  Index st(x.shape.size());
  std::int64_t base = 0;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    base += std::clamp<std::int64_t>(starts[d], 0, x.shape[d]) * own[d];
    st[d] = o.shape[d] > 1 ? own[d] * steps[d] : 0;  // one element: no stride to overflow
  }
  strided_read(x, o, st, base);
}

void concat(const Launch& l) {
  const View& o = l.out[0];
  const std::size_t axis = axis_of(l.view().find("axis")->as_int(), o.shape.size());
  bool same_dtype = true;
  for (const View& x : l.in) same_dtype = same_dtype && x.dtype == o.dtype;
  if (same_dtype) {  // each input is one contiguous run per index of the dims before axis
    std::int64_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < axis; ++d) outer *= o.shape[d];
    for (std::size_t d = axis + 1; d < o.shape.size(); ++d) inner *= o.shape[d];
    const std::size_t es = size_of(o.dtype);
    const auto [first, last] = block_range(outer);
    for (std::int64_t r = first; r < last; ++r) {
      std::byte* dst = o.data + static_cast<std::size_t>(r * o.shape[axis] * inner) * es;
      for (const View& x : l.in) {
        const auto run = static_cast<std::size_t>(x.shape[axis] * inner) * es;
        std::memcpy(dst, x.data + static_cast<std::size_t>(r) * run, run);
        dst += run;
      }
    }
    return;
  }
  if (kiln::block_idx().x != 0) return;  // the general path runs on one block
  const Index ost = strides_of(o.shape);
  std::int64_t offset = 0;
  for (const View& x : l.in) {
    for_each_element(x.shape, {ost}, [&](std::int64_t i, const std::vector<std::int64_t>& off) {
      copy_element(o, off[0] + offset * ost[axis], x, i);
    });
    offset += x.shape[axis];
  }
}

void split(const Launch& l) {
  const View& x = l.in[0];
  const std::size_t axis = axis_of(l.view().find("axis")->as_int(), x.shape.size());
  const Index xst = strides_of(x.shape);
  std::int64_t offset = 0;
  for (const View& o : l.out) {
    strided_read(x, o, xst, offset * xst[axis]);
    offset += o.shape[axis];
  }
}

void gather(const Launch& l) {
  const View &x = l.in[0], &ids = l.in[1], &o = l.out[0];
  const std::size_t axis = axis_of(l.view().find("axis")->as_int(), x.shape.size());
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (std::size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const std::int64_t n = elements(ids.shape), rows = x.shape[axis];
  const std::size_t es = size_of(x.dtype);
  const auto [first, last] = block_range(outer * n);
  for (std::int64_t item = first; item < last; ++item) {
    const std::int64_t a = item / n, k = item % n;
    const std::int64_t id =
        load_as_int(ids.dtype, ids.data + static_cast<std::size_t>(k) * size_of(ids.dtype));
    if (id < 0 || id >= rows)
      throw UserError(
          cat("gather (", l.view().describe(), "): index ", id, " is outside [0, ", rows, ")"));
    if (x.dtype == o.dtype) {  // a row of `inner` elements, as bytes
      std::memcpy(o.data + static_cast<std::size_t>((a * n + k) * inner) * es,
                  x.data + static_cast<std::size_t>((a * rows + id) * inner) * es,
                  static_cast<std::size_t>(inner) * es);
      continue;
    }
    for (std::int64_t j = 0; j < inner; ++j)
      copy_element(o, (a * n + k) * inner + j, x, (a * rows + id) * inner + j);
  }
}

}  // namespace kiln::compiler::kernel
