#pragma once
/// \file
/// IR attributes: the constant parameters of an op (an axis, a name, a shape, a callee).
/// A small closed set of kinds, each with one MLIR spelling (see `kiln/ir/text.hpp`).

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"

namespace kiln::ir {

/// A reference to a graph of the module by its symbol name (`@block`).
struct SymbolRef {
  std::string name;
  friend bool operator==(const SymbolRef&, const SymbolRef&) = default;
};

/// The elements of a constant tensor: dtype, static shape and the raw little-endian bytes
/// (one byte per bool).
struct DenseData {
  DType dtype = DType::f32;
  Shape shape;
  std::string bytes;
  friend bool operator==(const DenseData&, const DenseData&) = default;
};

/// One attribute value. Implicit from the C++ value it holds, so attribute lists read
/// `{{"axis", 1}, {"keepdim", true}, {"name", "w"}}`.
class Attribute {
 public:
  using Array = std::vector<Attribute>;
  enum class Kind : std::uint8_t {
    integer,
    floating,
    boolean,
    string,
    array,
    dtype,
    shape,
    symbol,
    dense
  };

  Attribute() : value_(std::int64_t{0}) {}
  Attribute(std::int64_t v) : value_(v) {}                   // NOLINT
  Attribute(int v) : value_(std::int64_t{v}) {}              // NOLINT
  Attribute(double v) : value_(v) {}                         // NOLINT
  Attribute(bool v) : value_(v) {}                           // NOLINT
  Attribute(std::string v) : value_(std::move(v)) {}         // NOLINT
  Attribute(const char* v) : value_(std::string(v)) {}       // NOLINT
  Attribute(std::string_view v) : value_(std::string(v)) {}  // NOLINT
  Attribute(Array v) : value_(std::move(v)) {}               // NOLINT
  Attribute(DType v) : value_(v) {}                          // NOLINT
  Attribute(Shape v) : value_(std::move(v)) {}               // NOLINT
  Attribute(SymbolRef v) : value_(std::move(v)) {}           // NOLINT
  Attribute(DenseData v) : value_(std::move(v)) {}           // NOLINT

  Kind kind() const noexcept { return static_cast<Kind>(value_.index()); }

  /// The held value. \throws UserError naming both kinds when the attribute holds another.
  std::int64_t as_int() const;
  double as_float() const;  ///< Also accepts an integer.
  bool as_bool() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  DType as_dtype() const;
  const Shape& as_shape() const;
  const SymbolRef& as_symbol() const;
  const DenseData& as_dense() const;
  /// An array of integers as a vector. \throws UserError for anything else.
  std::vector<std::int64_t> as_int_array() const;
  /// An array of numbers (floats or integers) as doubles. \throws UserError for anything else.
  std::vector<double> as_float_array() const;

  friend bool operator==(const Attribute&, const Attribute&) = default;

 private:
  std::variant<std::int64_t, double, bool, std::string, Array, DType, Shape, SymbolRef, DenseData>
      value_;
};

/// "integer", "float", ... for messages.
std::string_view kind_name(Attribute::Kind kind) noexcept;

/// A named attribute of an op. Ops keep theirs sorted by name.
struct NamedAttribute {
  std::string name;
  Attribute value;
  friend bool operator==(const NamedAttribute&, const NamedAttribute&) = default;
};

}  // namespace kiln::ir
