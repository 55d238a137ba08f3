#include "compiler/cpu/vector_math.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/cpu/bf16_emulation.hpp"
#include "compiler/cpu/vector_math_targets.hpp"

namespace kiln::compiler::vmath {
namespace {

/// Distance in units in the last place between two floats of the same sign.
double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  if (got == w) return 0;
  const float spacing = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

std::vector<float> samples(float low, float high) {
  std::vector<float> x;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(low, high);
  for (int i = 0; i < 20000; ++i) x.push_back(u(rng));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, 0.5f, -0.5f, 0.55f, 1.0f, -1.0f, low, high})
    x.push_back(v);
  return x;
}

struct Case {
  Unary f;
  double (*exact)(double);
  float low, high;
  double max_ulps;  // relative accuracy, where |exact| > 1e-3
  double max_abs;   // absolute accuracy everywhere
};

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(VectorMath, UnaryFunctionsMatchDoublePrecision) {
  const std::vector<Case> cases = {
      {Unary::exp, [](double x) { return std::exp(x); }, -87, 88, 2, 0},
      {Unary::log, [](double x) { return std::log(x); }, 1e-30f, 1e30f, 2, 0},
      {Unary::tanh, [](double x) { return std::tanh(x); }, -12, 12, 3, 0},
      {Unary::erf, [](double x) { return std::erf(x); }, -6, 6, 3, 0},
      {Unary::erf, [](double x) { return std::erf(x); }, -0.6f, 0.6f, 3, 0},  // both forms
      {Unary::sigmoid, sigmoid, -80, 80, 4, 0},
      {Unary::silu, [](double x) { return x / (1 + std::exp(-x)); }, -80, 80, 4, 0},
      {Unary::gelu_erf, gelu_erf, -10, 10, 1e9, 5e-7},
      // The argument 2u = 2c(x + 0.044715x³) is rounded to f32 before e^-2u: ~1e-7·|2u| relative.
      {Unary::gelu_tanh, gelu_tanh, -10, 10, 24, 0},
      {Unary::sqrt, [](double x) { return std::sqrt(x); }, 0, 1e6, 0.5, 0},
      {Unary::rsqrt, [](double x) { return 1 / std::sqrt(x); }, 1e-6f, 1e6, 1.5, 0},
  };
  for (const Case& c : cases) {
    const std::vector<float> x = samples(c.low, c.high);
    std::vector<float> y(x.size());
    unary(c.f, x.data(), y.data(), x.size());
    double worst_ulps = 0, worst_abs = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = c.exact(static_cast<double>(x[i]));
      worst_abs = std::max(worst_abs, std::fabs(static_cast<double>(y[i]) - want));
      if (std::fabs(want) > 1e-3) worst_ulps = std::max(worst_ulps, ulps(y[i], want));
    }
    EXPECT_LE(worst_ulps, c.max_ulps) << "function " << static_cast<int>(c.f);
    if (c.max_abs > 0) {
      EXPECT_LE(worst_abs, c.max_abs) << "function " << static_cast<int>(c.f);
    }
  }
}

TEST(VectorMath, ErfIsAccurateRelativelyDownToTheSmallestNormals) {
  // erf(x) ~ 2x/sqrt(pi) near 0: 1 - erfc would lose every digit there; the series keeps
  // them (the general test checks relative accuracy above 1e-3 only).
  std::vector<float> x;
  for (double v = 1e-37; v < 1e-2; v *= 1.37) {
    x.push_back(static_cast<float>(v));
    x.push_back(static_cast<float>(-v));
  }
  std::vector<float> y(x.size());
  unary(Unary::erf, x.data(), y.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_LE(ulps(y[i], std::erf(static_cast<double>(x[i]))), 2) << x[i];
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0.5f, -0.5f, 10.0f};
  float out[8];
  unary(Unary::erf, specials, out, 8);
  EXPECT_TRUE(out[0] == 0.0f && !std::signbit(out[0]));
  EXPECT_TRUE(out[1] == 0.0f && std::signbit(out[1]));  // erf(-0) = -0
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], -1.0f);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_LE(ulps(out[5], std::erf(0.5)), 2);
  EXPECT_LE(ulps(out[6], std::erf(-0.5)), 2);
  EXPECT_EQ(out[7], 1.0f);
}

TEST(VectorMath, ErfBasedGeluIsAccurateInAbsoluteTerms) {
  std::vector<float> x;
  for (float v = -6; v <= 6; v += 0.001f) x.push_back(v);
  std::vector<float> y(x.size());
  unary(Unary::gelu_erf, x.data(), y.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], gelu_erf(x[i]), 5e-7 * std::max(1.0f, std::fabs(x[i]))) << x[i];
}

