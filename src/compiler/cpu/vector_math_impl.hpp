// The array loops, compiled once per instruction set (vector_math_{avx512,avx2,base}.cpp
// include this file with KILN_VMATH_TARGET set); vector_math.cpp picks one at start-up.
// Helpers are force-inlined so that each copy vectorises them for its own target.
//
// Multiply-adds are written as std::fma, one rounding each: the AVX2 and AVX-512 copies
// run them as FMA instructions and the baseline copy as libm's correctly rounded fmaf, so
// that every copy computes the same bits (the compiler contracts nothing else:
// -ffp-contract=off).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "compiler/cpu/vector_math.hpp"

#define KILN_INLINE inline __attribute__((always_inline))

namespace kiln::compiler::vmath::KILN_VMATH_TARGET {
namespace {

KILN_INLINE float fmadd(float a, float b, float c) { return std::fma(a, b, c); }

/// c[0] x^(N-1) + ... + c[N-1], by Horner's rule (coefficients from the highest power).
/// (Unrolled by a fold expression: a loop left in the body would keep the caller's loop
/// from vectorising.)
template <std::size_t N>
KILN_INLINE float horner(float x, const float (&c)[N]) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    float p = c[0];
    ((p = fmadd(p, x, c[I + 1])), ...);
    return p;
  }
  (std::make_index_sequence<N - 1>{});
}

KILN_INLINE float round_to_int(float x) {  // nearest integer, as a float (|x| < 2^22)
  constexpr float kMagic = 12582912.0f;    // 1.5 * 2^23
  return (x + kMagic) - kMagic;
}

/// 2^k for integral k in [-125, 128], times 2 folded in by the caller (see exp_f).
KILN_INLINE float pow2_minus1(float k) {
  return std::bit_cast<float>((static_cast<std::int32_t>(k) + 126) << 23);
}

// exp: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact k ln2), then the
// Cephes single-precision polynomial for e^r. Below -87.3 the result is a denormal (down
// to e^-103.97, the smallest): scaled by 2^(k+64), a normal float, then exactly by 2^-64,
// so that it is rounded once, into the denormal.
KILN_INLINE float exp_f(float x) {
  // Below -104 e^x rounds to 0: computed from 0 instead and then replaced, so that no lane
  // underflows (x86 takes a microcode assist per instruction whose result underflows: a
  // softmax over masked scores, -3.4e38, ran 3x slower).
  float c = x > 89.0f ? 89.0f : x;  // e^89 overflows to inf, as it should
  c = c < -104.0f ? 0.0f : c;       // e^c < 2^-150 rounds to 0: made so below
  c = c != c ? 0.0f : c;            // NaN (returned below) never reaches the int conversion
  const float k = round_to_int(c * 1.44269504088896341f);
  float r = fmadd(k, -0.693359375f, c);
  r = fmadd(k, 2.12194440e-4f, r);
  const float p = horner(r, {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                             1.6666665459e-1f, 5.0000001201e-1f});
  const bool denormal = k < -125.0f;
  const float e = (fmadd(p, r * r, r) + 1.0f) * 2.0f * pow2_minus1(denormal ? k + 64.0f : k);
  const float scaled = denormal ? e * 5.42101086242752217e-20f : e;  // 2^-64
  const float result = x < -104.0f ? 0.0f : scaled;
  return x != x ? x : result;
}

// log: x = m 2^e with m in [√½, √2); log m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716,
// by its odd series (terms to s^11: error below 1e-10).
KILN_INLINE float log_f(float x) {
  const bool tiny = x < 1.17549435e-38f;  // denormals: scale into the normal range
  const float xs = tiny ? x * 8388608.0f : x;
  const auto bits = std::bit_cast<std::int32_t>(xs);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 127) - (tiny ? 23.0f : 0.0f);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f800000);
  const bool high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e = high ? e + 1.0f : e;
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  const float p = horner(s2, {1.0f / 11.0f, 1.0f / 9.0f, 1.0f / 7.0f, 1.0f / 5.0f, 1.0f / 3.0f});
  const float log_m = fmadd(2.0f * s, s2 * p, 2.0f * s);
  const float y = fmadd(e, 0.693359375f, fmadd(e, -2.12194440e-4f, log_m));
  const float special = x == 0.0f ? -INFINITY : x == INFINITY ? INFINITY : NAN;
  return x > 0.0f && x < INFINITY ? y : (x != x ? x : special);
}

// tanh: its Taylor series to x^15 below 0.55 (error < 0.5 ulp), 1 - 2/(e^{2|x|}+1) above.
KILN_INLINE float tanh_f(float x) {
  const float a = std::fabs(x);
  const float x2 = x * x;
  const float p =
      horner(x2, {-929569.0f / 638512875.0f, 21844.0f / 6081075.0f, -1382.0f / 155925.0f,
                  62.0f / 2835.0f, -17.0f / 315.0f, 2.0f / 15.0f, -1.0f / 3.0f});
  const float small = fmadd(x, x2 * p, x);
  const float ac = a > 10.0f ? 10.0f : a;  // tanh(10) rounds to 1
  const float big = 1.0f - 2.0f / (exp_f(2.0f * ac) + 1.0f);
  const float signed_big = x < 0.0f ? -big : big;
  return a < 0.55f ? (x == 0.0f ? x : small) : (x != x ? x : signed_big);  // tanh(-0) = -0
}

// 1 + erf(x) through erfc(|x|) = t e^(-x² + P(t)), t = 1 / (1 + |x|/2): the Chebyshev
// fit of Numerical Recipes' erfcc (relative error below 1.2e-7 for every x, so GELU's
// 0.5 x (1 + erf) is within a few ulp of the exact value), where 1 + erf(x) for negative x
// is erfc(|x|) computed directly rather than by cancellation. x² is kept exact inside the
// fused multiply-add.
KILN_INLINE float erfc_of_abs(float a) {  // a = inf: t = 0 and e^-inf = 0, so erfc = 0
  const float t = 1.0f / fmadd(0.5f, a, 1.0f);
  const float p = horner(t, {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                             -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f});
  return t * exp_f(fmadd(-a, a, p));
}
KILN_INLINE float one_plus_erf(float x) {
  const float erfc = erfc_of_abs(std::fabs(x));
  const float y = x < 0.0f ? erfc : 2.0f - erfc;
  return x != x ? x : y;
}

// erf: below |x| = 0.5 its Maclaurin series x P(x²) (the terms to x^15; the first one left
// out is below 1e-9 of the sum), where 1 - erfc would cancel; above, ±(1 - erfc(|x|)),
// erfc(|x|) <= erfc(0.5) = 0.48 (one subtraction, no cancellation).
KILN_INLINE float erf_f(float x) {
  const float x2 = x * x;
  // 2/sqrt(pi) (-1)^n / (n! (2n + 1)), n = 7 down to 0.
  const float small =
      x * horner(x2, {-1.4925650358406251e-5f, 1.2055332981789664e-4f, -8.5483270234508130e-4f,
                      5.2239776254421878e-3f, -2.6866170645131252e-2f, 1.1283791670955126e-1f,
                      -3.7612638903183754e-1f, 1.1283791670955126e+0f});
  const float big = std::copysign(1.0f - erfc_of_abs(std::fabs(x)), x);  // NaN stays NaN
  return std::fabs(x) < 0.5f ? small : big;
}

KILN_INLINE float sigmoid_f(float x) { return 1.0f / (1.0f + exp_f(-x)); }

