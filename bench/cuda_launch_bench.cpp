// Per-kernel cost of a chain of tiny kernels on the GPU, four ways side by side: kiln's
// `enqueue_function` (stream launches) and `DeviceGraph::replay` (one CUDA graph), and the
// driver API directly (cuLaunchKernel, cuGraphLaunch) to show what kiln adds on top. Then
// f32 GEMM TFLOP/s: cuBLAS called directly, kiln's GEMM node (what compiled plans replay:
// cuBLAS captured into a CUDA graph), and a compiled one-matmul module's whole call (with
// its inputs copied to the GPU and its output back). Needs a GPU: without one it says why
// and exits 0.
//
//   bench_cuda_launch [--chains 10,100,1000] [--gemm 1024,2048,4096] [--reps 20]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "kiln/stage/stage.hpp"
#include "runtime/cuda/cublas.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/nvrtc.hpp"
#include "runtime/gemm.hpp"

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

/// f32 GEMM TFLOP/s for n x n x n: cuBLAS directly, kiln's GEMM graph node, a compiled
/// call.
void gemm_table(kiln::DeviceContext& ctx, const std::vector<int>& sizes, int reps) {
  const kiln::detail::CudaDriver& cu = kiln::detail::CudaDriver::instance();
  const kiln::detail::Cublas& blas = kiln::detail::Cublas::instance();
  cublasHandle_t handle = nullptr;
  blas.check(blas.cublasCreate(&handle), "cublasCreate");
  CUstream stream = nullptr;
  cu.check(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  blas.check(blas.cublasSetStream(handle, stream), "cublasSetStream");
  std::printf("\nf32 GEMM n x n x n, TFLOP/s (median of %d)\n", reps);
  std::printf("%6s %14s %14s %8s %22s\n", "n", "cuBLAS direct", "kiln GEMM node", "ratio",
              "compiled call (copies)");
  const auto ctx_ptr = std::make_shared<kiln::DeviceContext>(ctx);
  for (int n : sizes) {
    const auto count = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
    auto a = ctx.enqueue_create_buffer<float>(count);
    auto b = ctx.enqueue_create_buffer<float>(count);
    auto c = ctx.enqueue_create_buffer<float>(count);
    ctx.enqueue_memset(a, 0.5f);
    ctx.enqueue_memset(b, 0.25f);
    ctx.synchronize();
    const double flops = 2.0 * n * n * n;
    const float one = 1.0f, zero = 0.0f;
    const double direct = kiln::bench::median_seconds(reps, [&] {
      blas.check(
          blas.cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.data(),
                                         n, 0, a.data(), n, 0, &zero, c.data(), n, 0, 1),
          "cublasSgemmStridedBatched");
      cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
    });
    const kiln::detail::GemmF32 g{n, n, n, 1, a.data(), b.data(), c.data(), 0, 0, 0};
    auto graph = kiln::DeviceGraph::create(ctx, [&](kiln::DeviceGraphBuilder& builder) {
      builder.add_cuda_work([&ctx, g](void* s) { kiln::detail::enqueue_gemm_f32(ctx, s, g); }, {});
    });
    const double node = kiln::bench::median_seconds(reps, [&] {
      graph.replay();
      ctx.synchronize();
    });
    const kiln::TensorLayout layout(kiln::DType::f32, {n, n});
    const kiln::StagedGraph staged = kiln::stage(
        [](kiln::Tensor x, kiln::Tensor y) { return kiln::matmul(x, y); })(layout, layout);
    kiln::CompiledCallable compiled(staged, {}, {.context = ctx_ptr});
    const kiln::Tensor x = kiln::Tensor::random(layout, 1), y = kiln::Tensor::random(layout, 2);
    (void)compiled.run({x, y});
    const double call = kiln::bench::median_seconds(reps, [&] { (void)compiled.run({x, y}); });
    std::printf("%6d %14.1f %14.1f %7.2fx %22.1f\n", n, flops / direct / 1e12, flops / node / 1e12,
                direct / node, flops / call / 1e12);
  }
  blas.cublasDestroy(handle);
  cu.cuStreamDestroy(stream);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> chains = {10, 100, 1000};
  std::vector<int> gemm = {1024, 2048, 4096};
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--chains" && i + 1 < argc) {
      chains = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--gemm" && i + 1 < argc) {
      gemm = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--chains 10,100,1000] [--gemm 1024,2048,4096] [--reps 20]\n",
                   argv[0]);
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
    if (!gemm.empty()) gemm_table(ctx, gemm, reps);
    cu.cuDevicePrimaryCtxRelease(device);
  } catch (const kiln::UserError& e) {
    std::printf("bench_cuda_launch: no GPU to measure: %s\n", e.what());
    return 0;
  }
  return 0;
}
