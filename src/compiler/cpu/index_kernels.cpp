// gather_elements, gather_nd, scatter_elements, scatter_nd, cumsum and top_k: indexing by
// data, running sums and selection. Indices may be negative (from the end); one outside [-n, n)
// throws, naming the op. Nothing here allocates: index arithmetic is on the operands' shapes.
// Scatters run on one block, in the order of the updates, so that the last of several
// writes to one element wins and reductions combine in one order.

#include <algorithm>
#include <cstring>
#include <string>

#include "compiler/cpu/kernel_support.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler::kernel {

using kiln::detail::cat;

namespace {

/// Index \p id into a dim of \p size, negative counting from the end. \throws UserError.
std::int64_t checked_index(const Launch& l, std::int64_t id, std::int64_t size) {
  if (id < -size || id >= size)
    throw UserError(
        cat(l.view().describe(), ": index ", id, " is outside [", -size, ", ", size, ")"));
  return id < 0 ? id + size : id;
}

std::int64_t load_index(const View& ids, std::int64_t i) {
  return load_as_int(ids.dtype, ids.data + static_cast<std::size_t>(i) * size_of(ids.dtype));
}

/// Off the axis the indices must fit in x (symbolic dims: checked now that they have sizes).
void check_fits_off_axis(const Launch& l, const View& ids, const View& x, std::size_t axis) {
  for (std::size_t d = 0; d < x.shape.size(); ++d)
    if (d != axis && ids.shape[d] > x.shape[d])
      throw UserError(cat(l.view().describe(), ": indices of ", ids.shape[d], " at axis ", d,
                          " do not fit in x's ", x.shape[d]));
}

/// The element of x that index element \p i names: i's coordinates, the axis's replaced
/// by the index.
std::int64_t element_along_axis(const Launch& l, const View& ids, const View& x, std::size_t axis,
                                std::int64_t i) {
  std::int64_t rest = i, offset = 0, stride = 1;
  for (std::size_t d = x.shape.size(); d-- > 0;) {
    std::int64_t c = rest % ids.shape[d];
    rest /= ids.shape[d];
    if (d == axis) c = checked_index(l, load_index(ids, i), x.shape[d]);
    offset += c * stride;
    stride *= x.shape[d];
  }
  return offset;
}

enum class Combine { none, add, mul, max, min };

Combine combine_of(const Launch& l) {
  const ir::Attribute* r = l.view().find("reduction");
  const std::string mode = r == nullptr ? "none" : r->as_string();
  return mode == "add"   ? Combine::add
         : mode == "mul" ? Combine::mul
         : mode == "max" ? Combine::max
         : mode == "min" ? Combine::min
                         : Combine::none;  // the verifier refused anything else
}

/// o[at] = combine(o[at], up[u]): floats in double, rounded once (max and min propagate
/// NaN), integers wrapping at 64 bits, then to the dtype's width.
void scatter_element(const View& o, std::int64_t at, const View& up, std::int64_t u, Combine c) {
  const std::size_t es = size_of(o.dtype);
  if (c == Combine::none) {
    std::memcpy(o.data + static_cast<std::size_t>(at) * es,
                up.data + static_cast<std::size_t>(u) * es, es);
    return;
  }
  Number a = load_number(o, at);
  const Number b = load_number(up, u);
  if (is_floating(o.dtype)) {
    const bool nan = a.f != a.f || b.f != b.f;
    a.f = c == Combine::add   ? a.f + b.f
          : c == Combine::mul ? a.f * b.f
          : nan               ? (a.f != a.f ? a.f : b.f)
          : c == Combine::max ? std::max(a.f, b.f)
                              : std::min(a.f, b.f);
  } else {
    const auto ua = static_cast<std::uint64_t>(a.i), ub = static_cast<std::uint64_t>(b.i);
    a.i = c == Combine::add   ? static_cast<std::int64_t>(ua + ub)
          : c == Combine::mul ? static_cast<std::int64_t>(ua * ub)
          : c == Combine::max ? std::max(a.i, b.i)
                              : std::min(a.i, b.i);
  }
  store_number(o, at, a);
}

/// The output starts as x.
void copy_input(const View& x, const View& o) {
  if (o.data != x.data)
    std::memcpy(o.data, x.data, static_cast<std::size_t>(elements(x.shape)) * size_of(x.dtype));
}

}  // namespace