KILN_INLINE float apply(Unary f, float x) {
  switch (f) {
    case Unary::neg:
      return -x;
    case Unary::abs:
      return std::fabs(x);
    case Unary::exp:
      return exp_f(x);
    case Unary::log:
      return log_f(x);
    case Unary::sqrt:
      return std::sqrt(x);
    case Unary::rsqrt:
      return 1.0f / std::sqrt(x);
    case Unary::tanh:
      return tanh_f(x);
    case Unary::erf:
      return erf_f(x);
    case Unary::sin:
      return static_cast<float>(std::sin(static_cast<double>(x)));
    case Unary::cos:
      return static_cast<float>(std::cos(static_cast<double>(x)));
    case Unary::tan:
      return static_cast<float>(std::tan(static_cast<double>(x)));
    case Unary::sign:  // NaN and signed zeros stay as they are
      return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
    case Unary::floor:
      return std::floor(x);
    case Unary::ceil:
      return std::ceil(x);
    case Unary::round:  // halves to even, in the default rounding mode
      return std::nearbyint(x);
    case Unary::sigmoid:
      return sigmoid_f(x);
    case Unary::relu:  // NaN stays NaN, as in PyTorch
      return x > 0.0f || x != x ? x : 0.0f;
    case Unary::silu:
      return x * sigmoid_f(x);
    case Unary::gelu_erf:
      return 0.5f * x * one_plus_erf(x * 0.70710678118654752f);
    case Unary::gelu_tanh:  // 0.5 (1 + tanh u) = sigmoid(2u): no cancellation for x < 0
      return x * sigmoid_f(1.5957691216057308f * (x + 0.044715f * x * x * x));
    case Unary::copy:
      return x;
    case Unary::to_mask:
      return x != 0.0f ? 1.0f : 0.0f;
  }
  return x;
}

/// One vectorised loop per function: the switch is outside the loop.
template <Unary F>
KILN_INLINE void unary_loop(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = apply(F, x[i]);
}

template <Binary F>
KILN_INLINE float apply2(float a, float b) {
  if constexpr (F == Binary::add) return a + b;
  if constexpr (F == Binary::sub) return a - b;
  if constexpr (F == Binary::mul) return a * b;
  if constexpr (F == Binary::div) return a / b;
  // maximum and minimum propagate a NaN from either side, as in PyTorch.
  if constexpr (F == Binary::max) return a < b || b != b ? b : a;
  if constexpr (F == Binary::min) return b < a || b != b ? b : a;
  if constexpr (F == Binary::fmod) return std::fmod(a, b);  // exact: no rounding
  if constexpr (F == Binary::eq) return a == b ? 1.0f : 0.0f;
  if constexpr (F == Binary::ne) return a != b ? 1.0f : 0.0f;
  if constexpr (F == Binary::lt) return a < b ? 1.0f : 0.0f;
  if constexpr (F == Binary::le) return a <= b ? 1.0f : 0.0f;
  if constexpr (F == Binary::gt) return a > b ? 1.0f : 0.0f;
  if constexpr (F == Binary::ge) return a >= b ? 1.0f : 0.0f;
  return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
}

template <Binary F>
KILN_INLINE void binary_loop(const float* a, std::size_t sa, const float* b, std::size_t sb,
                             float* y, std::size_t n) {
  if (sa == 1 && sb == 1) {
    for (std::size_t i = 0; i < n; ++i) y[i] = apply2<F>(a[i], b[i]);
  } else if (sa == 1) {
    const float bv = b[0];
    for (std::size_t i = 0; i < n; ++i) y[i] = apply2<F>(a[i], bv);
  } else if (sb == 1) {
    const float av = a[0];
    for (std::size_t i = 0; i < n; ++i) y[i] = apply2<F>(av, b[i]);
  } else {
    const float v = apply2<F>(a[0], b[0]);
    for (std::size_t i = 0; i < n; ++i) y[i] = v;
  }
}

/// pow with one exponent for every element, when it is 1, 2 or 3: products, which give
/// what pow in double rounded to f32 gives (x * x is exact in double; x * x * x rounds
/// once there, as a correctly rounded pow does). \returns false for other exponents.
KILN_INLINE bool small_integer_pow(const float* a, std::size_t sa, float e, float* y,
                                   std::size_t n) {
  if (sa != 1 || (e != 1.0f && e != 2.0f && e != 3.0f)) return false;
  if (e == 1.0f) {
    for (std::size_t i = 0; i < n; ++i) y[i] = a[i];
  } else if (e == 2.0f) {
    for (std::size_t i = 0; i < n; ++i) y[i] = a[i] * a[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const double x = a[i];
      y[i] = static_cast<float>(x * x * x);
    }
  }
  return true;
}

