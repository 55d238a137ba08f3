// Per-kernel cost of a chain of tiny kernels on the GPU, four ways side by side: kiln's
// `enqueue_function` (stream launches) and `DeviceGraph::replay` (one CUDA graph), and the
// driver API directly (cuLaunchKernel, cuGraphLaunch) to show what kiln adds on top. Needs
// a GPU: without one it says why and exits 0.
//
//   bench_cuda_launch [--chains 10,100,1000] [--reps 20]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/nvrtc.hpp"

namespace {

const char* kSource =
    "extern \"C\" __global__ void kiln_add_one(float* x) { x[threadIdx.x] += 1.0f; }\n";

/// Microseconds per kernel of \p run (a chain of \p n kernels), synchronized each time.
template <class Run, class Sync>
double us_per_kernel(int n, int reps, Run&& run, Sync&& sync) {
  return 1e6 / n * kiln::bench::median_seconds(reps, [&] {
           run();
           sync();
         });
}

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
    kiln::DeviceContext ctx(kiln::Device::cuda(0));
    const auto add_one = ctx.compile_function(kiln::CudaSource{kSource, "kiln_add_one"});
    auto x = ctx.enqueue_create_buffer<float>(32);
    ctx.enqueue_memset(x, 0.0f);
    ctx.synchronize();

    // The driver directly, on its own stream, with the same PTX.
    CUdevice device = 0;
    cu.check(cu.cuDeviceGet(&device, 0), "cuDeviceGet");
    char name[256] = {};
    cu.cuDeviceGetName(name, sizeof name - 1, device);
    int major = 0, minor = 0;
    cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    const std::string ptx = kiln::detail::Nvrtc::instance().compile(
        kSource, "kiln_add_one", "compute_" + std::to_string(major * 10 + minor));
    CUcontext context = nullptr;
    cu.check(cu.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
    cu.check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
    cu.check(cu.cuModuleLoadData(&module, ptx.c_str()), "cuModuleLoadData");
    cu.check(cu.cuModuleGetFunction(&fn, module, "kiln_add_one"), "cuModuleGetFunction");
    CUstream stream = nullptr;
    cu.check(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CUdeviceptr raw_x = 0;
    cu.check(cu.cuMemAlloc(&raw_x, 32 * sizeof(float)), "cuMemAlloc");
    void* params[] = {&raw_x};
    const auto raw_sync = [&] { cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize"); };
    const auto kiln_sync = [&] { ctx.synchronize(); };

    std::printf("%s: chains of tiny kernels, microseconds per kernel (median of %d)\n", name, reps);
    std::printf("%8s %12s %12s %8s %12s %12s %8s\n", "kernels", "kiln launch", "kiln graph",
                "ratio", "cu launch", "cu graph", "ratio");
    for (int n : chains) {
      auto graph = kiln::DeviceGraph::create(ctx, [&](kiln::DeviceGraphBuilder& b) {
        for (int k = 0; k < n; ++k)
          b.add_function(add_one, kiln::LaunchConfig{1, 32},
                         k == 0 ? kiln::DeviceGraphDependencies{} : b.last_node(), x.data());
      });
      CUgraph raw_graph = nullptr;
      cu.check(cu.cuGraphCreate(&raw_graph, 0), "cuGraphCreate");
      CUgraphNode prev = nullptr;
      for (int k = 0; k < n; ++k) {
        CUDA_KERNEL_NODE_PARAMS p{};
        p.func = fn;
        p.gridDimX = p.gridDimY = p.gridDimZ = 1;
        p.blockDimX = 32;
        p.blockDimY = p.blockDimZ = 1;
        p.kernelParams = params;
        CUgraphNode node = nullptr;
        cu.check(
            cu.cuGraphAddKernelNode(&node, raw_graph, prev ? &prev : nullptr, prev ? 1 : 0, &p),
            "cuGraphAddKernelNode");
        prev = node;
      }
      CUgraphExec exec = nullptr;
      cu.check(cu.cuGraphInstantiate(&exec, raw_graph, 0), "cuGraphInstantiate");

      const double kiln_launch = us_per_kernel(
          n, reps,
          [&] {
            for (int k = 0; k < n; ++k)
              ctx.enqueue_function(add_one, kiln::LaunchConfig{1, 32}, x.data());
          },
          kiln_sync);
      const double kiln_graph = us_per_kernel(
          n, reps, [&] { graph.replay(); }, kiln_sync);
      const double cu_launch = us_per_kernel(
          n, reps,
          [&] {
            for (int k = 0; k < n; ++k)
              cu.check(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr),
                       "cuLaunchKernel");
          },
          raw_sync);
      const double cu_graph = us_per_kernel(
          n, reps, [&] { cu.check(cu.cuGraphLaunch(exec, stream), "cuGraphLaunch"); }, raw_sync);
      std::printf("%8d %12.2f %12.2f %7.2fx %12.2f %12.2f %7.2fx\n", n, kiln_launch, kiln_graph,
                  kiln_launch / kiln_graph, cu_launch, cu_graph, cu_launch / cu_graph);
      cu.cuGraphExecDestroy(exec);
      cu.cuGraphDestroy(raw_graph);
    }
    cu.cuMemFree(raw_x);
    cu.cuStreamDestroy(stream);
    cu.cuModuleUnload(module);
    cu.cuDevicePrimaryCtxRelease(device);
  } catch (const kiln::UserError& e) {
    std::printf("bench_cuda_launch: no GPU to measure: %s\n", e.what());
    return 0;
  }
  return 0;
}
