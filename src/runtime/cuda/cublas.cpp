#include "runtime/cuda/cublas.hpp"

#include <cstdlib>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/dynamic_library.hpp"

namespace kiln::detail {
namespace {

#define KILN_CUBLAS_NAME2(x) #x
#define KILN_CUBLAS_NAME(x) KILN_CUBLAS_NAME2(x)  // the exported name cublas_v2.h maps x to

struct Loaded {
  Cublas api;
  std::string error;
};

Loaded load() {
  Loaded out;
  std::vector<std::string> candidates;
#ifdef KILN_CUDA_LIBRARY_DIR
  candidates.push_back(std::string(KILN_CUDA_LIBRARY_DIR) + "/libcublas.so");
#endif
  candidates.insert(candidates.end(), {"libcublas.so", "libcublas.so.13", "libcublas.so.12"});
  void* handle =
      open_optional_library("KILN_CUBLAS_LIBRARY", std::move(candidates), "cuBLAS",
                            "install the CUDA toolkit or set KILN_CUBLAS_LIBRARY", out.error);
  if (handle == nullptr) return out;
  std::vector<std::string> missing;
#define KILN_CUBLAS_LOAD(name)                                                           \
  out.api.name = library_symbol<decltype(out.api.name)>(handle, KILN_CUBLAS_NAME(name)); \
  if (out.api.name == nullptr) missing.push_back(KILN_CUBLAS_NAME(name));
  KILN_CUBLAS_ENTRIES(KILN_CUBLAS_LOAD)
#undef KILN_CUBLAS_LOAD
  if (!missing.empty()) out.error = cat("cuBLAS lacks ", join(missing, ", "));
  return out;
}

}  // namespace

const Cublas& Cublas::instance() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) throw UserError(loaded.error);
  return loaded.api;
}

void Cublas::check(cublasStatus_t s, const std::string& what) const {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const char* text = cublasGetStatusString != nullptr ? cublasGetStatusString(s) : nullptr;
  throw DeviceError(cat(what, " failed: ", text != nullptr ? text : "cuBLAS error"),
                    static_cast<long>(s));
}

}  // namespace kiln::detail
