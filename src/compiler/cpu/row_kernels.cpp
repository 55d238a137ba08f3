// Reductions, argmax, softmax and layer/RMS norms: f32 rows and columns through the vector
// math, split over the launch's blocks; other dtypes and layouts by a general path.

#include <cmath>
#include <limits>
#include <optional>

#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/vector_math.hpp"
#include "core/str.hpp"
#include "kiln/core/cpu_isa.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler::kernel {

using kiln::detail::cat;

bool f32_last_axis_rows(const Launch& l, std::size_t axis) {
  const View &x = l.in[0], &o = l.out[0];
  return x.dtype == DType::f32 && o.dtype == DType::f32 && !x.shape.empty() &&
         axis == x.shape.size() - 1 && x.shape.back() > 0;
}

bool f32_rows_norm(const Launch& l, bool rms) {
  return f32_last_axis_rows(l, l.in[0].shape.empty() ? 0 : l.in[0].shape.size() - 1) &&
         l.in[1].dtype == DType::f32 && (rms || l.in[2].dtype == DType::f32);
}

namespace {

enum class Reduce { sum, mean, max, min, prod };

/// A reduction's input as [outer, reduced, inner] (dims merged; size-1 dims go anywhere),
/// or nullopt when the reduced axes are not one run of dims.
struct ReduceShape {
  std::int64_t outer = 1, reduced = 1, inner = 1;
};
std::optional<ReduceShape> reduce_shape(const Launch& l) {
  const Dims shape = l.in[0].shape;
  if (shape.size() > 64) return std::nullopt;
  std::uint64_t reduced = 0;  // bit d: axis d is reduced
  for (std::int64_t a : l.view().find("axes")->as_int_array())
    reduced |= std::uint64_t{1} << axis_of(a, shape.size());
  ReduceShape r;
  int phase = 0;  // 0: before the reduced run, 1: in it, 2: after it
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (reduced >> d & 1) {
      if (phase == 2) return std::nullopt;
      phase = 1;
      r.reduced *= shape[d];
    } else if (phase == 0) {
      r.outer *= shape[d];
    } else {
      phase = 2;
      r.inner *= shape[d];
    }
  }
  return r;
}

/// f32 reductions over [outer, reduced, inner]: sums and products in double, max/min propagating
/// NaN (as PyTorch). Rows (inner 1) through the vector math, columns a chunk of accumulators at a
/// time; the blocks split outer × column chunks.
template <Reduce R>
void reduce_f32(const Launch& l, const ReduceShape& s) {
  const auto* x = reinterpret_cast<const float*>(l.in[0].data);
  auto* o = reinterpret_cast<float*>(l.out[0].data);
  const auto finish = [&](double acc) {
    return static_cast<float>(R == Reduce::mean ? acc / static_cast<double>(s.reduced) : acc);
  };
  if (s.inner == 1) {
    const auto [first, last] = block_range(s.outer);
    for (std::int64_t r = first; r < last; ++r) {
      const float* row = x + r * s.reduced;
      const auto n = static_cast<std::size_t>(s.reduced);
      if constexpr (R == Reduce::max) {
        o[r] = vmath::max(row, n);
      } else if constexpr (R == Reduce::min) {
        float m = INFINITY;
        for (std::size_t i = 0; i < n; ++i) m = row[i] < m || row[i] != row[i] ? row[i] : m;
        o[r] = m;
      } else if constexpr (R == Reduce::prod) {
        double p = 1;
        for (std::size_t i = 0; i < n; ++i) p *= row[i];
        o[r] = static_cast<float>(p);
      } else {
        o[r] = finish(vmath::sum(row, n));
      }
    }
    return;
  }
  constexpr std::int64_t kChunk = 256;  // columns per unit of work
  const std::int64_t chunks = (s.inner + kChunk - 1) / kChunk;
  const auto [first, last] = block_range(s.outer * chunks);
  for (std::int64_t unit = first; unit < last; ++unit) {
    const std::int64_t i = unit / chunks, j0 = unit % chunks * kChunk;
    const std::int64_t width = std::min(kChunk, s.inner - j0);
    const float* base = x + i * s.reduced * s.inner + j0;
    float* out = o + i * s.inner + j0;
    if constexpr (R == Reduce::max || R == Reduce::min) {
      std::array<float, kChunk> m;
      std::fill(m.begin(), m.end(), R == Reduce::max ? -INFINITY : INFINITY);
      for (std::int64_t r = 0; r < s.reduced; ++r)
        for (std::int64_t j = 0; j < width; ++j) {
          const float v = base[r * s.inner + j];
          if constexpr (R == Reduce::max) {
            m[j] = m[j] < v || v != v ? v : m[j];
          } else {
            m[j] = v < m[j] || v != v ? v : m[j];
          }
        }
      std::copy(m.begin(), m.begin() + width, out);
    } else if constexpr (R == Reduce::prod) {
      std::array<double, kChunk> acc;
      acc.fill(1.0);
      for (std::int64_t r = 0; r < s.reduced; ++r)
        for (std::int64_t j = 0; j < width; ++j) acc[j] *= base[r * s.inner + j];
      for (std::int64_t j = 0; j < width; ++j) out[j] = static_cast<float>(acc[j]);
    } else {
      std::array<double, kChunk> acc{};
      for (std::int64_t r = 0; r < s.reduced; ++r)
        for (std::int64_t j = 0; j < width; ++j) acc[j] += base[r * s.inner + j];
      for (std::int64_t j = 0; j < width; ++j) out[j] = finish(acc[j]);
    }
  }
}