// Sixteen floats: one AVX-512 register, two AVX2 ones, or an array (the baseline copy).
// Written with intrinsics: the vectoriser kept depthwise_plane's sixteen sums in scalar
// registers. Every copy multiplies and adds by fused multiply-adds, as everywhere here.
#if defined(__AVX512F__)
struct Vec16 {
  __m512 v;
};
KILN_INLINE Vec16 vec_broadcast(float x) { return {_mm512_set1_ps(x)}; }
KILN_INLINE Vec16 vec_load(const float* p) { return {_mm512_loadu_ps(p)}; }
KILN_INLINE Vec16 vec_fma(Vec16 a, Vec16 b, Vec16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
KILN_INLINE void vec_store(float* p, Vec16 a) { _mm512_storeu_ps(p, a.v); }
KILN_INLINE Vec16 vec_add(Vec16 a, Vec16 b) { return {_mm512_add_ps(a.v, b.v)}; }
KILN_INLINE Vec16 vec_sub(Vec16 a, Vec16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
KILN_INLINE Vec16 vec_mul(Vec16 a, Vec16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
KILN_INLINE Vec16 vec_div(Vec16 a, Vec16 b) { return {_mm512_div_ps(a.v, b.v)}; }
/// b where \p take_b, else a.
KILN_INLINE Vec16 vec_pick(__mmask16 take_b, Vec16 a, Vec16 b) {
  return {_mm512_mask_blend_ps(take_b, a.v, b.v)};
}
// apply2's maximum and minimum: b when it is larger (smaller) or NaN, else a.
KILN_INLINE Vec16 vec_max(Vec16 a, Vec16 b) {
  return vec_pick(
      _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ) | _mm512_cmp_ps_mask(b.v, b.v, _CMP_UNORD_Q), a, b);
}
KILN_INLINE Vec16 vec_min(Vec16 a, Vec16 b) {
  return vec_pick(
      _mm512_cmp_ps_mask(b.v, a.v, _CMP_LT_OQ) | _mm512_cmp_ps_mask(b.v, b.v, _CMP_UNORD_Q), a, b);
}
// max and min as above when one operand is known not to be NaN (a chain's scalar): maxps
// and minps return their second operand on NaN and on equal values, as apply2 does then.
// (The zero-masked forms: GCC 12 warns that the plain ones read an undefined vector.)
/// max(a, b), b not NaN.
KILN_INLINE Vec16 vec_max_number(Vec16 a, Vec16 b) {
  return {_mm512_maskz_max_ps(static_cast<__mmask16>(0xffff), b.v, a.v)};
}
/// min(a, b), b not NaN.
KILN_INLINE Vec16 vec_min_number(Vec16 a, Vec16 b) {
  return {_mm512_maskz_min_ps(static_cast<__mmask16>(0xffff), b.v, a.v)};
}
/// max(a, b), a not NaN: b when it is larger or NaN.
KILN_INLINE Vec16 vec_number_max(Vec16 a, Vec16 b) {
  return vec_pick(_mm512_cmp_ps_mask(b.v, a.v, _CMP_NLE_UQ), a, b);
}
/// min(a, b), a not NaN: b when it is smaller or NaN.
KILN_INLINE Vec16 vec_number_min(Vec16 a, Vec16 b) {
  return vec_pick(_mm512_cmp_ps_mask(b.v, a.v, _CMP_NGE_UQ), a, b);
}
KILN_INLINE __mmask16 first_lanes(std::size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}
/// p[0, n) and zeros, n <= 16; reads nothing past p[n).
KILN_INLINE Vec16 vec_load_n(const float* p, std::size_t n) {
  return {_mm512_maskz_loadu_ps(first_lanes(n), p)};
}
/// Stores a's first n lanes, n <= 16.
KILN_INLINE void vec_store_n(float* p, Vec16 a, std::size_t n) {
  _mm512_mask_storeu_ps(p, first_lanes(n), a.v);
}
/// Of x = a then b (32 floats): its even-indexed ones and its odd-indexed ones.
KILN_INLINE void vec_split(Vec16 a, Vec16 b, Vec16& even, Vec16& odd) {
  const __m512i evens =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  even = {_mm512_permutex2var_ps(a.v, evens, b.v)};
  odd = {_mm512_permutex2var_ps(a.v, odds, b.v)};
}
/// Columns of 16 outputs depthwise_plane keeps in registers per row, and rows of one column
/// (eight sums in all: twice the multiply-add's latency times its two units).
inline constexpr std::size_t kDepthwiseVectors = 2, kDepthwiseRows = 8;
/// Output rows and channels conv_channels8 keeps in registers at once (16 sums of 16).
inline constexpr std::size_t kConvRows = 2, kConvChannels = 8;
#elif defined(__AVX2__) && defined(__FMA__)
struct Vec16 {
  __m256 lo, hi;
};
KILN_INLINE Vec16 vec_broadcast(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
KILN_INLINE Vec16 vec_load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
KILN_INLINE Vec16 vec_fma(Vec16 a, Vec16 b, Vec16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
KILN_INLINE void vec_store(float* p, Vec16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
KILN_INLINE Vec16 vec_add(Vec16 a, Vec16 b) {
  return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
KILN_INLINE Vec16 vec_sub(Vec16 a, Vec16 b) {
  return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
}
KILN_INLINE Vec16 vec_mul(Vec16 a, Vec16 b) {
  return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
KILN_INLINE Vec16 vec_div(Vec16 a, Vec16 b) {
  return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)};
}
// apply2's maximum and minimum: b when it is larger (smaller) or NaN, else a.
KILN_INLINE __m256 max8(__m256 a, __m256 b) {
  const __m256 take_b =
      _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(a, b, take_b);
}
KILN_INLINE __m256 min8(__m256 a, __m256 b) {
  const __m256 take_b =
      _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_LT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(a, b, take_b);
}
KILN_INLINE Vec16 vec_max(Vec16 a, Vec16 b) { return {max8(a.lo, b.lo), max8(a.hi, b.hi)}; }
KILN_INLINE Vec16 vec_min(Vec16 a, Vec16 b) { return {min8(a.lo, b.lo), min8(a.hi, b.hi)}; }
// max and min as above when one operand is known not to be NaN (a chain's scalar): maxps
// and minps return their second operand on NaN and on equal values, as apply2 does then.
/// max(a, b), b not NaN.
KILN_INLINE Vec16 vec_max_number(Vec16 a, Vec16 b) {
  return {_mm256_max_ps(b.lo, a.lo), _mm256_max_ps(b.hi, a.hi)};
}
/// min(a, b), b not NaN.
KILN_INLINE Vec16 vec_min_number(Vec16 a, Vec16 b) {
  return {_mm256_min_ps(b.lo, a.lo), _mm256_min_ps(b.hi, a.hi)};
}
/// b where it is larger than a or NaN, else a (a not NaN).
KILN_INLINE __m256 number_max8(__m256 a, __m256 b) {
  return _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_NLE_UQ));
}
/// b where it is smaller than a or NaN, else a (a not NaN).
KILN_INLINE __m256 number_min8(__m256 a, __m256 b) {
  return _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_NGE_UQ));
}
/// max(a, b), a not NaN.
KILN_INLINE Vec16 vec_number_max(Vec16 a, Vec16 b) {
  return {number_max8(a.lo, b.lo), number_max8(a.hi, b.hi)};
}
/// min(a, b), a not NaN.
KILN_INLINE Vec16 vec_number_min(Vec16 a, Vec16 b) {
  return {number_min8(a.lo, b.lo), number_min8(a.hi, b.hi)};
}
/// Lanes j < n of eight set (n may exceed 8).
KILN_INLINE __m256i first_lanes8(std::size_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<std::size_t>(n, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/// p[0, n) and zeros, n <= 16; reads nothing past p[n).
KILN_INLINE Vec16 vec_load_n(const float* p, std::size_t n) {
  return {_mm256_maskload_ps(p, first_lanes8(n)),
          _mm256_maskload_ps(p + 8, first_lanes8(n > 8 ? n - 8 : 0))};
}
/// Stores v's first n lanes, n <= 8, in pieces of 4, 2 and 1: a masked store (vmaskmovps)
/// is tens of micro-ops on AMD's cores.
KILN_INLINE void store_n8(float* p, __m256 v, std::size_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 part = _mm256_castps256_ps128(v);
  if ((n & 4) != 0) {
    _mm_storeu_ps(p, part);
    p += 4;
    part = _mm256_extractf128_ps(v, 1);
  }
  if ((n & 2) != 0) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), part);
    p += 2;
    part = _mm_movehl_ps(part, part);
  }
  if ((n & 1) != 0) _mm_store_ss(p, part);
}
/// Stores a's first n lanes, n <= 16.
KILN_INLINE void vec_store_n(float* p, Vec16 a, std::size_t n) {
  if (n > 8) {
    _mm256_storeu_ps(p, a.lo);
    store_n8(p + 8, a.hi, n - 8);
  } else {
    store_n8(p, a.lo, n);
  }
}
/// Of x = a then b (16 floats): the lanes kPick chooses from each 128-bit half, in order
/// (0x88: the even-indexed ones, 0xdd: the odd ones).
template <int kPick>
KILN_INLINE __m256 pick8(__m256 a, __m256 b) {
  // shuffle_ps picks within 128-bit lanes, [a0 a2 b0 b2 | a4 a6 b4 b6] for 0x88; the
  // 64-bit pairs are then put in order.
  return _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, kPick)), 0xd8));
}
/// Of x = a then b (32 floats): its even-indexed ones and its odd-indexed ones.
KILN_INLINE void vec_split(Vec16 a, Vec16 b, Vec16& even, Vec16& odd) {
  even = {pick8<0x88>(a.lo, a.hi), pick8<0x88>(b.lo, b.hi)};
  odd = {pick8<0xdd>(a.lo, a.hi), pick8<0xdd>(b.lo, b.hi)};
}
/// Columns of 16 outputs depthwise_plane keeps in registers per row, and rows (eight
/// registers of sums).
inline constexpr std::size_t kDepthwiseVectors = 1, kDepthwiseRows = 4;
/// Output rows and channels conv_channels8 keeps in registers at once: eight registers of
/// sums, of sixteen (two rows of eight channels, as with AVX-512, spilled: ResNet-18's stem
/// took 8.0 ms on an AMD EPYC, 3.3 ms so, its FMA floor 2.3 ms).
inline constexpr std::size_t kConvRows = 1, kConvChannels = 4;
#else
struct Vec16 {
  float v[16];
};
KILN_INLINE Vec16 vec_broadcast(float x) {
  Vec16 r;
  for (float& e : r.v) e = x;
  return r;
}
KILN_INLINE Vec16 vec_load(const float* p) {
  Vec16 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
KILN_INLINE Vec16 vec_fma(Vec16 a, Vec16 b, Vec16 c) {
  for (std::size_t j = 0; j < 16; ++j) c.v[j] = fmadd(a.v[j], b.v[j], c.v[j]);
  return c;
}
KILN_INLINE void vec_store(float* p, Vec16 a) { std::memcpy(p, a.v, sizeof a.v); }
template <Binary F>
KILN_INLINE Vec16 vec_lanes(Vec16 a, Vec16 b) {
  for (std::size_t j = 0; j < 16; ++j) a.v[j] = apply2<F>(a.v[j], b.v[j]);
  return a;
}
KILN_INLINE Vec16 vec_add(Vec16 a, Vec16 b) { return vec_lanes<Binary::add>(a, b); }
KILN_INLINE Vec16 vec_sub(Vec16 a, Vec16 b) { return vec_lanes<Binary::sub>(a, b); }
KILN_INLINE Vec16 vec_mul(Vec16 a, Vec16 b) { return vec_lanes<Binary::mul>(a, b); }
KILN_INLINE Vec16 vec_div(Vec16 a, Vec16 b) { return vec_lanes<Binary::div>(a, b); }
KILN_INLINE Vec16 vec_max(Vec16 a, Vec16 b) { return vec_lanes<Binary::max>(a, b); }
KILN_INLINE Vec16 vec_min(Vec16 a, Vec16 b) { return vec_lanes<Binary::min>(a, b); }
// One operand not NaN changes nothing here.
KILN_INLINE Vec16 vec_max_number(Vec16 a, Vec16 b) { return vec_max(a, b); }
KILN_INLINE Vec16 vec_min_number(Vec16 a, Vec16 b) { return vec_min(a, b); }
KILN_INLINE Vec16 vec_number_max(Vec16 a, Vec16 b) { return vec_max(a, b); }
KILN_INLINE Vec16 vec_number_min(Vec16 a, Vec16 b) { return vec_min(a, b); }
/// p[0, n) and zeros, n <= 16; reads nothing past p[n).
KILN_INLINE Vec16 vec_load_n(const float* p, std::size_t n) {
  Vec16 r = vec_broadcast(0.0f);
  std::memcpy(r.v, p, n * sizeof(float));
  return r;
}
/// Stores a's first n lanes, n <= 16.
KILN_INLINE void vec_store_n(float* p, Vec16 a, std::size_t n) {
  std::memcpy(p, a.v, n * sizeof(float));
}
/// Of x = a then b (32 floats): its even-indexed ones and its odd-indexed ones.
KILN_INLINE void vec_split(Vec16 a, Vec16 b, Vec16& even, Vec16& odd) {
  for (std::size_t j = 0; j < 8; ++j) {
    even.v[j] = a.v[2 * j], odd.v[j] = a.v[2 * j + 1];
    even.v[8 + j] = b.v[2 * j], odd.v[8 + j] = b.v[2 * j + 1];
  }
}
/// Columns of 16 outputs depthwise_plane keeps per row, and rows.
inline constexpr std::size_t kDepthwiseVectors = 1, kDepthwiseRows = 4;
/// Output rows and channels conv_channels8 computes at once.
inline constexpr std::size_t kConvRows = 1, kConvChannels = 4;
#endif
/// exp_f's range reduction and polynomial on sixteen lanes, its operations in its order:
/// for c clamped as exp_f clamps it, k = round(c log2 e) and q = e^(c - k ln 2), where
/// e^c = q 2^k (each copy below scales by 2^k its own way).
KILN_INLINE Vec16 exp_reduced(Vec16 c, Vec16& k) {
  const Vec16 magic = vec_broadcast(12582912.0f);  // round_to_int's
  k = vec_sub(vec_add(vec_mul(c, vec_broadcast(1.44269504088896341f)), magic), magic);
  Vec16 r = vec_fma(k, vec_broadcast(-0.693359375f), c);
  r = vec_fma(k, vec_broadcast(2.12194440e-4f), r);
  Vec16 p = vec_broadcast(1.9875691500e-4f);
  for (const float coefficient :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = vec_fma(p, r, vec_broadcast(coefficient));
  return vec_add(vec_fma(p, vec_mul(r, r), r), vec_broadcast(1.0f));
}
#if defined(__AVX512F__)
/// exp_f on sixteen lanes, the same bits: q 2^k by vscalefps (one rounding, into the
/// denormals too) instead of exp_f's two multiplies by powers of two and its selects, a
/// third of the instructions.
inline constexpr bool kVecExp = true;
KILN_INLINE Vec16 vec_exp(Vec16 x) {
  const __m512 zero = _mm512_setzero_ps();
  const __mmask16 tiny = _mm512_cmp_ps_mask(x.v, _mm512_set1_ps(-104.0f), _CMP_LT_OQ);
  // NaN lanes compute NaN and are replaced by x at the end, as exp_f's.
  const __m512 most = _mm512_set1_ps(89.0f);
  const Vec16 c{_mm512_mask_mov_ps(
      _mm512_mask_mov_ps(x.v, _mm512_cmp_ps_mask(x.v, most, _CMP_GT_OQ), most), tiny, zero)};
  Vec16 k;
  const __m512 q = exp_reduced(c, k).v;
  // (The masked form: GCC 12 warns that the unmasked one reads an uninitialised source.)
  const __m512 e = _mm512_mask_mov_ps(_mm512_mask_scalef_ps(q, 0xffff, q, k.v), tiny, zero);
  return {_mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q), x.v)};
}
#elif defined(__AVX2__) && defined(__FMA__)
/// exp_f's clamps of x on eight lanes.
KILN_INLINE __m256 exp_clamped8(__m256 x) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 most = _mm256_set1_ps(89.0f), least = _mm256_set1_ps(-104.0f);
  __m256 c = _mm256_blendv_ps(x, most, _mm256_cmp_ps(x, most, _CMP_GT_OQ));
  c = _mm256_blendv_ps(c, zero, _mm256_cmp_ps(c, least, _CMP_LT_OQ));
  return _mm256_blendv_ps(c, zero, _mm256_cmp_ps(c, c, _CMP_UNORD_Q));
}
/// exp_f's q 2^k on eight lanes: 2^k built from k's bits as pow2_minus1 does, the
/// denormal results scaled by 2^-64 after; x's zeros and NaNs kept as exp_f keeps them.
KILN_INLINE __m256 exp_scaled8(__m256 x, __m256 k, __m256 q) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 denormal = _mm256_cmp_ps(k, _mm256_set1_ps(-125.0f), _CMP_LT_OQ);
  const __m256 kk = _mm256_blendv_ps(k, _mm256_add_ps(k, _mm256_set1_ps(64.0f)), denormal);
  const __m256 scale = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(kk), _mm256_set1_epi32(126)), 23));
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(q, _mm256_set1_ps(2.0f)), scale);
  const __m256 scaled =
      _mm256_blendv_ps(e, _mm256_mul_ps(e, _mm256_set1_ps(5.42101086242752217e-20f)), denormal);
  const __m256 result =
      _mm256_blendv_ps(scaled, zero, _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ));
  return _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
