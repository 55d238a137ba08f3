// Per-kernel cost of a chain of tiny kernels on the GPU: launched one by one on a stream,
// against the same chain as one CUDA graph replayed (the driver API directly; what kiln's
// CUDA DeviceGraph will map onto). Needs a GPU: without one it says why and exits 0.
//
//   bench_cuda_launch [--chains 10,100,1000] [--reps 20]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "kiln/core/error.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/nvrtc.hpp"

namespace {

const char* kSource =
    "extern \"C\" __global__ void kiln_add_one(float* x) { x[threadIdx.x] += 1.0f; }\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> chains = {10, 100, 1000};
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--chains" && i + 1 < argc) {
      chains = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--chains 10,100,1000] [--reps 20]\n", argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  try {
    const kiln::detail::CudaDriver& cu = kiln::detail::CudaDriver::instance();
    CUdevice device = 0;
    CUcontext context = nullptr;
    cu.check(cu.cuDeviceGet(&device, 0), "cuDeviceGet");
    cu.check(cu.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    cu.check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
    char name[256] = {};
    cu.cuDeviceGetName(name, sizeof name, device);
    int major = 0, minor = 0;
    cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    const std::string ptx = kiln::detail::Nvrtc::instance().compile(
        kSource, "kiln_add_one", "compute_" + std::to_string(major * 10 + minor));
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    cu.check(cu.cuModuleLoadData(&module, ptx.c_str()), "cuModuleLoadData");
    cu.check(cu.cuModuleGetFunction(&fn, module, "kiln_add_one"), "cuModuleGetFunction");
    CUstream stream = nullptr;
    cu.check(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CUdeviceptr x = 0;
    cu.check(cu.cuMemAlloc(&x, 32 * sizeof(float)), "cuMemAlloc");
    void* params[] = {&x};
    std::printf("%s: chain of tiny kernels, us per kernel (median of %d)\n", name, reps);
    std::printf("%8s %14s %14s %10s\n", "kernels", "stream launch", "graph replay", "ratio");
    for (int n : chains) {
      CUgraph graph = nullptr;
      cu.check(cu.cuGraphCreate(&graph, 0), "cuGraphCreate");
      CUgraphNode prev = nullptr;
      for (int k = 0; k < n; ++k) {
        CUDA_KERNEL_NODE_PARAMS p{};
        p.func = fn;
        p.gridDimX = p.gridDimY = p.gridDimZ = 1;
        p.blockDimX = 32;
        p.blockDimY = p.blockDimZ = 1;
        p.kernelParams = params;
        CUgraphNode node = nullptr;
        cu.check(cu.cuGraphAddKernelNode(&node, graph, prev ? &prev : nullptr, prev ? 1 : 0, &p),
                 "cuGraphAddKernelNode");
        prev = node;
      }
      CUgraphExec exec = nullptr;
      cu.check(cu.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
      const auto time = [&](auto&& run) {  // microseconds per kernel
        return 1e6 / n * kiln::bench::median_seconds(reps, [&] {
                 run();
                 cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
               });
      };
      const double launches = time([&] {
        for (int k = 0; k < n; ++k)
          cu.check(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr),
                   "cuLaunchKernel");
      });
      const double replay =
          time([&] { cu.check(cu.cuGraphLaunch(exec, stream), "cuGraphLaunch"); });
      std::printf("%8d %14.2f %14.2f %9.2fx\n", n, launches, replay, launches / replay);
      cu.cuGraphExecDestroy(exec);
      cu.cuGraphDestroy(graph);
    }
    cu.cuMemFree(x);
  } catch (const kiln::UserError& e) {
    std::printf("bench_cuda_launch: no GPU to measure: %s\n", e.what());
    return 0;
  }
  return 0;
}
