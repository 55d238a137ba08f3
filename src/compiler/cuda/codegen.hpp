#pragma once
// Internal: elementwise bodies (`FusedProgram`s) written out as CUDA C++ kernels for
// NVRTC. One generated kernel computes one launch's output: a grid-stride loop over the
// output's elements, each input read at its own offset (the element's index for inputs of
// the output's shape, 0 for scalars, broadcast strides otherwise), the body's ops as
// float expressions with the same formulas as the CPU's vector math.

#include <string>
#include <vector>

#include "compiler/cpu/kernels.hpp"

namespace kiln::compiler {

/// How a generated kernel reads one input.
enum class InputAccess { same_shape, scalar, broadcast };

/// What a generated kernel is specialised for: the output's rank and each input's access.
struct CudaKernelShape {
  std::size_t rank = 0;
  std::vector<InputAccess> inputs;
};

/// The access pattern of each input of launch \p l (bound views) on its output.
CudaKernelShape cuda_kernel_shape(const Launch& l);

/// CUDA C++ for \p program specialised to \p shape: `extern "C" __global__ void
/// <name>(KilnFusedArgs)` (the argument struct is in the source: input pointers, their
/// strides broadcast to the output, the output's shape, the output, the element count).
/// \throws UserError for bodies that are not all-f32 array programs.
std::string cuda_fused_source(const FusedProgram& program, const CudaKernelShape& shape,
                              const std::string& name);

/// CUDA C++ for a body over any dtypes (\p inputs: each input's, \p output: the
/// result's), computed as the CPU's per-element interpreter does: values loaded as
/// double, each op's result rounded to its dtype (stored and loaded back), the result
/// stored with the same conversions (saturating integers, f16/bf16 rounded to nearest
/// even). `KilnScalarArgs` has KilnFusedArgs' layout with untyped pointers.
std::string cuda_scalar_source(const FusedProgram& program, const CudaKernelShape& shape,
                               const std::vector<DType>& inputs, DType output,
                               const std::string& name);

}  // namespace kiln::compiler
