#include "backends.hpp"

#include <atomic>
#include <stdexcept>

#ifdef KILN_TEST_EMULATED_GPU
#include "../cuda/fake_cuda_driver.hpp"
#include "runtime/cuda/cuda_stream.hpp"
#endif

namespace kiln::testing {

std::string Backend::name() const {
  if (gpu()) return "emulated_gpu";
  return "cpu_" + std::to_string(threads) + (threads == 1 ? "_thread" : "_threads");
}

std::vector<Backend> all_backends() {
  std::vector<Backend> out{{1}, {2}, {3}};
#ifdef KILN_TEST_EMULATED_GPU
  out.push_back({0});
#endif
  return out;
}

std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param.name();
}

#ifdef KILN_TEST_EMULATED_GPU

DeviceContext make_context(const Backend& backend) {
  if (backend.gpu()) FakeCuda::get().reset();
  return another_context(backend);
}

DeviceContext another_context(const Backend& backend) {
  if (!backend.gpu()) return DeviceContext(Device::cpu(), {.num_threads = backend.threads});
  return DeviceContext(
      detail::make_cuda_stream(Device::cuda(0), FakeCuda::get().driver(), &FakeCuda::get().blas()));
}

namespace detail_backends {

std::string register_fake_kernel(std::vector<std::size_t> param_sizes, FakeRun run) {
  static std::atomic<int> count{0};
  std::string entry = "suite_kernel_" + std::to_string(count++);
  FakeKernel k;
  k.param_sizes = std::move(param_sizes);
  k.run = [run = std::move(run)](const unsigned char* args, const unsigned grid[3],
                                 const unsigned block[3]) {
    return static_cast<CUresult>(run(args, grid, block));
  };
  FakeCuda::get().kernels[entry] = std::move(k);
  return entry;
}

DeviceFunction<CudaKernel> load_fake_kernel(const DeviceContext& ctx, const std::string& entry,
                                            FunctionOptions options) {
  if (options.name.empty()) options.name = entry;
  return ctx.compile_function(CudaModule{"fake module: " + entry, entry}, std::move(options));
}

int cuda_success() { return CUDA_SUCCESS; }
int cuda_launch_failed() { return CUDA_ERROR_LAUNCH_FAILED; }

}  // namespace detail_backends

#else  // no CUDA paths: the CPU backends only

DeviceContext make_context(const Backend& backend) { return another_context(backend); }

DeviceContext another_context(const Backend& backend) {
  return DeviceContext(Device::cpu(), {.num_threads = backend.threads});
}

namespace detail_backends {
std::string register_fake_kernel(std::vector<std::size_t>, FakeRun) {
  throw std::logic_error("no emulated GPU in this build");
}
DeviceFunction<CudaKernel> load_fake_kernel(const DeviceContext&, const std::string&,
                                            FunctionOptions) {
  throw std::logic_error("no emulated GPU in this build");
}
int cuda_success() { return 0; }
int cuda_launch_failed() { return 1; }
}  // namespace detail_backends

#endif

}  // namespace kiln::testing
