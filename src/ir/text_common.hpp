#pragma once
// Internal: spellings shared by the IR printer and parser, so the two cannot drift apart.

#include <optional>
#include <string_view>

#include "kiln/core/dtype.hpp"

namespace kiln::ir::detail {

/// MLIR element type of a dtype: f32, f16, bf16, f64, i8, ui8, i32, i64, i1.
std::string_view mlir_element_type(DType dtype) noexcept;
/// The dtype of an MLIR element type spelling, if it is one of ours.
std::optional<DType> dtype_of_mlir(std::string_view spelling) noexcept;
/// True when \p name can be written bare after `@` (else it is quoted).
bool is_bare_symbol(std::string_view name) noexcept;

inline constexpr std::string_view kTensorEncoding = "#kiln.tensor";
inline constexpr std::string_view kShapeAttribute = "#kiln.shape";
inline constexpr std::string_view kDeviceAttribute = "kiln.device";
inline constexpr std::string_view kEntryAttribute = "kiln.entry";

}  // namespace kiln::ir::detail
