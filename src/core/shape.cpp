#include "kiln/core/shape.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <vector>

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

/// A dim's expression: coefficients by monomial (its names, sorted, repeated for powers;
/// the constant term's is empty), no zero coefficients.
using Polynomial = std::map<std::vector<std::string>, std::int64_t>;

constexpr const char* kDimText =
    "use a size, a name (letters, digits and '_', not starting with a digit, e.g. \"batch\") "
    "or an expression over names and sizes with '*', ' + ' and ' - ' (e.g. \"batch*seq\", "
    "\"seq + 1\")";

/// The most terms, and the highest degree, of a dim's expression: exported models need a
/// few (batch*seq + seq); a hostile chain of products must not grow one without bound.
constexpr std::size_t kMaxTerms = 64, kMaxDegree = 16;

/// \throws UserError when \p p is larger than kiln keeps.
void check_size(const Polynomial& p, std::string_view what) {
  bool deep = false;
  for (const auto& [m, c] : p) deep = deep || m.size() > kMaxDegree;
  if (p.size() > kMaxTerms || deep)
    throw UserError(detail::cat(what, ": a dimension expression of more than ", kMaxTerms,
                                " terms or of degree above ", kMaxDegree,
                                " is more than kiln keeps"));
}

/// Adds c * m to \p p (dropping a zero result). \throws UserError on overflow.
void add_term(Polynomial& p, const std::vector<std::string>& m, std::int64_t c,
              std::string_view what) {
  const std::int64_t sum = checked_add(p[m], c, what);
  if (sum == 0) {
    p.erase(m);
  } else {
    p[m] = sum;
  }
}