TEST(VectorMath, SpecialValues) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, inf, -inf, 0.0f, -1.0f, 1e-40f, 100.0f, -100.0f};
  std::vector<float> y(x.size());
  unary(Unary::exp, x.data(), y.data(), x.size());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], inf);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[6], inf);
  EXPECT_NEAR(y[7], 3.7835059e-44f, 2e-45f);  // e^-100: a denormal, not 0
  {  // the normal range's end and the denormals (e^-87 was once 0)
    const std::vector<float> low = {-87.0f, -87.5f, -95.0f, -103.0f, -103.9f, -104.5f, -200.0f};
    std::vector<float> e(low.size());
    unary(Unary::exp, low.data(), e.data(), low.size());
    for (std::size_t i = 0; i < low.size(); ++i) {
      const float want = std::exp(low[i]);
      EXPECT_NEAR(e[i], want, std::max(want * 2e-6f, 1.5e-45f)) << "exp(" << low[i] << ")";
    }
    // Below -104 exactly 0 (made without an underflowing step: a masked score is -3.4e38),
    // and a softmax row with masked scores gives them 0 and the rest their share.
    const float lowest = std::numeric_limits<float>::lowest();
    const std::vector<float> masked = {lowest, -104.01f, -1e30f, -inf};
    std::vector<float> z(masked.size(), -7.0f);
    unary(Unary::exp, masked.data(), z.data(), masked.size());
    for (std::size_t i = 0; i < masked.size(); ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(z[i]), 0u) << "exp(" << masked[i] << ")";
    const std::vector<float> row = {0.5f, lowest, 0.5f, lowest, lowest};
    std::vector<float> p(row.size());
    softmax_row(row.data(), p.data(), row.size());
    EXPECT_EQ(p, (std::vector<float>{0.5f, 0.0f, 0.5f, 0.0f, 0.0f}));
  }
  unary(Unary::log, x.data(), y.data(), x.size());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], inf);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], -inf);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_NEAR(y[5], std::log(1e-40), 1e-4);  // a denormal input
  unary(Unary::tanh, x.data(), y.data(), x.size());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], -1.0f);
  EXPECT_EQ(y[6], 1.0f);
  EXPECT_EQ(y[7], -1.0f);
  unary(Unary::gelu_erf, x.data(), y.data(), x.size());
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[6], 100.0f);
  EXPECT_EQ(y[7], -0.0f);
  unary(Unary::relu, x.data(), y.data(), x.size());
  EXPECT_TRUE(std::isnan(y[0]));  // NaN propagates, as in PyTorch
  EXPECT_EQ(y[4], 0.0f);
  unary(Unary::tanh, x.data() + 3, y.data(), 1);
  const float minus_zero = -0.0f;
  unary(Unary::tanh, &minus_zero, y.data() + 1, 1);
  EXPECT_FALSE(std::signbit(y[0]));
  EXPECT_TRUE(std::signbit(y[1]));  // tanh(-0) = -0
  const float a[] = {1.0f, nan, nan, -0.0f}, b[] = {nan, 1.0f, nan, 2.0f};
  float m[4];
  binary(Binary::max, a, 1, b, 1, m, 4);
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]) && std::isnan(m[2]));  // as PyTorch
  EXPECT_EQ(m[3], 2.0f);
  binary(Binary::min, a, 1, b, 1, m, 4);
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1]) && std::isnan(m[2]));
  EXPECT_EQ(m[3], -0.0f);
}

TEST(VectorMath, EveryInstructionSetComputesTheSameBits) {
  const std::vector<float> x = samples(-30, 30);
  std::vector<float> want(x.size()), got(x.size());
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (int f = 0; f <= static_cast<int>(Unary::to_mask); ++f) {
    base::unary(static_cast<Unary>(f), x.data(), want.data(), x.size());
    for (const auto& [available, run] :
         {std::pair{avx2, &avx2::unary}, std::pair{avx512, &avx512::unary}}) {
      if (!available) continue;
      run(static_cast<Unary>(f), x.data(), got.data(), x.size());
      for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_TRUE(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
            << "function " << f << " at " << x[i] << ": " << got[i] << " vs " << want[i];
    }
  }
  // The reductions too, on a length that leaves a tail.
  const std::size_t n = x.size() - 3;
  for (const auto& [available, copy] : {std::pair{avx2, 0}, std::pair{avx512, 1}}) {
    if (!available) continue;
    EXPECT_EQ(copy ? avx512::sum(x.data(), n) : avx2::sum(x.data(), n), base::sum(x.data(), n));
    EXPECT_EQ(copy ? avx512::sum_squares(x.data(), n, 0.25) : avx2::sum_squares(x.data(), n, 0.25),
              base::sum_squares(x.data(), n, 0.25));
    EXPECT_EQ(copy ? avx512::max(x.data(), n) : avx2::max(x.data(), n), base::max(x.data(), n));
    // The row functions.
    std::vector<float> gamma(n), beta(n);
    for (std::size_t i = 0; i < n; ++i) {
      gamma[i] = x[(i * 7) % n];
      beta[i] = x[(i * 13) % n];
    }
    for (const float* b :
         {static_cast<const float*>(beta.data()), static_cast<const float*>(nullptr)}) {
      base::normalize_row(x.data(), 0.125, 0.75, gamma.data(), b, want.data(), n);
      (copy ? avx512::normalize_row : avx2::normalize_row)(x.data(), 0.125, 0.75, gamma.data(), b,
                                                           got.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "normalize_row at " << i;
    }
    base::softmax_row(x.data(), want.data(), n);
    (copy ? avx512::softmax_row : avx2::softmax_row)(x.data(), got.data(), n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "softmax_row at " << i;
  }
  EXPECT_NE(std::string(instruction_set()), "");
}

TEST(VectorMath, ExponentialsGiveTheSameBitsOnEveryInstructionSetOverTheirWholeRange) {
  // exp and the functions built on it (the AVX-512 copy computes them sixteen lanes at a
  // time, by vscalefps): every input from the overflow past e^89 down through the
  // denormal results (below -87.3) and the zeros (below -104), the specials, and a row
  // with a tail; softmax rows that reach the denormals too.
  std::vector<float> x;
  for (float v = -120.0f; v < 100.0f; v += 0.0137f) x.push_back(v);
  for (float v : {88.72f, 88.7228f, 89.0f, 89.5f, -87.33f, -103.97f, -103.99f, -104.0f, -104.01f,
                  0.0f, -0.0f, 1e-30f, -1e-30f, INFINITY, -INFINITY, NAN, -NAN, 3.4e38f, -3.4e38f})
    x.push_back(v);
  x.push_back(0.5f);  // a tail
  std::vector<float> want(x.size()), got(x.size());
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (Unary f : {Unary::exp, Unary::sigmoid, Unary::silu, Unary::gelu_tanh}) {
    base::unary(f, x.data(), want.data(), x.size());
    for (const auto& [available, run] :
         {std::pair{avx2, &avx2::unary}, std::pair{avx512, &avx512::unary}}) {
      if (!available) continue;
      run(f, x.data(), got.data(), x.size());
      for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_TRUE(std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]) ||
                    (std::isnan(got[i]) && std::isnan(want[i])))
            << "function " << static_cast<int>(f) << " at " << x[i] << ": " << got[i] << " vs "
            << want[i];
    }
  }
  for (const auto& [available, run] :
       {std::pair{avx2, &avx2::softmax_row}, std::pair{avx512, &avx512::softmax_row}}) {
    if (!available) continue;
    for (const float spread : {1.0f, 30.0f, 110.0f}) {  // 110: denormal and zero results
      std::vector<float> row(37);
      for (std::size_t i = 0; i < row.size(); ++i)
        row[i] = spread * static_cast<float>(i % 11) / 10.0f - (i == 5 ? 3.4e38f : 0.0f);
      std::vector<float> w(row.size()), g(row.size());
      base::softmax_row(row.data(), w.data(), row.size());
      run(row.data(), g.data(), row.size());
      EXPECT_EQ(g, w) << "spread " << spread;
    }
  }
}

TEST(VectorMath, ReductionsMatchDoublePrecision) {
  std::vector<float> x = samples(-3, 3);
  double s = 0, ss = 0;
  float m = -INFINITY;
  for (float v : x) {
    s += v;
    m = std::max(m, v);
  }
  const double mean = s / static_cast<double>(x.size());
  for (float v : x) ss += (v - mean) * (v - mean);
  EXPECT_NEAR(sum(x.data(), x.size()), s, 1e-9 * x.size());
  EXPECT_NEAR(sum_squares(x.data(), x.size(), mean), ss, 1e-9 * ss);
  EXPECT_EQ(max(x.data(), x.size()), m);
  x[5] = NAN;  // propagates, as in PyTorch
  EXPECT_TRUE(std::isnan(max(x.data(), x.size())));
  EXPECT_TRUE(std::isnan(max(x.data() + 5, x.size() - 5)));
  EXPECT_EQ(max(x.data(), 0), -INFINITY);
  EXPECT_EQ(sum(x.data(), 0), 0.0);
}

TEST(VectorMath, SoftmaxRowsMatchDoublePrecisionShortAndLong) {
  // Attention's rows of 128 (one piece of f32 partial sums), and rows of many pieces (the
  // pieces' sums in double), with tails of every length; each value within a few f32
  // roundings of the double formula, relative to the largest.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{128}, std::size_t{1000},
                        std::size_t{5000}, std::size_t{100003}}) {
    std::vector<float> x(n), y(n);
    for (float& v : x) v = normal(rng);
    softmax_row(x.data(), y.data(), n);
    const double mx = *std::max_element(x.begin(), x.end());
    double total = 0;
    for (float v : x) total += std::exp(static_cast<double>(v) - mx);
    double worst = 0, largest = 0, sum_y = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double want = std::exp(static_cast<double>(x[i]) - mx) / total;
      worst = std::max(worst, std::abs(y[i] - want));
      largest = std::max(largest, want);
      sum_y += y[i];
    }
    EXPECT_LT(worst, 4e-7 * largest) << "n " << n;
    EXPECT_NEAR(sum_y, 1.0, 1e-5) << "n " << n;
  }
}

