// The IR text parser: reads what the printer writes (with any whitespace), character by
// character, never past the end of its input, with a bounded nesting depth. Errors carry
// file:line:col, what was found there and what was expected.

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_map>

#include "core/str.hpp"
#include "ir/text_common.hpp"
#include "ir/text_cursor.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"

namespace kiln::ir {

ParseError::ParseError(std::string file, std::uint32_t line, std::uint32_t column,
                       std::string message)
    : UserError(kiln::detail::cat(file, ":", line, ":", column, ": error: ", message)),
      file_(std::move(file)),
      line_(line),
      column_(column) {}

namespace {

using kiln::detail::cat;

constexpr int kMaxDepth = 64;  // nested arrays / dense lists

using detail::is_id_char;

class Parser : detail::TextCursor {
 public:
  Parser(std::string_view text, std::string_view file) : TextCursor(text, file) {}

  Module run() {
    skip_space();
    keyword("module");
    std::optional<Device> device;
    std::string entry;
    bool has_entry = false;
    if (try_keyword("attributes")) {
      expect('{');
      if (!try_char('}')) {
        do {
          const Position where = here();
          const std::string key = bare_id("an attribute name");
          expect('=');
          if (key == detail::kDeviceAttribute) {
            const std::string text = string_literal();
            device = parse_device(text, where);
          } else if (key == detail::kEntryAttribute) {
            entry_at_ = where;
            entry = symbol_name();
            has_entry = true;
          } else {
            fail_at(where, cat("unknown module attribute '", key, "' (expected ",
                               detail::kDeviceAttribute, " or ", detail::kEntryAttribute, ")"));
          }
        } while (try_char(','));
        expect('}');
      }
    }
    module_ = Module(device.value_or(Device::cpu()));
    expect('{');
    while (!try_char('}')) graph();
    skip_space();
    if (pos_ != text_.size()) fail("expected end of input after the module");
    if (has_entry) {
      if (module_.find(entry) == nullptr)
        fail_at(entry_at_, cat("kiln.entry names @", entry, ", which the module does not define"));
      module_.set_entry(entry);
    }
    return std::move(module_);
  }

 private:
  Device parse_device(std::string_view text, const Position& where) const {
    try {
      return Device::parse(text);
    } catch (const UserError& e) {
      fail_at(where, e.what());
    }
  }

  // ---- types -----------------------------------------------------------------------------

  TensorType type() {
    skip_space();
    // Types repeat: cache them by their text, up to the '>' that closes `tensor<`.
    std::size_t end = pos_;
    int depth = 0;
    bool closed = false;
    while (end < text_.size() && text_[end] != '\n' && !closed) {
      const char c = text_[end++];
      if (c == '<') ++depth;
      if (c == '>') closed = --depth == 0;
    }
    const std::string_view key = text_.substr(pos_, end - pos_);
    if (closed) {
      if (auto it = type_cache_.find(key); it != type_cache_.end()) {
        while (pos_ < end) advance();
        return it->second;
      }
    }
    TensorType t = parse_type();
    if (closed && pos_ == end) type_cache_.emplace(key, t);
    return t;
  }

  TensorType parse_type() {
    if (!try_keyword("tensor")) expected("a tensor type");
    expect('<');
    std::vector<std::optional<std::int64_t>> dims;  // nullopt: '?'
    TensorType t;
    t.device = module_.device();
    std::optional<Position> first_symbolic;
    for (;;) {
      skip_space();
      if (peek() == '?') {
        if (!first_symbolic) first_symbolic = here();
        advance();
        dims.emplace_back();
      } else if (std::isdigit(static_cast<unsigned char>(peek()))) {
        dims.emplace_back(integer("a dimension"));
      } else {
        break;
      }
      if (peek() != 'x') expected("'x' after a dimension");
      advance();
    }
    const Position at = here();
    std::string element;
    while (std::isalnum(static_cast<unsigned char>(peek()))) {
      element += peek();
      advance();
    }
    const std::optional<DType> dtype = detail::dtype_of_mlir(element);
    if (!dtype) {
      pos_ = at.offset, line_ = at.line, column_ = at.column;
      expected("an element type (f32, f16, bf16, f64, i8, ui8, i32, i64, i1)");
    }
    t.dtype = *dtype;
    std::vector<Dim> shape;
    bool named = false;
    if (try_char(',')) {
      if (!try_literal(detail::kTensorEncoding)) expected(cat("'", detail::kTensorEncoding, "<'"));
      expect('<');
      skip_space();
      if (peek() == '[') {
        const Position where = here();
        shape = dim_list();
        named = true;
        if (shape.size() != dims.size())
          fail_at(where,
                  cat("the encoding lists ", shape.size(), " dims but the type has ", dims.size()));
        for (std::size_t i = 0; i < dims.size(); ++i) {
          const bool is_static = dims[i].has_value();
          if (is_static != shape[i].is_static() || (is_static && shape[i].size() != *dims[i]))
            fail_at(where,
                    cat("dim ", i, " of the encoding (", shape[i], ") does not match the type's (",
                        is_static ? cat(*dims[i]) : std::string("?"), ")"));
        }
        if (try_char(',')) t.device = device_token();
      } else {
        t.device = device_token();
      }
      expect('>');
    }
    if (!named) {
      for (const auto& d : dims) {
        if (!d)
          fail_at(*first_symbolic, "a '?' dim needs its name in a #kiln.tensor<[...]> encoding");
        shape.emplace_back(*d);
      }
    }
    expect('>');
    t.shape = Shape(std::move(shape));
    return t;
  }

