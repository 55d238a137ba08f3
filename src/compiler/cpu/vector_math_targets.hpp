#pragma once
// Internal: the per-instruction-set copies of the array loops (vector_math_{avx512,avx2,
// base}.cpp), declared for the dispatcher and for tests that check every copy.

#include "compiler/cpu/vector_math.hpp"

#define KILN_VMATH_DECLARE_TARGET(target)                                                        \
  namespace kiln::compiler::vmath::target {                                                      \
  void unary(Unary f, const float* x, float* y, std::size_t n);                                  \
  void binary(Binary f, const float* a, std::size_t a_stride, const float* b,                    \
              std::size_t b_stride, float* y, std::size_t n);                                    \
  void select(const float* mask, std::size_t mask_stride, const float* a, std::size_t a_stride,  \
              const float* b, std::size_t b_stride, float* y, std::size_t n);                    \
  double sum(const float* x, std::size_t n);                                                     \
  double sum_squares(const float* x, std::size_t n, double center);                              \
  float max(const float* x, std::size_t n);                                                      \
  void softmax_row(const float* x, float* y, std::size_t n);                                     \
  void softmax_rows(const SoftmaxRows& p);                                                       \
  void normalize_row(const float* x, double mean, double scale, const float* gamma,              \
                     const float* beta, float* y, std::size_t n);                                \
  void matmul_panel(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows,      \
                    const float* b, std::size_t ldb, std::size_t k, float* c, std::size_t ldc,   \
                    std::size_t cols);                                                           \
  void matmul_panel_bf16(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows, \
                         const std::uint16_t* b, std::size_t ldb, std::size_t k, float* c,       \
                         std::size_t ldc, std::size_t cols);                                     \
  void round_bf16(const float* x, std::uint16_t* y, std::size_t n);                              \
  void round_bf16_f32(const float* x, float* y, std::size_t n, float scale);                     \
  void depthwise_plane(const float* in, std::size_t in_row, std::size_t row_step,                \
                       const std::size_t* taps, const float* w, std::size_t kh, std::size_t kw,  \
                       float bias, float* out, std::size_t oh, std::size_t ow);                  \
  void copy_rows(const float* from, std::size_t w, std::size_t n, std::size_t rows, float* to,   \
                 std::size_t cols, std::size_t at, std::size_t at_odd, bool split);              \
  void conv_channels8(const ConvChannels8& p);                                                   \
  void winograd_input_4x3(const float* patch, std::size_t row, float* v, std::size_t v_stride);  \
  void winograd_output_4x3(const float* m, std::size_t m_stride, const float* bias, float* out,  \
                           std::size_t row);                                                     \
  void winograd_input_2x3(const float* patch, std::size_t row, float* v, std::size_t v_stride);  \
  void winograd_output_2x3(const float* m, std::size_t m_stride, const float* bias, float* out,  \
                           std::size_t row);                                                     \
  void interleave16(const float* src, std::size_t src_stride, std::size_t n, float* dst);        \
  void deinterleave16(const float* src, std::size_t n, float* dst, std::size_t dst_stride);      \
  void binary_chain(const float* x, const ChainStep* steps, std::size_t num_steps, float* y,     \
                    std::size_t n);                                                              \
  }
KILN_VMATH_DECLARE_TARGET(avx512)
KILN_VMATH_DECLARE_TARGET(avx2)
KILN_VMATH_DECLARE_TARGET(base)
#undef KILN_VMATH_DECLARE_TARGET

namespace kiln::compiler::vmath {
/// True when this CPU can run the copy built for AVX-512 / for AVX2 with FMA.
inline bool cpu_has_avx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}
inline bool cpu_has_avx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
}  // namespace kiln::compiler::vmath
