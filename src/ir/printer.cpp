// The MLIR printer. Deterministic: value names come from positions, attributes are kept
// sorted, floats print in their shortest round-trip form, nothing depends on addresses.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/str.hpp"
#include "ir/text_common.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"

namespace kiln::ir {
namespace detail {

std::string_view mlir_element_type(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f64:
      return "f64";
    case DType::i8:
      return "i8";
    case DType::u8:
      return "ui8";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::bool_:
      return "i1";
  }
  return "?";
}

std::optional<DType> dtype_of_mlir(std::string_view spelling) noexcept {
  for (DType d : kAllDTypes)
    if (mlir_element_type(d) == spelling) return d;
  return std::nullopt;
}

bool is_bare_symbol(std::string_view name) noexcept {
  if (name.empty()) return false;
  const auto head = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  if (!head(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
  });
}

}  // namespace detail

namespace {

class Printer {
 public:
  explicit Printer(const Module& module) : module_(module) {}

  std::string run() {
    out_ += "module attributes {";
    out_ += detail::kDeviceAttribute;
    out_ += " = ";
    string(module_.device().str());
    if (module_.num_graphs() > 0) {
      out_ += ", ";
      out_ += detail::kEntryAttribute;
      out_ += " = ";
      symbol(module_.entry().name());
    }
    out_ += "} {\n";
    for (std::size_t i = 0; i < module_.num_graphs(); ++i)
      graph(module_.graph(i), &module_.graph(i) == &module_.entry());
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  void graph(const Graph& g, bool is_entry) {
    // Value names: arguments %argN; each op with results the next number.
    names_.assign(g.num_values(), {});
    for (std::size_t i = 0; i < g.arguments().size(); ++i)
      names_[g.arguments()[i].id] = std::string("%arg").append(std::to_string(i));
    std::size_t next = 0;
    for (std::size_t i = 0; i < g.num_ops(); ++i) {
      const OpView op = g.op(i);
      if (op.num_results() == 0) continue;
      // (append, not operator+: GCC 12 warns falsely about the latter)
      const std::string base = std::string("%").append(std::to_string(next++));
      for (std::size_t r = 0; r < op.num_results(); ++r)
        names_[op.result(r).id] =
            op.num_results() == 1 ? base : std::string(base).append("#").append(std::to_string(r));
    }

    out_ += is_entry ? "  func.func " : "  func.func private ";
    symbol(g.name());
    out_ += '(';
    for (std::size_t i = 0; i < g.arguments().size(); ++i) {
      if (i) out_ += ", ";
      out_ += names_[g.arguments()[i].id];
      out_ += ": ";
      type(g.type(g.arguments()[i]));
      name_attribute(g.argument_name(i));
    }
    out_ += ')';
    if (!g.results().empty()) {
      out_ += " -> ";
      bool named = false;
      for (std::size_t i = 0; i < g.results().size(); ++i)
        named = named || !g.result_name(i).empty();
      if (named) {
        out_ += '(';
        for (std::size_t i = 0; i < g.results().size(); ++i) {
          if (i) out_ += ", ";
          type(g.type(g.results()[i]));
          name_attribute(g.result_name(i));
        }
        out_ += ')';
      } else {
        type_list(g, g.results(), /*parenthesize_single=*/false);
      }
    }
    out_ += " {\n";
    for (std::size_t i = 0; i < g.num_ops(); ++i) op(g, g.op(i));
    out_ += "    return";
    if (!g.results().empty()) {
      out_ += ' ';
      value_list(g.results());
      out_ += " : ";
      for (std::size_t i = 0; i < g.results().size(); ++i) {
        if (i) out_ += ", ";
        type(g.type(g.results()[i]));
      }
    }
    out_ += "\n  }\n";
  }

  void op(const Graph& g, const OpView& op) {
    out_ += "    ";
    if (op.num_results() > 0) {
      const std::string& first = names_[op.result(0).id];
      out_.append(first, 0, first.find('#'));
      if (op.num_results() > 1) {
        out_ += ':';
        integer(static_cast<std::int64_t>(op.num_results()));
      }
      out_ += " = ";
    }
    string(op.name());
    out_ += '(';
    value_list(op.operands());
    out_ += ')';
    if (!op.attributes().empty()) {
      out_ += " {";
      bool first = true;
      for (const NamedAttribute& a : op.attributes()) {
        if (!first) out_ += ", ";
        first = false;
        out_ += a.name;
        out_ += " = ";
        attribute(a.value);
      }
      out_ += '}';
    }
    out_ += " : (";
    for (std::size_t i = 0; i < op.operands().size(); ++i) {
      if (i) out_ += ", ";
      type(g.type(op.operand(i)));
    }
    out_ += ") -> ";
    if (op.num_results() == 1) {
      type(g.type(op.result(0)));
    } else {
      out_ += '(';
      for (std::size_t r = 0; r < op.num_results(); ++r) {
        if (r) out_ += ", ";
        type(g.type(op.result(r)));
      }
      out_ += ')';
    }
    if (const Location& loc = op.location(); loc.known()) {
      out_ += " loc(";
      string(loc.file);
      out_ += ':';
      integer(loc.line);
      out_ += ':';
      integer(loc.column);
      out_ += ')';
    }
    out_ += '\n';
  }

  void value_list(std::span<const Value> values) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i) out_ += ", ";
      out_ += names_[values[i].id];
    }
  }

  void type_list(const Graph& g, std::span<const Value> values, bool parenthesize_single) {
    const bool parens = values.size() != 1 || parenthesize_single;
    if (parens) out_ += '(';
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i) out_ += ", ";
      type(g.type(values[i]));
    }
    if (parens) out_ += ')';
  }

  void type(const TensorType& t) {
    out_ += "tensor<";
    bool symbolic = false;
    for (const Dim& d : t.shape.dims()) {
      if (d.is_static()) {
        integer(d.size());
      } else {
        out_ += '?';
        symbolic = true;
      }
      out_ += 'x';
    }
    out_ += detail::mlir_element_type(t.dtype);
    const bool other_device = t.device != module_.device();
    if (symbolic || other_device) {
      out_ += ", ";
      out_ += detail::kTensorEncoding;
      out_ += '<';
      if (symbolic) dims(t.shape);
      if (symbolic && other_device) out_ += ", ";
      if (other_device) out_ += t.device.str();
      out_ += '>';
    }
    out_ += '>';
  }

  void dims(const Shape& s) {
    out_ += '[';
    for (std::size_t i = 0; i < s.rank(); ++i) {
      if (i) out_ += ", ";
      const Dim& d = s.dims()[i];
      if (d.is_static()) {
        integer(d.size());
      } else {
        out_ += d.symbol();
      }
    }
    out_ += ']';
  }

  void attribute(const Attribute& a) {
    switch (a.kind()) {
      case Attribute::Kind::integer:
        integer(a.as_int());
        return;
      case Attribute::Kind::floating:
        floating(a.as_float());
        return;
      case Attribute::Kind::boolean:
        out_ += a.as_bool() ? "true" : "false";
        return;
      case Attribute::Kind::string:
        string(a.as_string());
        return;
      case Attribute::Kind::array: {
        out_ += '[';
        bool first = true;
        for (const Attribute& e : a.as_array()) {
          if (!first) out_ += ", ";
          first = false;
          attribute(e);
        }
        out_ += ']';
        return;
      }
      case Attribute::Kind::dtype:
        out_ += detail::mlir_element_type(a.as_dtype());
        return;
      case Attribute::Kind::shape:
        out_ += detail::kShapeAttribute;
        out_ += '<';
        dims(a.as_shape());
        out_ += '>';
        return;
      case Attribute::Kind::symbol:
        symbol(a.as_symbol().name);
        return;
      case Attribute::Kind::dense:
        dense(a.as_dense());
        return;
    }
  }

  void dense(const DenseData& d) {
    out_ += "dense<";
    const std::int64_t count = d.shape.num_elements();
    // Bools as nested lists; an empty bool tensor as "[]" whatever its dims (a nested
    // list of dims [10^9, 0] would be 10^9 "[]"s); every other dtype as hex bytes ("0x"
    // for no elements).
    if (d.dtype == DType::bool_ && count == 0) {
      out_ += "[]";
    } else if (d.dtype == DType::bool_) {
      std::size_t next = 0;
      nested(d, 0, next);
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out_ += "\"0x";
      for (unsigned char c : d.bytes) {
        out_ += kHex[c >> 4];
        out_ += kHex[c & 15];
      }
      out_ += '"';
    }
    out_ += "> : tensor<";
    for (const Dim& dim : d.shape.dims()) {
      integer(dim.size());
      out_ += 'x';
    }
    out_ += detail::mlir_element_type(d.dtype);
    out_ += '>';
  }

  // Nested list form (bool elements, or no elements): [[true, false], [false, true]].
  void nested(const DenseData& d, std::size_t axis, std::size_t& next) {
    if (axis == d.shape.rank()) {
      out_ += d.bytes[next++] != 0 ? "true" : "false";
      return;
    }
    out_ += '[';
    for (std::int64_t i = 0; i < d.shape.dims()[axis].size(); ++i) {
      if (i) out_ += ", ";
      nested(d, axis + 1, next);
    }
    out_ += ']';
  }

  void integer(std::int64_t v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, end);
  }

  void floating(double v) {
    if (!std::isfinite(v)) {  // MLIR spells these by their bits
      std::uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      char buf[24];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, bits, 16);
      std::string hex(buf, end);
      std::transform(hex.begin(), hex.end(), hex.begin(), ::toupper);
      out_ += "0x" + std::string(16 - hex.size(), '0') + hex + " : f64";
      return;
    }
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    std::string text(buf, end);
    // MLIR floats need a '.': 1 -> 1.0, 1e-05 -> 1.0e-05.
    if (text.find('.') == std::string::npos) {
      const std::size_t e = text.find('e');
      text.insert(e == std::string::npos ? text.size() : e, ".0");
    }
    out_ += text;
  }

  // ` {kiln.name = "..."}` after an argument's or result's type, when it has a name.
  void name_attribute(const std::string& name) {
    if (name.empty()) return;
    out_ += " {kiln.name = ";
    string(name);
    out_ += '}';
  }

  void string(std::string_view s) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    out_ += '"';
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) {
        out_ += '\\';
        out_ += kHex[c >> 4];
        out_ += kHex[c & 15];
      } else {
        out_ += ch;
      }
    }
    out_ += '"';
  }

  void symbol(std::string_view name) {
    out_ += '@';
    if (detail::is_bare_symbol(name)) {
      out_ += name;
    } else {
      string(name);
    }
  }

  const Module& module_;
  std::string out_;
  std::vector<std::string> names_;
};

}  // namespace

std::string print(const Module& module) { return Printer(module).run(); }

}  // namespace kiln::ir
