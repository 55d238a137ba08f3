#include "kiln/core/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

TEST(DType, SizesMatchTheirCxxTypes) {
  EXPECT_EQ(size_of(DType::f32), sizeof(float));
  EXPECT_EQ(size_of(DType::f16), 2u);
  EXPECT_EQ(size_of(DType::bf16), 2u);
  EXPECT_EQ(size_of(DType::f64), sizeof(double));
  EXPECT_EQ(size_of(DType::i8), 1u);
  EXPECT_EQ(size_of(DType::u8), 1u);
  EXPECT_EQ(size_of(DType::i32), 4u);
  EXPECT_EQ(size_of(DType::i64), 8u);
  EXPECT_EQ(size_of(DType::bool_), sizeof(bool));
  static_assert(dtype_of<float> == DType::f32);
  static_assert(dtype_of<const std::int64_t> == DType::i64);
  static_assert(dtype_of<Half> == DType::f16);
  static_assert(!Element<std::uint16_t>);
}

TEST(DType, NamesRoundTripThroughParse) {
  for (DType d : kAllDTypes) EXPECT_EQ(parse_dtype(name(d)), d) << name(d);
  EXPECT_EQ(name(DType::bool_), "bool");
  std::ostringstream os;
  os << DType::bf16;
  EXPECT_EQ(os.str(), "bf16");
}

TEST(DType, ParseAcceptsCommonAliases) {
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("int64"), DType::i64);
}

TEST(DType, ParseRejectsUnknownNamesListingChoices) {
  KILN_EXPECT_THROW_MSG(parse_dtype("f31"), UserError, "'f31'", "f32, f16, bf16");
  KILN_EXPECT_THROW_MSG(parse_dtype(""), UserError, "unknown dtype ''");
}

TEST(DType, Classification) {
  EXPECT_TRUE(is_floating(DType::bf16));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_TRUE(is_integer(DType::u8));
  EXPECT_FALSE(is_integer(DType::bool_));
}

TEST(Half, ConvertsExactValuesExactly) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 5.9604645e-08f})
    EXPECT_EQ(static_cast<float>(Half(v)), v) << v;
  EXPECT_EQ(Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(Half(-2.0f).bits, 0xc000);
}

TEST(Half, RoundsToNearestEvenAndSaturatesToInfinity) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(Half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
  EXPECT_EQ(Half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(Half(70000.0f).bits, 0x7c00);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(-std::numeric_limits<float>::infinity()))));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.0f)), 3.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(BFloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_EQ(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::nanf("")))));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(DTypeElements, StoreRoundsSaturatesAndLoadReadsBack) {
  unsigned char buffer[8];
  const auto round_trip = [&](DType d, double v) {
    store_from_double(d, v, buffer);
    return load_as_double(d, buffer);
  };
  EXPECT_EQ(round_trip(DType::f32, 0.1), static_cast<double>(0.1f));
  EXPECT_EQ(round_trip(DType::f64, 0.1), 0.1);
  EXPECT_EQ(round_trip(DType::f16, 1.0 / 3), 0.333251953125);
  EXPECT_EQ(round_trip(DType::bf16, 1.0 / 3), 0.333984375);
  EXPECT_EQ(round_trip(DType::i8, 300), 127);
  EXPECT_EQ(round_trip(DType::i8, -2.7), -2);
  EXPECT_EQ(round_trip(DType::u8, -1), 0);
  EXPECT_EQ(round_trip(DType::i32, 1e12), 2147483647);
  EXPECT_EQ(round_trip(DType::i64, std::nan("")), 0);
  EXPECT_EQ(round_trip(DType::bool_, -0.5), 1);
  EXPECT_EQ(round_trip(DType::bool_, 0), 0);
}

}  // namespace
}  // namespace kiln
