#pragma once
// Internal: f32 GEMMs on a GPU for the compiler's plans, behind one function that exists
// in every build (without the CUDA code paths it throws).

#include <cstdint>

#include "kiln/runtime/device_context.hpp"

namespace kiln::detail {

/// `batch` row-major products C = A B, A m x k, B k x n, C m x n, product i at
/// `a + i * stride_a` (likewise b and c; a stride of 0 reuses the matrix).
struct GemmF32 {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  const float* a = nullptr;
  const float* b = nullptr;
  float* c = nullptr;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

/// Enqueues \p g on \p stream, a stream of \p ctx's GPU (the one CUDA work is given:
/// `enqueue_cuda_work`, `add_cuda_work`), through cuBLAS with \p ctx's handle.
/// \throws UserError on a CPU context, without cuBLAS, or for sizes cuBLAS cannot take.
void enqueue_gemm_f32(const DeviceContext& ctx, void* stream, const GemmF32& g);

}  // namespace kiln::detail