/// exp_f on sixteen lanes, its operations in its order (the same bits; than the lane-by-lane
/// loop, SiLU 0.89 -> 1.02 and softmax 0.73 -> 0.88 G elements/s in cache on an AMD EPYC).
inline constexpr bool kVecExp = true;
KILN_INLINE Vec16 vec_exp(Vec16 x) {
  Vec16 k;
  const Vec16 q = exp_reduced({exp_clamped8(x.lo), exp_clamped8(x.hi)}, k);
  return {exp_scaled8(x.lo, k.lo, q.lo), exp_scaled8(x.hi, k.hi, q.hi)};
}
#else
/// exp_f on sixteen lanes (this copy: lane by lane, where the caller's loop vectorises it).
inline constexpr bool kVecExp = false;
KILN_INLINE Vec16 vec_exp(Vec16 x) {
  float lanes[16];
  vec_store(lanes, x);
  for (float& v : lanes) v = exp_f(v);
  return vec_load(lanes);
}
#endif
}  // namespace

namespace {

/// The functions of exp that vec_exp computes sixteen lanes at a time where it is fast (the
/// same operations as `apply`'s, in the same order: the same bits).
template <Unary F>
KILN_INLINE Vec16 vec_apply(Vec16 x) {
  const Vec16 one = vec_broadcast(1.0f);
  const auto sigmoid = [&](Vec16 v) {
    return vec_div(one, vec_add(one, vec_exp(vec_sub(vec_broadcast(0.0f), v))));
  };
  if constexpr (F == Unary::exp) return vec_exp(x);
  if constexpr (F == Unary::sigmoid) return sigmoid(x);
  if constexpr (F == Unary::silu) return vec_mul(x, sigmoid(x));
  if constexpr (F == Unary::gelu_tanh) {
    const Vec16 cube = vec_mul(vec_mul(vec_mul(vec_broadcast(0.044715f), x), x), x);
    return vec_mul(x, sigmoid(vec_mul(vec_broadcast(1.5957691216057308f), vec_add(x, cube))));
  }
  return x;
}

template <Unary F>
void unary_vec_loop(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) vec_store(y + i, vec_apply<F>(vec_load(x + i)));
  for (; i < n; ++i) y[i] = apply(F, x[i]);
}

}  // namespace

void unary(Unary f, const float* x, float* y, std::size_t n) {
  if constexpr (kVecExp) {
    switch (f) {
      case Unary::exp:
        return unary_vec_loop<Unary::exp>(x, y, n);
      case Unary::sigmoid:
        return unary_vec_loop<Unary::sigmoid>(x, y, n);
      case Unary::silu:
        return unary_vec_loop<Unary::silu>(x, y, n);
      case Unary::gelu_tanh:
        return unary_vec_loop<Unary::gelu_tanh>(x, y, n);
      default:
        break;
    }
  }
  switch (f) {
#define KILN_CASE(name)               \
  case Unary::name:                   \
    unary_loop<Unary::name>(x, y, n); \
    return;
    KILN_CASE(neg)
    KILN_CASE(abs)
    KILN_CASE(exp)
    KILN_CASE(log)
    KILN_CASE(sqrt)
    KILN_CASE(rsqrt)
    KILN_CASE(tanh)
    KILN_CASE(erf)
    KILN_CASE(sin)
    KILN_CASE(cos)
    KILN_CASE(tan)
    KILN_CASE(sign)
    KILN_CASE(floor)
    KILN_CASE(ceil)
    KILN_CASE(round)
    KILN_CASE(sigmoid)
    KILN_CASE(relu)
    KILN_CASE(silu)
    KILN_CASE(gelu_erf)
    KILN_CASE(gelu_tanh)
    KILN_CASE(copy)
    KILN_CASE(to_mask)
#undef KILN_CASE
  }
}

