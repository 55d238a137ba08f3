#pragma once
// Internal: the CUDA backend: one CUDA stream on a device's primary context, through the
// driver API (src/runtime/cuda/driver.hpp). Kernels are CUDA code loaded as modules
// (compiled by NVRTC from source, or images from nvcc); device graphs are CUDA graphs.

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/cublas.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/device_code.hpp"
#include "runtime/stream_backend.hpp"

namespace kiln::detail {

/// Failures of host functions (which run on a driver thread and cannot throw into it):
/// the first is kept until the next synchronize. Thread-safe.
class HostFailures {
 public:
  void record(std::exception_ptr error, std::string where);
  /// The first failure since the last call, or an empty one.
  std::pair<std::exception_ptr, std::string> take();

 private:
  std::mutex mutex_;
  std::exception_ptr error_;
  std::string where_;
};

/// What a CUDA stream, its graphs and its kernels share: the driver, the device's primary
/// context and the stream. Released (stream destroyed, context released) with the last of
/// them.
struct CudaStreamState {
  const CudaDriver* cu = nullptr;
  Device device;
  CUdevice handle = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  std::string arch;                    // "compute_90": what NVRTC targets
  int shared_default = 48 << 10;       // bytes of shared memory a block may use unasked
  int shared_opt_in = 48 << 10;        // ... and at most, once the kernel asks
  std::string name;                    // "NVIDIA H200"
  mutable HostFailures host_failures;  // written from driver threads

  CudaStreamState(const CudaDriver& driver, Device device, const Cublas* blas = nullptr);
  ~CudaStreamState();
  CudaStreamState(const CudaStreamState&) = delete;
  CudaStreamState& operator=(const CudaStreamState&) = delete;

  /// Makes the context current on the calling thread (a no-op when it already is).
  void make_current() const;
  /// driver.check with the device in the message.
  void check(CUresult r, const char* what) const;
  /// This device's cuBLAS handle (made on first use, with a workspace of its own so that
  /// its GEMMs can be captured into graphs). \throws UserError without cuBLAS.
  std::pair<const Cublas*, cublasHandle_t> blas() const;
  /// Points the handle at this device's workspace again: after every cublasSetStream,
  /// which forgets it (then a captured GEMM would allocate, and its graph could not be a
  /// child graph).
  void use_blas_workspace() const;
  /// The workspace's size (32 MiB: what NVIDIA suggests for Hopper).
  static constexpr std::size_t kBlasWorkspace = std::size_t{32} << 20;

 private:
  mutable std::mutex blas_mutex_;
  mutable const Cublas* blas_;
  mutable cublasHandle_t blas_handle_ = nullptr;
  mutable CUdeviceptr blas_workspace_ = 0;
};

/// A loaded `__global__` function: its module, handle and parameter layout.
struct CudaCode final : DeviceCode {
  std::shared_ptr<const CudaStreamState> state;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  int static_shared = 0;  // bytes of __shared__ the kernel declares
  // The most dynamic shared memory the driver has been told this kernel may use.
  mutable std::atomic<int> dynamic_shared_allowed{0};
  ~CudaCode() override;

  /// Lets launches of this kernel use \p bytes of dynamic shared memory (asking the
  /// driver when above the default limit). \p where and \p name (the kernel's) are for
  /// the message. \throws UserError when the device cannot give that much.
  void allow_dynamic_shared(std::uint32_t bytes, const char* where, const std::string& name) const;
};

/// The device address of \p p (unified addressing: host pointers too).
inline CUdeviceptr device_address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

/// The memsets that set \p count elements of \p size bytes at \p dst to \p pattern, as
/// the driver takes them (elements of 1, 2 or 4 bytes): one for elements of 1, 2 and 4
/// bytes (height 1); for 8 and 16, one per 32-bit word, a column of a 2-D memset whose
/// pitch is the element. What a stream enqueues and a graph adds as nodes.
/// \throws InternalError for another element size.
std::vector<CUDA_MEMSET_NODE_PARAMS> memset_params(CUdeviceptr dst, std::size_t count,
                                                   const void* pattern, std::size_t size);

/// The CUDA backend on \p device through \p driver and \p blas (tests pass fakes; no
/// \p blas: cuBLAS, loaded when a GEMM first needs it).
/// \throws UserError for a device index this machine does not have.
std::shared_ptr<StreamBackend> make_cuda_stream(Device device, const CudaDriver& driver,
                                                const Cublas* blas = nullptr);

}  // namespace kiln::detail
