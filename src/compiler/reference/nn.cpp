// The reference evaluators of conv, conv_transpose, max_pool and avg_pool: the sums and
// windows of their definitions, tap by tap in double, written apart from the kernels
// (cpu/conv_kernels.cpp) that they check.

#include <cmath>
#include <limits>

#include "compiler/reference/support.hpp"

namespace kiln::reference {
namespace {

/// The geometry attributes of a window op over \p x, one entry per spatial dim.
struct Geometry {
  Index kernel, stride, dilation, pad_begin;
  std::size_t spatial = 0;
};

Geometry geometry_of(const OpArgs& a, const Index& kernel) {
  Geometry g;
  g.spatial = kernel.size();
  g.kernel = kernel;
  g.stride = a.attr("strides").as_int_array();
  g.dilation = a.attr("dilations").as_int_array();
  const Index pads = a.attr("pads").as_int_array();
  g.pad_begin.assign(pads.begin(), pads.begin() + static_cast<long>(g.spatial));
  return g;
}

std::int64_t flat_of(const Index& idx, const Index& shape) {
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

Array zeros(DType dtype, const Index& shape) {
  return {dtype, shape, std::vector<Num>(static_cast<std::size_t>(count(shape)))};
}

/// conv: out[n, m, o] = bias[m] + sum over the group's channels c and taps k of
/// x[n, c, o * stride - pad + k * dilation] w[m, c - first, k] (taps in the pads add 0).
std::vector<Array> conv(const OpArgs& a) {
  const Array &x = *a.in[0], &w = *a.in[1];
  const Index kernel(w.shape.begin() + 2, w.shape.end());
  const Geometry g = geometry_of(a, kernel);
  const std::int64_t groups = a.attr("groups").as_int();
  const std::int64_t per_group_in = w.shape[1], per_group_out = w.shape[0] / groups;
  const Index taps(w.shape.begin() + 1, w.shape.end());
  Array out = zeros(a.out_dtype(), a.ctx.resolve(a.graph.type(a.op.result(0)).shape));
  for_each_index(out.shape, [&](const Index& o, std::int64_t flat) {
    const std::int64_t m = o[1], first = m / per_group_out * per_group_in;
    double sum = a.in.size() > 2 ? a.in[2]->data[static_cast<std::size_t>(m)].f : 0.0;
    Index xi(x.shape.size()), wi(w.shape.size());
    xi[0] = o[0];
    wi[0] = m;
    // One output channel's taps, w[m]: an input channel of the group, then kernel dims.
    for_each_index(taps, [&](const Index& tap, std::int64_t) {
      bool inside = true;
      for (std::size_t d = 0; d < g.spatial; ++d) {
        const std::int64_t at =
            o[2 + d] * g.stride[d] - g.pad_begin[d] + tap[1 + d] * g.dilation[d];
        inside = inside && at >= 0 && at < x.shape[2 + d];
        xi[2 + d] = at;
        wi[2 + d] = tap[1 + d];
      }
      if (!inside) return;
      xi[1] = first + tap[0];
      wi[1] = tap[0];
      sum += x.data[static_cast<std::size_t>(flat_of(xi, x.shape))].f *
             w.data[static_cast<std::size_t>(flat_of(wi, w.shape))].f;
    });
    out.data[static_cast<std::size_t>(flat)] = fit(out.dtype, {sum, 0}, true);
  });
  return {out};
}

/// conv_transpose: each x[n, c, i] times w[c, j, k] lands on out[n, group's first + j,
/// i * stride - pad + k * dilation], where that is inside the output; plus the bias.
std::vector<Array> conv_transpose(const OpArgs& a) {
  const Array &x = *a.in[0], &w = *a.in[1];
  const Index kernel(w.shape.begin() + 2, w.shape.end());
  const Geometry g = geometry_of(a, kernel);
  const std::int64_t groups = a.attr("groups").as_int();
  const std::int64_t per_group_in = x.shape[1] / groups, per_group_out = w.shape[1];
  const Index out_shape = a.ctx.resolve(a.graph.type(a.op.result(0)).shape);
  std::vector<double> sum(static_cast<std::size_t>(count(out_shape)), 0.0);
  Index oi(out_shape.size()), wi(w.shape.size());
  for_each_index(x.shape, [&](const Index& xi, std::int64_t xflat) {
    const double v = x.data[static_cast<std::size_t>(xflat)].f;
    const std::int64_t c = xi[1], first = c / per_group_in * per_group_out;
    for (std::int64_t j = 0; j < per_group_out; ++j)
      for_each_index(kernel, [&](const Index& k, std::int64_t) {
        oi[0] = xi[0];
        oi[1] = first + j;
        for (std::size_t d = 0; d < g.spatial; ++d) {
          oi[2 + d] = xi[2 + d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
          if (oi[2 + d] < 0 || oi[2 + d] >= out_shape[2 + d]) return;
          wi[2 + d] = k[d];
        }
        wi[0] = c;
        wi[1] = j;
        sum[static_cast<std::size_t>(flat_of(oi, out_shape))] +=
            v * w.data[static_cast<std::size_t>(flat_of(wi, w.shape))].f;
      });
  });
  Array out = zeros(a.out_dtype(), out_shape);
  for_each_index(out_shape, [&](const Index& o, std::int64_t flat) {
    const double bias = a.in.size() > 2 ? a.in[2]->data[static_cast<std::size_t>(o[1])].f : 0.0;
    out.data[static_cast<std::size_t>(flat)] =
        fit(out.dtype, {sum[static_cast<std::size_t>(flat)] + bias, 0}, true);
  });
  return {out};
}

/// max_pool and avg_pool: each output's taps o * stride - pad + k * dilation; a max of
/// those inside x (a NaN wins), or their mean, over the taps inside x or, counting the
/// pads, over the taps inside the padded input [-pad_begin, size + pad_end).
std::vector<Array> pool(const OpArgs& a, bool average) {
  const Array& x = *a.in[0];
  const Geometry g = geometry_of(a, a.attr("kernel_shape").as_int_array());
  const Index pads = a.attr("pads").as_int_array();
  const bool include_pad = average && a.attr("count_include_pad").as_bool();
  Array out = zeros(a.out_dtype(), a.ctx.resolve(a.graph.type(a.op.result(0)).shape));
  const bool on_floats = floating(x);
  for_each_index(out.shape, [&](const Index& o, std::int64_t flat) {
    Index xi{o[0], o[1]};
    xi.resize(x.shape.size());
    double sum = 0, best = -std::numeric_limits<double>::infinity();
    std::int64_t best_int = std::numeric_limits<std::int64_t>::min(), taps = 0, padded_taps = 0;
    bool nan = false;
    for_each_index(g.kernel, [&](const Index& k, std::int64_t) {
      bool inside = true, in_padding_range = true;
      for (std::size_t d = 0; d < g.spatial; ++d) {
        const std::int64_t at = o[2 + d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
        inside = inside && at >= 0 && at < x.shape[2 + d];
        in_padding_range =
            in_padding_range && at >= -g.pad_begin[d] && at < x.shape[2 + d] + pads[g.spatial + d];
        xi[2 + d] = at;
      }
      if (in_padding_range) ++padded_taps;
      if (!inside) return;
      ++taps;
      const Num v = x.data[static_cast<std::size_t>(flat_of(xi, x.shape))];
      if (!on_floats) {
        best_int = std::max(best_int, v.i);
      } else if (std::isnan(v.f)) {
        nan = true;
      } else {
        best = std::max(best, v.f);
        sum += v.f;
      }
    });
    Num r{};
    if (!on_floats) {
      r.i = best_int;
    } else if (nan) {
      r.f = std::numeric_limits<double>::quiet_NaN();
    } else if (average) {
      r.f = sum / static_cast<double>(include_pad ? padded_taps : taps);
    } else {
      r.f = best;
    }
    out.data[static_cast<std::size_t>(flat)] = fit(out.dtype, r, on_floats);
  });
  return {out};
}

}  // namespace

void add_nn_evaluators(std::unordered_map<std::string, Evaluator>& m) {
  m["kiln.conv"] = conv;
  m["kiln.conv_transpose"] = conv_transpose;
  m["kiln.max_pool"] = [](const OpArgs& a) { return pool(a, false); };
  m["kiln.avg_pool"] = [](const OpArgs& a) { return pool(a, true); };
}

}  // namespace kiln::reference