void binary(Binary f, const float* a, std::size_t a_stride, const float* b, std::size_t b_stride,
            float* y, std::size_t n) {
  switch (f) {
    case Binary::add:
      return binary_loop<Binary::add>(a, a_stride, b, b_stride, y, n);
    case Binary::sub:
      return binary_loop<Binary::sub>(a, a_stride, b, b_stride, y, n);
    case Binary::mul:
      return binary_loop<Binary::mul>(a, a_stride, b, b_stride, y, n);
    case Binary::div:
      return binary_loop<Binary::div>(a, a_stride, b, b_stride, y, n);
    case Binary::max:
      return binary_loop<Binary::max>(a, a_stride, b, b_stride, y, n);
    case Binary::min:
      return binary_loop<Binary::min>(a, a_stride, b, b_stride, y, n);
    case Binary::pow:
      if (b_stride == 0 && small_integer_pow(a, a_stride, b[0], y, n)) return;
      return binary_loop<Binary::pow>(a, a_stride, b, b_stride, y, n);
    case Binary::fmod:
      return binary_loop<Binary::fmod>(a, a_stride, b, b_stride, y, n);
    case Binary::eq:
      return binary_loop<Binary::eq>(a, a_stride, b, b_stride, y, n);
    case Binary::ne:
      return binary_loop<Binary::ne>(a, a_stride, b, b_stride, y, n);
    case Binary::lt:
      return binary_loop<Binary::lt>(a, a_stride, b, b_stride, y, n);
    case Binary::le:
      return binary_loop<Binary::le>(a, a_stride, b, b_stride, y, n);
    case Binary::gt:
      return binary_loop<Binary::gt>(a, a_stride, b, b_stride, y, n);
    case Binary::ge:
      return binary_loop<Binary::ge>(a, a_stride, b, b_stride, y, n);
  }
}

void select(const float* mask, std::size_t sm, const float* a, std::size_t sa, const float* b,
            std::size_t sb, float* y, std::size_t n) {
  if (sm == 0) {  // one mask value: all of one operand
    const float* from = mask[0] != 0.0f ? a : b;
    const std::size_t stride = mask[0] != 0.0f ? sa : sb;
    for (std::size_t i = 0; i < n; ++i) y[i] = from[i * stride];
  } else if (sa == 1 && sb == 1) {
    for (std::size_t i = 0; i < n; ++i) y[i] = mask[i] != 0.0f ? a[i] : b[i];
  } else if (sa == 1) {
    const float bv = b[0];
    for (std::size_t i = 0; i < n; ++i) y[i] = mask[i] != 0.0f ? a[i] : bv;
  } else if (sb == 1) {
    const float av = a[0];
    for (std::size_t i = 0; i < n; ++i) y[i] = mask[i] != 0.0f ? av : b[i];
  } else {
    const float av = a[0], bv = b[0];
    for (std::size_t i = 0; i < n; ++i) y[i] = mask[i] != 0.0f ? av : bv;
  }
}

double sum(const float* x, std::size_t n) {
  double acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) acc[j] += static_cast<double>(x[i + j]);
  for (std::size_t j = 0; i < n; ++i, ++j) acc[j] += static_cast<double>(x[i]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double sum_squares(const float* x, std::size_t n, double center) {
  double acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      const double d = static_cast<double>(x[i + j]) - center;
      acc[j] += d * d;
    }
  for (std::size_t j = 0; i < n; ++i, ++j) {
    const double d = static_cast<double>(x[i]) - center;
    acc[j] += d * d;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

float max(const float* x, std::size_t n) {
  // The eight partial maxima as one GCC vector: the compiler does not vectorise the
  // compare-and-select over an array of eight as a whole (a third of the speed on the
  // rows of attention's softmax); the same lanes in the same order on every target.
  using Lanes = float __attribute__((vector_size(32)));
  Lanes m = Lanes{} - INFINITY;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof v);
    m = ((m < v) | (v != v)) ? v : m;  // a NaN, once in a lane, stays: the maximum is NaN
  }
  for (std::size_t j = 0; i < n; ++i, ++j) m[j] = m[j] < x[i] || x[i] != x[i] ? x[i] : m[j];
  float best = m[0];
  for (std::size_t j = 0; j < 8; ++j) best = best < m[j] || m[j] != m[j] ? m[j] : best;
  return best;
}

namespace {
/// softmax_row's exponentials t of x, in y, and 1 / Σ t.
KILN_INLINE float softmax_exponentials(const float* x, float* y, std::size_t n) {
  const float mx = max(x, n);
  // The exponentials and their sum in one pass: per piece of 1024, sixteen lanes of f32
  // partial sums (one AVX-512 register, two AVX2 ones or sixteen scalars: the same on
  // every target), added pairwise, then the pieces' sums in double (long rows lose
  // nothing to f32 sums).
  double total = 0;
  std::size_t i = 0;
  while (i < n) {
    const std::size_t end = std::min(n, i + 1024);
    // The sums in a register (as an array on the stack every add waited for the last).
    Vec16 sums = vec_broadcast(0.0f);
    for (; i + 16 <= end; i += 16) {
      if constexpr (kVecExp) {
        const Vec16 e = vec_exp(vec_sub(vec_load(x + i), vec_broadcast(mx)));
        vec_store(y + i, e);
        sums = vec_add(sums, e);
      } else {
        for (std::size_t j = 0; j < 16; ++j) y[i + j] = exp_f(x[i + j] - mx);
        sums = vec_add(sums, vec_load(y + i));
      }
    }
    float acc[16];
    vec_store(acc, sums);
    for (std::size_t j = 0; i < end; ++i, ++j) {
      const float e = exp_f(x[i] - mx);
      y[i] = e;
      acc[j] += e;
    }
    for (std::size_t width = 8; width > 0; width /= 2)
      for (std::size_t j = 0; j < width; ++j) acc[j] += acc[j + width];
    total += static_cast<double>(acc[0]);
  }
  return 1.0f / static_cast<float>(total);  // a multiply is cheaper
}
}  // namespace

void softmax_row(const float* x, float* y, std::size_t n) {
  const float inverse = softmax_exponentials(x, y, n);
  for (std::size_t i = 0; i < n; ++i) y[i] = y[i] * inverse;
}

void softmax_rows(const SoftmaxRows& p) {
  for (std::size_t r = 0; r < p.rows; ++r) {
    float* x = p.x + r * p.row;
    if (p.add != nullptr) {
      const float* a = p.add + r * p.add_row;
      std::size_t i = 0;
      for (; i + 16 <= p.n; i += 16) vec_store(x + i, vec_add(vec_load(x + i), vec_load(a + i)));
      if (i < p.n) {
        const std::size_t left = p.n - i;
        vec_store_n(x + i, vec_add(vec_load_n(x + i, left), vec_load_n(a + i, left)), left);
      }
    }
    const float inverse = softmax_exponentials(x, x, p.n);
    if (p.nan_to == nullptr) {
      for (std::size_t i = 0; i < p.n; ++i) x[i] = x[i] * inverse;
      continue;
    }
    const float to = *p.nan_to;
    for (std::size_t i = 0; i < p.n; ++i) {
      const float y = x[i] * inverse;
      x[i] = y != y ? to : y;
    }
  }
}

void normalize_row(const float* x, double mean, double scale, const float* gamma, const float* beta,
                   float* y, std::size_t n) {
  // In f32 (the double version's conversions kept the loop at half this speed): the
  // mean as hi + lo, so that (x - hi) - lo loses nothing where x is close to the mean (x - hi
  // is exact there), then a multiply by the scale and a multiply-add.
  const auto hi = static_cast<float>(mean);
  const auto lo = static_cast<float>(mean - static_cast<double>(hi));
  const auto s = static_cast<float>(scale);
  if (beta == nullptr) {
    for (std::size_t i = 0; i < n; ++i) y[i] = ((x[i] - hi) - lo) * s * gamma[i];
    return;
  }
  for (std::size_t i = 0; i < n; ++i) y[i] = fmadd(((x[i] - hi) - lo) * s, gamma[i], beta[i]);
}

