// What can run on a GPU today (ctest label cuda; scripts/gpu-check.sh): a generated fused
// kernel compiled by NVRTC for the device, loaded and launched through the driver API,
// against the CPU. Without a GPU these tests skip, saying why, and the error a user gets
// for a CUDA context is checked instead.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../error_matchers.hpp"
#include "../fused_cuda_case.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/nvrtc.hpp"

namespace kiln {
namespace {

/// The driver, or the reason there is none (the test then skips with it).
const detail::CudaDriver* driver_or(std::string& why) {
  try {
    return &detail::CudaDriver::instance();
  } catch (const UserError& e) {
    why = e.what();
    return nullptr;
  }
}

TEST(CudaDevice, WithoutAGpuAContextSaysWhy) {
  std::string why;
  if (driver_or(why) != nullptr) GTEST_SKIP() << "a GPU is present";
  KILN_EXPECT_THROW_MSG(DeviceContext(Device::cuda(0)), UserError, "cuda:0 is not available",
                        why.c_str());
}

TEST(CudaGpu, AGeneratedFusedKernelRunsOnTheGpuAsOnTheCpu) {
  std::string why;
  const detail::CudaDriver* cu = driver_or(why);
  if (cu == nullptr) GTEST_SKIP() << why;
  CUdevice device = 0;
  CUcontext context = nullptr;
  cu->check(cu->cuDeviceGet(&device, 0), "cuDeviceGet");
  cu->check(cu->cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  cu->check(cu->cuCtxSetCurrent(context), "cuCtxSetCurrent");
  int major = 0, minor = 0;
  cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  const std::string arch = "compute_" + std::to_string(major * 10 + minor);

  const testing::FusedCudaCase c = testing::fused_cuda_case(257, 384);
  const std::string ptx = detail::Nvrtc::instance().compile(
      compiler::cuda_fused_source(*c.program, c.shape, "kiln_gpu"), "kiln_gpu", arch);
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  cu->check(cu->cuModuleLoadData(&module, ptx.c_str()), "cuModuleLoadData");
  cu->check(cu->cuModuleGetFunction(&function, module, "kiln_gpu"), "cuModuleGetFunction");

  // The generated KilnFusedArgs: in[K], strides[K][R], shape[R], out, n: all 8 bytes.
  const std::size_t k = c.values.size(), r = c.out_shape.size();
  const long long n = c.out_shape[0] * c.out_shape[1];
  std::vector<CUdeviceptr> buffers;
  std::vector<std::uint64_t> args;
  for (const std::vector<float>& v : c.values) {
    CUdeviceptr p = 0;
    cu->check(cu->cuMemAlloc(&p, v.size() * sizeof(float)), "cuMemAlloc");
    cu->check(cu->cuMemcpyHtoD(p, v.data(), v.size() * sizeof(float)), "cuMemcpyHtoD");
    buffers.push_back(p);
    args.push_back(p);
  }
  for (std::size_t i = 0; i < k; ++i)
    for (std::size_t d = 0; d < r; ++d) args.push_back(static_cast<std::uint64_t>(c.strides[i][d]));
  for (long long d : c.out_shape) args.push_back(static_cast<std::uint64_t>(d));
  CUdeviceptr out = 0;
  cu->check(cu->cuMemAlloc(&out, static_cast<std::size_t>(n) * sizeof(float)), "cuMemAlloc");
  args.push_back(out);
  args.push_back(static_cast<std::uint64_t>(n));
  void* params[] = {args.data()};
  cu->check(cu->cuLaunchKernel(function, 64, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
            "cuLaunchKernel");
  cu->check(cu->cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<float> got(static_cast<std::size_t>(n));
  cu->check(cu->cuMemcpyDtoH(got.data(), out, got.size() * sizeof(float)), "cuMemcpyDtoH");
  for (CUdeviceptr p : buffers) cu->cuMemFree(p);
  cu->cuMemFree(out);
  ASSERT_EQ(got.size(), c.expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], c.expected[i], 1e-5 * (1 + std::fabs(c.expected[i]))) << "element " << i;
}

}  // namespace
}  // namespace kiln