  // ( [type {, type}] )
  std::vector<TensorType> type_list() {
    expect('(');
    std::vector<TensorType> types;
    if (try_char(')')) return types;
    do types.push_back(type());
    while (try_char(','));
    expect(')');
    return types;
  }

  // A single type, or a parenthesised list of them (function results).
  /// A function's result types: one, or a parenthesized list whose types may carry
  /// `{kiln.name = "..."}` (into \p names, one per type, empty for none).
  std::vector<TensorType> result_type_list(std::vector<std::string>* names = nullptr) {
    skip_space();
    if (peek() != '(') return {type()};
    if (names == nullptr) return type_list();  // an op's: no names
    expect('(');
    std::vector<TensorType> types;
    if (try_char(')')) return types;
    do {
      types.push_back(type());
      names->push_back(name_attribute());
    } while (try_char(','));
    expect(')');
    return types;
  }

  /// An optional `{kiln.name = "..."}` (the only argument or result attribute kiln
  /// reads); its string, or empty when there is none.
  std::string name_attribute() {
    skip_space();
    if (!try_char('{')) return {};
    skip_space();
    const Position at = here();
    if (!try_literal("kiln.name"))
      fail_at(at, "expected kiln.name, the only argument and result attribute kiln reads");
    expect('=');
    skip_space();
    std::string name = string_literal();
    if (name.empty()) fail_at(at, "kiln.name must not be empty");
    expect('}');
    return name;
  }

  Device device_token() {
    skip_space();
    const Position where = here();
    std::string text;
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == ':') {
      text += peek();
      advance();
    }
    if (text.empty()) expected("a device (cpu:0, cuda:1)");
    return parse_device(text, where);
  }

  // [2, batch, 4]
  std::vector<Dim> dim_list() {
    expect('[');
    std::vector<Dim> dims;
    if (try_char(']')) return dims;
    do {
      skip_space();
      const Position where = here();
      // A size, a name or an expression over names ("batch*seq + 1"): up to ',' or ']'.
      std::string text;
      while (peek() != ',' && peek() != ']' && peek() != '\0' && peek() != '\n') {
        text += peek();
        advance();
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      if (text.empty()) fail_at(where, "expected a dimension (a size, a name or an expression)");
      std::int64_t size = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), size);
      if (ec == std::errc() && end == text.data() + text.size()) {
        if (size < 0) fail_at(where, cat("dimension ", size, " is negative"));
        dims.emplace_back(size);
      } else {
        try {
          dims.emplace_back(text);
        } catch (const UserError& e) {
          fail_at(where, e.what());
        }
      }
    } while (try_char(','));
    expect(']');
    return dims;
  }

  // ---- attributes ------------------------------------------------------------------------

  Attribute attribute(int depth = 0) {
    if (depth > kMaxDepth) fail(cat("attributes nest deeper than ", kMaxDepth, " levels"));
    skip_space();
    const char c = peek();
    if (c == '"') return Attribute(string_literal());
    if (c == '@') return Attribute(SymbolRef{symbol_name()});
    if (c == '[') {
      advance();
      Attribute::Array items;
      if (!try_char(']')) {
        do items.push_back(attribute(depth + 1));
        while (try_char(','));
        expect(']');
      }
      return Attribute(std::move(items));
    }
    if (try_literal(detail::kShapeAttribute)) {
      expect('<');
      std::vector<Dim> dims = dim_list();
      expect('>');
      return Attribute(Shape(std::move(dims)));
    }
    if (try_keyword("true")) return Attribute(true);
    if (try_keyword("false")) return Attribute(false);
    if (try_keyword("dense")) return Attribute(dense());
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    if (std::isalpha(static_cast<unsigned char>(c))) {
      const Position at = here();
      const std::string word = bare_id("an attribute value");
      if (const auto d = detail::dtype_of_mlir(word)) return Attribute(*d);
      fail_at(at, cat("expected an attribute value but found '", word, "'"));
    }
    expected("an attribute value");
  }