TEST(VectorMath, SoftmaxRowsGiveTheBitsOfAddSoftmaxAndNanReplacementOneByOne) {
  // Attention's rows with their mask added and NaNs replaced in one call: per row, the bits
  // of binary add, softmax_row and a select, on every instruction set. Rows of a few
  // lengths (tails of the 16-float vectors, more than one piece of 1024), one mask row for
  // every row or one per row, no mask, masked keys (-inf), a row masked whole (NaN, then
  // the replacement) and a NaN score; rows `row` apart with the gap between them untouched.
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  const float replacement = 0.0f, other = -2.5f;
  for (const std::size_t n : {1, 5, 16, 33, 128, 1100}) {
    const std::size_t rows = 4, row = n + 3;
    std::vector<float> x(rows * row), mask(rows * n);
    for (float& v : x) v = normal(rng);
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 5 == 1 ? -inf : normal(rng);
    for (std::size_t i = 0; i < n; ++i) mask[2 * n + i] = -inf;  // row 2 masked whole
    x[3 * row + n / 2] = nan;                                    // row 3: a NaN score
    for (const std::size_t add_row : {std::size_t{0}, n})
      for (const bool masked : {false, true})
        for (const float* nan_to : {static_cast<const float*>(nullptr), &replacement, &other}) {
          std::vector<float> want = x;
          for (std::size_t r = 0; r < rows; ++r) {
            float* w = want.data() + r * row;
            if (masked) base::binary(Binary::add, w, 1, mask.data() + r * add_row, 1, w, n);
            base::softmax_row(w, w, n);
            if (nan_to != nullptr)
              for (std::size_t i = 0; i < n; ++i) w[i] = std::isnan(w[i]) ? *nan_to : w[i];
          }
          for (const auto& [available, run, name] :
               {std::tuple{true, &base::softmax_rows, "base"},
                std::tuple{avx2, &avx2::softmax_rows, "avx2"},
                std::tuple{avx512, &avx512::softmax_rows, "avx512"}}) {
            if (!available) continue;
            std::vector<float> got = x;
            run({.x = got.data(),
                 .rows = rows,
                 .n = n,
                 .row = row,
                 .add = masked ? mask.data() : nullptr,
                 .add_row = add_row,
                 .nan_to = nan_to});
            for (std::size_t i = 0; i < got.size(); ++i)
              ASSERT_TRUE(std::bit_cast<std::uint32_t>(got[i]) ==
                              std::bit_cast<std::uint32_t>(want[i]) ||
                          (std::isnan(got[i]) && std::isnan(want[i])))
                  << name << ": n " << n << ", add_row " << add_row << ", masked " << masked
                  << ", nan_to " << (nan_to ? *nan_to : 1.0f) << ", element " << i << ": " << got[i]
                  << " vs " << want[i];
          }
          if (masked && nan_to != nullptr) {  // the replacement did happen
            std::vector<float> got = x;
            softmax_rows({.x = got.data(),
                          .rows = rows,
                          .n = n,
                          .row = row,
                          .add = mask.data(),
                          .add_row = add_row,
                          .nan_to = nan_to});
            EXPECT_EQ(got[2 * row], add_row == 0 ? got[2 * row] : *nan_to) << n;
            EXPECT_EQ(got[3 * row], *nan_to) << n;
          }
        }
  }
}

TEST(VectorMath, NormalizedRowsAreAccurateFarFromZeroToo) {
  // Rows around 0 and around 1000 (where x - mean in one f32 step would lose the small
  // differences a norm is about), with and without beta; against the double formula.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> noise(-1, 1);
  const std::size_t n = 203;  // vector bodies and a tail
  std::vector<float> gamma(n), beta(n), x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) gamma[i] = 0.5f + noise(rng), beta[i] = noise(rng);
  for (const float center : {0.0f, 1000.0f}) {
    double sum = 0;
    for (float& v : x) sum += v = center + 0.01f * noise(rng);
    const double mean = sum / n, scale = 1 / 0.0057;
    for (const float* b :
         {static_cast<const float*>(beta.data()), static_cast<const float*>(nullptr)}) {
      normalize_row(x.data(), mean, scale, gamma.data(), b, y.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const double t = (static_cast<double>(x[i]) - mean) * scale * gamma[i];
        const double bi = b != nullptr ? b[i] : 0.0;
        ASSERT_NEAR(y[i], t + bi, 3e-7 * (std::fabs(t) + std::fabs(bi)))
            << "at " << i << " of a row around " << center;
      }
    }
  }
}

