#include "kiln/ir/attribute.hpp"

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/type.hpp"

namespace kiln::ir {

std::string_view kind_name(Attribute::Kind kind) noexcept {
  switch (kind) {
    case Attribute::Kind::integer:
      return "integer";
    case Attribute::Kind::floating:
      return "float";
    case Attribute::Kind::boolean:
      return "bool";
    case Attribute::Kind::string:
      return "string";
    case Attribute::Kind::array:
      return "array";
    case Attribute::Kind::dtype:
      return "dtype";
    case Attribute::Kind::shape:
      return "shape";
    case Attribute::Kind::symbol:
      return "symbol";
    case Attribute::Kind::dense:
      return "dense constant";
  }
  return "?";
}

namespace {
template <class T>
const T& get(const auto& value, Attribute::Kind wanted, Attribute::Kind actual) {
  if (const T* p = std::get_if<T>(&value)) return *p;
  throw UserError(detail::cat("attribute holds a ", kind_name(actual), " where a ",
                              kind_name(wanted), " is expected"));
}
}  // namespace

std::int64_t Attribute::as_int() const { return get<std::int64_t>(value_, Kind::integer, kind()); }
double Attribute::as_float() const {
  if (kind() == Kind::integer) return static_cast<double>(std::get<std::int64_t>(value_));
  return get<double>(value_, Kind::floating, kind());
}
bool Attribute::as_bool() const { return get<bool>(value_, Kind::boolean, kind()); }
const std::string& Attribute::as_string() const {
  return get<std::string>(value_, Kind::string, kind());
}
const Attribute::Array& Attribute::as_array() const {
  return get<Array>(value_, Kind::array, kind());
}
DType Attribute::as_dtype() const { return get<DType>(value_, Kind::dtype, kind()); }
const Shape& Attribute::as_shape() const { return get<Shape>(value_, Kind::shape, kind()); }
const SymbolRef& Attribute::as_symbol() const {
  return get<SymbolRef>(value_, Kind::symbol, kind());
}
const DenseData& Attribute::as_dense() const { return get<DenseData>(value_, Kind::dense, kind()); }

std::vector<std::int64_t> Attribute::as_int_array() const {
  std::vector<std::int64_t> out;
  for (const Attribute& a : as_array()) {
    if (a.kind() != Kind::integer)
      throw UserError(
          detail::cat("array element is a ", kind_name(a.kind()), " where an integer is expected"));
    out.push_back(a.as_int());
  }
  return out;
}

std::vector<double> Attribute::as_float_array() const {
  std::vector<double> out;
  for (const Attribute& a : as_array()) out.push_back(a.as_float());
  return out;
}

std::string to_string(const TensorType& type) {
  return detail::cat(name(type.dtype), type.shape.str(), " on ", type.device);
}
std::ostream& operator<<(std::ostream& os, const TensorType& type) { return os << to_string(type); }

}  // namespace kiln::ir
