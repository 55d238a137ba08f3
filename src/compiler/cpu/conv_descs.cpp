// oneDNN descriptors of conv operands over kiln's layout (see conv_descs.hpp).

#include "compiler/cpu/conv_descs.hpp"

namespace kiln::compiler::kernel {

namespace {
constexpr std::size_t kMaxSpatial = WindowGeometry::kMaxSpatial;
using Spatial = WindowGeometry::Spatial;
using Geometry = WindowGeometry;
}  // namespace

DnnlDims tail(const Spatial& s, std::size_t spatial, std::int64_t minus) {
  DnnlDims d;
  for (std::size_t i = kMaxSpatial - spatial; i < kMaxSpatial; ++i) d.push_back(s[i] - minus);
  return d;
}

Desc activation_desc(std::int64_t rows, std::int64_t channels, std::int64_t total,
                     const Spatial& plane, std::size_t spatial) {
  DnnlDims dims{rows, channels}, strides;
  const DnnlDims space = tail(plane, spatial);
  dims.insert(dims.end(), space.begin(), space.end());
  std::int64_t step = 1;
  for (std::size_t d = space.size(); d-- > 0;) {
    strides.insert(strides.begin(), step);
    step *= space[d];
  }
  // One row: its batch stride is never used; a dense one keeps the slice of channels a
  // plain layout (oneDNN runs only its reference kernel on other strides).
  strides.insert(strides.begin(), {(rows == 1 ? channels : total) * step, step});
  return Desc(dims, dnnl::memory::data_type::f32, strides);
}

std::pair<Desc, std::int64_t> weights_desc(const Geometry& g, bool transposed, std::int64_t m0,
                                           std::int64_t m1) {
  const std::int64_t cg = g.c / g.groups, mg = g.m / g.groups, taps = g.taps();
  const DnnlDims kernel = tail(g.kernel, g.spatial);
  DnnlDims kernel_strides;
  std::int64_t step = 1;
  for (std::size_t d = kernel.size(); d-- > 0;) {
    kernel_strides.insert(kernel_strides.begin(), step);
    step *= kernel[d];
  }
  DnnlDims dims, strides;
  std::int64_t offset = 0;
  if (g.groups == 1) {  // a slice of output channels
    dims = {m1 - m0, g.c};
    strides = transposed ? DnnlDims{taps, g.m * taps} : DnnlDims{g.c * taps, taps};
    offset = m0 * (transposed ? taps : g.c * taps);
  } else {  // a slice of whole groups
    dims = {(m1 - m0) / mg, mg, cg};
    strides = transposed ? DnnlDims{cg * mg * taps, taps, mg * taps}
                         : DnnlDims{mg * cg * taps, cg * taps, taps};
    offset = m0 / mg * mg * cg * taps;
  }
  dims.insert(dims.end(), kernel.begin(), kernel.end());
  strides.insert(strides.end(), kernel_strides.begin(), kernel_strides.end());
  return {Desc(dims, dnnl::memory::data_type::f32, strides), offset};
}

}  // namespace kiln::compiler::kernel
