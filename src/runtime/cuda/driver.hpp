#pragma once
// Internal: the CUDA driver API, loaded with dlopen on first use (libcuda.so.1 comes with
// the NVIDIA driver, not the toolkit: a machine without a GPU has none, and kiln must
// still start there). Only the entry points kiln uses, under the names the toolkit's
// cuda.h maps them to (cuMemAlloc is cuMemAlloc_v2, ...).

#include <cuda.h>

#include <string>

namespace kiln::detail {

struct CudaDriver {
#define KILN_CUDA_ENTRY(name) decltype(&::name) name = nullptr;
// Grouped by kind, as written (clang-format would staircase the macro list).
// clang-format off
#define KILN_CUDA_ENTRIES(X) \
  X(cuInit) X(cuGetErrorString) \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent) \
  X(cuCtxSynchronize) \
  X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) \
  X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemAllocHost) X(cuMemFreeHost) \
  X(cuMemcpyAsync) X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) \
  X(cuMemsetD2D32Async) \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetParamInfo) \
  X(cuFuncGetAttribute) X(cuFuncSetAttribute) \
  X(cuLaunchKernel) X(cuLaunchHostFunc) \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamWaitEvent) \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuThreadExchangeStreamCaptureMode) \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventQuery) \
  X(cuEventSynchronize) X(cuEventElapsedTime) \
  X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphAddKernelNode) X(cuGraphAddMemcpyNode) \
  X(cuGraphAddMemsetNode) X(cuGraphAddHostNode) X(cuGraphAddEmptyNode) \
  X(cuGraphAddChildGraphNode) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecUpdate) \
  X(cuGraphExecDestroy) X(cuGraphClone) X(cuGraphAddEventRecordNode) \
  X(cuGraphConditionalHandleCreate) X(cuGraphAddNode)
  // clang-format on
  KILN_CUDA_ENTRIES(KILN_CUDA_ENTRY)
#undef KILN_CUDA_ENTRY

  /// The driver, initialised (cuInit). \throws UserError saying why it cannot be used
  /// (no libcuda.so.1: no NVIDIA driver on this machine; cuInit failing: no usable GPU).
  static const CudaDriver& instance();
  /// Throws DeviceError naming \p what and the driver's message unless \p r succeeded.
  void check(CUresult r, const std::string& what) const;
  /// The driver's text for \p r ("an illegal memory access was encountered").
  std::string error_text(CUresult r) const;
};

}  // namespace kiln::detail
