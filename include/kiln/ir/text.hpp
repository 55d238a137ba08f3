#pragma once
/// \file
/// The text form of the IR: valid MLIR that `mlir-opt --allow-unregistered-dialect`
/// accepts, and that `parse_module` reads back exactly (print, parse, print gives the same
/// bytes).
///
/// \code{.mlir}
///   module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
///     func.func @main(%arg0: tensor<?x4xf32, #kiln.tensor<[batch, 4]>>) -> tensor<?x4xf32,
///     #kiln.tensor<[batch, 4]>> {
///       %0 = "kiln.weight"() {name = "w"} : () -> tensor<4x4xf32>
///       %1 = "kiln.matmul"(%arg0, %0) : (tensor<...>, tensor<4x4xf32>) -> tensor<...>
///       loc("model.cpp":12:7) %2 = func.call @block(%1) {kiln.prefix = "layers.0."} :
///       (tensor<...>) -> tensor<...> return %2 : tensor<...>
///     }
///     func.func private @block(...) -> ... { ... }
///   }
/// \endcode
///
/// - Graphs are `func.func` (the entry public, the others private); results are `return`.
/// - kiln ops are in MLIR's generic form, attributes sorted by name.
/// - Types are builtin tensors; a symbolic dim prints as `?` and its name, and a device
///   other than the module's `kiln.device`, go in the `#kiln.tensor<[dims], device>`
///   encoding.
/// - Attributes: integers `3`, floats `2.5` (non-finite: hex `: f64`), `true`/`false`,
///   strings with `\XX` escapes, arrays `[...]`, dtypes as MLIR types (`f32`, `ui8`, `i1`),
///   shapes `#kiln.shape<[2, batch]>`, symbols `@name`, constants
///   `dense<"0x…"> : tensor<…>`.
/// - Values are numbered in order: `%argN` for arguments, `%N` / `%N#i` for results.
/// - An op's source location, when known, is a trailing `loc("file":line:col)`.

#include <stdexcept>
#include <string>
#include <string_view>

#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::ir {

/// The MLIR text of \p module (same as `module.str()`).
std::string print(const Module& module);

/// A syntax or reference error in IR text, with where it is.
class ParseError : public UserError {
 public:
  ParseError(std::string file, std::uint32_t line, std::uint32_t column, std::string message);
  const std::string& file() const noexcept { return file_; }
  std::uint32_t line() const noexcept { return line_; }
  std::uint32_t column() const noexcept { return column_; }

 private:
  std::string file_;
  std::uint32_t line_, column_;
};

/// Parses module text as `print` writes it. \p file names the text in messages.
/// \throws ParseError (`file:line:col: error: expected ')' but found 'x'`) at the first
/// problem: bad syntax, an unknown op, an undefined or redefined value, a duplicate graph,
/// a type that does not match the value's. Never crashes or hangs on any input.
/// Semantic checks beyond that are the verifier's (`verify`).
Module parse_module(std::string_view text, std::string_view file = "<input>");

}  // namespace kiln::ir