TEST(VectorMath, BinaryBroadcastsAStrideOfZero) {
  const std::vector<float> a = {1, 2, 3, 4}, b = {10};
  std::vector<float> y(4);
  binary(Binary::sub, a.data(), 1, b.data(), 0, y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{-9, -8, -7, -6}));
  binary(Binary::div, b.data(), 0, a.data(), 1, y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{10, 5, 10.0f / 3, 2.5f}));
  binary(Binary::max, a.data(), 0, b.data(), 0, y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{10, 10, 10, 10}));
  binary(Binary::pow, a.data(), 1, a.data(), 1, y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{1, 4, 27, 256}));
}

TEST(VectorMath, BinaryChainsGiveTheBitsOfTheirStepsOneByOneOnEveryInstructionSet) {
  // Hard-swish as exports write it (x * min(max(x / 6 + 0.5, 0), 1)), flipped operands,
  // the input as an operand, NaN scalars, max and min with scalars in either order; inputs with
  // NaN, infinities and signed zeros; lengths with and without whole blocks of 64 and vectors of
  // 16, and tails shorter than a vector.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-5, 5);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  using S = ChainStep;
  const std::vector<std::vector<S>> chains = {
      {{Binary::mul, false, false, 1.0f / 6},
       {Binary::add, false, false, 0.5f},
       {Binary::max, false, false, 0.0f},
       {Binary::min, false, false, 1.0f},
       {Binary::mul, true, true, 0.0f}},
      {{Binary::sub, true, false, 2.0f},
       {Binary::div, true, false, 1.0f},
       {Binary::max, true, false, -0.0f},
       {Binary::min, true, true, 0.0f}},
      {{Binary::mul, false, true, 0.0f},
       {Binary::div, false, false, 3.0f},
       {Binary::sub, false, true, 0.0f}},
      {{Binary::max, false, false, nan}, {Binary::add, false, false, 1.0f}},
      {{Binary::min, true, false, nan}},
      // Scalars that are not NaN take one maxps or minps (two flipped): every order, and
      // signed zeros against signed zeros.
      {{Binary::min, true, false, 0.5f},
       {Binary::max, true, false, -1.0f},
       {Binary::min, false, false, -0.0f},
       {Binary::max, false, false, 0.0f},
       {Binary::max, true, false, nan}},
      {{Binary::max, false, false, -0.0f}, {Binary::min, true, false, -0.0f}},
  };
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (const std::size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 81, 95, 200}) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float specials[] = {nan, inf, -inf, 0.0f, -0.0f, 3.0f};
      x[i] = i % 4 == 0 ? specials[(i / 4) % 6] : u(rng);
    }
    for (std::size_t c = 0; c < chains.size(); ++c) {
      const std::vector<S>& steps = chains[c];
      std::vector<float> want = x, operand(n);
      for (const S& step : steps) {  // the steps one by one
        for (std::size_t i = 0; i < n; ++i) operand[i] = step.input ? x[i] : step.scalar;
        if (step.flip)
          base::binary(step.f, operand.data(), 1, want.data(), 1, want.data(), n);
        else
          base::binary(step.f, want.data(), 1, operand.data(), 1, want.data(), n);
      }
      const auto same = [&](const std::vector<float>& got, const char* copy) {
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_TRUE(std::bit_cast<std::uint32_t>(got[i]) ==
                          std::bit_cast<std::uint32_t>(want[i]) ||
                      (std::isnan(got[i]) && std::isnan(want[i])))
              << copy << ": chain " << c << ", n " << n << ", element " << i << " (x " << x[i]
              << "): " << got[i] << " vs " << want[i];
      };
      for (const auto& [available, run, name] :
           {std::tuple{true, &base::binary_chain, "base"},
            std::tuple{avx2, &avx2::binary_chain, "avx2"},
            std::tuple{avx512, &avx512::binary_chain, "avx512"}}) {
        if (!available) continue;
        std::vector<float> got(n + 1, -7.0f);
        run(x.data(), steps.data(), steps.size(), got.data(), n);
        ASSERT_EQ(got[n], -7.0f) << name << ": written past the end";
        got.resize(n);
        same(got, name);
        std::vector<float> in_place = x;  // y may be x
        run(in_place.data(), steps.data(), steps.size(), in_place.data(), n);
        same(in_place, name);
      }
    }
    // ReLU as max(0, x), the chain step kiln's fused bodies make of it: ReLU's bits (NaN
    // stays NaN, -0 becomes 0), on every copy.
    const S relu{Binary::max, true, false, 0.0f};
    std::vector<float> want(n);
    base::unary(Unary::relu, x.data(), want.data(), n);
    for (const auto& [available, run] :
         {std::pair{true, &base::binary_chain}, std::pair{avx2, &avx2::binary_chain},
          std::pair{avx512, &avx512::binary_chain}}) {
      if (!available) continue;
      std::vector<float> got(n);
      run(x.data(), &relu, 1, got.data(), n);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_TRUE(std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]) ||
                    (std::isnan(got[i]) && std::isnan(want[i])))
            << "ReLU, n " << n << ", element " << i << " (x " << x[i] << "): " << got[i];
    }
  }
}

TEST(VectorMath, PowOfOneExponentOneTwoOrThreeIsLibmsPowInDoubleRounded) {
  // The products that replace pow for these exponents give its values, signs of zero,
  // infinities and NaN included; other exponents still run pow.
  std::vector<float> x = samples(-1e4f, 1e4f);
  for (float v : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                  -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                  -std::numeric_limits<float>::max(), 1e-20f, -3e12f})
    x.push_back(v);
  std::vector<float> y(x.size());
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (const float e : {1.0f, 2.0f, 3.0f, 2.5f, -1.0f}) {
    for (const auto& [available, run] :
         {std::pair{true, &base::binary}, std::pair{avx2, &avx2::binary},
          std::pair{avx512, &avx512::binary}}) {
      if (!available) continue;
      run(Binary::pow, x.data(), 1, &e, 0, y.data(), x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        const auto want = static_cast<float>(std::pow(static_cast<double>(x[i]), double{e}));
        ASSERT_TRUE(std::bit_cast<std::uint32_t>(y[i]) == std::bit_cast<std::uint32_t>(want) ||
                    (std::isnan(y[i]) && std::isnan(want)))
            << x[i] << " ^ " << e << ": " << y[i] << " vs " << want;
      }
    }
  }
}