void round_bf16(const float* x, std::uint16_t* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = to_bf16(x[i]);  // the compiler selects, no branch
}

void round_bf16_f32(const float* x, float* y, std::size_t n, float scale) {
  for (std::size_t i = 0; i < n; ++i)
    y[i] = std::bit_cast<float>(static_cast<std::uint32_t>(to_bf16(x[i] * scale)) << 16);
}

namespace {

/// matmul_panel for R rows; Full: all kPanel columns (a width the compiler knows, so that
/// the accumulators live in registers).
/// An element of a panel as f32: itself, or a bfloat16 widened (exact: a shift).
KILN_INLINE float widen(float x) { return x; }
KILN_INLINE float widen(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

template <std::size_t R, bool Full, class B>
KILN_INLINE void panel_rows(const float* a, std::size_t a_row, std::size_t a_col, const B* b,
                            std::size_t ldb, std::size_t k, float* c, std::size_t ldc,
                            std::size_t cols) {
  const std::size_t width = Full ? kPanel : cols;
  float acc[R][kPanel] = {};
  for (std::size_t p = 0; p < k; ++p) {
    const B* row = b + p * ldb;
    for (std::size_t r = 0; r < R; ++r) {
      const float x = a[r * a_row + p * a_col];
      for (std::size_t j = 0; j < width; ++j) acc[r][j] = fmadd(x, widen(row[j]), acc[r][j]);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t j = 0; j < width; ++j) c[r * ldc + j] = acc[r][j];
}

template <std::size_t R, class B>
void panel_of(const float* a, std::size_t a_row, std::size_t a_col, const B* b, std::size_t ldb,
              std::size_t k, float* c, std::size_t ldc, std::size_t cols) {
  if (cols == kPanel)
    panel_rows<R, true>(a, a_row, a_col, b, ldb, k, c, ldc, cols);
  else
    panel_rows<R, false>(a, a_row, a_col, b, ldb, k, c, ldc, cols);
}

template <class B>
void panel(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows, const B* b,
           std::size_t ldb, std::size_t k, float* c, std::size_t ldc, std::size_t cols) {
  switch (rows) {
    case 1:
      return panel_of<1>(a, a_row, a_col, b, ldb, k, c, ldc, cols);
    case 2:
      return panel_of<2>(a, a_row, a_col, b, ldb, k, c, ldc, cols);
    case 3:
      return panel_of<3>(a, a_row, a_col, b, ldb, k, c, ldc, cols);
    default:
      return panel_of<4>(a, a_row, a_col, b, ldb, k, c, ldc, cols);
  }
}

}  // namespace

void matmul_panel(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows,
                  const float* b, std::size_t ldb, std::size_t k, float* c, std::size_t ldc,
                  std::size_t cols) {
  panel(a, a_row, a_col, rows, b, ldb, k, c, ldc, cols);
}

void matmul_panel_bf16(const float* a, std::size_t a_row, std::size_t a_col, std::size_t rows,
                       const std::uint16_t* b, std::size_t ldb, std::size_t k, float* c,
                       std::size_t ldc, std::size_t cols) {
  panel(a, a_row, a_col, rows, b, ldb, k, c, ldc, cols);
}

namespace {

/// depthwise_plane's arguments.
struct DepthwiseArgs {
  const float* in;
  std::size_t in_row, row_step;
  const std::size_t* taps;
  const float* w;
  std::size_t kh, kw;
  float bias;
  float* out;
  std::size_t oh, ow;
};

/// Outputs [x, x + n) of R output rows of depthwise_plane from row oy, 16 (C - 1) < n <=
/// 16 C: all 16 C computed (the input has kDepthwiseSlack floats to read past each row), n
/// stored. R x C independent sums hide the multiply-add's latency. KW: the window's width,
/// or 0 for a.kw (a known width unrolls the taps).
template <std::size_t R, std::size_t C, std::size_t KW>
KILN_INLINE void depthwise_rows(const DepthwiseArgs& a, std::size_t oy, std::size_t x,
                                std::size_t n) {
  const std::size_t kw = KW != 0 ? KW : a.kw, in_step = a.row_step * a.in_row;
  const float* top = a.in + oy * in_step + x;
  Vec16 acc[R][C];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t c = 0; c < C; ++c) acc[r][c] = vec_broadcast(a.bias);
  for (std::size_t ky = 0; ky < a.kh; ++ky) {
    const float* row = top + ky * a.in_row;
    for (std::size_t kx = 0; kx < kw; ++kx) {
      const Vec16 wv = vec_broadcast(a.w[ky * kw + kx]);
      const float* s = row + a.taps[kx];
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t c = 0; c < C; ++c)
          acc[r][c] = vec_fma(wv, vec_load(s + r * in_step + 16 * c), acc[r][c]);
    }
  }
  float* out = a.out + oy * a.ow + x;
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t c = 0; c + 1 < C; ++c) vec_store(out + r * a.ow + 16 * c, acc[r][c]);
    const std::size_t last = n - 16 * (C - 1);
    if (last == 16)
      vec_store(out + r * a.ow + 16 * (C - 1), acc[r][C - 1]);
    else
      vec_store_n(out + r * a.ow + 16 * (C - 1), acc[r][C - 1], last);
  }
}

/// Outputs [x, x + n) of every row, R rows at a time; the last block overlaps the one before
/// it rather than leaving rows to fewer sums (it writes the same values again). Planes of
/// fewer rows take blocks of R / 2.
template <std::size_t R, std::size_t C, std::size_t KW>
KILN_INLINE void depthwise_columns(const DepthwiseArgs& a, std::size_t x, std::size_t n) {
  if constexpr (R > 1) {
    if (a.oh < R) {
      depthwise_columns<R / 2, C, KW>(a, x, n);
      return;
    }
  }
  for (std::size_t oy = 0;; oy += R) {
    oy = std::min(oy, a.oh - R);
    depthwise_rows<R, C, KW>(a, oy, x, n);
    if (oy + R >= a.oh) break;
  }
}

template <std::size_t KW>
void depthwise_plane_of(const DepthwiseArgs& a) {
  std::size_t x = 0;
  if constexpr (kDepthwiseVectors == 2)
    for (; x + 16 < a.ow; x += 32)
      depthwise_columns<kDepthwiseRows / 2, 2, KW>(a, x, std::min<std::size_t>(32, a.ow - x));
  for (; x < a.ow; x += 16)
    depthwise_columns<kDepthwiseRows, 1, KW>(a, x, std::min<std::size_t>(16, a.ow - x));
}
}  // namespace

void depthwise_plane(const float* in, std::size_t in_row, std::size_t row_step,
                     const std::size_t* taps, const float* w, std::size_t kh, std::size_t kw,
                     float bias, float* out, std::size_t oh, std::size_t ow) {
  static_assert(16 <= kDepthwiseSlack);
  if (oh == 0 || ow == 0) return;
  const DepthwiseArgs a{in, in_row, row_step, taps, w, kh, kw, bias, out, oh, ow};
  if (kw == 3)
    depthwise_plane_of<3>(a);
  else if (kw == 5)
    depthwise_plane_of<5>(a);
  else
    depthwise_plane_of<0>(a);
}