void scatter_elements(const Launch& l) {
  const View &x = l.in[0], &ids = l.in[1], &up = l.in[2], &o = l.out[0];
  const std::size_t rank = x.shape.size();
  const std::size_t axis = axis_of(l.view().find("axis")->as_int(), rank);
  check_fits_off_axis(l, ids, x, axis);
  copy_input(x, o);
  const Combine c = combine_of(l);
  for (std::int64_t i = 0, n = elements(ids.shape); i < n; ++i)
    scatter_element(o, element_along_axis(l, ids, x, axis, i), up, i, c);
}

void scatter_nd(const Launch& l) {
  const View &x = l.in[0], &ids = l.in[1], &up = l.in[2], &o = l.out[0];
  const auto k = static_cast<std::size_t>(ids.shape.back());
  std::int64_t inner = 1;
  for (std::size_t d = k; d < x.shape.size(); ++d) inner *= x.shape[d];
  copy_input(x, o);
  const Combine c = combine_of(l);
  const std::int64_t tuples = elements(ids.shape) / static_cast<std::int64_t>(k);
  for (std::int64_t t = 0; t < tuples; ++t) {
    std::int64_t offset = 0;
    for (std::size_t j = 0; j < k; ++j)
      offset = offset * x.shape[j] +
               checked_index(l, load_index(ids, t * static_cast<std::int64_t>(k) + j), x.shape[j]);
    for (std::int64_t e = 0; e < inner; ++e)
      scatter_element(o, offset * inner + e, up, t * inner + e, c);
  }
}

void gather_elements(const Launch& l) {
  const View &x = l.in[0], &ids = l.in[1], &o = l.out[0];
  const std::size_t rank = x.shape.size();
  const std::size_t axis = axis_of(l.view().find("axis")->as_int(), rank);
  check_fits_off_axis(l, ids, x, axis);
  const std::size_t es = size_of(x.dtype);
  const auto [first, last] = block_range(elements(ids.shape));
  for (std::int64_t i = first; i < last; ++i) {
    const std::int64_t offset = element_along_axis(l, ids, x, axis, i);
    std::memcpy(o.data + static_cast<std::size_t>(i) * es,
                x.data + static_cast<std::size_t>(offset) * es, es);
  }
}

void gather_nd(const Launch& l) {
  const View &x = l.in[0], &ids = l.in[1], &o = l.out[0];
  const auto b = static_cast<std::size_t>(l.view().find("batch_dims")->as_int());
  const std::size_t q = ids.shape.size(), r = x.shape.size();
  const auto k = static_cast<std::size_t>(ids.shape[q - 1]);
  // Each index tuple selects a slice of `inner` elements of x.
  std::int64_t inner = 1, batch_elements = 1, tuples_per_batch = 1;
  for (std::size_t d = b + k; d < r; ++d) inner *= x.shape[d];
  for (std::size_t d = b; d < r; ++d) batch_elements *= x.shape[d];
  for (std::size_t d = b; d + 1 < q; ++d) tuples_per_batch *= ids.shape[d];
  const std::size_t es = size_of(x.dtype);
  const auto [first, last] = block_range(elements(ids.shape) / static_cast<std::int64_t>(k));
  for (std::int64_t t = first; t < last; ++t) {
    std::int64_t offset = 0;
    for (std::size_t j = 0; j < k; ++j) {
      const std::int64_t id =
          checked_index(l, load_index(ids, t * static_cast<std::int64_t>(k) + j), x.shape[b + j]);
      offset = offset * x.shape[b + j] + id;
    }
    const std::int64_t batch = t / tuples_per_batch;
    const std::int64_t from = batch * batch_elements + offset * inner;
    std::memcpy(o.data + static_cast<std::size_t>(t * inner) * es,
                x.data + static_cast<std::size_t>(from) * es, static_cast<std::size_t>(inner) * es);
  }
}

