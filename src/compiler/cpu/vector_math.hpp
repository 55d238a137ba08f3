#pragma once
// Internal: f32 math over arrays, written as plain loops the compiler vectorises, built
// for AVX-512, AVX2 and baseline x86-64; the first call picks the best the CPU has. The
// fused kernels and the f32 fast paths use these.
//
// Accuracy against the double-precision reference rounded to f32: add, sub, mul, div,
// sqrt, min, max, fmod, neg, abs, relu, sign, floor, ceil, round are exact; exp, log, tanh, erf,
// sigmoid, silu within a few ulp; sin, cos, tan are libm's in double, rounded once (not
// vectorised: no model has them on a hot path); the erf-based GELU within 5e-7 |x| absolute. NaN in
// gives NaN out; exp overflows to inf and underflows to 0 (no denormal results).

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kiln::compiler::vmath {

enum class Unary : unsigned char {
  neg,
  abs,
  exp,
  log,
  sqrt,
  rsqrt,
  tanh,
  erf,
  sin,
  cos,
  tan,
  sign,
  floor,
  ceil,
  round,
  sigmoid,
  relu,
  silu,
  gelu_erf,
  gelu_tanh,
  copy,
  to_mask,  ///< 1 where x != 0 (NaN included), else 0: a cast to bool, as a mask
};
/// The comparisons (eq ... ge) give masks: 1 where true, 0 where false (NaN compares as
/// in C: unequal to everything).
enum class Binary : unsigned char {
  add,
  sub,
  mul,
  div,
  max,
  min,
  pow,
  fmod,
  eq,
  ne,
  lt,
  le,
  gt,
  ge
};

/// "avx512", "avx2" or "base": the copy of the loops in use.
const char* instruction_set();
/// y[i] = f(x[i]) for i < n (y may equal x).
void unary(Unary f, const float* x, float* y, std::size_t n);
/// y[i] = f(a[i], b[i]); a stride of 0 broadcasts that operand's first element. pow with
/// a broadcast exponent of 1, 2 or 3 multiplies (the same values as libm's pow in double).
void binary(Binary f, const float* a, std::size_t a_stride, const float* b, std::size_t b_stride,
            float* y, std::size_t n);
/// One step of binary_chain: t = f(t, operand), or f(operand, t) when `flip`; the operand
/// is the chain's input x[i] when `input`, else `scalar`. f: add, sub, mul, div, max, min.
struct ChainStep {
  Binary f = Binary::add;
  bool flip = false;
  bool input = false;
  float scalar = 0;
};
/// y[i] = t after the steps in order from t = x[i], each rounded to f32: the bits of the
/// steps as `binary` calls one by one, in one pass with t in registers (y may equal x).
void binary_chain(const float* x, const ChainStep* steps, std::size_t num_steps, float* y,
                  std::size_t n);
/// y[i] = mask[i] != 0 ? a[i] : b[i] (strides as in `binary`; y may be any of them).
void select(const float* mask, std::size_t mask_stride, const float* a, std::size_t a_stride,
            const float* b, std::size_t b_stride, float* y, std::size_t n);

// Reductions over rows, in a fixed order (eight interleaved partial results), so that the
// result does not depend on the instruction set.
/// Σ x[i], accumulated in double.
double sum(const float* x, std::size_t n);
/// Σ (x[i] - center)², accumulated in double.
double sum_squares(const float* x, std::size_t n, double center);
/// The largest x[i], ignoring NaN (as std::max does); -inf when n is 0.
float max(const float* x, std::size_t n);

// Whole rows, in one call (a row of a few hundred elements costs little more than the
// calls and loop set-ups of doing it op by op).
/// Softmax of a row (n >= 1): t = exp(x - max x), y = t · (1 / Σ t), the exponentials and
/// their sum in one pass (per 1024 elements sixteen interleaved f32 partial sums, added
/// pairwise; those in double). y may equal x.
void softmax_row(const float* x, float* y, std::size_t n);
/// Rows of attention's scores, each softmaxed in place while it is in the first-level
/// cache, with what the ops around a softmax usually add fused in.
struct SoftmaxRows {
  float* x = nullptr;  // `rows` rows of n >= 1 floats, `row` apart
  std::size_t rows = 0, n = 0, row = 0;
  const float* add = nullptr;     // nullptr, or rows added first: add[r · add_row + i]
  std::size_t add_row = 0;        // 0: the same row added to every row
  const float* nan_to = nullptr;  // nullptr, or the value that replaces NaN results
};
/// Per row: x = x + add (f32), softmax_row(x, x, n), then x = isnan(x) ? *nan_to : x; the
/// same bits as those steps one by one.
void softmax_rows(const SoftmaxRows& p);
/// y[i] = (x[i] - mean) · scale · gamma[i] + beta[i] in f32 arithmetic, within 3e-7 of
/// |(x[i] - mean) · scale · gamma[i]| + |beta[i]| (the mean is subtracted in two parts, so
/// that rows far from 0 keep their small differences); beta nullptr adds 0.
void normalize_row(const float* x, double mean, double scale, const float* gamma, const float* beta,
                   float* y, std::size_t n);

/// Columns in one panel of `matmul_panel`: four AVX-512 registers per row.
inline constexpr std::size_t kPanel = 64;
/// Most rows of one `matmul_panel` call.
inline constexpr std::size_t kPanelRows = 4;

/// One panel of a matrix product with few rows (a batch-1 Linear layer):
/// c[r·ldc + j] = Σ_p a[r·a_row + p·a_col] · b[p·ldb + j] for r < rows (1..kPanelRows) and
/// j < cols (1..kPanel), each sum accumulated in order of p by fused multiply-adds from 0,
/// so that every copy computes the same bits. The rows stay in registers while b is
/// read once, row after row (contiguous when ldb is kPanel: a packed panel).
void matmul_panel(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows,
                  const float* b, std::size_t ldb, std::size_t k, float* c, std::size_t ldc,
                  std::size_t cols);
/// The same with b in bfloat16 (the high halves of f32s): each element widened to f32
/// exactly, then the same fused multiply-adds in the same order. Half the bytes of b to
/// read, for the layers whose time that reading is.
void matmul_panel_bf16(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows,
                       const std::uint16_t* b, std::size_t ldb, std::size_t k, float* c,
                       std::size_t ldc, std::size_t cols);

/// y[i] = to_bf16(x[i]) for i < n (vectorised).
void round_bf16(const float* x, std::uint16_t* y, std::size_t n);

/// y[i] = x[i] * scale rounded to bfloat16 and widened back to f32 (exact), for i < n:
/// bf16 operands as f32 for an f32 GEMM on CPUs without bf16 units (vectorised).
void round_bf16_f32(const float* x, float* y, std::size_t n, float scale);

/// Readable floats depthwise_plane needs after its input plane.
inline constexpr std::size_t kDepthwiseSlack = 16;
/// One plane of a depthwise convolution over a padded input plane (every window inside it):
/// out[oy·ow + ox] = bias + Σ w[ky·kw + kx] · in[(oy·row_step + ky)·in_row + taps[kx] + ox]
/// for oy < oh, ox < ow, summed by fused multiply-adds from the bias in the order of ky,
/// then kx (every copy computes the same bits). `row_step` is the vertical stride; a
/// horizontal stride is the caller's, by how it lays out each row and the tap offsets
/// (for stride 2: the even columns, then the odd ones). Reads up to kDepthwiseSlack floats
/// past the end of the plane's last row (whose values change nothing).
void depthwise_plane(const float* in, std::size_t in_row, std::size_t row_step,
                     const std::size_t* taps, const float* w, std::size_t kh, std::size_t kw,
                     float bias, float* out, std::size_t oh, std::size_t ow);

/// Eight output channels of a convolution over \p c zero-padded input planes, laid out as
/// depthwise_plane's (every window inside them; `row_step`, `taps` and the stride as
/// there), with the weights packed [c][kh][kw][8] (channel j's at j, zeros past
/// `channels`): out[j·out_plane + oy·ow + ox] = bias[j] + Σ w[((ci·kh + ky)·kw + kx)·8 + j]
/// · in[ci·in_plane + (oy·row_step + ky)·in_row + taps[kx] + ox] for j < channels (at most
/// 8), oy < oh, ox < ow, summed by fused multiply-adds from the bias in the order of ci, ky,
/// then kx. Reads up to kDepthwiseSlack floats past the last plane's last row.
struct ConvChannels8 {
  const float* in = nullptr;
  std::size_t in_plane = 0, in_row = 0, row_step = 1;
  const std::size_t* taps = nullptr;
  const float* w = nullptr;  // [c][kh][kw][8]
  std::size_t c = 0, kh = 0, kw = 0;
  const float* bias = nullptr;  // [8]
  float* out = nullptr;
  std::size_t out_plane = 0, channels = 8, oh = 0, ow = 0;
};
void conv_channels8(const ConvChannels8& p);

/// Winograd's minimal filtering F(4x4, 3x3) (winograd_conv.hpp) over sixteen channels at
/// once, by the transforms of Lavin and Gray (points 0, ±1, ±2, ∞). The input transform:
/// from a 6x6 patch of input positions, channel j of position (y, x) at
/// `patch[y·row + x·16 + j]`, the 36 values V = Bᵀ d B of each channel to
/// `v[ξ·v_stride + j]`, ξ = 6a + b. Every copy adds, subtracts, multiplies and fuses in the
/// same order (the same bits).
void winograd_input_4x3(const float* patch, std::size_t row, float* v, std::size_t v_stride);
/// The output transform: from the 36 products `m[ξ·m_stride + j]` of sixteen output
/// channels, the 4x4 outputs Y = Aᵀ M A plus `bias[j]`, (y, x) to `out[y·row + x·16 + j]`.
void winograd_output_4x3(const float* m, std::size_t m_stride, const float* bias, float* out,
                         std::size_t row);
/// The same for F(2x2, 3x3) (points 0, ±1, ∞): a 4x4 patch to 16 values, ξ = 4a + b, and
/// 16 products to 2x2 outputs.
void winograd_input_2x3(const float* patch, std::size_t row, float* v, std::size_t v_stride);
void winograd_output_2x3(const float* m, std::size_t m_stride, const float* bias, float* out,
                         std::size_t row);
/// Sixteen rows interleaved: dst[x·16 + j] = src[j·src_stride + x] for x < n, j < 16
/// (kiln's Winograd reads sixteen channels of a position at once). Vectorised.
void interleave16(const float* src, std::size_t src_stride, std::size_t n, float* dst);
/// The inverse: dst[j·dst_stride + x] = src[x·16 + j] for x < n, j < 16.
void deinterleave16(const float* src, std::size_t n, float* dst, std::size_t dst_stride);

/// Rows of a padded plane for depthwise_plane or conv_channels8 from input rows: for
/// r < rows, the first n floats of from[r·w ...] go to the row to[r·cols ...]; without
/// \p split, x to column at + x; with it (stride 2 along rows), even x to column at + x/2 and
/// odd x to column at_odd + x/2. Nothing else is written or read (vectorised).
void copy_rows(const float* from, std::size_t w, std::size_t n, std::size_t rows, float* to,
               std::size_t cols, std::size_t at, std::size_t at_odd, bool split);

/// \p x rounded to the nearest bfloat16 (ties to even; NaN stays NaN).
inline std::uint16_t to_bf16(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}
/// The f32 a bfloat16 stands for (exact).
inline float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t{h} << 16;
  float x = 0;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace kiln::compiler::vmath
