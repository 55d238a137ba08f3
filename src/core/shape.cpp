#include "kiln/core/shape.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <ostream>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Dim::Dim(std::int64_t size) : size_(size) {
  if (size < 0)
    throw UserError(detail::cat("dimension size ", size,
                                " is negative; a static dimension must be >= 0 (use a named "
                                "symbolic dim such as \"batch\" for a size known only later)"));
}

Dim::Dim(std::string_view symbol) : size_(-1), symbol_(symbol) {
  if (!is_identifier(symbol))
    throw UserError(detail::cat("symbolic dimension name '", symbol,
                                "' is not an identifier; use letters, digits and '_', not "
                                "starting with a digit (e.g. \"batch\")"));
}

std::int64_t Dim::size() const {
  if (!is_static())
    throw UserError(detail::cat("dimension '", symbol_,
                                "' is symbolic and has no static size; bind it to data first"));
  return size_;
}

const Dim& Shape::operator[](std::size_t axis) const {
  if (axis >= dims_.size())
    throw UserError(detail::cat("axis ", axis, " is out of range for shape ", str(), " of rank ",
                                dims_.size()));
  return dims_[axis];
}

bool Shape::is_static() const noexcept {
  for (const Dim& d : dims_)
    if (!d.is_static()) return false;
  return true;
}

std::int64_t Shape::num_elements() const {
  std::vector<std::int64_t> sizes;
  for (const Dim& d : dims_) {
    if (!d.is_static())
      throw UserError(detail::cat("shape ", str(), " has symbolic dimension '", d.symbol(),
                                  "', so its element count is unknown until data is bound"));
    sizes.push_back(d.size());
  }
  return checked_volume(sizes);
}

std::int64_t Shape::num_bytes(std::size_t element_size) const {
  num_elements();  // the symbolic-dim error
  std::vector<std::int64_t> sizes;
  for (const Dim& d : dims_) sizes.push_back(d.size());
  return checked_tensor_bytes(sizes, element_size);
}

std::int64_t checked_volume(std::span<const std::int64_t> dims) {
  for (std::int64_t d : dims)
    if (d == 0) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n))
      throw UserError(detail::cat("shape [", detail::join(dims, ", "),
                                  "] has 2^63 elements or more: too big for one tensor"));
  return n;
}

std::int64_t checked_tensor_bytes(std::span<const std::int64_t> dims, std::size_t element_size) {
  // Zero dims count as one here, so that a tensor's strides (products of its trailing
  // dims) fit as well: `[0, 2^40, 2^40]` holds nothing but has a stride of 2^80.
  std::int64_t bytes = static_cast<std::int64_t>(element_size);
  bool over = false;
  for (std::int64_t d : dims)
    over = over || __builtin_mul_overflow(bytes, std::max<std::int64_t>(d, 1), &bytes);
  if (over || bytes > kMaxTensorBytes)
    throw UserError(detail::cat("a tensor of shape [", detail::join(dims, ", "), "] and ",
                                element_size,
                                "-byte elements is more than 2^62 bytes, kiln's "
                                "limit for one tensor: too big"));
  return checked_volume(dims) * static_cast<std::int64_t>(element_size);
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw UserError(detail::cat(what, ": ", a, " + ", b, " overflows 64-bit integers"));
  return out;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw UserError(detail::cat(what, ": ", a, " * ", b, " overflows 64-bit integers"));
  return out;
}

std::string Shape::str() const { return detail::cat('[', detail::join(dims_, ", "), ']'); }

Shape parse_shape(std::string_view text) {
  std::string_view body = trim(text);
  if (!body.empty() && body.front() == '[') {
    if (body.back() != ']')
      throw UserError(detail::cat("shape '", text,
                                  "' opens '[' but does not close it; write e.g. "
                                  "[2, batch, 4]"));
    body = trim(body.substr(1, body.size() - 2));
  }
  std::vector<Dim> dims;
  if (body.empty()) return Shape(std::move(dims));
  std::size_t pos = 0;
  for (std::size_t index = 0;; ++index) {
    const std::size_t comma = body.find(',', pos);
    const std::string_view piece =
        trim(body.substr(pos, comma == std::string_view::npos ? body.npos : comma - pos));
    if (piece.empty())
      throw UserError(detail::cat("shape '", text, "' has an empty dimension at position ", index,
                                  "; write e.g. [2, batch, 4]"));
    const char first = piece.front();
    if (std::isdigit(static_cast<unsigned char>(first)) || first == '-' || first == '+') {
      std::int64_t value = 0;
      const auto [end, ec] =
          std::from_chars(piece.data() + (first == '+'), piece.data() + piece.size(), value);
      if (ec != std::errc() || end != piece.data() + piece.size())
        throw UserError(detail::cat("shape '", text, "': dimension ", index, " ('", piece,
                                    "') is not an integer or a name"));
      if (value < 0)
        throw UserError(detail::cat("shape '", text, "': dimension ", index, " is ", value,
                                    "; dimensions must be >= 0"));
      dims.emplace_back(value);
    } else {
      dims.emplace_back(piece);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return Shape(std::move(dims));
}

std::ostream& operator<<(std::ostream& os, const Dim& dim) {
  if (dim.is_static()) return os << dim.size();
  return os << dim.symbol();
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

}  // namespace kiln
