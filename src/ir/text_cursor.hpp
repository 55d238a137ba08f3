#pragma once
// Internal: the character level of the IR text parser (parser.cpp): a cursor over the text
// that tracks line and column, skips whitespace and comments, reads tokens (identifiers,
// string literals, symbols, integers) and reports errors as file:line:col with what was
// found there. It never reads past the end of its input.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/str.hpp"
#include "kiln/ir/text.hpp"

namespace kiln::ir::detail {

/// Whether \p c may continue an identifier.
bool is_id_char(char c);

class TextCursor {
 public:
  TextCursor(std::string_view text, std::string_view file) : text_(text), file_(file) {}

 protected:
  struct Position {
    std::size_t offset;
    std::uint32_t line, column;
  };

  // ---- errors ----------------------------------------------------------------------------

  [[noreturn]] void fail_at(const Position& p, const std::string& message) const {
    throw ParseError(std::string(file_), p.line, p.column, message);
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(here(), message); }
  [[noreturn]] void expected(std::string_view what) const {
    fail(kiln::detail::cat("expected ", what, " but found ", found()));
  }
  std::string found() const;
  Position here() const { return {pos_, line_, column_}; }

  // ---- characters ------------------------------------------------------------------------

  char peek(std::size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance() {
    if (pos_ >= text_.size()) return;
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }
  void skip_space();
  bool try_char(char c) {
    skip_space();
    if (peek() != c) return false;
    advance();
    return true;
  }
  void expect(char c) {
    if (!try_char(c)) expected(kiln::detail::cat("'", c, "'"));
  }
  bool try_literal(std::string_view s) {
    skip_space();
    if (text_.substr(pos_, s.size()) != s) return false;
    for (std::size_t i = 0; i < s.size(); ++i) advance();
    return true;
  }
  // A word that must not run on into an identifier (`module`, not `modules`).
  bool try_keyword(std::string_view word) {
    skip_space();
    if (text_.substr(pos_, word.size()) != word || is_id_char(peek(word.size()))) return false;
    for (std::size_t i = 0; i < word.size(); ++i) advance();
    return true;
  }
  void keyword(std::string_view word) {
    if (!try_keyword(word)) expected(kiln::detail::cat("'", word, "'"));
  }

  std::string bare_id(std::string_view what);

  std::string string_literal();
  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c - 'A' + 10;
  }

  std::string symbol_name();

  std::int64_t integer(std::string_view what);

  std::string_view text_;
  std::string_view file_;
  std::size_t pos_ = 0;
  std::uint32_t line_ = 1, column_ = 1;
};

}  // namespace kiln::ir::detail