template <Reduce R>
void reduce_of(const Launch& l) {
  const View &x = l.in[0], &o = l.out[0];
  if ((R == Reduce::max || R == Reduce::min) && elements(o.shape) > 0 && elements(x.shape) == 0)
    throw UserError(cat(l.view().describe(), ": ", R == Reduce::max ? "max" : "min",
                        " over an empty axis has no value (the reduced dims are empty)"));
  if (x.dtype == DType::f32 && o.dtype == DType::f32) {
    if (const std::optional<ReduceShape> s = reduce_shape(l)) {
      reduce_f32<R>(l, *s);
      return;
    }
  }
  if (kiln::block_idx().x != 0) return;  // the general path runs on one block
  std::vector<bool> reduced(x.shape.size(), false);
  for (std::int64_t a : l.view().find("axes")->as_int_array())
    reduced[axis_of(a, x.shape.size())] = true;
  Index kept = to_index(x.shape), ost(x.shape.size(), 0);
  std::int64_t per = 1;
  for (std::size_t d = 0; d < x.shape.size(); ++d)
    if (reduced[d]) {
      kept[d] = 1;
      per *= x.shape[d];
    }
  const Index kst = strides_of(kept);
  for (std::size_t d = 0; d < x.shape.size(); ++d) ost[d] = reduced[d] ? 0 : kst[d];
  // Floats in double (max and min propagate NaN); integers exactly (sums wrap at 64 bits,
  // then to the dtype's width). Max and min start from the first element of each output.
  const bool ints = !is_floating(x.dtype);
  std::vector<Number> acc(static_cast<std::size_t>(elements(kept)),
                          R == Reduce::prod ? Number{1.0, 1} : Number{});  // 1 over no elements
  std::vector<bool> started(acc.size(), R == Reduce::sum || R == Reduce::mean || R == Reduce::prod);
  for_each_element(x.shape, {ost}, [&](std::int64_t i, const std::vector<std::int64_t>& off) {
    const auto at = static_cast<std::size_t>(off[0]);
    Number& a = acc[at];
    const Number v = load_number(x, i);
    if (!started[at]) {
      a = v;
      started[at] = true;
    } else if (R == Reduce::prod) {
      if (ints)
        a.i = static_cast<std::int64_t>(static_cast<std::uint64_t>(a.i) *
                                        static_cast<std::uint64_t>(v.i));
      else
        a.f *= v.f;
    } else if (ints) {
      a.i = R == Reduce::max   ? std::max(a.i, v.i)
            : R == Reduce::min ? std::min(a.i, v.i)
                               : static_cast<std::int64_t>(static_cast<std::uint64_t>(a.i) +
                                                           static_cast<std::uint64_t>(v.i));
    } else if (R == Reduce::max || R == Reduce::min) {
      if (a.f == a.f && (v.f != v.f || (R == Reduce::max ? a.f < v.f : v.f < a.f))) a = v;
    } else {
      a.f += v.f;
    }
  });
  // (Every output has an element: an empty input with outputs was refused above.)
  for (std::size_t i = 0; i < acc.size(); ++i) {
    if (R == Reduce::mean) acc[i].f /= static_cast<double>(per);  // floats only (verified)
    store_number(o, static_cast<std::int64_t>(i), acc[i]);
  }
}

