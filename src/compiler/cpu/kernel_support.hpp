#pragma once
// Internal: what the CPU kernels (kernels.cpp, data_kernels.cpp, row_kernels.cpp) share —
// element access in any dtype, index arithmetic, a launch's share of the work and stack
// scratch — and the kernels and prepare hooks each file defines for ops/kernel_defs.cpp.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernels.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln::compiler::kernel {

// ---- elements ------------------------------------------------------------------------------

inline double load(const View& v, std::int64_t i) {
  return load_as_double(v.dtype, v.data + static_cast<std::size_t>(i) * size_of(v.dtype));
}

inline void store(const View& v, std::int64_t i, double x) {
  store_from_double(v.dtype, x, v.data + static_cast<std::size_t>(i) * size_of(v.dtype));
}

/// Element \p i of \p v exactly: floats in `f`, integers and bool in `i`.
inline Number load_number(const View& v, std::int64_t i) {
  const std::byte* at = v.data + static_cast<std::size_t>(i) * size_of(v.dtype);
  return is_floating(v.dtype) ? Number{load_as_double(v.dtype, at), 0}
                              : Number{0, load_as_int(v.dtype, at)};
}

/// Stores \p x (a value of \p v's dtype, as load_number gives) as element \p i.
inline void store_number(const View& v, std::int64_t i, Number x) {
  std::byte* at = v.data + static_cast<std::size_t>(i) * size_of(v.dtype);
  if (is_floating(v.dtype)) {
    store_from_double(v.dtype, x.f, at);
  } else {
    store_from_int(v.dtype, x.i, at);
  }
}

/// \p x, computed as a float (in `f`, when \p from_float) or as an integer (in `i`), as a
/// value of \p d: what storing it and loading it back gives (an op's result, rounded).
inline Number fit_number(DType d, Number x, bool from_float) {
  alignas(8) std::byte slot[8];
  if (from_float) {
    store_from_double(d, x.f, slot);
  } else {
    store_from_int(d, x.i, slot);
  }
  return load_number(View{slot, d, {}, {}}, 0);
}

/// \p x (of dtype \p from) converted to \p to as kiln.cast does (one rounding).
inline Number cast_number(DType from, Number x, DType to) {
  alignas(8) std::byte in[8], out[8];
  store_number(View{in, from, {}, {}}, 0, x);
  convert_element(from, in, to, out);
  return load_number(View{out, to, {}, {}}, 0);
}

/// Copies element \p j of \p from into element \p i of \p to: bit for bit for one dtype,
/// else converted as kiln.cast does.
inline void copy_element(const View& to, std::int64_t i, const View& from, std::int64_t j) {
  convert_element(from.dtype, from.data + static_cast<std::size_t>(j) * size_of(from.dtype),
                  to.dtype, to.data + static_cast<std::size_t>(i) * size_of(to.dtype));
}

// ---- indexing ------------------------------------------------------------------------------

inline std::int64_t elements(Dims s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}

