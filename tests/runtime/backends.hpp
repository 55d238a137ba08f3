#pragma once
// The conformance suite's backends: every runtime and device-graph behaviour is checked on
// the CPU at 1, 2 and 3 worker threads and, where kiln is built with its CUDA paths, on
// the CUDA backend over the fake driver (tests/cuda/fake_cuda_driver.hpp: deferred
// per-stream queues, events that complete when their work has run), in the manner of
// IREE's CTS and ggml's test-backend-ops. A test is written once, over `ctx`; its kernels
// are C++ callables made with `kernel(...)`, which on the emulated GPU become `__global__`
// functions of the fake driver, called once per CUDA thread (once per block for the
// `per_block` form) with `block_idx()`, `thread_idx()`, `block_dim()` and `grid_dim()`
// set as on the CPU. What differs by design (a GPU kernel cannot throw; host threads
// cannot share the fake) is skipped on the backend that cannot show it, saying why.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/runtime/device_context.hpp"
#include "kiln/runtime/device_graph.hpp"

namespace kiln::testing {

/// One backend of the suite.
struct Backend {
  int threads = 0;  // CPU worker threads; 0: the emulated GPU
  bool gpu() const { return threads == 0; }
  /// The test-name suffix: `cpu_1_thread`, `cpu_3_threads`, `emulated_gpu`.
  std::string name() const;
};
inline void PrintTo(const Backend& b, std::ostream* os) { *os << b.name(); }

/// CPU at 1, 2 and 3 threads, then the emulated GPU where kiln has its CUDA paths.
std::vector<Backend> all_backends();
/// A fresh context on \p backend (on the emulated GPU, the fake driver restarts first).
DeviceContext make_context(const Backend& backend);
/// One more context on \p backend's device, beside those that live (another stream of
/// the same GPU on the emulated one).
DeviceContext another_context(const Backend& backend);

namespace detail_backends {
/// Runs a fake kernel: the packed parameters, the grid and the block; returns a CUresult.
using FakeRun =
    std::function<int(const unsigned char* args, const unsigned grid[3], const unsigned block[3])>;
/// Registers \p run with the fake driver under a fresh entry name, which it returns.
std::string register_fake_kernel(std::vector<std::size_t> param_sizes, FakeRun run);
/// The entry \p entry of a fake module, loaded on \p ctx.
DeviceFunction<CudaKernel> load_fake_kernel(const DeviceContext& ctx, const std::string& entry,
                                            FunctionOptions options);
/// CUDA's CUDA_SUCCESS and CUDA_ERROR_LAUNCH_FAILED (a kernel that threw on the fake).
int cuda_success();
int cuda_launch_failed();

template <class F>
struct Params : Params<decltype(&F::operator())> {};
template <class C, class R, class... P>
struct Params<R (C::*)(P...) const> {
  using type = std::tuple<std::decay_t<P>...>;
};
template <class C, class R, class... P>
struct Params<R (C::*)(P...)> {
  using type = std::tuple<std::decay_t<P>...>;
};

inline std::size_t align_up(std::size_t at, std::size_t size) {
  const std::size_t a = size < 8 ? size : 8;
  return (at + a - 1) / a * a;
}
}  // namespace detail_backends

/// A kernel of the suite: the C++ callable \p F on the CPU, the same callable as a fake
/// `__global__` function on the emulated GPU. Arguments are converted to F's parameter
/// types first, so that a literal `1` for an `std::int64_t` has the parameter's size on
/// CUDA as on the CPU.
template <class F>
class Kernel {
 public:
  using Params = typename detail_backends::Params<F>::type;

  Kernel(const DeviceContext& ctx, const Backend& backend, F f, FunctionOptions options) {
    if (!backend.gpu()) {
      cpu_ = std::make_shared<const DeviceFunction<F>>(
          ctx.compile_function(std::move(f), std::move(options)));
      return;
    }
    const std::string entry = register_on_fake(std::move(f), options.form);
    gpu_ = std::make_shared<const DeviceFunction<CudaKernel>>(
        detail_backends::load_fake_kernel(ctx, entry, std::move(options)));
  }

