#pragma once
// Internal: oneDNN descriptors of conv operands as kiln lays them out.

#include <cstdint>
#include <utility>

#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/onednn_support.hpp"

namespace kiln::compiler::kernel {

using Desc = dnnl::memory::desc;
using DnnlDims = dnnl::memory::dims;

/// The trailing \p spatial entries of \p s, each minus \p minus.
DnnlDims tail(const WindowGeometry::Spatial& s, std::size_t spatial, std::int64_t minus = 0);

/// [rows, channels, spatial...] f32 of a row-major tensor of \p total channels.
Desc activation_desc(std::int64_t rows, std::int64_t channels, std::int64_t total,
                     const WindowGeometry::Spatial& plane, std::size_t spatial);

/// The weights of output channels [m0, m1) as oneDNN reads them (o, i, kernel; with groups
/// g, o, i, kernel) over kiln's layout: [M, C / groups, kernel] for a conv, [C, M / groups,
/// kernel] for a conv_transpose; and the element offset of the slice.
std::pair<Desc, std::int64_t> weights_desc(const WindowGeometry& g, bool transposed,
                                           std::int64_t m0, std::int64_t m1);

}  // namespace kiln::compiler::kernel
