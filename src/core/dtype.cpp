#include "kiln/core/dtype.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool floating;
  bool integer;
};

constexpr std::array<DTypeInfo, 9> kInfo = {{
    {DType::f32, "f32", 4, true, false},
    {DType::f16, "f16", 2, true, false},
    {DType::bf16, "bf16", 2, true, false},
    {DType::f64, "f64", 8, true, false},
    {DType::i8, "i8", 1, false, true},
    {DType::u8, "u8", 1, false, true},
    {DType::i32, "i32", 4, false, true},
    {DType::i64, "i64", 8, false, true},
    {DType::bool_, "bool", 1, false, false},
}};

const DTypeInfo& info(DType dtype) noexcept { return kInfo[static_cast<std::size_t>(dtype)]; }

struct Alias {
  std::string_view text;
  DType dtype;
};
constexpr Alias kAliases[] = {
    {"float32", DType::f32}, {"float", DType::f32},     {"float16", DType::f16},
    {"half", DType::f16},    {"bfloat16", DType::bf16}, {"float64", DType::f64},
    {"double", DType::f64},  {"int8", DType::i8},       {"uint8", DType::u8},
    {"int32", DType::i32},   {"int64", DType::i64},     {"i1", DType::bool_},
};

}  // namespace

std::size_t size_of(DType dtype) noexcept { return info(dtype).size; }