/// Calls line(offset, stride, count) for every line of \p shape along \p axis, in the
/// order of the remaining indices.
template <class F>
void lines(Dims shape, std::size_t axis, F&& line) {
  const Index st = strides_of(shape);
  Index outer = to_index(shape);
  outer[axis] = 1;
  Index ost = st;
  ost[axis] = 0;
  for_each_element(outer, {ost}, [&](std::int64_t i, const std::vector<std::int64_t>& off) {
    line(i, off[0], st[axis], shape[axis]);
  });
}

template <bool Log>
void softmax_f32(const Launch& l) {
  const std::int64_t n = l.in[0].shape.back(), rows = elements(l.in[0].shape) / n;
  const auto [first, last] = block_range(rows);
  for (std::int64_t r = first; r < last; ++r) {
    const float* x = reinterpret_cast<const float*>(l.in[0].data) + r * n;
    float* y = reinterpret_cast<float*>(l.out[0].data) + r * n;
    const auto count = static_cast<std::size_t>(n);
    if (Log) {
      const float mx = vmath::max(x, count);
      vmath::binary(vmath::Binary::sub, x, 1, &mx, 0, y, count);
      Scratch<float, 4096> e(count);  // rows of up to 4096 on the stack
      vmath::unary(vmath::Unary::exp, y, e.data(), count);
      const auto log_sum = static_cast<float>(std::log(vmath::sum(e.data(), count)));
      vmath::binary(vmath::Binary::sub, y, 1, &log_sum, 0, y, count);
    } else {
      vmath::softmax_row(x, y, count);
      // Read only by emulated bf16 batched matmuls (attention's context): rounded for them.
      if (l.out_bf16) vmath::round_bf16_f32(y, y, count, 1.0f);
    }
  }
}

template <bool Log>
void softmax_of(const Launch& l) {
  const View &x = l.in[0], &o = l.out[0];
  if (f32_last_axis_rows(l, axis_of(l.view().find("axis")->as_int(), x.shape.size()))) {
    softmax_f32<Log>(l);
    return;
  }
  lines(x.shape, axis_of(l.view().find("axis")->as_int(), x.shape.size()),
        [&](std::int64_t, std::int64_t base, std::int64_t stride, std::int64_t n) {
          double mx = -std::numeric_limits<double>::infinity(), sum = 0;
          for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, load(x, base + i * stride));
          for (std::int64_t i = 0; i < n; ++i) sum += std::exp(load(x, base + i * stride) - mx);
          for (std::int64_t i = 0; i < n; ++i) {
            const double v = load(x, base + i * stride) - mx;
            store(o, base + i * stride, Log ? v - std::log(sum) : std::exp(v) / sum);
          }
        });
}