TEST(VectorMath, ComparisonsGiveMasksAndSelectsReadThemOnEveryInstructionSet) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {1, 2, 3, nan, -0.0f, 5, nan, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const std::vector<float> b = {1, 3, 2, 1, 0.0f, nan, nan, 7, 9, 8, 10, 12, 11, 13, 15, 14, 16};
  const std::size_t n = a.size();
  const struct {
    Binary f;
    bool (*want)(float, float);
  } cases[] = {{Binary::eq, [](float p, float q) { return p == q; }},
               {Binary::ne, [](float p, float q) { return p != q; }},
               {Binary::lt, [](float p, float q) { return p < q; }},
               {Binary::le, [](float p, float q) { return p <= q; }},
               {Binary::gt, [](float p, float q) { return p > q; }},
               {Binary::ge, [](float p, float q) { return p >= q; }}};
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (const auto& [available, binary_fn, select_fn, unary_fn] :
       {std::tuple{true, &base::binary, &base::select, &base::unary},
        std::tuple{avx2, &avx2::binary, &avx2::select, &avx2::unary},
        std::tuple{avx512, &avx512::binary, &avx512::select, &avx512::unary}}) {
    if (!available) continue;
    std::vector<float> mask(n), y(n);
    for (const auto& c : cases) {
      binary_fn(c.f, a.data(), 1, b.data(), 1, mask.data(), n);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(mask[i], c.want(a[i], b[i]) ? 1.0f : 0.0f)
            << "comparison " << static_cast<int>(c.f) << " of " << a[i] << " and " << b[i];
      // Selects by that mask, with each operand whole or broadcast, and the mask broadcast.
      const float nine = 9;
      select_fn(mask.data(), 1, a.data(), 1, b.data(), 1, y.data(), n);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]),
                  std::bit_cast<std::uint32_t>(c.want(a[i], b[i]) ? a[i] : b[i]));
      select_fn(mask.data(), 1, &nine, 0, b.data(), 1, y.data(), n);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]),
                  std::bit_cast<std::uint32_t>(c.want(a[i], b[i]) ? nine : b[i]));
      select_fn(mask.data(), 1, a.data(), 1, &nine, 0, y.data(), n);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]),
                  std::bit_cast<std::uint32_t>(c.want(a[i], b[i]) ? a[i] : nine));
    }
    const float yes = 1, no = 0;
    select_fn(&yes, 0, a.data(), 1, b.data(), 1, y.data(), n);
    EXPECT_EQ(std::memcmp(y.data(), a.data(), n * sizeof(float)), 0);
    select_fn(&no, 0, a.data(), 1, b.data(), 1, y.data(), n);
    EXPECT_EQ(std::memcmp(y.data(), b.data(), n * sizeof(float)), 0);
    // A cast to bool: 1 for anything but zeros (NaN included).
    unary_fn(Unary::to_mask, a.data(), y.data(), n);
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], a[i] != 0.0f ? 1.0f : 0.0f) << a[i];
  }
}

TEST(VectorMath, MatmulPanelsSumInOrderOnEveryInstructionSet) {
  // a: 4 rows with a row stride of 3·k and a column stride of 3 (a transposed, strided
  // view); b: k rows of 80 floats; panels of 64 (registers) and of 13 columns (a tail).
  const std::size_t k = 37, ldb = 80, ldc = 70;
  std::vector<float> a(4 * 3 * k), b(k * ldb);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (std::size_t rows = 1; rows <= kPanelRows; ++rows) {
    for (std::size_t cols : {kPanel, std::size_t{13}}) {
      for (std::size_t depth : {k, std::size_t{0}}) {
        std::vector<float> want(4 * ldc, -1.0f), got(4 * ldc, -1.0f);
        base::matmul_panel(a.data(), 3 * k, 3, rows, b.data() + 5, ldb, depth, want.data(), ldc,
                           cols);
        for (std::size_t r = 0; r < 4; ++r) {
          for (std::size_t j = 0; j < ldc; ++j) {
            const std::string where = "rows " + std::to_string(rows) + ", cols " +
                                      std::to_string(cols) + ", k " + std::to_string(depth) +
                                      ": c[" + std::to_string(r) + "][" + std::to_string(j) + "]";
            if (r >= rows || j >= cols) {
              ASSERT_EQ(want[r * ldc + j], -1.0f) << where << " written outside the panel";
              continue;
            }
            double exact = 0;
            for (std::size_t p = 0; p < depth; ++p)
              exact += static_cast<double>(a[r * 3 * k + p * 3]) * b[p * ldb + 5 + j];
            ASSERT_NEAR(want[r * ldc + j], exact, 1e-5) << where;
          }
        }
        for (const auto& [available, run] :
             {std::pair{avx2, &avx2::matmul_panel}, std::pair{avx512, &avx512::matmul_panel}}) {
          if (!available) continue;
          std::fill(got.begin(), got.end(), -1.0f);
          run(a.data(), 3 * k, 3, rows, b.data() + 5, ldb, depth, got.data(), ldc, cols);
          ASSERT_EQ(got, want) << "rows " << rows << ", cols " << cols << ", k " << depth;
        }
      }
    }
  }
  std::vector<float> c(2 * ldc);
  matmul_panel(a.data(), 3 * k, 3, 2, b.data(), ldb, k, c.data(), ldc, kPanel);  // dispatched
  std::vector<float> want(2 * ldc);
  base::matmul_panel(a.data(), 3 * k, 3, 2, b.data(), ldb, k, want.data(), ldc, kPanel);
  EXPECT_EQ(c, want);
}

