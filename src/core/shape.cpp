#include "kiln/core/shape.hpp"

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
  std::int64_t n = 1;
  for (const Dim& d : dims_) {
    if (!d.is_static())
      throw UserError(detail::cat("shape ", str(), " has symbolic dimension '", d.symbol(),
                                  "', so its element count is unknown until data is bound"));
    if (d.size() != 0 && n > std::numeric_limits<std::int64_t>::max() / d.size())
      throw UserError(detail::cat("shape ", str(), " has more than 2^63 elements"));
    n *= d.size();
  }
  return n;
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
