// max_pool and avg_pool over [N, C, spatial...] buffers: loops over planes (any dtype),
// f32 max pools by window rows, vectorised.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "compiler/cpu/kernel_support.hpp"

namespace kiln::compiler::kernel {

namespace {

using Geometry = WindowGeometry;

/// The taps k in [0, kernel) of a window from \p start whose positions start + k dilation
/// lie in [lo, hi): [first, last), empty when none do (worked out, not scanned: a hostile
/// kernel may have 2^31 taps).
std::pair<std::int64_t, std::int64_t> tap_range(std::int64_t start, std::int64_t dilation,
                                                std::int64_t kernel, std::int64_t lo,
                                                std::int64_t hi) {
  if (hi <= lo) return {0, 0};
  const std::int64_t below = lo - start, above = hi - 1 - start;  // k dilation in [below, above]
  if (above < 0) return {0, 0};
  const std::int64_t first = below <= 0 ? 0 : (below + dilation - 1) / dilation;
  const std::int64_t last = std::min(kernel, above / dilation + 1);
  return first < last ? std::pair{first, last} : std::pair<std::int64_t, std::int64_t>{0, 0};
}

/// The taps k in [0, kernel) that some window starting in [\p first, \p last) reaches
/// inside [0, in) with: first + k dilation <= in - 1 and last + k dilation >= 0.
std::pair<std::int64_t, std::int64_t> run_tap_range(std::int64_t first, std::int64_t last,
                                                    std::int64_t dilation, std::int64_t kernel,
                                                    std::int64_t in) {
  const std::int64_t lo = last >= 0 ? 0 : (-last + dilation - 1) / dilation;
  const std::int64_t room = in - 1 - first;  // k dilation <= room
  if (room < 0) return {0, 0};
  const std::int64_t hi = std::min(kernel, room / dilation + 1);
  return lo < hi ? std::pair{lo, hi} : std::pair<std::int64_t, std::int64_t>{0, 0};
}

/// The taps of dim \p d of \p g for output position \p o: those inside the input,
/// [lo, hi), and how many lie inside the padded input. An interior window (the common case)
/// takes no division.
struct Taps {
  std::int64_t lo = 0, hi = 0, padded = 0;
};
inline Taps taps_of(const WindowGeometry& g, std::size_t d, std::int64_t o) {
  const std::int64_t start = o * g.stride[d] - g.pad_begin[d];
  if (start >= 0 && start + (g.kernel[d] - 1) * g.dilation[d] < g.in[d])
    return {0, g.kernel[d], g.kernel[d]};
  Taps t;
  std::tie(t.lo, t.hi) = tap_range(start, g.dilation[d], g.kernel[d], 0, g.in[d]);
  const auto [p0, p1] =
      tap_range(start, g.dilation[d], g.kernel[d], -g.pad_begin[d], g.in[d] + g.pad_end[d]);
  t.padded = p1 - p0;
  return t;
}

/// Pools planes [first, last) of \p g: \p V is the value type loads give (float for f32,
/// double for other floats, int64 for integers).
template <class V, class Load, class Store>
void pool_planes(const Geometry& g, bool average, bool include_pad, std::int64_t first,
                 std::int64_t last, Load&& load_at, Store&& store_at) {
  for (std::int64_t plane = first; plane < last; ++plane) {
    const std::int64_t in_base = plane * g.in_plane(), out_base = plane * g.out_plane();
    std::int64_t written = 0;
    for (std::int64_t o0 = 0; o0 < g.out[0]; ++o0) {
      const Taps t0 = taps_of(g, 0, o0);
      for (std::int64_t o1 = 0; o1 < g.out[1]; ++o1) {
        const Taps t1 = taps_of(g, 1, o1);
        for (std::int64_t o2 = 0; o2 < g.out[2]; ++o2) {
          const Taps t2 = taps_of(g, 2, o2);
          V best = std::numeric_limits<V>::has_infinity ? -std::numeric_limits<V>::infinity()
                                                        : std::numeric_limits<V>::lowest();
          V sum = 0;
          for (std::int64_t k0 = t0.lo; k0 < t0.hi; ++k0) {
            const std::int64_t i0 = o0 * g.stride[0] - g.pad_begin[0] + k0 * g.dilation[0];
            for (std::int64_t k1 = t1.lo; k1 < t1.hi; ++k1) {
              const std::int64_t i1 = o1 * g.stride[1] - g.pad_begin[1] + k1 * g.dilation[1];
              const std::int64_t row = in_base + (i0 * g.in[1] + i1) * g.in[2];
              for (std::int64_t k2 = t2.lo; k2 < t2.hi; ++k2) {
                const V v = load_at(row + o2 * g.stride[2] - g.pad_begin[2] + k2 * g.dilation[2]);
                if (average) {
                  sum += v;
                } else {
                  // A NaN wins, and stays; a select, not a branch (ReLU'd inputs hold ties
                  // a branch would mispredict).
                  best = v > best || v != v ? v : best;
                }
              }
            }
          }
          const std::int64_t taps = (t0.hi - t0.lo) * (t1.hi - t1.lo) * (t2.hi - t2.lo);
          store_at(
              out_base + written++,
              average ? sum / static_cast<V>(include_pad ? t0.padded * t1.padded * t2.padded : taps)
                      : best);
        }
      }
    }
  }
}

/// One output row of an f32 pool: its plane's input, its outputs (`g.out[2]` of them), and
/// where it is along the outer two spatial dims, with their windows' taps.
struct PoolRow {
  const float* x = nullptr;
  float* out = nullptr;
  std::int64_t o0 = 0, o1 = 0;
  Taps t0, t1;
};

/// Calls \p f(row) for every output row of planes [first, last).
template <class F>
void for_each_pool_row(const Geometry& g, std::int64_t first, std::int64_t last, const float* in,
                       float* out, F&& f) {
  for (std::int64_t plane = first; plane < last; ++plane)
    for (std::int64_t o0 = 0; o0 < g.out[0]; ++o0) {
      const Taps t0 = taps_of(g, 0, o0);
      for (std::int64_t o1 = 0; o1 < g.out[1]; ++o1)
        f(PoolRow{.x = in + plane * g.in_plane(),
                  .out = out + plane * g.out_plane() + (o0 * g.out[1] + o1) * g.out[2],
                  .o0 = o0,
                  .o1 = o1,
                  .t0 = t0,
                  .t1 = taps_of(g, 1, o1)});
    }
}

/// Calls \p f(input_row) for each input row inside the input that \p r's windows reach.
template <class F>
void for_each_window_row(const Geometry& g, const PoolRow& r, F&& f) {
  for (std::int64_t k0 = r.t0.lo; k0 < r.t0.hi; ++k0) {
    const std::int64_t i0 = r.o0 * g.stride[0] - g.pad_begin[0] + k0 * g.dilation[0];
    for (std::int64_t k1 = r.t1.lo; k1 < r.t1.hi; ++k1) {
      const std::int64_t i1 = r.o1 * g.stride[1] - g.pad_begin[1] + k1 * g.dilation[1];
      f(r.x + (i0 * g.in[1] + i1) * g.in[2]);
    }
  }
}

/// The f32 pools: pool_planes' results (the same taps in the same order per output), a
/// run of up to kRun outputs of a row at a time, tap by tap, so that each tap is one
/// vectorisable loop over the run (strided loads) rather than scalar work per output.
void pool_planes_f32(const Geometry& g, bool average, bool include_pad, std::int64_t first,
                     std::int64_t last, const float* in, float* out) {
  constexpr std::int64_t kRun = 256;
  float acc[kRun];
  const std::int64_t s2 = g.stride[2], d2 = g.dilation[2], p2 = g.pad_begin[2];
  for_each_pool_row(g, first, last, in, out, [&](const PoolRow& r) {
    for (std::int64_t c0 = 0; c0 < g.out[2]; c0 += kRun) {
      const std::int64_t c1 = std::min(g.out[2], c0 + kRun), len = c1 - c0;
      std::fill(acc, acc + len, average ? 0.0f : -std::numeric_limits<float>::infinity());
      // The taps k2 inside the row for some output of the run (worked out, not scanned:
      // a hostile kernel may have 2^31 taps): o s2 - p2 + k2 d2 in [0, in2) for an o in
      // [c0, c1).
      const std::pair<std::int64_t, std::int64_t> run_taps =
          run_tap_range(c0 * s2 - p2, (c1 - 1) * s2 - p2, d2, g.kernel[2], g.in[2]);
      for_each_window_row(g, r, [&](const float* row) {
        for (std::int64_t k2 = run_taps.first; k2 < run_taps.second; ++k2) {
          // The outputs o of this run whose tap k2 lies inside the row:
          // 0 <= o s2 - p2 + k2 d2 < in2.
          const std::int64_t shift = k2 * d2 - p2;
          const std::int64_t lo = std::max(c0, shift >= 0 ? 0 : (-shift + s2 - 1) / s2);
          const std::int64_t top = g.in[2] - 1 - shift;
          const std::int64_t hi = top < 0 ? lo : std::min(c1, top / s2 + 1);
          const float* from = row + shift;
          if (average) {
            for (std::int64_t o = lo; o < hi; ++o) acc[o - c0] += from[o * s2];
          } else {
            for (std::int64_t o = lo; o < hi; ++o) {
              const float v = from[o * s2], best = acc[o - c0];
              acc[o - c0] = v > best || v != v ? v : best;  // a NaN wins, and stays
            }
          }
        }
      });
      for (std::int64_t o = c0; o < c1; ++o) {
        float v = acc[o - c0];
        if (average) {
          const Taps t2 = taps_of(g, 2, o);
          const std::int64_t count =
              include_pad ? r.t0.padded * r.t1.padded * t2.padded
                          : (r.t0.hi - r.t0.lo) * (r.t1.hi - r.t1.lo) * (t2.hi - t2.lo);
          v /= static_cast<float>(count);
        }
        r.out[o] = v;
      }
    }
  });
}

/// Max pools planes [first, last) by rows: per output row, the maximum over the input rows
/// its windows reach, into a row padded with -inf on both sides as far as the windows go;
/// then per tap along the row, over every output (both loops contiguous or of a fixed
/// stride, and branch-free: vectorised). A NaN wins and stays, as in pool_planes_f32.
/// ResNet-18's 3x3 stride-2 pool on an AMD EPYC (Zen 3): 1.3 -> 0.5 ms (before, nine
/// strided loads and a branch an output). \returns false, doing nothing, for rows whose
/// windows reach further than its buffer.
bool max_pool_by_rows(const Geometry& g, std::int64_t first, std::int64_t last, const float* in,
                      float* out) {
  constexpr std::int64_t kMaxRow = 4096;
  const std::int64_t width = g.in[2], left = g.pad_begin[2], s2 = g.stride[2], d2 = g.dilation[2];
  // The padded row's length: the last window's last tap, counted from the left padding.
  const double reach = static_cast<double>(g.out[2] - 1) * static_cast<double>(s2) +
                       static_cast<double>(g.kernel[2] - 1) * static_cast<double>(d2) + 1;
  if (reach > static_cast<double>(kMaxRow) || left + width > kMaxRow) return false;
  const auto span = std::max(static_cast<std::int64_t>(reach), left + width);
  float padded[kMaxRow];
  float* rows = padded + left;  // input column x at rows[x]
  std::fill(padded, padded + span, -std::numeric_limits<float>::infinity());
  // Branch-free picks (a compare and a blend; a branch on random data mispredicts).
  const auto pick = [](float v, float best) { return ((v > best) | (v != v)) ? v : best; };
  for_each_pool_row(g, first, last, in, out, [&](const PoolRow& r) {
    bool any = false;
    for_each_window_row(g, r, [&](const float* row) {
      if (!any) {
        std::copy_n(row, width, rows);
        any = true;
      } else {
        for (std::int64_t i = 0; i < width; ++i) rows[i] = pick(row[i], rows[i]);
      }
    });
    std::fill_n(r.out, g.out[2], -std::numeric_limits<float>::infinity());
    if (!any) return;  // every window in the padding
    for (std::int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
      const float* taps = padded + k2 * d2;
      for (std::int64_t o2 = 0; o2 < g.out[2]; ++o2) r.out[o2] = pick(taps[o2 * s2], r.out[o2]);
    }
  });
  return true;
}

void pool(const Launch& l, bool average) {
  const Geometry g = window_geometry(l, false);
  const ir::Attribute* include = l.view().find("count_include_pad");
  const bool include_pad = average && include != nullptr && include->as_bool();
  const View &x = l.in[0], &o = l.out[0];
  const auto [first, last] = block_range(g.n * g.c);
  if (x.dtype == DType::f32 && !average &&
      max_pool_by_rows(g, first, last, reinterpret_cast<const float*>(x.data),
                       reinterpret_cast<float*>(o.data))) {
    return;
  }
  if (x.dtype == DType::f32) {
    pool_planes_f32(g, average, include_pad, first, last, reinterpret_cast<const float*>(x.data),
                    reinterpret_cast<float*>(o.data));
  } else if (is_floating(x.dtype)) {
    pool_planes<double>(
        g, average, include_pad, first, last, [&](std::int64_t i) { return load(x, i); },
        [&](std::int64_t i, double v) { store(o, i, v); });
  } else {
    pool_planes<std::int64_t>(
        g, false, false, first, last, [&](std::int64_t i) { return load_number(x, i).i; },
        [&](std::int64_t i, std::int64_t v) {
          store_number(o, i, {0, v});
        });
  }
}

}  // namespace

void max_pool(const Launch& l) { pool(l, false); }
void avg_pool(const Launch& l) { pool(l, true); }

void prepare_pool(Launch& l, int threads) {
  const std::int64_t planes = l.in[0].shape[0] * l.in[0].shape[1];
  double work = static_cast<double>(elements(l.out[0].shape));  // double: hostile kernels
  for (std::int64_t k : l.view().find("kernel_shape")->as_int_array())
    work *= static_cast<double>(k);
  const double most = std::min<double>(static_cast<double>(planes), std::max(threads, 1));
  l.blocks = static_cast<std::uint32_t>(std::clamp(work / 16384, 1.0, std::max(most, 1.0)));
}

}  // namespace kiln::compiler::kernel