TEST(VectorMath, DepthwisePlanesSumInOrderOnEveryInstructionSet) {
  // Planes of 1 to 9 rows (groups of 4 and the rest) and 1 to 49 columns (whole vectors of
  // 16 and tails), 3x3 and 5x2 windows, vertical steps 1 and 2, taps at any offsets: the
  // baseline copy against sums in double, every other copy bit for bit against it, and
  // nothing written outside the output plane.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (const auto& [kh, kw] : {std::pair<std::size_t, std::size_t>{3, 3}, {5, 2}}) {
    for (std::size_t step : {1, 2}) {
      for (std::size_t oh : {1, 4, 9}) {
        for (std::size_t ow : {1, 15, 16, 17, 32, 33, 40, 49}) {
          const std::size_t in_row = ow + 2 * kw + 3, rows = (oh - 1) * step + kh;
          std::vector<float> in(rows * in_row + kDepthwiseSlack), w(kh * kw);
          for (float& v : in) v = u(rng);
          for (float& v : w) v = u(rng);
          std::vector<std::size_t> taps;
          for (std::size_t kx = 0; kx < kw; ++kx) taps.push_back(2 * kx + kx % 2);
          const float bias = u(rng);
          std::vector<float> want(oh * ow + 8, -7.0f), got(oh * ow + 8, -7.0f);
          base::depthwise_plane(in.data(), in_row, step, taps.data(), w.data(), kh, kw, bias,
                                want.data(), oh, ow);
          const std::string what = std::to_string(kh) + "x" + std::to_string(kw) + ", step " +
                                   std::to_string(step) + ", " + std::to_string(oh) + "x" +
                                   std::to_string(ow);
          for (std::size_t y = 0; y < oh; ++y)
            for (std::size_t x = 0; x < ow; ++x) {
              double exact = bias;
              for (std::size_t ky = 0; ky < kh; ++ky)
                for (std::size_t kx = 0; kx < kw; ++kx)
                  exact += static_cast<double>(w[ky * kw + kx]) *
                           in[(y * step + ky) * in_row + taps[kx] + x];
              ASSERT_NEAR(want[y * ow + x], exact, 1e-5) << what << " at " << y << ", " << x;
            }
          for (std::size_t i = oh * ow; i < want.size(); ++i)
            ASSERT_EQ(want[i], -7.0f) << what << ": written past the plane";
          for (const auto& [available, run] : {std::pair{avx2, &avx2::depthwise_plane},
                                               std::pair{avx512, &avx512::depthwise_plane}}) {
            if (!available) continue;
            std::fill(got.begin(), got.end(), -7.0f);
            run(in.data(), in_row, step, taps.data(), w.data(), kh, kw, bias, got.data(), oh, ow);
            ASSERT_EQ(got, want) << what;
          }
        }
      }
    }
  }
  // conv_channels8: 1 to 3 input planes, 1 to 8 output channels, rows in pairs and the
  // rest, whole vectors and tails; the baseline against double, every copy bit for bit.
  for (const auto& [c, channels, kh, kw] :
       {std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>{3, 8, 3, 3},
        {1, 5, 2, 4},
        {2, 1, 1, 1}}) {
    for (std::size_t step : {1, 2}) {
      for (std::size_t oh : {1, 2, 5}) {
        for (std::size_t ow : {1, 16, 23}) {
          const std::size_t in_row = 2 * ow + kw + 3, rows = (oh - 1) * step + kh;
          const std::size_t in_plane = rows * in_row + 5, out_plane = oh * ow + 3;
          std::vector<float> in(c * in_plane + kDepthwiseSlack), w(c * kh * kw * 8), bias(8);
          for (float& v : in) v = u(rng);
          for (float& v : w) v = u(rng);
          for (float& v : bias) v = u(rng);
          std::vector<std::size_t> taps;
          for (std::size_t kx = 0; kx < kw; ++kx) taps.push_back(kx / 2 + (kx % 2) * (ow + 1));
          ConvChannels8 p;
          p.in = in.data(), p.in_plane = in_plane, p.in_row = in_row, p.row_step = step;
          p.taps = taps.data(), p.w = w.data(), p.c = c, p.kh = kh, p.kw = kw;
          p.bias = bias.data(), p.out_plane = out_plane, p.channels = channels, p.oh = oh;
          p.ow = ow;
          std::vector<float> want(8 * out_plane, -7.0f), got(want.size(), -7.0f);
          p.out = want.data();
          base::conv_channels8(p);
          const std::string what = std::to_string(c) + " planes, " + std::to_string(channels) +
                                   " channels, step " + std::to_string(step) + ", " +
                                   std::to_string(oh) + "x" + std::to_string(ow);
          for (std::size_t j = 0; j < 8; ++j)
            for (std::size_t i = 0; i < out_plane; ++i) {
              const float v = want[j * out_plane + i];
              const std::size_t y = i / ow, x = i % ow;
              if (j >= channels || i >= oh * ow) {
                ASSERT_EQ(v, -7.0f) << what << ": written outside channel " << j << "'s plane";
                continue;
              }
              double exact = bias[j];
              for (std::size_t ci = 0; ci < c; ++ci)
                for (std::size_t ky = 0; ky < kh; ++ky)
                  for (std::size_t kx = 0; kx < kw; ++kx)
                    exact += static_cast<double>(w[((ci * kh + ky) * kw + kx) * 8 + j]) *
                             in[ci * in_plane + (y * step + ky) * in_row + taps[kx] + x];
              ASSERT_NEAR(v, exact, 1e-5) << what << " channel " << j << " at " << y << ", " << x;
            }
          for (const auto& [available, run] : {std::pair{avx2, &avx2::conv_channels8},
                                               std::pair{avx512, &avx512::conv_channels8}}) {
            if (!available) continue;
            std::fill(got.begin(), got.end(), -7.0f);
            p.out = got.data();
            run(p);
            ASSERT_EQ(got, want) << what;
          }
        }
      }
    }
  }
  // copy_rows: plain and split, lengths around the vectors' (odd and even, whole vectors,
  // tails that overlap the vector before them), from rows as long as what is copied (the
  // last row ending the buffer: nothing read past it) and longer, on every copy: every
  // float in its place and nothing else written.
  for (bool split : {false, true}) {
    for (const std::size_t n : {0, 1, 2, 7, 16, 17, 28, 31, 32, 33, 56, 63, 64, 65, 66, 79})
      for (const std::size_t slack : {0, 3}) {
        const std::size_t w = n + slack, rows = 3, at = 2, half = (n + 1) / 2;
        const std::size_t at_odd = split ? at + half + 1 : 0, cols = at + n + 4;
        std::vector<float> from(rows * w);
        for (float& v : from) v = u(rng);
        std::vector<float> want(rows * cols, -7.0f);
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t x = 0; x < n; ++x)
            want[r * cols + (!split ? at + x : (x % 2 == 0 ? at : at_odd) + x / 2)] =
                from[r * w + x];
        for (const auto& [available, run] :
             {std::pair{true, &base::copy_rows}, std::pair{avx2, &avx2::copy_rows},
              std::pair{avx512, &avx512::copy_rows}, std::pair{true, &copy_rows}}) {
          if (!available) continue;
          std::vector<float> got(want.size(), -7.0f);
          run(from.data(), w, n, rows, got.data(), cols, at, at_odd, split);
          ASSERT_EQ(got, want) << (split ? "split, " : "") << n << " floats of " << w;
        }
      }
  }
}