  Attribute number() {
    const Position start = here();
    if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X')) {  // float bits: 0x... : f64
      advance();
      advance();
      const std::size_t first = pos_;
      while (std::isxdigit(static_cast<unsigned char>(peek()))) advance();
      std::uint64_t bits = 0;
      const auto [end, ec] = std::from_chars(text_.data() + first, text_.data() + pos_, bits, 16);
      if (ec != std::errc() || pos_ == first) fail_at(start, "bad hexadecimal number");
      expect(':');
      keyword("f64");
      double v;
      std::memcpy(&v, &bits, sizeof v);
      return Attribute(v);
    }
    std::size_t end = pos_;
    if (end < text_.size() && text_[end] == '-') ++end;
    bool is_float = false;
    while (end < text_.size()) {
      const char c = text_[end];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++end;
      } else if (c == '.' || c == 'e' || c == 'E' ||
                 ((c == '+' || c == '-') && (text_[end - 1] == 'e' || text_[end - 1] == 'E'))) {
        is_float = true;
        ++end;
      } else {
        break;
      }
    }
    const char* first = text_.data() + pos_;
    const char* last = text_.data() + end;
    Attribute out;
    if (is_float) {
      double v = 0;
      const auto [stop, ec] = std::from_chars(first, last, v);
      if (ec != std::errc() || stop != last) expected("a number");
      out = Attribute(v);
    } else {
      std::int64_t v = 0;
      const auto [stop, ec] = std::from_chars(first, last, v);
      if (ec != std::errc() || stop != last) expected("a number (64-bit integer)");
      out = Attribute(v);
    }
    while (pos_ < end) advance();
    // Optional MLIR type suffix, as mlir-opt writes them.
    const std::size_t save = pos_;
    const std::uint32_t save_line = line_, save_column = column_;
    if (try_char(':')) {
      if (is_float ? !try_keyword("f64") : !try_keyword("i64")) {
        pos_ = save, line_ = save_line, column_ = save_column;
      }
    }
    return out;
  }

  DenseData dense() {
    expect('<');
    skip_space();
    const Position value_at = here();
    std::string hex;
    bool have_hex = false;
    std::vector<int> flags;  // bool or empty nested list
    if (peek() == '"') {
      const std::string text = string_literal();
      if (text.size() < 2 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X') ||
          text.size() % 2 != 0)
        fail_at(value_at, "expected a hex string \"0x...\" with whole bytes");
      for (std::size_t i = 2; i < text.size(); i += 2) {
        if (!std::isxdigit(static_cast<unsigned char>(text[i])) ||
            !std::isxdigit(static_cast<unsigned char>(text[i + 1])))
          fail_at(value_at, "bad hex digit in dense data");
        hex += static_cast<char>(hex_value(text[i]) * 16 + hex_value(text[i + 1]));
      }
      have_hex = true;
    } else {
      nested_list(flags, 0);
    }
    expect('>');
    expect(':');
    const Position type_at = here();
    TensorType t = parse_type();
    if (!t.shape.is_static()) fail_at(type_at, "a dense constant needs a static shape");
    DenseData d{t.dtype, t.shape, {}};
    std::int64_t count = 0;
    try {
      count = t.shape.num_elements();
    } catch (const UserError& e) {
      fail_at(type_at, e.what());
    }
    const auto bytes = static_cast<std::uint64_t>(count) * size_of(t.dtype);
    if (have_hex) {
      if (t.dtype == DType::bool_) fail_at(value_at, "write bool constants as [true, false]");
      if (hex.size() != bytes)
        fail_at(value_at, cat("dense data has ", hex.size(), " bytes but ", t.shape, " ",
                              name(t.dtype), " needs ", bytes));
      d.bytes = std::move(hex);
    } else {
      if (static_cast<std::int64_t>(flags.size()) != count ||
          (t.dtype != DType::bool_ && count != 0))
        fail_at(value_at,
                cat("the list holds ", flags.size(), " elements; ", t.shape, " ", name(t.dtype),
                    " needs ", count, " (lists are for bool or empty constants)"));
      for (int f : flags) d.bytes += static_cast<char>(f);
    }
    return d;
  }

  // true / false / [ ... ] nested; records the flags in order.
  void nested_list(std::vector<int>& flags, int depth) {
    if (depth > kMaxDepth) fail(cat("dense lists nest deeper than ", kMaxDepth, " levels"));
    if (try_keyword("true")) {
      flags.push_back(1);
      return;
    }
    if (try_keyword("false")) {
      flags.push_back(0);
      return;
    }
    expect('[');
    if (try_char(']')) return;
    do nested_list(flags, depth + 1);
    while (try_char(','));
    expect(']');
  }

  std::vector<NamedAttribute> attribute_dict() {
    std::vector<NamedAttribute> out;
    if (try_char('}')) return out;
    do {
      skip_space();
      const Position at = here();
      std::string key = bare_id("an attribute name");
      for (const NamedAttribute& a : out)
        if (a.name == key) fail_at(at, cat("attribute '", key, "' appears twice"));
      expect('=');
      out.push_back({std::move(key), attribute()});
    } while (try_char(','));
    expect('}');
    return out;
  }

  // ---- graphs ----------------------------------------------------------------------------

  void graph() {
    keyword("func.func");
    try_keyword("private");
    skip_space();
    const Position name_at = here();
    std::string name = symbol_name();
    if (module_.find(name) != nullptr)
      fail_at(name_at, cat("@", name, " is defined twice; graph names must be unique"));
    Graph& g = module_.add_graph(std::move(name));
    // A fresh table per graph: clear() would cost the buckets of the largest graph so far
    // for every graph, quadratic in a module of many graphs.
    decltype(values_)().swap(values_);  // (`= {}` would be clear(): every bucket again)
    expect('(');
    if (!try_char(')')) {
      do {
        skip_space();
        const Position at = here();
        const std::string_view value = value_name();
        expect(':');
        define(at, value, {g.add_argument(type()).id, 1});
        if (std::string arg_name = name_attribute(); !arg_name.empty()) {
          for (std::size_t i = 0; i + 1 < g.arguments().size(); ++i)
            if (g.argument_name(i) == arg_name)
              fail_at(at, cat("arguments ", i, " and ", g.arguments().size() - 1, " of @", g.name(),
                              " are both named ", quote_name(arg_name)));
          g.set_argument_name(g.arguments().size() - 1, std::move(arg_name));
        }
      } while (try_char(','));
      expect(')');
    }
    std::vector<TensorType> result_types;
    std::vector<std::string> result_names;
    if (try_literal("->")) result_types = result_type_list(&result_names);
    expect('{');
    while (!try_keyword("return")) op(g);
    skip_space();
    const Position return_at = here();
    std::vector<Value> results;
    if (peek() == '%') {
      do results.push_back(use(g));
      while (try_char(','));
      expect(':');
      for (std::size_t i = 0; i < results.size(); ++i) {
        if (i) expect(',');
        skip_space();
        const Position at = here();
        const TensorType t = type();
        if (t != g.type(results[i]))
          fail_at(at, cat("return value ", i, " is ", g.type(results[i]), " but is written ", t));
      }
    }
    if (results.size() != result_types.size())
      fail_at(return_at, cat("@", g.name(), " declares ", result_types.size(),
                             " results but returns ", results.size()));
    for (std::size_t i = 0; i < results.size(); ++i)
      if (g.type(results[i]) != result_types[i])
        fail_at(return_at, cat("result ", i, " of @", g.name(), " is declared ", result_types[i],
                               " but the returned value is ", g.type(results[i])));
    g.set_results(std::move(results));
    for (std::size_t i = 0; i < result_names.size(); ++i)
      if (!result_names[i].empty()) g.set_result_name(i, std::move(result_names[i]));
    expect('}');
  }

  // A slice of the input: names live as long as the text, so no copies.
  std::string_view value_name() {
    skip_space();
    if (peek() != '%') expected("a value (%name)");
    advance();
    const std::size_t start = pos_;
    while (is_id_char(peek())) advance();
    if (pos_ == start) expected("a value name after '%'");
    return text_.substr(start, pos_ - start);
  }

  // The values a name stands for: one argument, or an op's results (consecutive ids).
  struct Named {
    std::uint32_t first;
    std::uint32_t count;
    std::size_t size() const { return count; }
    Value operator[](std::size_t i) const { return Value{first + static_cast<std::uint32_t>(i)}; }
  };

  void define(const Position& at, std::string_view name, Named values) {
    if (!values_.emplace(name, values).second) fail_at(at, cat("%", name, " is defined twice"));
  }

  Value use(const Graph& g) {
    skip_space();
    const Position at = here();
    const std::string_view name = value_name();
    auto it = values_.find(name);
    if (it == values_.end())
      fail_at(at, cat("use of undefined value %", name, " in @", g.name(),
                      " (values must be defined before they are used)"));
    std::size_t index = 0;
    if (peek() == '#') {
      advance();
      index = static_cast<std::size_t>(integer("a result number after '#'"));
    } else if (it->second.size() != 1) {
      fail_at(at,
              cat("%", name, " has ", it->second.size(), " results; pick one with %", name, "#N"));
    }
    if (index >= it->second.size())
      fail_at(at,
              cat("%", name, " has ", it->second.size(), " results; #", index, " does not exist"));
    return it->second[index];
  }

  void op(Graph& g) {
    skip_space();
    const Position op_at = here();
    std::string_view result_name;
    std::size_t declared_results = 0;
    if (peek() == '%') {
      result_name = value_name();
      declared_results = 1;
      if (try_char(':')) {
        const std::int64_t n = integer("a result count");
        if (n < 1 || n > 65536) fail_at(op_at, cat("result count ", n, " is out of range"));
        declared_results = static_cast<std::size_t>(n);
      }
      expect('=');
    }
    skip_space();
    const Position name_at = here();
    if (peek() != '"') expected("an op in generic form (\"kiln.name\"(...)) or 'return'");
    const std::string op_name = string_literal();
    const OpDef* def = OpRegistry::global().find(op_name);
    if (def == nullptr) {
      try {
        lookup_op(op_name);
      } catch (const UserError& e) {
        fail_at(name_at, e.what());
      }
    }
    expect('(');
    std::vector<Value> operands;
    if (!try_char(')')) {
      do operands.push_back(use(g));
      while (try_char(','));
      expect(')');
    }
    skip_space();
    std::vector<NamedAttribute> attributes;
    const Position attributes_at = here();
    if (try_char('{')) attributes = attribute_dict();
    if (std::string problem = def->check(operands.size(), attributes); !problem.empty())
      fail_at(problem.starts_with("takes") ? name_at : attributes_at, cat(op_name, " ", problem));
    expect(':');
    skip_space();
    const Position types_at = here();
    if (peek() != '(') expected("'('");
    const std::vector<TensorType> operand_types = type_list();
    if (operand_types.size() != operands.size())
      fail_at(types_at, cat(op_name, " has ", operands.size(), " operands but its type lists ",
                            operand_types.size()));
    for (std::size_t i = 0; i < operands.size(); ++i)
      if (g.type(operands[i]) != operand_types[i])
        fail_at(types_at, cat("type mismatch: operand ", i, " of ", op_name, " is ",
                              g.type(operands[i]), " but the op's type says ", operand_types[i]));
    if (!try_literal("->")) expected("'->'");
    skip_space();
    const Position results_at = here();
    std::vector<TensorType> result_types = result_type_list();
    if (result_types.size() != declared_results)
      fail_at(results_at, cat(op_name, " defines ", declared_results, " results but its type has ",
                              result_types.size()));
    Location location;
    if (try_keyword("loc")) {
      expect('(');
      location.file = string_literal();
      expect(':');
      location.line = line_number();
      expect(':');
      location.column = line_number();
      expect(')');
    }
    const OpView view = g.add_op_typed(*def, operands, std::move(attributes),
                                       std::move(result_types), std::move(location));
    if (declared_results > 0)
      define(op_at, result_name,
             {view.result(0).id, static_cast<std::uint32_t>(view.num_results())});
  }

  std::uint32_t line_number() {
    const std::int64_t n = integer("a line or column number");
    if (n < 1 || n > 0xffffffffLL) fail(cat("line/column ", n, " is out of range"));
    return static_cast<std::uint32_t>(n);
  }

  Module module_;
  Position entry_at_{0, 1, 1};
  std::unordered_map<std::string_view, Named> values_;
  std::unordered_map<std::string_view, TensorType> type_cache_;
};

}  // namespace

Module parse_module(std::string_view text, std::string_view file) {
  return Parser(text, file).run();
}

}  // namespace kiln::ir