  template <class... A>
  void enqueue(const DeviceContext& ctx, const LaunchConfig& config, A&&... args) const {
    if (cpu_) return ctx.enqueue_function(*cpu_, config, static_cast<A&&>(args)...);
    with_params([&](const auto&... p) { ctx.enqueue_function(*gpu_, config, p...); }, args...);
  }
  template <class... A>
  DeviceGraphNode add(DeviceGraphBuilder& b, const LaunchConfig& config,
                      const DeviceGraphDependencies& deps, A&&... args) const {
    if (cpu_) return b.add_function(*cpu_, config, deps, static_cast<A&&>(args)...);
    DeviceGraphNode node;
    with_params([&](const auto&... p) { node = b.add_function(*gpu_, config, deps, p...); },
                args...);
    return node;
  }
  const std::string& name() const { return cpu_ ? cpu_->name() : gpu_->name(); }

 private:
  template <class G, class... A>
  static void with_params(G&& g, const A&... args) {
    static_assert(sizeof...(A) == std::tuple_size_v<Params>, "argument count");
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      g(static_cast<std::tuple_element_t<I, Params>>(args)...);
    }
    (std::make_index_sequence<sizeof...(A)>{});
  }

  static std::string register_on_fake(F f, KernelForm form) {
    std::vector<std::size_t> sizes;
    std::apply([&](const auto&... p) { (sizes.push_back(sizeof(p)), ...); }, Params{});
    auto run = [f = std::move(f), form](const unsigned char* args, const unsigned grid[3],
                                        const unsigned block[3]) -> int {
      Params params;
      std::size_t at = 0;
      std::apply(
          [&](auto&... p) {
            ((at = detail_backends::align_up(at, sizeof(p)),
              std::memcpy(static_cast<void*>(&p), args + at, sizeof(p)), at += sizeof(p)),
             ...);
          },
          params);
      auto& idx = kiln::detail::t_kernel_indices;
      idx.grid_dim = Dim3{grid[0], grid[1], grid[2]};
      idx.block_dim = Dim3{block[0], block[1], block[2]};
      const bool per_thread = form == KernelForm::per_thread;
      try {
        for (unsigned bz = 0; bz < grid[2]; ++bz)
          for (unsigned by = 0; by < grid[1]; ++by)
            for (unsigned bx = 0; bx < grid[0]; ++bx) {
              idx.block_idx = Dim3{bx, by, bz};
              for (unsigned tz = 0; tz < (per_thread ? block[2] : 1u); ++tz)
                for (unsigned ty = 0; ty < (per_thread ? block[1] : 1u); ++ty)
                  for (unsigned tx = 0; tx < (per_thread ? block[0] : 1u); ++tx) {
                    idx.thread_idx = Dim3{tx, ty, tz};
                    std::apply(f, params);
                  }
            }
      } catch (...) {
        return detail_backends::cuda_launch_failed();  // a GPU kernel has no exceptions
      }
      return detail_backends::cuda_success();
    };
    return detail_backends::register_fake_kernel(std::move(sizes), std::move(run));
  }

  // One of the two (shared: a Kernel is cheap to copy, like a DeviceFunction).
  std::shared_ptr<const DeviceFunction<F>> cpu_;
  std::shared_ptr<const DeviceFunction<CudaKernel>> gpu_;
};

/// A fixture whose `ctx` runs on the test's backend; instantiate with
/// `INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::ValuesIn(all_backends()),
/// backend_name)`.
class OnEveryBackend : public ::testing::TestWithParam<Backend> {
 protected:
  static const Backend& backend() { return GetParam(); }
  static bool gpu() { return GetParam().gpu(); }
  /// CPU worker threads (0 on the emulated GPU).
  static int threads() { return GetParam().threads; }
  /// Another context on the test's device (another queue; another stream of the GPU).
  DeviceContext another_context() const { return testing::another_context(backend()); }
  template <class F>
  Kernel<std::decay_t<F>> kernel(F&& f, FunctionOptions options = {}) const {
    return Kernel<std::decay_t<F>>(ctx, backend(), std::forward<F>(f), std::move(options));
  }

  DeviceContext ctx = make_context(GetParam());
};

/// gtest's parameter name: `Backend::name()`.
std::string backend_name(const ::testing::TestParamInfo<Backend>& info);

/// Skips the test on the emulated GPU, saying why.
#define KILN_CPU_ONLY(why) \
  if (gpu()) GTEST_SKIP() << "on the CPU only: " why

}  // namespace kiln::testing
