// The reference evaluators of gather_elements, gather_nd and cumsum: loops over
// multi-indices, written apart from the kernels (cpu/index_kernels.cpp) that they check.

#include <algorithm>
#include <cmath>
#include <string>

#include "compiler/reference/support.hpp"

namespace kiln::reference {
namespace {

/// \p id of a dim of \p size with negatives from the end. \throws UserError naming the op.
std::int64_t in_range(const OpArgs& a, std::int64_t id, std::int64_t size) {
  if (id < -size || id >= size)
    throw UserError(cat("reference: ", a.op.describe(), ": index ", id, " is outside [", -size,
                        ", ", size, ")"));
  return id < 0 ? id + size : id;
}

std::int64_t flat_of(const Index& idx, const Index& shape) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

std::vector<Array> gather_elements(const OpArgs& a) {
  const Array &x = *a.in[0], &ids = *a.in[1];
  const std::size_t axis = axis_of(a.attr("axis").as_int(), x.shape.size());
  for (std::size_t d = 0; d < x.shape.size(); ++d)
    if (d != axis && ids.shape[d] > x.shape[d])
      throw UserError(cat("reference: ", a.op.describe(), ": indices do not fit in x at axis ", d));
  Array out{a.out_dtype(), ids.shape, std::vector<Num>(static_cast<std::size_t>(count(ids.shape)))};
  for_each_index(ids.shape, [&](const Index& idx, std::int64_t flat) {
    Index at = idx;
    at[axis] = in_range(a, ids.data[static_cast<std::size_t>(flat)].i, x.shape[axis]);
    out.data[static_cast<std::size_t>(flat)] =
        x.data[static_cast<std::size_t>(flat_of(at, x.shape))];
  });
  return {out};
}

std::vector<Array> gather_nd(const OpArgs& a) {
  const Array &x = *a.in[0], &ids = *a.in[1];
  const auto b = static_cast<std::size_t>(a.attr("batch_dims").as_int());
  const auto k = static_cast<std::size_t>(ids.shape.back());
  Index out_shape(ids.shape.begin(), ids.shape.end() - 1);
  out_shape.insert(out_shape.end(), x.shape.begin() + static_cast<long>(b + k), x.shape.end());
  Array out{a.out_dtype(), out_shape, std::vector<Num>(static_cast<std::size_t>(count(out_shape)))};
  const std::size_t tuple_rank = ids.shape.size() - 1;  // the output dims that pick a tuple
  for_each_index(out_shape, [&](const Index& idx, std::int64_t flat) {
    Index at(x.shape.size());
    for (std::size_t d = 0; d < b; ++d) at[d] = idx[d];  // batch dims: the same in both
    Index tuple(idx.begin(), idx.begin() + static_cast<long>(tuple_rank));
    tuple.push_back(0);
    for (std::size_t j = 0; j < k; ++j) {
      tuple.back() = static_cast<std::int64_t>(j);
      at[b + j] = in_range(a, ids.data[static_cast<std::size_t>(flat_of(tuple, ids.shape))].i,
                           x.shape[b + j]);
    }
    for (std::size_t d = b + k; d < x.shape.size(); ++d) at[d] = idx[tuple_rank + d - b - k];
    out.data[static_cast<std::size_t>(flat)] =
        x.data[static_cast<std::size_t>(flat_of(at, x.shape))];
  });
  return {out};
}

/// What a scatter's update does to the element it lands on (floats in double, NaN
/// propagating through max and min; integers wrapping).
Num combined(const std::string& mode, const Num& old, const Num& update, bool on_floats) {
  if (mode == "none") return update;
  if (on_floats) {
    const double a = old.f, b = update.f;
    if (mode == "add") return {a + b, 0};
    if (mode == "mul") return {a * b, 0};
    if (std::isnan(a) || std::isnan(b)) return {std::isnan(a) ? a : b, 0};
    return {mode == "max" ? std::max(a, b) : std::min(a, b), 0};
  }
  const std::int64_t a = old.i, b = update.i;
  if (mode == "add") return {0, wrapped(bits(a) + bits(b))};
  if (mode == "mul") return {0, wrapped(bits(a) * bits(b))};
  return {0, mode == "max" ? std::max(a, b) : std::min(a, b)};
}

std::string reduction_of(const OpArgs& a) {
  const ir::Attribute* r = a.op.find("reduction");
  return r == nullptr ? "none" : r->as_string();
}

/// x, then each update in order written at x's element whose index along the axis the
/// indices give (the others: the update's own).
std::vector<Array> scatter_elements(const OpArgs& a) {
  const Array &x = *a.in[0], &ids = *a.in[1], &up = *a.in[2];
  const std::size_t axis = axis_of(a.attr("axis").as_int(), x.shape.size());
  for (std::size_t d = 0; d < x.shape.size(); ++d)
    if (d != axis && ids.shape[d] > x.shape[d])
      throw UserError(cat("reference: ", a.op.describe(), ": indices do not fit in x at axis ", d));
  const std::string mode = reduction_of(a);
  Array out{a.out_dtype(), x.shape, x.data};
  for_each_index(ids.shape, [&](const Index& idx, std::int64_t flat) {
    Index at = idx;
    at[axis] = in_range(a, ids.data[static_cast<std::size_t>(flat)].i, x.shape[axis]);
    Num& target = out.data[static_cast<std::size_t>(flat_of(at, x.shape))];
    target =
        fit(out.dtype, combined(mode, target, up.data[static_cast<std::size_t>(flat)], floating(x)),
            floating(x));
  });
  return {out};
}

/// x, then each update in order written at the element its tuple of leading indices and
/// its own trailing ones name.
std::vector<Array> scatter_nd(const OpArgs& a) {
  const Array &x = *a.in[0], &ids = *a.in[1], &up = *a.in[2];
  const auto k = static_cast<std::size_t>(ids.shape.back());
  const std::size_t tuple_rank = ids.shape.size() - 1;
  const std::string mode = reduction_of(a);
  Array out{a.out_dtype(), x.shape, x.data};
  for_each_index(up.shape, [&](const Index& idx, std::int64_t flat) {
    Index tuple(idx.begin(), idx.begin() + static_cast<long>(tuple_rank));
    tuple.push_back(0);
    Index at(x.shape.size());
    for (std::size_t j = 0; j < k; ++j) {
      tuple.back() = static_cast<std::int64_t>(j);
      at[j] =
          in_range(a, ids.data[static_cast<std::size_t>(flat_of(tuple, ids.shape))].i, x.shape[j]);
    }
    for (std::size_t d = k; d < x.shape.size(); ++d) at[d] = idx[tuple_rank + d - k];
    Num& target = out.data[static_cast<std::size_t>(flat_of(at, x.shape))];
    target =
        fit(out.dtype, combined(mode, target, up.data[static_cast<std::size_t>(flat)], floating(x)),
            floating(x));
  });
  return {out};
}

std::vector<Array> cumsum(const OpArgs& a) {
  const Array& x = *a.in[0];
  const std::size_t axis = axis_of(a.attr("axis").as_int(), x.shape.size());
  const auto flag = [&](const char* name) {
    const ir::Attribute* f = a.op.find(name);
    return f != nullptr && f->as_bool();
  };
  const bool exclusive = flag("exclusive"), reverse = flag("reverse");
  const bool from_float = floating(x);
  Array out{a.out_dtype(), x.shape, std::vector<Num>(x.data.size())};
  for_each_index(x.shape, [&](const Index& idx, std::int64_t flat) {
    // The elements before this one in the scan's order (from the end when reversed), and
    // this one unless exclusive, added in that order; the first one as it is (so that a
    // lone -0.0 stays -0.0); no element at all: +0.
    const std::int64_t n = x.shape[axis], here = idx[axis];
    Num sum{};
    std::uint64_t isum = 0;
    bool first = true;
    Index at = idx;
    for (std::int64_t step = 0; step < n; ++step) {
      const std::int64_t s = reverse ? n - 1 - step : step;
      if (s == here && exclusive) break;
      at[axis] = s;
      const Num v = x.data[static_cast<std::size_t>(flat_of(at, x.shape))];
      sum.f = first ? v.f : sum.f + v.f;
      isum += bits(v.i);
      first = false;
      if (s == here) break;
    }
    sum.i = wrapped(isum);
    out.data[static_cast<std::size_t>(flat)] = fit(out.dtype, sum, from_float);
  });
  return {out};
}

}  // namespace

/// The k best of each line along the axis: all of the line sorted (stably, so ties keep
/// the lower index first) by value, NaN above every number, then the first k.
std::vector<Array> top_k(const OpArgs& a) {
  const Array& x = *a.in[0];
  const std::size_t axis = axis_of(a.attr("axis").as_int(), x.shape.size());
  const std::int64_t k = a.attr("k").as_int();
  const bool largest = a.attr("largest").as_bool(), ints = !floating(x);
  if (k > x.shape[axis])
    throw UserError(cat("reference: ", a.op.describe(), ": k = ", k, " is more than axis ", axis,
                        "'s ", x.shape[axis]));
  Index shape = x.shape;
  shape[axis] = k;
  const auto size = static_cast<std::size_t>(count(shape));
  Array values{x.dtype, shape, std::vector<Num>(size)};
  Array indices{DType::i64, shape, std::vector<Num>(size)};
  // Rank of a value: NaN highest; larger numbers higher.
  const auto higher = [&](const Num& u, const Num& v) {
    if (ints) return u.i > v.i;
    if (std::isnan(u.f) || std::isnan(v.f)) return std::isnan(u.f) && !std::isnan(v.f);
    return u.f > v.f;
  };
  Index outer = x.shape;
  outer[axis] = 1;
  for_each_index(outer, [&](const Index& idx, std::int64_t) {
    std::vector<std::int64_t> order;
    for (std::int64_t i = 0; i < x.shape[axis]; ++i) order.push_back(i);
    const auto at = [&](std::int64_t i) {
      Index where = idx;
      where[axis] = i;
      return x.data[static_cast<std::size_t>(flat_of(where, x.shape))];
    };
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t p, std::int64_t q) {
      return largest ? higher(at(p), at(q)) : higher(at(q), at(p));
    });
    for (std::int64_t j = 0; j < k; ++j) {
      Index where = idx;
      where[axis] = j;
      const auto flat = static_cast<std::size_t>(flat_of(where, shape));
      values.data[flat] = at(order[static_cast<std::size_t>(j)]);
      indices.data[flat] = {0, order[static_cast<std::size_t>(j)]};
    }
  });
  return {values, indices};
}

void add_indexing_evaluators(std::unordered_map<std::string, Evaluator>& m) {
  m["kiln.gather_elements"] = gather_elements;
  m["kiln.gather_nd"] = gather_nd;
  m["kiln.cumsum"] = cumsum;
  m["kiln.scatter_elements"] = scatter_elements;
  m["kiln.scatter_nd"] = scatter_nd;
  m["kiln.top_k"] = top_k;
}

}  // namespace kiln::reference
