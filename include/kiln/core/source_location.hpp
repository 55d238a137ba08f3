#pragma once
/// \file
/// `SourceLocation`: where a call came from, captured by a defaulted argument.
/// (`std::source_location` where the library has it; the compiler builtins otherwise —
/// clang 14 with libstdc++ 12, Debian 12's pair, lacks the former.)

#include <cstdint>
#if !defined(__clang__)
#include <source_location>
#endif

namespace kiln {

class SourceLocation {
 public:
  constexpr SourceLocation() = default;
#if defined(__clang__)
  /// The location of the call that evaluates this default argument.
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          std::uint32_t line = __builtin_LINE(),
                                          std::uint32_t column = __builtin_COLUMN()) noexcept {
    return SourceLocation(file, line, column);
  }
#else
  /// The location of the call that evaluates this default argument.
  static constexpr SourceLocation current(
      std::source_location where = std::source_location::current()) noexcept {
    return SourceLocation(where.file_name(), where.line(), where.column());
  }
#endif
  /// A location given by hand (another language's call site: kiln's Python package
  /// passes the Python file and line). \p file must outlive every use of the location.
  static constexpr SourceLocation at(const char* file, std::uint32_t line,
                                     std::uint32_t column = 0) noexcept {
    return SourceLocation(file, line, column);
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr std::uint32_t line() const noexcept { return line_; }
  constexpr std::uint32_t column() const noexcept { return column_; }

 private:
  constexpr SourceLocation(const char* file, std::uint32_t line, std::uint32_t column) noexcept
      : file_(file), line_(line), column_(column) {}
  const char* file_ = "";
  std::uint32_t line_ = 0;
  std::uint32_t column_ = 0;
};

}  // namespace kiln
