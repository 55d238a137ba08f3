#pragma once
/// \file
/// `DType`: the element types kiln tensors and buffers hold, with their sizes and names.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <type_traits>

namespace kiln {

/// Element type of a buffer or tensor. A closed set; the text names are the ones MLIR uses
/// for the matching builtin types (`f32`, `i64`, ...), with `bool` for booleans.
enum class DType : std::uint8_t { f32, f16, bf16, f64, i8, u8, i32, i64, bool_ };

/// Every dtype, in declaration order (handy for tests and for listing choices in errors).
inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,  DType::i8,
                                       DType::u8,  DType::i32, DType::i64,  DType::bool_};

/// Size of one element in bytes.
std::size_t size_of(DType dtype) noexcept;

/// The element stored at \p element (little-endian, of \p dtype) as a double.
double load_as_double(DType dtype, const void* element) noexcept;
/// Stores \p value as one element of \p dtype at \p element: floats round to nearest,
/// integers truncate toward zero and saturate at their range (NaN becomes 0), bool is
/// `value != 0`.
void store_from_double(DType dtype, double value, void* element) noexcept;
/// The element stored at \p element as an int64, exactly for integer and bool dtypes; a
/// floating-point one is converted as a cast to i64 is (truncated toward zero, saturated,
/// NaN 0).
std::int64_t load_as_int(DType dtype, const void* element) noexcept;
/// Stores \p value as one element of \p dtype: integers wrap to the dtype's width (two's
/// complement, as integer arithmetic in C++, NumPy and PyTorch does), bool is
/// `value != 0`, floats round once to nearest even (i64 to bf16 included).
void store_from_int(DType dtype, std::int64_t value, void* element) noexcept;
/// Converts one element from \p from at \p src to \p to at \p dst as `kiln.cast` does:
/// floats round once to nearest even (f64 to bf16 and i64 to f32 included); a float to an
/// integer truncates toward zero and saturates at the range, NaN 0; an integer to a
/// narrower integer wraps; anything to bool is `!= 0` (NaN is true).
void convert_element(DType from, const void* src, DType to, void* dst) noexcept;
/// \p value rounded to float by round-to-odd (truncated, then the last bit set when
/// inexact): rounding that once more to a narrower type (bf16, f16) rounds correctly.
float round_to_odd_float(double value) noexcept;

/// Canonical name: "f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool".
std::string_view name(DType dtype) noexcept;
/// True for f32, f16, bf16, f64.
bool is_floating(DType dtype) noexcept;
/// True for i8, u8, i32, i64.
bool is_integer(DType dtype) noexcept;

/// Parses a canonical name or a common alias ("float32", "int64", "bfloat16", ...).
/// \throws UserError naming the text and listing the valid names.
DType parse_dtype(std::string_view text);

/// Writes `name(dtype)`.
std::ostream& operator<<(std::ostream& os, DType dtype);

/// IEEE 754 half precision, stored as its 16 bits. Converts to and from float with
/// round-to-nearest-even; arithmetic is done in float.
struct Half {
  std::uint16_t bits = 0;
  Half() = default;
  explicit Half(float value) noexcept;
  explicit operator float() const noexcept;
  static Half from_bits(std::uint16_t b) noexcept {
    Half h;
    h.bits = b;
    return h;
  }
  friend bool operator==(Half a, Half b) noexcept { return a.bits == b.bits; }
};

/// bfloat16 (the upper half of an f32), stored as its 16 bits; round-to-nearest-even.
struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value) noexcept;
  explicit operator float() const noexcept;
  static BFloat16 from_bits(std::uint16_t b) noexcept {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  friend bool operator==(BFloat16 a, BFloat16 b) noexcept { return a.bits == b.bits; }
};

namespace detail {
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::f16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<std::int8_t> {
  static constexpr DType value = DType::i8;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::bool_;
};
}  // namespace detail

/// A C++ type that is the element type of some `DType` (float, double, Half, BFloat16,
/// int8_t, uint8_t, int32_t, int64_t, bool).
template <class T>
concept Element = requires {
  detail::DTypeOf<std::remove_cv_t<T>>::value;
};

/// The `DType` of element type \p T.
template <Element T>
inline constexpr DType dtype_of = detail::DTypeOf<std::remove_cv_t<T>>::value;

}  // namespace kiln