TEST(VectorMath, Bf16RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(from_bf16(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even (1); just above goes up.
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // halfway, odd below: up to even
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::nanf("")))));
  EXPECT_EQ(from_bf16(to_bf16(std::numeric_limits<float>::infinity())),
            std::numeric_limits<float>::infinity());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-100, 100);
  for (int i = 0; i < 1000; ++i) {
    const float x = u(rng);
    EXPECT_LE(std::fabs(from_bf16(to_bf16(x)) - x), std::fabs(x) * 0x1p-8f) << x;
  }
}

TEST(VectorMath, Bf16RowsRoundAsToBf16OnEveryInstructionSet) {
  // Ties both ways, values just above them, NaNs (quieted), infinities, the largest finite
  // value (which rounds to infinity), denormals, and a body with a tail.
  std::vector<float> x = {1.0f + 0x1p-8f,
                          1.0f + 3 * 0x1p-8f,
                          1.0f + 0x1p-8f + 0x1p-20f,
                          -2.0f,
                          std::nanf(""),
                          -std::nanf(""),
                          INFINITY,
                          -INFINITY,
                          3.4028235e38f,
                          1e-40f,
                          -0.0f};
  for (float v : samples(-30, 30)) x.push_back(v);
  std::vector<std::uint16_t> want(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = to_bf16(x[i]);
  for (const auto& [available, run] :
       {std::pair{true, &base::round_bf16}, std::pair{cpu_has_avx2(), &avx2::round_bf16},
        std::pair{cpu_has_avx512(), &avx512::round_bf16}, std::pair{true, &round_bf16}}) {
    if (!available) continue;
    std::fill(got.begin(), got.end(), std::uint16_t{0});
    run(x.data(), got.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << x[i];
  }
}

// The emulated bf16 GEMMs' operand pass reads views as they are (dense, rows of a wider
// matrix, transposed, broadcast, more dims than it tracks) and writes them densely,
// times the scale, rounded once: element by element as to_bf16 of the strided element.
TEST(VectorMath, Bf16DenseCopiesOfViewsMatchElementByElement) {
  std::vector<float> data(70000);  // every view below reads within it
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3, 3);
  for (float& v : data) v = u(rng);
  data[5] = std::nanf("");
  data[6] = -0.0f;
  struct View {
    std::vector<std::int64_t> shape, strides;
  };
  const std::vector<View> views = {
      {{8, 128, 64}, {8192, 64, 1}},       // dense: one row
      {{1, 8, 37, 64}, {0, 64, 1536, 1}},  // attention's Q: rows of a wider matrix
      {{1, 8, 64, 37}, {0, 64, 1, 1536}},  // K transposed (a tail of 37 = 2x16 + 5)
      {{3, 19, 21}, {0, 1, 19}},           // transposed and broadcast
      {{5, 7}, {3, 2}},                    // neither dim contiguous
      {{2, 1, 2, 1, 2, 1, 2, 1, 2, 3}, {1500, 7, 600, 7, 250, 7, 100, 7, 30, 1}},  // 10 dims
      {{4, 0, 3}, {3, 3, 1}},                                                      // empty
      {{}, {}}};                                                                   // one element
  for (float scale : {1.0f, 0.125f, 0.3f}) {
    for (const View& v : views) {
      std::int64_t total = 1;
      for (std::int64_t d : v.shape) total *= d;
      std::vector<float> got(static_cast<std::size_t>(total) + 1, 42.0f), want(got.size(), 42.0f);
      for (std::int64_t flat = 0; flat < total; ++flat) {
        std::int64_t offset = 0;
        for (std::int64_t rest = flat, d = static_cast<std::int64_t>(v.shape.size()) - 1; d >= 0;
             --d) {
          const auto k = static_cast<std::size_t>(d);
          offset += rest % v.shape[k] * v.strides[k];
          rest /= v.shape[k];
        }
        want[static_cast<std::size_t>(flat)] =
            from_bf16(to_bf16(data[static_cast<std::size_t>(offset)] * scale));
      }
      round_dense_bf16(data.data(), v.shape, v.strides, got.data(), scale);
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
            << "element " << i << " of a view of " << v.shape.size() << " dims, scale " << scale
            << (i == got.size() - 1 ? " (written past the end)" : "");
    }
  }
}

TEST(VectorMath, Bf16MatmulPanelsWidenExactlyOnEveryInstructionSet) {
  // The same sums as the f32 panel over the widened values, bit for bit, on every copy.
  const std::size_t k = 45, ldc = 70;
  std::vector<float> a(3 * k), widened(k * kPanel);
  std::vector<std::uint16_t> b(k * kPanel);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : a) v = u(rng);
  for (std::size_t i = 0; i < b.size(); ++i) {
    b[i] = to_bf16(u(rng));
    widened[i] = from_bf16(b[i]);
  }
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  for (std::size_t rows = 1; rows <= 3; ++rows) {
    for (std::size_t cols : {kPanel, std::size_t{21}}) {
      std::vector<float> want(3 * ldc, -1.0f);
      base::matmul_panel(a.data(), k, 1, rows, widened.data(), kPanel, k, want.data(), ldc, cols);
      for (const auto& [available, run] :
           {std::pair{true, &base::matmul_panel_bf16}, std::pair{avx2, &avx2::matmul_panel_bf16},
            std::pair{avx512, &avx512::matmul_panel_bf16}}) {
        if (!available) continue;
        std::vector<float> got(3 * ldc, -1.0f);
        run(a.data(), k, 1, rows, b.data(), kPanel, k, got.data(), ldc, cols);
        ASSERT_EQ(got, want) << "rows " << rows << ", cols " << cols;
      }
    }
  }
}

