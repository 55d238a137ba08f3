#pragma once
// Internal: argument checks shared by stream enqueues and graph building, so both report
// the same problem with the same words.

#include <cstddef>

#include "kiln/core/dtype.hpp"
#include "kiln/runtime/device_function.hpp"

namespace kiln::detail {

/// \throws UserError (prefixed with \p where) unless every launch dimension is >= 1.
void check_launch(const char* where, const KernelLaunch& kernel);
/// \throws UserError (prefixed with \p where) when \p kernel is device code and \p device
/// a CPU, or a C++ callable and \p device a GPU.
void check_kernel_device(const char* where, const KernelLaunch& kernel, Device device);
/// \throws UserError (prefixed with \p where) unless the two byte counts are equal.
void check_copy_sizes(const char* where, std::size_t dst_bytes, std::size_t src_bytes, DType dtype);

}  // namespace kiln::detail