double load_as_double(DType dtype, const void* element) noexcept {
  const auto get = [element](auto x) {
    std::memcpy(&x, element, sizeof x);
    return x;
  };
  switch (dtype) {
    case DType::f32:
      return get(float{});
    case DType::f64:
      return get(double{});
    case DType::f16:
      return static_cast<float>(get(Half{}));
    case DType::bf16:
      return static_cast<float>(get(BFloat16{}));
    case DType::i8:
      return get(std::int8_t{});
    case DType::u8:
      return get(std::uint8_t{});
    case DType::i32:
      return get(std::int32_t{});
    case DType::i64:
      return static_cast<double>(get(std::int64_t{}));
    case DType::bool_:
      return get(std::uint8_t{}) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

namespace {
template <class I>
I saturate(double x) noexcept {
  if (std::isnan(x)) return 0;
  x = std::trunc(x);
  if (x <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (x >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}
}  // namespace

float round_to_odd_float(double value) noexcept {
  float f = static_cast<float>(value);
  if (std::isnan(value) || static_cast<double>(f) == value) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(value)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

namespace {
/// \p value rounded to double by round-to-odd (see round_to_odd_float).
double round_to_odd_double(std::int64_t value) noexcept {
  const bool negative = value < 0;
  const std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(value) : value;
  if (u < (std::uint64_t{1} << 53)) return static_cast<double>(value);
  const int drop = 64 - std::countl_zero(u) - 53;
  std::uint64_t kept = u >> drop;
  if ((u & ((std::uint64_t{1} << drop) - 1)) != 0) kept |= 1;
  const double r = std::ldexp(static_cast<double>(kept), drop);
  return negative ? -r : r;
}
}  // namespace

void store_from_double(DType dtype, double value, void* element) noexcept {
  const auto put = [element](auto x) { std::memcpy(element, &x, sizeof x); };
  switch (dtype) {
    case DType::f32:
      return put(static_cast<float>(value));
    case DType::f64:
      return put(value);
    case DType::f16:  // through float by round-to-odd: one rounding in all
      return put(Half(round_to_odd_float(value)));
    case DType::bf16:
      return put(BFloat16(round_to_odd_float(value)));
    case DType::i8:
      return put(saturate<std::int8_t>(value));
    case DType::u8:
      return put(saturate<std::uint8_t>(value));
    case DType::i32:
      return put(saturate<std::int32_t>(value));
    case DType::i64:
      return put(saturate<std::int64_t>(value));
    case DType::bool_:
      return put(static_cast<std::uint8_t>(value != 0));
  }
}
std::int64_t load_as_int(DType dtype, const void* element) noexcept {
  const auto get = [element](auto x) {
    std::memcpy(&x, element, sizeof x);
    return x;
  };
  switch (dtype) {
    case DType::i8:
      return get(std::int8_t{});
    case DType::u8:
      return get(std::uint8_t{});
    case DType::i32:
      return get(std::int32_t{});
    case DType::i64:
      return get(std::int64_t{});
    case DType::bool_:
      return get(std::uint8_t{}) != 0 ? 1 : 0;
    default:
      return saturate<std::int64_t>(load_as_double(dtype, element));
  }
}

void store_from_int(DType dtype, std::int64_t value, void* element) noexcept {
  const auto put = [element](auto x) { std::memcpy(element, &x, sizeof x); };
  const auto u = static_cast<std::uint64_t>(value);
  switch (dtype) {
    case DType::i8:  // wrap: the low bits, two's complement
      return put(static_cast<std::int8_t>(u & 0xff));
    case DType::u8:
      return put(static_cast<std::uint8_t>(u & 0xff));
    case DType::i32:
      return put(static_cast<std::int32_t>(u & 0xffffffffu));
    case DType::i64:
      return put(value);
    case DType::bool_:
      return put(static_cast<std::uint8_t>(value != 0));
    case DType::f32:
      return put(static_cast<float>(value));
    case DType::f64:
      return put(static_cast<double>(value));
    case DType::f16:
    case DType::bf16:  // through double and float by round-to-odd: one rounding in all
      return store_from_double(dtype, round_to_odd_float(round_to_odd_double(value)), element);
  }
}

void convert_element(DType from, const void* src, DType to, void* dst) noexcept {
  if (from == to) {
    std::memcpy(dst, src, size_of(from));
  } else if (!is_floating(from)) {
    store_from_int(to, load_as_int(from, src), dst);
  } else if (to == DType::bool_) {
    const double v = load_as_double(from, src);
    const std::uint8_t b = v != 0 ? 1 : 0;  // NaN != 0
    std::memcpy(dst, &b, 1);
  } else {
    store_from_double(to, load_as_double(from, src), dst);  // floats: exact, then one rounding
  }
}

std::string_view name(DType dtype) noexcept { return info(dtype).name; }
bool is_floating(DType dtype) noexcept { return info(dtype).floating; }
bool is_integer(DType dtype) noexcept { return info(dtype).integer; }

DType parse_dtype(std::string_view text) {
  for (const auto& i : kInfo)
    if (i.name == text) return i.dtype;
  for (const auto& a : kAliases)
    if (a.text == text) return a.dtype;
  std::array<std::string_view, kInfo.size()> names{};
  for (std::size_t i = 0; i < kInfo.size(); ++i) names[i] = kInfo[i].name;
  throw UserError(detail::cat("unknown dtype '", text, "'; valid dtypes are ",
                              detail::join(names, ", "),
                              " (aliases such as 'float32' or 'int64' are accepted too)"));
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << name(dtype); }

// f32 -> f16 with round-to-nearest-even, handling subnormals, overflow to inf, and NaN.
Half::Half(float value) noexcept {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN: keep NaN quiet
    bits = static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = static_cast<std::uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Add 0.5 (as a float) so the FPU's own rounding does round-to-nearest-even.
    const float shifted = std::bit_cast<float>(abs) + 0.5f;
    bits = static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u));
    return;
  }
  const std::uint32_t mant_odd = (abs >> 13) & 1u;
  const std::uint32_t rounded = abs + 0xc8000fffu + mant_odd;  // rebias exponent and round
  bits = static_cast<std::uint16_t>(sign | (rounded >> 13));
}

Half::operator float() const noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {  // zero or subnormal: value = mant * 2^-24
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

BFloat16::BFloat16(float value) noexcept {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate but stay quiet
    bits = static_cast<std::uint16_t>((f >> 16) | 0x40u);
    return;
  }
  const std::uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  bits = static_cast<std::uint16_t>((f + rounding) >> 16);
}

BFloat16::operator float() const noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace kiln
