// Picks the array loops built for the best instruction set this CPU has, once.

#include "compiler/cpu/vector_math.hpp"

#include "compiler/cpu/vector_math_targets.hpp"
#include "kiln/core/cpu_isa.hpp"

namespace kiln::compiler::vmath {
namespace {

struct Table {
  const char* name;
  void (*unary)(Unary, const float*, float*, std::size_t);
  void (*binary)(Binary, const float*, std::size_t, const float*, std::size_t, float*, std::size_t);
  void (*select)(const float*, std::size_t, const float*, std::size_t, const float*, std::size_t,
                 float*, std::size_t);
  double (*sum)(const float*, std::size_t);
  double (*sum_squares)(const float*, std::size_t, double);
  float (*max)(const float*, std::size_t);
  void (*softmax_row)(const float*, float*, std::size_t);
  void (*softmax_rows)(const SoftmaxRows&);
  void (*normalize_row)(const float*, double, double, const float*, const float*, float*,
                        std::size_t);
  void (*matmul_panel)(const float*, std::size_t, std::size_t, std::size_t, const float*,
                       std::size_t, std::size_t, float*, std::size_t, std::size_t);
  void (*matmul_panel_bf16)(const float*, std::size_t, std::size_t, std::size_t,
                            const std::uint16_t*, std::size_t, std::size_t, float*, std::size_t,
                            std::size_t);
  void (*round_bf16)(const float*, std::uint16_t*, std::size_t);
  void (*round_bf16_f32)(const float*, float*, std::size_t, float);
  void (*depthwise_plane)(const float*, std::size_t, std::size_t, const std::size_t*, const float*,
                          std::size_t, std::size_t, float, float*, std::size_t, std::size_t);
  void (*copy_rows)(const float*, std::size_t, std::size_t, std::size_t, float*, std::size_t,
                    std::size_t, std::size_t, bool);
  void (*conv_channels8)(const ConvChannels8&);
  void (*winograd_input_4x3)(const float*, std::size_t, float*, std::size_t);
  void (*winograd_output_4x3)(const float*, std::size_t, const float*, float*, std::size_t);
  void (*winograd_input_2x3)(const float*, std::size_t, float*, std::size_t);
  void (*winograd_output_2x3)(const float*, std::size_t, const float*, float*, std::size_t);
  void (*interleave16)(const float*, std::size_t, std::size_t, float*);
  void (*deinterleave16)(const float*, std::size_t, float*, std::size_t);
  void (*binary_chain)(const float*, const ChainStep*, std::size_t, float*, std::size_t);
};

#define KILN_TABLE(target)                                                                    \
  Table {                                                                                     \
#target, target::unary, target::binary, target::select, target::sum, target::sum_squares, \
        target::max, target::softmax_row, target::softmax_rows, target::normalize_row,        \
        target::matmul_panel, target::matmul_panel_bf16, target::round_bf16,                  \
        target::round_bf16_f32, target::depthwise_plane, target::copy_rows,                   \
        target::conv_channels8, target::winograd_input_4x3, target::winograd_output_4x3,      \
        target::winograd_input_2x3, target::winograd_output_2x3, target::interleave16,        \
        target::deinterleave16, target::binary_chain                                          \
  }

const Table& table() {
  static const Table t = [] {
    // The level kiln uses (KILN_CPU_ISA may lower it), not only what the CPU has.
    const CpuIsa isa = cpu_isa();
    if (isa >= CpuIsa::avx512 && cpu_has_avx512()) return KILN_TABLE(avx512);
    if (isa >= CpuIsa::avx2 && cpu_has_avx2()) return KILN_TABLE(avx2);
    return KILN_TABLE(base);
  }();
  return t;
}
#undef KILN_TABLE

}  // namespace

const char* instruction_set() { return table().name; }

void unary(Unary f, const float* x, float* y, std::size_t n) { table().unary(f, x, y, n); }

void binary(Binary f, const float* a, std::size_t a_stride, const float* b, std::size_t b_stride,
            float* y, std::size_t n) {
  table().binary(f, a, a_stride, b, b_stride, y, n);
}

void select(const float* mask, std::size_t mask_stride, const float* a, std::size_t a_stride,
            const float* b, std::size_t b_stride, float* y, std::size_t n) {
  table().select(mask, mask_stride, a, a_stride, b, b_stride, y, n);
}

double sum(const float* x, std::size_t n) { return table().sum(x, n); }

double sum_squares(const float* x, std::size_t n, double center) {
  return table().sum_squares(x, n, center);
}

float max(const float* x, std::size_t n) { return table().max(x, n); }

void softmax_row(const float* x, float* y, std::size_t n) { table().softmax_row(x, y, n); }

void softmax_rows(const SoftmaxRows& p) { table().softmax_rows(p); }

void normalize_row(const float* x, double mean, double scale, const float* gamma, const float* beta,
                   float* y, std::size_t n) {
  table().normalize_row(x, mean, scale, gamma, beta, y, n);
}

void round_bf16(const float* x, std::uint16_t* y, std::size_t n) { table().round_bf16(x, y, n); }

void depthwise_plane(const float* in, std::size_t in_row, std::size_t row_step,
                     const std::size_t* taps, const float* w, std::size_t kh, std::size_t kw,
                     float bias, float* out, std::size_t oh, std::size_t ow) {
  table().depthwise_plane(in, in_row, row_step, taps, w, kh, kw, bias, out, oh, ow);
}

void copy_rows(const float* from, std::size_t w, std::size_t n, std::size_t rows, float* to,
               std::size_t cols, std::size_t at, std::size_t at_odd, bool split) {
  table().copy_rows(from, w, n, rows, to, cols, at, at_odd, split);
}

void conv_channels8(const ConvChannels8& p) { table().conv_channels8(p); }
void winograd_input_4x3(const float* patch, std::size_t row, float* v, std::size_t v_stride) {
  table().winograd_input_4x3(patch, row, v, v_stride);
}
void winograd_output_4x3(const float* m, std::size_t m_stride, const float* bias, float* out,
                         std::size_t row) {
  table().winograd_output_4x3(m, m_stride, bias, out, row);
}
void winograd_input_2x3(const float* patch, std::size_t row, float* v, std::size_t v_stride) {
  table().winograd_input_2x3(patch, row, v, v_stride);
}
void winograd_output_2x3(const float* m, std::size_t m_stride, const float* bias, float* out,
                         std::size_t row) {
  table().winograd_output_2x3(m, m_stride, bias, out, row);
}
void interleave16(const float* src, std::size_t src_stride, std::size_t n, float* dst) {
  table().interleave16(src, src_stride, n, dst);
}
void deinterleave16(const float* src, std::size_t n, float* dst, std::size_t dst_stride) {
  table().deinterleave16(src, n, dst, dst_stride);
}

void binary_chain(const float* x, const ChainStep* steps, std::size_t num_steps, float* y,
                  std::size_t n) {
  table().binary_chain(x, steps, num_steps, y, n);
}

void round_bf16_f32(const float* x, float* y, std::size_t n, float scale) {
  table().round_bf16_f32(x, y, n, scale);
}

void matmul_panel(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows,
                  const float* b, std::size_t ldb, std::size_t k, float* c, std::size_t ldc,
                  std::size_t cols) {
  table().matmul_panel(a, a_row, a_col, rows, b, ldb, k, c, ldc, cols);
}

void matmul_panel_bf16(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows,
                       const std::uint16_t* b, std::size_t ldb, std::size_t k, float* c,
                       std::size_t ldc, std::size_t cols) {
  table().matmul_panel_bf16(a, a_row, a_col, rows, b, ldb, k, c, ldc, cols);
}

}  // namespace kiln::compiler::vmath