void copy_rows(const float* from, std::size_t w, std::size_t n, std::size_t rows, float* to,
               std::size_t cols, std::size_t at, std::size_t at_odd, bool split) {
  // Whole vectors, and the row's tail by scalars: AVX2's masked loads and stores
  // (vmaskmovps) are several times slower on AMD's cores (MobileNetV3's stride-2 depthwise
  // convs spent 5x their sums' time here on an AMD EPYC).
  for (std::size_t r = 0; r < rows; ++r) {
    const float* src = from + r * w;
    float* row = to + r * cols;
    std::size_t x = 0;
    // A row's tail by one more vector that overlaps the one before it (writing the same
    // values again), not by scalars: a row of 28 was one vector and 12 scalar copies, a
    // stride-2 row of 56 one split and 12 scalar pairs (MobileNetV3's).
    if (!split) {
      for (; x + 16 <= n; x += 16) vec_store(row + at + x, vec_load(src + x));
      if (x < n && n >= 16) {
        vec_store(row + at + n - 16, vec_load(src + n - 16));
        x = n;
      }
      for (; x < n; ++x) row[at + x] = src[x];
      continue;
    }
    const auto split_block = [&](std::size_t from_x) {
      Vec16 even, odd;
      vec_split(vec_load(src + from_x), vec_load(src + from_x + 16), even, odd);
      vec_store(row + at + from_x / 2, even);
      vec_store(row + at_odd + from_x / 2, odd);
    };
    for (; x + 32 <= n; x += 32) split_block(x);
    if (x + 1 < n && n >= 32) {  // from an even x, so that evens stay evens
      const std::size_t last = (n - 32) & ~std::size_t{1};
      split_block(last);
      x = last + 32;
    }
    for (; x + 1 < n; x += 2) {
      row[at + x / 2] = src[x];
      row[at_odd + x / 2] = src[x + 1];
    }
    if (x < n) row[at + x / 2] = src[x];
  }
}

namespace {
/// Outputs [x, x + n) of R rows of conv_channels8's channels [J0, J0 + J) (`top`: the first
/// row's window tops in plane 0, `out` its outputs in channel 0), n <= 16: J channels x R
/// rows of 16 sums.
template <std::size_t R, std::size_t J0, std::size_t J>
KILN_INLINE void conv_channels8_rows(const ConvChannels8& p, const float* top, float* out,
                                     std::size_t n) {
  static_assert(J0 + J <= 8);
  if (J0 >= p.channels) return;
  Vec16 acc[R][J];
  for (std::size_t j = 0; j < J; ++j) {
    const Vec16 b = vec_broadcast(p.bias[J0 + j]);
    for (std::size_t r = 0; r < R; ++r) acc[r][j] = b;
  }
  const std::size_t down = p.row_step * p.in_row;
  const float* w = p.w + J0;
  for (std::size_t ci = 0; ci < p.c; ++ci) {
    for (std::size_t ky = 0; ky < p.kh; ++ky) {
      const float* row = top + ci * p.in_plane + ky * p.in_row;
      for (std::size_t kx = 0; kx < p.kw; ++kx, w += 8) {
        Vec16 v[R];
        for (std::size_t r = 0; r < R; ++r) v[r] = vec_load(row + p.taps[kx] + r * down);
        for (std::size_t j = 0; j < J; ++j) {
          const Vec16 wj = vec_broadcast(w[j]);
          for (std::size_t r = 0; r < R; ++r) acc[r][j] = vec_fma(wj, v[r], acc[r][j]);
        }
      }
    }
  }
  for (std::size_t j = 0; j < J && J0 + j < p.channels; ++j)
    for (std::size_t r = 0; r < R; ++r) {
      float* o = out + (J0 + j) * p.out_plane + r * p.ow;
      if (n == 16) {
        vec_store(o, acc[r][j]);
      } else {
        float lanes[16];
        vec_store(lanes, acc[r][j]);
        std::memcpy(o, lanes, n * sizeof(float));
      }
    }
}

/// conv_channels8_rows for every channel, kConvChannels at a time.
template <std::size_t R>
KILN_INLINE void conv_channels8_all(const ConvChannels8& p, const float* top, float* out,
                                    std::size_t n) {
  conv_channels8_rows<R, 0, kConvChannels>(p, top, out, n);
  if constexpr (kConvChannels < 8)
    conv_channels8_rows<R, kConvChannels, 8 - kConvChannels>(p, top, out, n);
}
}  // namespace

void conv_channels8(const ConvChannels8& p) {
  std::size_t oy = 0;
  for (; oy + kConvRows <= p.oh; oy += kConvRows)
    for (std::size_t x = 0; x < p.ow; x += 16)
      conv_channels8_all<kConvRows>(p, p.in + oy * p.row_step * p.in_row + x, p.out + oy * p.ow + x,
                                    std::min<std::size_t>(16, p.ow - x));
  for (; oy < p.oh; ++oy)
    for (std::size_t x = 0; x < p.ow; x += 16)
      conv_channels8_all<1>(p, p.in + oy * p.row_step * p.in_row + x, p.out + oy * p.ow + x,
                            std::min<std::size_t>(16, p.ow - x));
}

namespace {
/// Bᵀ d of F(4x4, 3x3) along one line of six: v0 = 4d0 - 5d2 + d4, v1,2 = (d4 - 4d2) ±
/// (d3 - 4d1), v3,4 = (d4 - d2) ± 2(d3 - d1), v5 = 4d1 - 5d3 + d5.
KILN_INLINE void winograd_in6(const Vec16 (&d)[6], Vec16 (&v)[6]) {
  const Vec16 four = vec_broadcast(4.0f), minus4 = vec_broadcast(-4.0f),
              minus5 = vec_broadcast(-5.0f), two = vec_broadcast(2.0f);
  v[0] = vec_fma(four, d[0], vec_fma(minus5, d[2], d[4]));
  const Vec16 a = vec_fma(minus4, d[2], d[4]), b = vec_fma(minus4, d[1], d[3]);
  v[1] = vec_add(a, b);
  v[2] = vec_sub(a, b);
  const Vec16 c = vec_sub(d[4], d[2]), e = vec_mul(two, vec_sub(d[3], d[1]));
  v[3] = vec_add(c, e);
  v[4] = vec_sub(c, e);
  v[5] = vec_fma(four, d[1], vec_fma(minus5, d[3], d[5]));
}
/// Aᵀ m of F(4x4, 3x3) along one line of six: y0 = m0 + (m1 + m2) + (m3 + m4),
/// y1,3 = (m1 - m2) + 2 or 8 (m3 - m4) (+ m5 for y3), y2 = (m1 + m2) + 4 (m3 + m4).
KILN_INLINE void winograd_out6(const Vec16 (&m)[6], Vec16 (&y)[4]) {
  const Vec16 p = vec_add(m[1], m[2]), q = vec_sub(m[1], m[2]), r = vec_add(m[3], m[4]),
              s = vec_sub(m[3], m[4]);
  y[0] = vec_add(vec_add(m[0], p), r);
  y[1] = vec_fma(vec_broadcast(2.0f), s, q);
  y[2] = vec_fma(vec_broadcast(4.0f), r, p);
  y[3] = vec_add(vec_fma(vec_broadcast(8.0f), s, q), m[5]);
}
}  // namespace

void winograd_input_4x3(const float* patch, std::size_t row, float* v, std::size_t v_stride) {
  Vec16 t[6][6];  // Bᵀ d: t[a][x]
  for (std::size_t x = 0; x < 6; ++x) {
    Vec16 d[6], out[6];
    for (std::size_t y = 0; y < 6; ++y) d[y] = vec_load(patch + y * row + x * 16);
    winograd_in6(d, out);
    for (std::size_t a = 0; a < 6; ++a) t[a][x] = out[a];
  }
  for (std::size_t a = 0; a < 6; ++a) {  // (Bᵀ d) B, row by row
    Vec16 out[6];
    winograd_in6(t[a], out);
    for (std::size_t b = 0; b < 6; ++b) vec_store(v + (a * 6 + b) * v_stride, out[b]);
  }
}

void winograd_output_4x3(const float* m, std::size_t m_stride, const float* bias, float* out,
                         std::size_t row) {
  Vec16 t[4][6];  // Aᵀ M: t[y][b]
  for (std::size_t b = 0; b < 6; ++b) {
    Vec16 col[6], y4[4];
    for (std::size_t a = 0; a < 6; ++a) col[a] = vec_load(m + (a * 6 + b) * m_stride);
    winograd_out6(col, y4);
    for (std::size_t y = 0; y < 4; ++y) t[y][b] = y4[y];
  }
  const Vec16 shift = vec_load(bias);
  for (std::size_t y = 0; y < 4; ++y) {  // (Aᵀ M) A, row by row, then the bias
    Vec16 x4[4];
    winograd_out6(t[y], x4);
    for (std::size_t x = 0; x < 4; ++x) vec_store(out + y * row + x * 16, vec_add(x4[x], shift));
  }
}