void cumsum(const Launch& l) {
  const View &x = l.in[0], &o = l.out[0];
  const std::size_t axis = axis_of(l.view().find("axis")->as_int(), x.shape.size());
  const auto flag = [&](const char* name) {
    const ir::Attribute* a = l.view().find(name);
    return a != nullptr && a->as_bool();
  };
  const bool exclusive = flag("exclusive"), reverse = flag("reverse");
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (std::size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const std::int64_t n = x.shape[axis];
  const auto [first, last] = block_range(outer * inner);
  for (std::int64_t line = first; line < last; ++line) {
    const std::int64_t base = (line / inner) * n * inner + line % inner;
    // Floats sum in double (each result rounded once), from -0.0, which adds nothing (a
    // lone -0.0 stays -0.0); the exclusive first is +0. Integers wrap as two's complement.
    double f = -0.0;
    std::uint64_t i = 0;
    for (std::int64_t s = 0; s < n; ++s) {
      const std::int64_t at = base + (reverse ? n - 1 - s : s) * inner;
      const Number v = load_number(x, at);
      if (exclusive) store_number(o, at, {s == 0 ? 0.0 : f, static_cast<std::int64_t>(i)});
      f += v.f;
      i += static_cast<std::uint64_t>(v.i);
      if (!exclusive) store_number(o, at, {f, static_cast<std::int64_t>(i)});
    }
  }
}

namespace {

/// top_k's order: a before b when a's value is better (larger, or smaller with !largest;
/// NaN above every number, as in PyTorch), ties by the lower index. A strict total order.
struct TopKOrder {
  const View& x;
  std::int64_t base, stride;
  bool largest, ints;
  bool before(std::int64_t a, std::int64_t b) const {
    const Number u = load_number(x, base + a * stride), v = load_number(x, base + b * stride);
    if (ints) {
      if (u.i != v.i) return largest ? u.i > v.i : u.i < v.i;
    } else {
      const bool un = u.f != u.f, vn = v.f != v.f;
      if (un != vn) return largest ? un : vn;
      if (!un && u.f != v.f) return largest ? u.f > v.f : u.f < v.f;
    }
    return a < b;
  }
};

/// The index in slot \p j of an i64 output line (base, stride).
struct IndexLine {
  std::byte* data;
  std::int64_t base, stride;
  std::int64_t get(std::int64_t j) const {
    std::int64_t v;
    std::memcpy(&v, data + static_cast<std::size_t>(base + j * stride) * 8, 8);
    return v;
  }
  void set(std::int64_t j, std::int64_t v) const {
    std::memcpy(data + static_cast<std::size_t>(base + j * stride) * 8, &v, 8);
  }
};

/// Restores the heap below slot \p j of \p n (the worst of the kept at the root).
void sift_down(const IndexLine& h, const TopKOrder& ord, std::int64_t j, std::int64_t n) {
  for (;;) {
    std::int64_t worst = j;
    for (std::int64_t c = 2 * j + 1; c <= 2 * j + 2 && c < n; ++c)
      if (ord.before(h.get(worst), h.get(c))) worst = c;
    if (worst == j) return;
    const std::int64_t t = h.get(j);
    h.set(j, h.get(worst));
    h.set(worst, t);
    j = worst;
  }
}

}  // namespace

/// Per line: a heap of the k best indices seen, kept in the indices' own output line (no
/// scratch), then sorted in place, best first; the values are read through them.
void top_k(const Launch& l) {
  const View &x = l.in[0], &values = l.out[0], &indices = l.out[1];
  const std::size_t axis = axis_of(l.view().find("axis")->as_int(), x.shape.size());
  const std::int64_t k = l.view().find("k")->as_int(), n = x.shape[axis];
  if (k > n)
    throw UserError(cat(l.view().describe(), ": k = ", k, " is more than the ", n,
                        " elements along axis ", axis));
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (std::size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const bool largest = l.view().find("largest")->as_bool(), ints = !is_floating(x.dtype);
  const auto [first, last] = block_range(outer * inner);
  for (std::int64_t line = first; line < last; ++line) {
    const std::int64_t outer_i = line / inner, inner_i = line % inner;
    const TopKOrder ord{x, outer_i * n * inner + inner_i, inner, largest, ints};
    const IndexLine h{indices.data, outer_i * k * inner + inner_i, inner};
    if (k == 0) continue;
    for (std::int64_t i = 0; i < n; ++i) {
      if (i < k) {  // filling: sift the new one up
        std::int64_t j = i;
        h.set(j, i);
        while (j > 0 && ord.before(h.get((j - 1) / 2), h.get(j))) {
          const std::int64_t p = (j - 1) / 2, t = h.get(p);
          h.set(p, h.get(j));
          h.set(j, t);
          j = p;
        }
      } else if (ord.before(i, h.get(0))) {
        h.set(0, i);
        sift_down(h, ord, 0, k);
      }
    }
    for (std::int64_t m = k; m-- > 1;) {  // the worst to the end, repeatedly: best first
      const std::int64_t t = h.get(0);
      h.set(0, h.get(m));
      h.set(m, t);
      sift_down(h, ord, 0, m);
    }
    for (std::int64_t j = 0; j < k; ++j)
      copy_element(values, outer_i * k * inner + inner_i + j * inner, x,
                   ord.base + h.get(j) * inner);
  }
}

}  // namespace kiln::compiler::kernel