inline Index strides_of(Dims s) {
  Index st(s.size(), 1);
  for (std::size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

/// Strides of \p in when broadcast to \p out (0 on stretched and missing dims).
inline Index broadcast_strides(Dims in, Dims out) {
  Index st(out.size(), 0);
  const Index own = strides_of(in);
  const std::size_t lead = out.size() - in.size();
  for (std::size_t d = 0; d < in.size(); ++d) st[lead + d] = in[d] == 1 ? 0 : own[d];
  return st;
}

/// Calls f(flat_out, offsets...) for every output element, with each input's offset.
template <class F>
void for_each_element(Dims out, const std::vector<Index>& in_strides, F&& f) {
  const std::int64_t n = elements(out);
  Index idx(out.size(), 0);
  std::vector<std::int64_t> off(in_strides.size(), 0);
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(flat, off);
    for (std::size_t d = out.size(); d-- > 0;) {
      ++idx[d];
      for (std::size_t k = 0; k < off.size(); ++k) off[k] += in_strides[k][d];
      if (idx[d] < out[d]) break;
      for (std::size_t k = 0; k < off.size(); ++k) off[k] -= in_strides[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

inline std::size_t axis_of(std::int64_t axis, std::size_t rank) {
  return static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(rank) : axis);
}

/// The elements [begin, end) of \p n that block `block_idx().x` of `grid_dim().x` owns,
/// in whole multiples of \p align.
inline std::pair<std::int64_t, std::int64_t> block_range(std::int64_t n, std::int64_t align = 1) {
  const std::int64_t blocks = std::max<std::int64_t>(1, kiln::grid_dim().x);
  const std::int64_t b = kiln::block_idx().x;
  const std::int64_t units = (n + align - 1) / align;
  const std::int64_t begin = units * b / blocks * align, end = units * (b + 1) / blocks * align;
  return {std::min(begin, n), std::min(end, n)};
}

/// Scratch of up to N elements on the stack, on the heap beyond: the kernels' working
/// buffers, so that a call allocates nothing whichever thread runs it (up to N).
template <class T, std::size_t N>
class Scratch {
 public:
  explicit Scratch(std::size_t n) {
    if (n > N) heap_.resize(n);
  }
  T* data() noexcept { return heap_.empty() ? stack_.data() : heap_.data(); }
  T& operator[](std::size_t i) noexcept { return data()[i]; }

 private:
  std::array<T, N> stack_;
  std::vector<T> heap_;
};

/// Index scratch: ranks up to 16 stay on the stack.
using IndexScratch = Scratch<std::int64_t, 16>;

// ---- kernels.cpp: grids ---------------------------------------------------------------------

/// How many blocks \p l's work splits into on \p threads workers (1 below ~2 K elements).
std::uint32_t blocks_for(const Launch& l, int threads);

// ---- fused_kernels.cpp: elementwise bodies ------------------------------------------------------

/// Elements per array op of an f32 body: every live tile stays in L1/L2.
constexpr std::int64_t kTile = 512;
/// Where run_fused_f32_rows reads the output of the matmul it is the epilogue of, and writes
/// its own, when that matmul keeps a block of rows in scratch (attention's scores): element
/// `at` of both at rows[at - origin], not where their views say. An input is the matmul's
/// output when its data is `matmul_out`. Default: every view where it says.
struct RowsAt {
  const std::byte* matmul_out = nullptr;
  std::int64_t origin = 0;
  float* rows = nullptr;
};
/// A fused f32 body over \p rows runs of its output, run r being the elements
/// [first + r * row_stride, first + r * row_stride + row_len) (matmul epilogues run it on
/// each output tile).
void run_fused_f32_rows(const Launch& l, std::int64_t first, std::int64_t rows,
                        std::int64_t row_len, std::int64_t row_stride, const RowsAt& at = {});

// ---- matmul_kernels.cpp: matmul ---------------------------------------------------------------

void matmul(const Launch& l);
/// Of \p rows query rows of an additive attention \p mask (row stride \p row, 0: one
/// row for all; \p t keys), the keys [0, live) the attention kernel computes: past `live`
/// every row's mask is "masked" (lowest() or -inf, as PyTorch and Hugging Face write it).
/// Only when every value is masked or "visible" (-1e30 or more, or NaN) and every row sees
/// a key: softmax then gives the keys past `live` exactly 0 for any score under 1e37 in
/// size, so leaving them out changes nothing (PyTorch's causal attention never reads them
/// either: a NaN or inf score there no longer reaches the row). \returns t otherwise.
std::int64_t live_keys(const float* mask, std::int64_t rows, std::int64_t row, std::int64_t t);
/// The matmul's layout (operands, batch, sizes; oneDNN's packed or skinny forms), its grid
/// adjusted to them.
void prepare_matmul(Launch& launch, int threads);
/// A reshape's and a transpose's strides over their operand's bytes (KernelDef::view_strides).
std::optional<Index> reshape_view_strides(const ir::OpView& op, Dims in_shape,
                                          const Index& in_strides);
std::optional<Index> transpose_view_strides(const ir::OpView& op, Dims in_shape,
                                            const Index& in_strides);

// ---- data_kernels.cpp: copies -------------------------------------------------------------

void copy_all(const Launch& l);  // a reshape that is not a view
void broadcast_to(const Launch& l);
void transpose(const Launch& l);
/// The strides a broadcast_to's or a transpose's output reads its input with
/// (`ReadStrides`, one entry).
void prepare_broadcast_to(Launch& launch, int threads);
void prepare_transpose(Launch& launch, int threads);
void slice(const Launch& l);
void concat(const Launch& l);
void split(const Launch& l);
void gather(const Launch& l);

// ---- index_kernels.cpp ---------------------------------------------------------------------

void gather_elements(const Launch& l);
void scatter_elements(const Launch& l);
void scatter_nd(const Launch& l);
void gather_nd(const Launch& l);
void cumsum(const Launch& l);
void top_k(const Launch& l);

// ---- resize_kernels.cpp ------------------------------------------------------------------

void resize(const Launch& l);
/// Each axis's taps (input positions and weights per output coordinate), once per plan.
void prepare_resize(Launch& launch, int threads);
/// The same taps laid out for the CUDA kernel, in 8-byte words: axis d's start at `at[d]`,
/// out[d] * taps[d] offsets into x (i64), as many weights (f64 bits), then out[d] flags
/// (1: the coordinate lies outside tf_crop_and_resize's crop).
struct ResizeTables {
  std::vector<std::int64_t> taps, at;
  std::vector<std::uint64_t> words;
  bool nearest = false, outside = false;  // outside: some coordinate has its flag set
  double extrapolation = 0;
};
ResizeTables resize_tables(const Launch& l);

// ---- conv_kernels.cpp: sliding windows ---------------------------------------------------

/// A window op's geometry (conv, conv_transpose, max_pool, avg_pool over [N, C, S...]),
/// its spatial dims right-aligned in three (the leading ones of size 1, with a kernel of
/// 1), so that one loop nest serves 1-D, 2-D and 3-D. The CUDA kernels read it too.
struct WindowGeometry {
  static constexpr std::size_t kMaxSpatial = 3;
  using Spatial = std::array<std::int64_t, kMaxSpatial>;
  std::int64_t n = 0, c = 0, m = 0, groups = 1;
  std::size_t spatial = 0;
  Spatial in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      pad_begin{0, 0, 0}, pad_end{0, 0, 0};
  std::int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  std::int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  std::int64_t taps() const { return kernel[0] * kernel[1] * kernel[2]; }
};
/// \p l's geometry; \p kernel_from_w: the kernel sizes are w's trailing dims (convs), else
/// the `kernel_shape` attribute (pools).
WindowGeometry window_geometry(const Launch& l, bool kernel_from_w);

void conv(const Launch& l);
void conv_transpose(const Launch& l);
/// f32 convs: oneDNN primitives over tiles of batch entries and output channels.
void prepare_conv(Launch& launch, int threads);
/// Whether the CPU kernels run conv \p depthwise, which reads conv \p pointwise's output,
/// inside \p pointwise (`Launch::depthwise`; see absorb_depthwise): f32 convs, the second a
/// 2-D depthwise one, which kiln's loops take (a 1x1 conv over whole planes on the GEMM
/// path, output rows of 16 or more) or, with \p blocked_allowed (fixed weights packed,
/// epilogues whose other operands are single values), oneDNN's blocked kernels (any
/// ungrouped first conv: a stem too; BlockedExpansion). Reads only the views' shapes and
/// dtypes and the ops' attributes.
bool runs_with_depthwise(const Launch& pointwise, const Launch& depthwise, bool blocked_allowed);
/// Whether the CPU kernels run the elementwise multiply \p scale, whose output is conv
/// \p conv's input, inside \p conv (`Launch::input_scale`; see absorb_input_scales): f32,
/// an [N, C, ...] activation times an [N or 1, C, 1...] scale, read by a 1x1 conv over
/// whole planes on the GEMM path. Reads only the views' shapes and dtypes and the ops'
/// attributes.
bool runs_with_input_scale(const Launch& conv, const Launch& scale);
void prepare_conv_transpose(Launch& launch, int threads);
/// True when prepare set the conv launch \p l to multiply in bfloat16.
bool conv_in_bf16(const Launch& l);
void max_pool(const Launch& l);
void avg_pool(const Launch& l);
/// Pools split by [N, C] planes.
void prepare_pool(Launch& launch, int threads);

/// The prepared state of fused launches (each input's strides broadcast to out[0]) and
/// of transpose and broadcast_to (one entry: the strides its output reads its input with).
struct ReadStrides final : PreparedLaunch {
  static constexpr Kind kKind = Kind::read_strides;
  explicit ReadStrides(std::vector<Index> s) : PreparedLaunch(kKind), strides(std::move(s)) {}
  const std::vector<Index> strides;
};

// ---- row_kernels.cpp: reductions, softmax, norms -------------------------------------------

void reduce_sum(const Launch& l);
void reduce_mean(const Launch& l);
void reduce_max(const Launch& l);
void reduce_min(const Launch& l);
void reduce_prod(const Launch& l);
void argmax(const Launch& l);
void softmax(const Launch& l);
void log_softmax(const Launch& l);
void layer_norm(const Launch& l);
void rms_norm(const Launch& l);
/// True when \p l reads and writes f32 and works on rows of the last axis.
bool f32_last_axis_rows(const Launch& l, std::size_t axis);
/// True when the layer_norm / rms_norm launch \p l runs the f32 row kernel (f32 rows,
/// gamma and, unless \p rms (an rms_norm), beta), the one that can write bf16
/// (`Launch::out_bf16`).
bool f32_rows_norm(const Launch& l, bool rms);

}  // namespace kiln::compiler::kernel