/// f32 rows: statistics in double, y = (x - mean) · scale · gamma + beta in f32 (see
/// `vmath::normalize_row`; then, with `out_bf16`, rounded to bf16: bf16 values with bf16
/// units, else f32 values rounded in place, as the emulated bf16 GEMMs read them).
template <bool Rms>
void norm_f32(const Launch& l, double eps) {
  const std::int64_t n = l.in[0].shape.back(), rows = elements(l.in[0].shape) / n;
  const auto* gamma = reinterpret_cast<const float*>(l.in[1].data);
  const auto* beta = Rms ? nullptr : reinterpret_cast<const float*>(l.in[2].data);
  const auto [first, last] = block_range(rows);
  const bool native_bf16 = l.out_bf16 && has_native_bf16();  // else the f32 GEMMs' rounding
  for (std::int64_t r = first; r < last; ++r) {
    const float* x = reinterpret_cast<const float*>(l.in[0].data) + r * n;
    const auto count = static_cast<std::size_t>(n);
    const double mean = Rms ? 0.0 : vmath::sum(x, count) / static_cast<double>(n);
    const double var = vmath::sum_squares(x, count, mean);
    const double scale = 1 / std::sqrt(var / static_cast<double>(n) + eps);
    if (l.out_bf16 && !native_bf16) {  // bf16-exact f32 values for emulated bf16 matmuls
      float* out = reinterpret_cast<float*>(l.out[0].data) + r * n;
      vmath::normalize_row(x, mean, scale, gamma, beta, out, count);
      vmath::round_bf16_f32(out, out, count, 1.0f);
    } else if (l.out_bf16) {  // normalised into a stack buffer, a piece at a time, then rounded
      std::array<float, 1024> y;
      auto* out = reinterpret_cast<std::uint16_t*>(l.out[0].data) + r * n;
      for (std::size_t c0 = 0; c0 < count; c0 += y.size()) {
        const std::size_t piece = std::min(y.size(), count - c0);
        vmath::normalize_row(x + c0, mean, scale, gamma + c0, beta ? beta + c0 : nullptr, y.data(),
                             piece);
        vmath::round_bf16(y.data(), out + c0, piece);
      }
    } else {
      vmath::normalize_row(x, mean, scale, gamma, beta,
                           reinterpret_cast<float*>(l.out[0].data) + r * n, count);
    }
  }
}

template <bool Rms>
void norm_of(const Launch& l) {
  const View &x = l.in[0], &o = l.out[0], &gamma = l.in[1];
  const double eps = l.view().find("eps")->as_float();
  if (f32_rows_norm(l, Rms)) {
    norm_f32<Rms>(l, eps);
    return;
  }
  const std::int64_t n = x.shape.empty() ? 1 : x.shape.back();
  const std::int64_t rows = n == 0 ? 0 : elements(x.shape) / n;
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    if (!Rms) {
      for (std::int64_t i = 0; i < n; ++i) mean += load(x, r * n + i);
      mean /= static_cast<double>(n);
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = load(x, r * n + i) - mean;
      var += d * d;
    }
    const double scale = 1 / std::sqrt(var / static_cast<double>(n) + eps);
    for (std::int64_t i = 0; i < n; ++i)
      store(o, r * n + i,
            (load(x, r * n + i) - mean) * scale * load(gamma, i) + (Rms ? 0 : load(l.in[2], i)));
  }
}

}  // namespace

void argmax(const Launch& l) {
  const View &x = l.in[0], &o = l.out[0];
  lines(x.shape, axis_of(l.view().find("axis")->as_int(), x.shape.size()),
        [&](std::int64_t line, std::int64_t base, std::int64_t stride, std::int64_t n) {
          // The first largest element, or the first NaN (as PyTorch); integers exactly.
          if (n == 0)
            throw UserError(cat(l.view().describe(), ": argmax over an empty axis has no value"));
          std::int64_t best = 0;
          Number top = load_number(x, base);
          const bool ints = !is_floating(x.dtype);
          for (std::int64_t i = 1; i < n && (ints || top.f == top.f); ++i) {
            const Number v = load_number(x, base + i * stride);
            if (ints ? v.i > top.i : (v.f > top.f || v.f != v.f)) best = i, top = v;
          }
          store_number(o, line, Number{0, best});
        });
}

void reduce_sum(const Launch& l) { reduce_of<Reduce::sum>(l); }
void reduce_mean(const Launch& l) { reduce_of<Reduce::mean>(l); }
void reduce_max(const Launch& l) { reduce_of<Reduce::max>(l); }
void reduce_min(const Launch& l) { reduce_of<Reduce::min>(l); }
void reduce_prod(const Launch& l) { reduce_of<Reduce::prod>(l); }
void softmax(const Launch& l) { softmax_of<false>(l); }
void log_softmax(const Launch& l) { softmax_of<true>(l); }
void layer_norm(const Launch& l) { norm_of<false>(l); }
void rms_norm(const Launch& l) { norm_of<true>(l); }

}  // namespace kiln::compiler::kernel