void winograd_input_2x3(const float* patch, std::size_t row, float* v, std::size_t v_stride) {
  // Bᵀ d along each line of four: d0 - d2, d1 + d2, d2 - d1, d1 - d3; columns, then rows.
  const auto line = [](const Vec16(&d)[4], Vec16(&out)[4]) {
    out[0] = vec_sub(d[0], d[2]);
    out[1] = vec_add(d[1], d[2]);
    out[2] = vec_sub(d[2], d[1]);
    out[3] = vec_sub(d[1], d[3]);
  };
  Vec16 t[4][4];
  for (std::size_t x = 0; x < 4; ++x) {
    Vec16 d[4], out[4];
    for (std::size_t y = 0; y < 4; ++y) d[y] = vec_load(patch + y * row + x * 16);
    line(d, out);
    for (std::size_t a = 0; a < 4; ++a) t[a][x] = out[a];
  }
  for (std::size_t a = 0; a < 4; ++a) {
    Vec16 out[4];
    line(t[a], out);
    for (std::size_t b = 0; b < 4; ++b) vec_store(v + (a * 4 + b) * v_stride, out[b]);
  }
}

void winograd_output_2x3(const float* m, std::size_t m_stride, const float* bias, float* out,
                         std::size_t row) {
  // Aᵀ m along each line of four: m0 + m1 + m2, m1 - m2 - m3; columns, then rows.
  Vec16 t[2][4];
  for (std::size_t b = 0; b < 4; ++b) {
    Vec16 c[4];
    for (std::size_t a = 0; a < 4; ++a) c[a] = vec_load(m + (a * 4 + b) * m_stride);
    t[0][b] = vec_add(vec_add(c[0], c[1]), c[2]);
    t[1][b] = vec_sub(vec_sub(c[1], c[2]), c[3]);
  }
  const Vec16 shift = vec_load(bias);
  for (std::size_t y = 0; y < 2; ++y) {
    const Vec16(&c)[4] = t[y];
    vec_store(out + y * row, vec_add(vec_add(vec_add(c[0], c[1]), c[2]), shift));
    vec_store(out + y * row + 16, vec_add(vec_sub(vec_sub(c[1], c[2]), c[3]), shift));
  }
}

#if defined(__AVX2__)
namespace {
/// The 8x8 transpose of r[0..8) (row i, lane j to row j, lane i).
KILN_INLINE void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}
}  // namespace
#endif

void interleave16(const float* src, std::size_t src_stride, std::size_t n, float* dst) {
  std::size_t x = 0;
#if defined(__AVX2__)
  for (; x + 8 <= n; x += 8)
    for (std::size_t half = 0; half < 16; half += 8) {
      __m256 r[8];
      for (std::size_t j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + (half + j) * src_stride + x);
      transpose8(r);
      for (std::size_t k = 0; k < 8; ++k) _mm256_storeu_ps(dst + (x + k) * 16 + half, r[k]);
    }
#endif
  for (; x < n; ++x)
    for (std::size_t j = 0; j < 16; ++j) dst[x * 16 + j] = src[j * src_stride + x];
}

void deinterleave16(const float* src, std::size_t n, float* dst, std::size_t dst_stride) {
  std::size_t x = 0;
#if defined(__AVX2__)
  for (; x + 8 <= n; x += 8)
    for (std::size_t half = 0; half < 16; half += 8) {
      __m256 r[8];
      for (std::size_t k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + (x + k) * 16 + half);
      transpose8(r);
      for (std::size_t j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (half + j) * dst_stride + x, r[j]);
    }
#endif
  for (; x < n; ++x)
    for (std::size_t j = 0; j < 16; ++j) dst[j * dst_stride + x] = src[x * 16 + j];
}

namespace {
/// One binary_chain step on V vectors of t at once (independent values hide the ops'
/// latency): t = f(t, o), or flipped f(o, t), o one broadcast scalar or, with \p x, the
/// input loaded again (from L1: only t stays in registers, four vectors of it within AVX2's
/// sixteen with room for the ops).
template <std::size_t V, class F>
KILN_INLINE void chain_step(Vec16 (&t)[V], bool flip, float scalar, const float* x, F f) {
  if (x != nullptr) {
    if (flip)
      for (std::size_t r = 0; r < V; ++r) t[r] = f(vec_load(x + 16 * r), t[r]);
    else
      for (std::size_t r = 0; r < V; ++r) t[r] = f(t[r], vec_load(x + 16 * r));
    return;
  }
  const Vec16 c = vec_broadcast(scalar);
  if (flip)
    for (std::size_t r = 0; r < V; ++r) t[r] = f(c, t[r]);
  else
    for (std::size_t r = 0; r < V; ++r) t[r] = f(t[r], c);
}

/// A max or min step of binary_chain: \p general (apply2's), or with a scalar operand that
/// is not NaN (\p number) \p number_first (flipped: f(scalar, t)) or \p number_second.
template <std::size_t V, class General, class NumberFirst, class NumberSecond>
KILN_INLINE void extremum_step(Vec16 (&t)[V], const ChainStep& step, const float* in, bool number,
                               General general, NumberFirst number_first,
                               NumberSecond number_second) {
  if (number && step.flip)
    chain_step<V>(t, true, step.scalar, nullptr, number_first);
  else if (number)
    chain_step<V>(t, false, step.scalar, nullptr, number_second);
  else
    chain_step<V>(t, step.flip, step.scalar, in, general);
}

/// binary_chain on the 16 V floats at x, to y. A max or min with a scalar that is not NaN
/// is one maxps or minps (two ops flipped) instead of apply2's general four.
template <std::size_t V>
KILN_INLINE void chain_block(const float* x, const ChainStep* steps, std::size_t num_steps,
                             float* y) {
  Vec16 t[V];
  for (std::size_t r = 0; r < V; ++r) t[r] = vec_load(x + 16 * r);
  for (std::size_t s = 0; s < num_steps; ++s) {
    const ChainStep& step = steps[s];
    const float* in = step.input ? x : nullptr;
    const bool number = in == nullptr && !std::isnan(step.scalar);
    switch (step.f) {
      case Binary::add:
        chain_step<V>(t, step.flip, step.scalar, in,
                      [](Vec16 a, Vec16 b) { return vec_add(a, b); });
        break;
      case Binary::sub:
        chain_step<V>(t, step.flip, step.scalar, in,
                      [](Vec16 a, Vec16 b) { return vec_sub(a, b); });
        break;
      case Binary::mul:
        chain_step<V>(t, step.flip, step.scalar, in,
                      [](Vec16 a, Vec16 b) { return vec_mul(a, b); });
        break;
      case Binary::div:
        chain_step<V>(t, step.flip, step.scalar, in,
                      [](Vec16 a, Vec16 b) { return vec_div(a, b); });
        break;
      case Binary::max:
        extremum_step<V>(
            t, step, in, number, [](Vec16 a, Vec16 b) { return vec_max(a, b); },
            [](Vec16 a, Vec16 b) { return vec_number_max(a, b); },
            [](Vec16 a, Vec16 b) { return vec_max_number(a, b); });
        break;
      default:
        extremum_step<V>(
            t, step, in, number, [](Vec16 a, Vec16 b) { return vec_min(a, b); },
            [](Vec16 a, Vec16 b) { return vec_number_min(a, b); },
            [](Vec16 a, Vec16 b) { return vec_min_number(a, b); });
        break;
    }
  }
  for (std::size_t r = 0; r < V; ++r) vec_store(y + 16 * r, t[r]);
}
}  // namespace

void binary_chain(const float* x, const ChainStep* steps, std::size_t num_steps, float* y,
                  std::size_t n) {
  // Lanes are independent and each op exact per lane: every width gives the same bits.
  constexpr std::size_t kVectors = 4, kBlock = 16 * kVectors;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) chain_block<kVectors>(x + i, steps, num_steps, y + i);
  for (; i + 16 <= n; i += 16) chain_block<1>(x + i, steps, num_steps, y + i);
  if (i < n) {  // the tail through a vector of its own (a 7x7 plane's runs are 49 long)
    float tail[16] = {};
    std::memcpy(tail, x + i, (n - i) * sizeof(float));
    chain_block<1>(tail, steps, num_steps, tail);
    std::memcpy(y + i, tail, (n - i) * sizeof(float));
  }
}

}  // namespace kiln::compiler::vmath::KILN_VMATH_TARGET
