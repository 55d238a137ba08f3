// The IR text parser's character level (see text_cursor.hpp).

#include "ir/text_cursor.hpp"

#include <cctype>
#include <charconv>

#include "core/str.hpp"

namespace kiln::ir::detail {

using kiln::detail::cat;

bool is_id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}

std::string TextCursor::found() const {
  if (pos_ >= text_.size()) return "end of input";
  std::size_t end = pos_;
  while (end < text_.size() && end - pos_ < 24 &&
         !std::isspace(static_cast<unsigned char>(text_[end])))
    ++end;
  if (end == pos_) ++end;
  std::string token;
  for (std::size_t i = pos_; i < end; ++i) {
    const auto c = static_cast<unsigned char>(text_[i]);
    token += std::isprint(c) ? static_cast<char>(c) : '?';
  }
  return "'" + token + "'";
}

void TextCursor::skip_space() {
  for (;;) {
    const char c = peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
    } else if (c == '/' && peek(1) == '/') {  // MLIR line comment
      while (pos_ < text_.size() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

std::string TextCursor::bare_id(std::string_view what) {
  skip_space();
  const char c = peek();
  if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_')) expected(what);
  std::string out;
  while (is_id_char(peek())) {
    out += peek();
    advance();
  }
  return out;
}

std::string TextCursor::string_literal() {
  skip_space();
  if (peek() != '"') expected("a string literal");
  advance();
  std::string out;
  for (;;) {
    if (pos_ >= text_.size()) fail("unterminated string literal");
    const char c = peek();
    if (c == '"') {
      advance();
      return out;
    }
    if (c == '\n') fail("newline in string literal (write it as \\0A)");
    if (c != '\\') {
      out += c;
      advance();
      continue;
    }
    advance();
    const char e = peek();
    if (e == '"' || e == '\\') {
      out += e;
      advance();
    } else if (e == 'n') {
      out += '\n';
      advance();
    } else if (e == 't') {
      out += '\t';
      advance();
    } else if (std::isxdigit(static_cast<unsigned char>(e)) &&
               std::isxdigit(static_cast<unsigned char>(peek(1)))) {
      out += static_cast<char>(hex_value(e) * 16 + hex_value(peek(1)));
      advance();
      advance();
    } else {
      fail("bad escape in string literal (use \\\\, \\\", \\n, \\t or two hex digits)");
    }
  }
}

std::string TextCursor::symbol_name() {
  skip_space();
  if (peek() != '@') expected("a symbol (@name)");
  advance();
  if (peek() == '"') return string_literal();
  std::string name;
  while (is_id_char(peek())) {
    name += peek();
    advance();
  }
  if (name.empty()) expected("a symbol name after '@'");
  return name;
}

std::int64_t TextCursor::integer(std::string_view what) {
  skip_space();
  const std::size_t start = pos_;
  if (peek() == '-') advance();
  while (std::isdigit(static_cast<unsigned char>(peek()))) advance();
  std::int64_t value = 0;
  const char* first = text_.data() + start;
  const char* last = text_.data() + pos_;
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last || first == last) {
    column_ -= static_cast<std::uint32_t>(pos_ - start);  // report at the number's start
    pos_ = start;
    expected(what);
  }
  return value;
}

}  // namespace kiln::ir::detail