/// Parses a dim's text. \throws UserError for what is not a polynomial in that syntax.
Polynomial parse_polynomial(std::string_view text) {
  const auto bad = [&]() {
    return UserError(detail::cat("symbolic dimension '", text,
                                 "' is not an integer, a name or an "
                                 "expression over names; ",
                                 kDimText));
  };
  Polynomial p;
  std::size_t i = 0;
  std::int64_t sign = 1;
  if (i < text.size() && text[i] == '-') {  // a leading minus, unspaced
    sign = -1;
    ++i;
  }
  for (;;) {  // one term: factors joined by '*'
    std::int64_t coefficient = sign;
    std::vector<std::string> names;
    for (;;) {
      const std::size_t start = i;
      if (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
        std::int64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data() + start, text.data() + i, value);
        if (ec != std::errc() || end != text.data() + i) throw bad();
        coefficient = checked_mul(coefficient, value, detail::cat("dimension '", text, "'"));
      } else if (i < text.size() &&
                 (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
        while (i < text.size() &&
               (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
          ++i;
        names.emplace_back(text.substr(start, i - start));
      } else {
        throw bad();
      }
      if (i < text.size() && text[i] == '*') {
        ++i;
        continue;
      }
      break;
    }
    std::sort(names.begin(), names.end());
    add_term(p, names, coefficient, detail::cat("dimension '", text, "'"));
    check_size(p, detail::cat("dimension '", text.substr(0, 64), "'"));
    if (i == text.size()) return p;
    // " + " or " - ", spaced.
    if (text.substr(i, 3) == " + ") {
      sign = 1;
    } else if (text.substr(i, 3) == " - ") {
      sign = -1;
    } else {
      throw bad();
    }
    i += 3;
  }
}

/// The canonical text: terms by degree, highest first, then by names; the constant last.
std::string polynomial_text(const Polynomial& p) {
  std::vector<std::pair<std::vector<std::string>, std::int64_t>> terms(p.begin(), p.end());
  std::stable_sort(terms.begin(), terms.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string out;
  for (const auto& [names, c] : terms) {
    const std::uint64_t magnitude =
        c < 0 ? 0 - static_cast<std::uint64_t>(c) : static_cast<std::uint64_t>(c);
    if (out.empty()) {
      if (c < 0) out += '-';
    } else {
      out += c < 0 ? " - " : " + ";
    }
    if (names.empty() || magnitude != 1) {
      out += std::to_string(magnitude);
      if (!names.empty()) out += '*';
    }
    out += detail::join(names, "*");
  }
  return out;
}

Polynomial polynomial_of(const Dim& d) {
  if (d.is_static()) {
    Polynomial p;
    if (d.size() != 0) p[{}] = d.size();
    return p;
  }
  return parse_polynomial(d.symbol());
}

/// The dim \p p is: static when constant. \throws UserError for a negative constant.
Dim dim_of(const Polynomial& p) {
  if (p.empty()) return Dim(std::int64_t{0});
  if (p.size() == 1 && p.begin()->first.empty()) return Dim(p.begin()->second);
  return Dim(polynomial_text(p));
}

}  // namespace

Dim::Dim(std::int64_t size) : size_(size) {
  if (size < 0)
    throw UserError(detail::cat("dimension size ", size,
                                " is negative; a static dimension must be >= 0 (use a named "
                                "symbolic dim such as \"batch\" for a size known only later)"));
}

Dim::Dim(std::string_view symbol) : size_(-1) {
  if (is_identifier(symbol)) {
    symbol_ = symbol;
    return;
  }
  const Polynomial p = parse_polynomial(symbol);
  if (p.empty() || (p.size() == 1 && p.begin()->first.empty())) {
    const std::int64_t value = p.empty() ? 0 : p.begin()->second;
    if (value < 0)
      throw UserError(
          detail::cat("dimension '", symbol, "' is ", value, "; dimensions must be >= 0"));
    size_ = value;
    return;
  }
  symbol_ = polynomial_text(p);
}

bool Dim::is_name() const noexcept { return !symbol_.empty() && is_identifier(symbol_); }

std::int64_t Dim::size() const {
  if (!is_static())
    throw UserError(detail::cat("dimension '", symbol_,
                                "' is symbolic and has no static size; bind it to data first"));
  return size_;
}

Dim operator+(const Dim& a, const Dim& b) {
  Polynomial p = polynomial_of(a);
  for (const auto& [m, c] : polynomial_of(b)) add_term(p, m, c, detail::cat(a, " + ", b));
  check_size(p, detail::cat(a, " + ", b));
  return dim_of(p);
}

Dim operator-(const Dim& a, const Dim& b) {
  Polynomial p = polynomial_of(a);
  for (const auto& [m, c] : polynomial_of(b))
    add_term(p, m, checked_mul(c, -1, detail::cat(a, " - ", b)), detail::cat(a, " - ", b));
  check_size(p, detail::cat(a, " - ", b));
  if (p.size() == 1 && p.begin()->first.empty() && p.begin()->second < 0)
    throw UserError(detail::cat("dimension ", a, " - ", b, " is ", p.begin()->second,
                                "; dimensions must be >= 0"));
  return dim_of(p);
}

Dim operator*(const Dim& a, const Dim& b) {
  const std::string what = detail::cat(a, " * ", b);
  Polynomial p;
  for (const auto& [ma, ca] : polynomial_of(a))
    for (const auto& [mb, cb] : polynomial_of(b)) {
      std::vector<std::string> m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      add_term(p, m, checked_mul(ca, cb, what), what);
      check_size(p, what);
    }
  return dim_of(p);
}

std::optional<Dim> divide_exactly(const Dim& a, const Dim& b) {
  const Polynomial pb = polynomial_of(b);
  if (pb.size() != 1) return std::nullopt;  // zero, or a sum
  const auto& [mb, cb] = *pb.begin();
  Polynomial q;
  for (const auto& [m, c] : polynomial_of(a)) {
    if (cb == -1 && c == std::numeric_limits<std::int64_t>::min()) return std::nullopt;
    if (c % cb != 0) return std::nullopt;
    std::vector<std::string> rest = m;
    for (const std::string& name : mb) {  // remove each of b's names once
      const auto at = std::find(rest.begin(), rest.end(), name);
      if (at == rest.end()) return std::nullopt;
      rest.erase(at);
    }
    q[rest] = c / cb;
  }
  if (q.size() == 1 && q.begin()->first.empty() && q.begin()->second < 0) return std::nullopt;
  return dim_of(q);
}

std::optional<std::int64_t> constant_difference(const Dim& a, const Dim& b) {
  Polynomial p = polynomial_of(a);
  for (const auto& [m, c] : polynomial_of(b)) {
    if (c == std::numeric_limits<std::int64_t>::min()) return std::nullopt;
    std::int64_t sum = 0;
    if (__builtin_add_overflow(p[m], -c, &sum)) return std::nullopt;
    if (sum == 0) {
      p.erase(m);
    } else {
      p[m] = sum;
    }
  }
  if (p.empty()) return 0;
  if (p.size() == 1 && p.begin()->first.empty()) return p.begin()->second;
  return std::nullopt;
}

std::vector<std::string> dim_names(const Dim& d) {
  std::vector<std::string> names;
  for (const auto& [m, c] : polynomial_of(d)) names.insert(names.end(), m.begin(), m.end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::int64_t evaluate_dim(
    const Dim& d, const std::function<std::optional<std::int64_t>(const std::string&)>& size_of) {
  if (d.is_static()) return d.size();
  const std::string what = detail::cat("dimension '", d.symbol(), "'");
  std::int64_t total = 0;
  for (const auto& [m, c] : polynomial_of(d)) {
    std::int64_t term = c;
    for (const std::string& name : m) {
      const std::optional<std::int64_t> v = size_of(name);
      if (!v) throw UserError(detail::cat(what, ": '", name, "' is bound by no input"));
      term = checked_mul(term, *v, what);
    }
    total = checked_add(total, term, what);
  }
  if (total < 0)
    throw UserError(detail::cat(what, " is ", total, " for these inputs; dimensions must be >= 0"));
  return total;
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
    std::int64_t value = 0;
    const auto [end, ec] =
        std::from_chars(piece.data() + (first == '+'), piece.data() + piece.size(), value);
    if (ec == std::errc() && end == piece.data() + piece.size()) {  // an integer
      if (value < 0)
        throw UserError(detail::cat("shape '", text, "': dimension ", index, " is ", value,
                                    "; dimensions must be >= 0"));
      dims.emplace_back(value);
    } else {
      try {
        dims.emplace_back(piece);
      } catch (const UserError& e) {
        throw UserError(detail::cat("shape '", text, "': dimension ", index, ": ", e.what()));
      }
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