TEST(VectorMath, WinogradTransformsComputeA3x3ConvOnEveryInstructionSet) {
  // F(4x4, 3x3) and F(2x2, 3x3) on sixteen lanes, each its own channel: the input transform,
  // the product with the filter's transform G g Gᵀ (in double here, with G written out
  // independently of kiln's), then the output transform plus the bias give the 3x3
  // correlation of the patch to within f32 roundings; every copy gives the baseline's bits,
  // and nothing is written between the strided rows.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const bool avx512 = cpu_has_avx512(), avx2 = cpu_has_avx2();
  using In = void (*)(const float*, std::size_t, float*, std::size_t);
  using Out = void (*)(const float*, std::size_t, const float*, float*, std::size_t);
  struct Form {
    std::size_t tile;
    std::vector<std::vector<double>> g;  // (tile + 2) x 3
    In in[3];
    Out out[3];
  };
  const Form forms[] = {
      {4,
       {{0.25, 0, 0},
        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
        {1.0 / 24, 1.0 / 12, 1.0 / 6},
        {1.0 / 24, -1.0 / 12, 1.0 / 6},
        {0, 0, 1}},
       {base::winograd_input_4x3, avx2::winograd_input_4x3, avx512::winograd_input_4x3},
       {base::winograd_output_4x3, avx2::winograd_output_4x3, avx512::winograd_output_4x3}},
      {2,
       {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
       {base::winograd_input_2x3, avx2::winograd_input_2x3, avx512::winograd_input_2x3},
       {base::winograd_output_2x3, avx2::winograd_output_2x3, avx512::winograd_output_2x3}}};
  for (const Form& f : forms) {
    const std::size_t alpha = f.tile + 2, points = alpha * alpha;
    const std::size_t row = (alpha + 3) * 16, stride = 16 + 5;  // gaps between rows, points
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> patch(alpha * row), w(16 * 9), bias(16);
      for (float& v : patch) v = u(rng);
      for (float& v : w) v = u(rng);
      for (float& v : bias) v = u(rng);
      const bool available[3] = {true, avx2, avx512};
      std::vector<float> want;
      for (int copy = 0; copy < 3; ++copy) {
        if (!available[copy]) continue;
        std::vector<float> v(points * stride, -7.0f), m(points * stride, -7.0f);
        f.in[copy](patch.data(), row, v.data(), stride);
        for (std::size_t p = 0; p < points; ++p)
          for (std::size_t j = 16; j < stride; ++j)
            ASSERT_EQ(v[p * stride + j], -7.0f) << "tile " << f.tile << ": written between points";
        for (std::size_t a = 0; a < alpha; ++a)
          for (std::size_t b = 0; b < alpha; ++b)
            for (std::size_t j = 0; j < 16; ++j) {
              double t = 0;  // (G g Gᵀ)[a][b] of lane j's filter
              for (std::size_t y = 0; y < 3; ++y)
                for (std::size_t x = 0; x < 3; ++x)
                  t += f.g[a][y] * static_cast<double>(w[j * 9 + y * 3 + x]) * f.g[b][x];
              const std::size_t p = (a * alpha + b) * stride + j;
              m[p] = static_cast<float>(static_cast<double>(v[p]) * t);
            }
        const std::size_t out_row = (f.tile + 1) * 16;
        std::vector<float> got(f.tile * out_row, -7.0f);
        f.out[copy](m.data(), stride, bias.data(), got.data(), out_row);
        if (copy == 0) {
          want = got;
          for (std::size_t y = 0; y < f.tile; ++y)
            for (std::size_t x = 0; x < f.tile + 1; ++x)
              for (std::size_t j = 0; j < 16; ++j) {
                const float value = want[y * out_row + x * 16 + j];
                if (x == f.tile) {
                  ASSERT_EQ(value, -7.0f) << "tile " << f.tile << ": written between rows";
                  continue;
                }
                double exact = bias[j];
                for (std::size_t ky = 0; ky < 3; ++ky)
                  for (std::size_t kx = 0; kx < 3; ++kx)
                    exact += static_cast<double>(w[j * 9 + ky * 3 + kx]) *
                             patch[(y + ky) * row + (x + kx) * 16 + j];
                ASSERT_NEAR(value, exact, 2e-5) << "tile " << f.tile << " at " << y << ", " << x;
              }
        } else {
          ASSERT_EQ(got, want) << "tile " << f.tile << ", copy " << copy;
        }
      }
    }
  }
}

TEST(VectorMath, InterleavingSixteenRowsRoundTripsOnEveryInstructionSet) {
  // Whole groups of 8 columns and tails: dst[x·16 + j] = src[j·stride + x], and back.
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1, 1);
  const bool available[3] = {true, cpu_has_avx2(), cpu_has_avx512()};
  const decltype(&base::interleave16) in[3] = {base::interleave16, avx2::interleave16,
                                               avx512::interleave16};
  const decltype(&base::deinterleave16) out[3] = {base::deinterleave16, avx2::deinterleave16,
                                                  avx512::deinterleave16};
  for (std::size_t n : {1, 7, 8, 9, 16, 23, 56}) {
    const std::size_t stride = n + 3;
    std::vector<float> src(16 * stride);
    for (float& v : src) v = u(rng);
    for (int copy = 0; copy < 3; ++copy) {
      if (!available[copy]) continue;
      std::vector<float> mixed(n * 16 + 4, -7.0f), back(16 * stride, -7.0f);
      in[copy](src.data(), stride, n, mixed.data());
      for (std::size_t x = 0; x < n; ++x)
        for (std::size_t j = 0; j < 16; ++j)
          ASSERT_EQ(mixed[x * 16 + j], src[j * stride + x]) << n << ", copy " << copy;
      for (std::size_t i = n * 16; i < mixed.size(); ++i) ASSERT_EQ(mixed[i], -7.0f);
      out[copy](mixed.data(), n, back.data(), stride);
      for (std::size_t j = 0; j < 16; ++j)
        for (std::size_t x = 0; x < stride; ++x)
          ASSERT_EQ(back[j * stride + x], x < n ? src[j * stride + x] : -7.0f)
              << n << ", copy " << copy << " at " << j << ", " << x;
    }
  }
}

}  // namespace
}  // namespace kiln::compiler::vmath
