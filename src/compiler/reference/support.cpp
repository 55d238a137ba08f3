// The reference interpreter's shared pieces (see support.hpp).

#include "compiler/reference/support.hpp"

#include <algorithm>
#include <cmath>

namespace kiln::reference {

bool floating(const Array& a) { return is_floating(a.dtype); }

std::int64_t count(const Index& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

Index strides(const Index& shape) {
  Index s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

Num fit(DType dtype, Num v, bool from_float) {
  alignas(8) std::byte slot[8];
  if (from_float) {
    store_from_double(dtype, v.f, slot);
  } else {
    store_from_int(dtype, v.i, slot);
  }
  return is_floating(dtype) ? Num{load_as_double(dtype, slot), 0}
                            : Num{0, load_as_int(dtype, slot)};
}

Array rounded(Array a) {
  for (Num& v : a.data) v = fit(a.dtype, v, is_floating(a.dtype));
  return a;
}

std::vector<Num> elements_of(const Tensor& t) {
  const std::span<const std::byte> bytes = t.bytes();
  const std::size_t size = size_of(t.dtype());
  std::vector<Num> out(bytes.size() / size);
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::byte* at = bytes.data() + k * size;
    out[k] = is_floating(t.dtype()) ? Num{load_as_double(t.dtype(), at), 0}
                                    : Num{0, load_as_int(t.dtype(), at)};
  }
  return out;
}

std::int64_t broadcast_offset(const Array& in, const Index& out_shape, const Index& idx) {
  const Index st = strides(in.shape);
  const std::size_t lead = out_shape.size() - in.shape.size();
  std::int64_t off = 0;
  for (std::size_t d = 0; d < in.shape.size(); ++d)
    if (in.shape[d] != 1) off += idx[lead + d] * st[d];
  return off;
}

Index broadcast_shape(const Index& a, const Index& b) {
  Index out(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      throw UserError(cat("reference: shapes do not broadcast (", da, " vs ", db, ")"));
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

std::size_t axis_of(std::int64_t axis, std::size_t rank) {
  return static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(rank) : axis);
}

std::string name_of(const ir::TensorType& t) { return ir::to_string(t); }

Evaluator binary(double (*f)(double, double), std::int64_t (*g)(std::int64_t, std::int64_t)) {
  return [f, g](const OpArgs& a) {
    const Array &x = *a.in[0], &y = *a.in[1];
    Array out{a.out_dtype(), broadcast_shape(x.shape, y.shape), {}};
    out.data.resize(static_cast<std::size_t>(count(out.shape)));
    const bool on_floats = floating(x);
    for_each_index(out.shape, [&](const Index& idx, std::int64_t flat) {
      const Num& u = x.data[static_cast<std::size_t>(broadcast_offset(x, out.shape, idx))];
      const Num& v = y.data[static_cast<std::size_t>(broadcast_offset(y, out.shape, idx))];
      out.data[static_cast<std::size_t>(flat)] =
          fit(out.dtype, on_floats ? Num{f(u.f, v.f), 0} : Num{0, g(u.i, v.i)}, on_floats);
    });
    return std::vector<Array>{out};
  };
}

Evaluator unary(double (*f)(double), std::int64_t (*g)(std::int64_t)) {
  return [f, g](const OpArgs& a) {
    const Array& x = *a.in[0];
    Array out{a.out_dtype(), x.shape, x.data};
    const bool on_floats = floating(x);
    for (Num& v : out.data)
      v = fit(out.dtype, on_floats ? Num{f(v.f), 0} : Num{0, g(v.i)}, on_floats);
    return std::vector<Array>{out};
  };
}

double gelu_exact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

std::int64_t wrapped(std::uint64_t x) { return static_cast<std::int64_t>(x); }

std::uint64_t bits(std::int64_t x) { return static_cast<std::uint64_t>(x); }

std::int64_t divide(std::int64_t a, std::int64_t b) {
  if (b == 0) return 0;
  return b == -1 ? wrapped(0 - bits(a)) : a / b;
}

std::int64_t power(std::int64_t a, std::int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return b % 2 == 0 ? 1 : -1;
    return 0;
  }
  std::uint64_t result = 1;
  for (std::uint64_t base = bits(a), e = bits(b); e > 0; e /= 2) {
    if (e % 2 == 1) result *= base;
    base *= base;
  }
  return wrapped(result);
}

double larger(double a, double b) { return std::isnan(a) || std::isnan(b) ? a + b : a < b ? b : a; }

double smaller(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? a + b : b < a ? b : a;
}

std::vector<Array> reduce(const OpArgs& a, Reduction kind) {
  const Array& x = *a.in[0];
  std::vector<bool> reduced(x.shape.size(), false);
  for (std::int64_t ax : a.attr("axes").as_int_array()) reduced[axis_of(ax, x.shape.size())] = true;
  const ir::Attribute* keep = a.op.find("keepdim");
  const bool keepdim = keep != nullptr && keep->as_bool();
  Index out_shape, kept;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    if (!reduced[d]) out_shape.push_back(x.shape[d]);
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
  }
  Array out{a.out_dtype(), keepdim ? kept : out_shape, {}};
  out.data.assign(static_cast<std::size_t>(count(kept)), Num{});
  if (kind == Reduction::prod)  // the product of no elements is 1
    for (Num& v : out.data) v = floating(x) ? Num{1.0, 0} : Num{0, 1};
  const bool extremum = kind == Reduction::max || kind == Reduction::min;
  std::vector<bool> seen(out.data.size(), !extremum);  // max and min start at the first
  const Index kst = strides(kept);
  std::int64_t per_output = 1;
  for (std::size_t d = 0; d < x.shape.size(); ++d)
    if (reduced[d]) per_output *= x.shape[d];
  const bool on_floats = floating(x);
  for_each_index(x.shape, [&](const Index& idx, std::int64_t flat) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < idx.size(); ++d)
      if (!reduced[d]) o += idx[d] * kst[d];
    Num& acc = out.data[static_cast<std::size_t>(o)];
    const Num& v = x.data[static_cast<std::size_t>(flat)];
    if (!seen[static_cast<std::size_t>(o)]) {
      acc = v;
      seen[static_cast<std::size_t>(o)] = true;
    } else if (kind == Reduction::prod) {
      if (on_floats) {
        acc.f *= v.f;
      } else {
        acc.i = wrapped(bits(acc.i) * bits(v.i));
      }
    } else if (!extremum) {
      if (on_floats) {
        acc.f += v.f;
      } else {
        acc.i = wrapped(bits(acc.i) + bits(v.i));
      }
    } else if (on_floats) {
      acc.f = kind == Reduction::max ? larger(acc.f, v.f) : smaller(acc.f, v.f);
    } else {
      acc.i = kind == Reduction::max ? std::max(acc.i, v.i) : std::min(acc.i, v.i);
    }
  });
  if (std::find(seen.begin(), seen.end(), false) != seen.end())
    throw UserError(cat("reference: ", a.op.describe(), ": ",
                        kind == Reduction::max ? "max" : "min", " over an empty axis"));
  if (kind == Reduction::mean)
    for (Num& v : out.data) v.f /= static_cast<double>(per_output);  // floats (verified)
  return {rounded(std::move(out))};
}

