#include "runtime/cuda/driver.hpp"

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/dynamic_library.hpp"

namespace kiln::detail {
namespace {

#define KILN_CUDA_NAME2(x) #x
#define KILN_CUDA_NAME(x) KILN_CUDA_NAME2(x)  // the exported name cuda.h maps x to

struct Loaded {
  CudaDriver driver;
  std::string error;  // why the driver cannot be used, if it cannot
};

Loaded load() {
  Loaded out;
  std::vector<std::string> tried;
  std::vector<std::string> candidates = {"libcuda.so.1", "libcuda.so"};
  if (const char* env = std::getenv("KILN_CUDA_DRIVER"); env && *env)
    candidates.insert(candidates.begin(), env);
  void* handle = open_first_library(candidates, tried);
  if (handle == nullptr) {
    out.error = cat("no CUDA driver on this machine (", join(tried, "; "), ")");
    return out;
  }
  std::vector<std::string> missing;
#define KILN_CUDA_LOAD(name)                                                                 \
  out.driver.name = library_symbol<decltype(out.driver.name)>(handle, KILN_CUDA_NAME(name)); \
  if (out.driver.name == nullptr) missing.push_back(KILN_CUDA_NAME(name));
  KILN_CUDA_ENTRIES(KILN_CUDA_LOAD)
#undef KILN_CUDA_LOAD
  if (!missing.empty()) {
    out.error =
        cat("the CUDA driver lacks ", join(missing, ", "), " (a driver older than the ",
            CUDA_VERSION / 1000, ".", CUDA_VERSION % 1000 / 10, " toolkit kiln was built with)");
    return out;
  }
  if (const CUresult r = out.driver.cuInit(0); r != CUDA_SUCCESS) {
    const char* text = nullptr;
    out.driver.cuGetErrorString(r, &text);
    out.error =
        cat("cuInit failed: ", text != nullptr ? text : "unknown error", " (no usable GPU?)");
  }
  return out;
}

}  // namespace

const CudaDriver& CudaDriver::instance() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) throw UserError(loaded.error);
  return loaded.driver;
}

std::string CudaDriver::error_text(CUresult r) const {
  const char* text = nullptr;
  if (cuGetErrorString != nullptr) cuGetErrorString(r, &text);
  return text != nullptr ? std::string(text) : cat("CUDA error ", static_cast<int>(r));
}

void CudaDriver::check(CUresult r, const std::string& what) const {
  if (r == CUDA_SUCCESS) return;
  throw DeviceError(cat(what, " failed: ", error_text(r)), static_cast<long>(r));
}

}  // namespace kiln::detail
