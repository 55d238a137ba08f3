#pragma once
// Internal: cuBLAS, loaded with dlopen on first use (like the driver and NVRTC), so that
// kiln starts on machines without it and only GEMMs on a GPU need it. Only the entry
// points kiln uses, under the names cublas_v2.h maps them to (cublasCreate is
// cublasCreate_v2, ...).

#include <cublas_v2.h>

#include <string>

namespace kiln::detail {

struct Cublas {
#define KILN_CUBLAS_ENTRY(name) decltype(&::name) name = nullptr;
// clang-format off
#define KILN_CUBLAS_ENTRIES(X) \
  X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetWorkspace) \
  X(cublasSgemmStridedBatched) X(cublasGetStatusString)
  // clang-format on
  KILN_CUBLAS_ENTRIES(KILN_CUBLAS_ENTRY)
#undef KILN_CUBLAS_ENTRY

  /// cuBLAS from the toolkit (KILN_CUBLAS_LIBRARY first, if set).
  /// \throws UserError saying why it cannot be loaded.
  static const Cublas& instance();
  /// Throws DeviceError naming \p what and cuBLAS's words unless \p s succeeded.
  void check(cublasStatus_t s, const std::string& what) const;
};

}  // namespace kiln::detail