Array matmul(const Array& a0, const Array& b0, DType dtype) {
  Array a = a0, b = b0;
  if (a.shape.size() == 1) a.shape.insert(a.shape.begin(), 1);
  if (b.shape.size() == 1) b.shape.push_back(1);
  const std::int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  const Index batch = broadcast_shape(Index(a.shape.begin(), a.shape.end() - 2),
                                      Index(b.shape.begin(), b.shape.end() - 2));
  Index out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Array out{dtype, out_shape, std::vector<Num>(static_cast<std::size_t>(count(out_shape)))};
  const bool on_floats = floating(a0);
  const Array a_batch{a.dtype, Index(a.shape.begin(), a.shape.end() - 2), {}};
  const Array b_batch{b.dtype, Index(b.shape.begin(), b.shape.end() - 2), {}};
  for_each_index(batch, [&](const Index& bi, std::int64_t bflat) {
    const std::int64_t ao = broadcast_offset(a_batch, batch, bi) * m * k;
    const std::int64_t bo = broadcast_offset(b_batch, batch, bi) * k * n;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        Num s;
        for (std::int64_t p = 0; p < k; ++p) {
          const Num& u = a.data[static_cast<std::size_t>(ao + i * k + p)];
          const Num& v = b.data[static_cast<std::size_t>(bo + p * n + j)];
          if (on_floats) {
            s.f += u.f * v.f;
          } else {
            s.i = wrapped(bits(s.i) + bits(u.i) * bits(v.i));
          }
        }
        out.data[static_cast<std::size_t>((bflat * m + i) * n + j)] = s;
      }
  });
  Index final_shape = batch;
  if (a0.shape.size() > 1) final_shape.push_back(m);
  if (b0.shape.size() > 1) final_shape.push_back(n);
  out.shape = final_shape;
  return rounded(std::move(out));
}

Array concat_arrays(const std::vector<const Array*>& parts, std::size_t axis, DType dtype) {
  Index out_shape = parts[0]->shape;
  out_shape[axis] = 0;
  for (const Array* x : parts) out_shape[axis] += x->shape[axis];
  Array out{dtype, out_shape, std::vector<Num>(static_cast<std::size_t>(count(out_shape)))};
  const Index ost = strides(out_shape);
  std::int64_t offset = 0;
  for (const Array* x : parts) {
    for_each_index(x->shape, [&](const Index& idx, std::int64_t flat) {
      std::int64_t dst = 0;
      for (std::size_t d = 0; d < idx.size(); ++d)
        dst += (idx[d] + (d == axis ? offset : 0)) * ost[d];
      out.data[static_cast<std::size_t>(dst)] = x->data[static_cast<std::size_t>(flat)];
    });
    offset += x->shape[axis];
  }
  return rounded(std::move(out));
}

std::vector<Array> split_array(const Array& x, std::size_t axis, const Index& sizes) {
  const Index st = strides(x.shape);
  std::vector<Array> outs;
  std::int64_t offset = 0;
  for (std::int64_t size : sizes) {
    Index shape = x.shape;
    shape[axis] = size;
    Array out{x.dtype, shape, std::vector<Num>(static_cast<std::size_t>(count(shape)))};
    for_each_index(shape, [&](const Index& idx, std::int64_t flat) {
      std::int64_t src = 0;
      for (std::size_t d = 0; d < idx.size(); ++d)
        src += (idx[d] + (d == axis ? offset : 0)) * st[d];
      out.data[static_cast<std::size_t>(flat)] = x.data[static_cast<std::size_t>(src)];
    });
    offset += size;
    outs.push_back(std::move(out));
  }
  return outs;
}

Array sum_arrays(const std::vector<const Array*>& parts, DType dtype) {
  Array out{dtype, parts[0]->shape, std::vector<Num>(parts[0]->data.size())};
  for (const Array* x : parts)
    for (std::size_t i = 0; i < out.data.size(); ++i) {
      if (floating(out)) {
        out.data[i].f += x->data[i].f;
      } else {
        out.data[i].i = wrapped(bits(out.data[i].i) + bits(x->data[i].i));
      }
    }
  return rounded(std::move(out));
}

}  // namespace kiln::reference
