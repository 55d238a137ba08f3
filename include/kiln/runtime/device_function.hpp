#pragma once
/// \file
/// `DeviceFunction`: a kernel prepared for launching on a context, made by
/// `DeviceContext::compile_function`.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/runtime/inline_function.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln {

/// CUDA C++ source that NVRTC compiles at run time for the context's GPU
/// (`DeviceContext::compile_function(CudaSource{...})`). The PTX is cached by a hash of
/// source and target, in memory and on disk (KILN_CACHE_DIR/ptx, else ~/.cache/kiln/ptx).
struct CudaSource {
  /// The translation unit, e.g. `extern "C" __global__ void scale(float* x, float s) {...}`.
  std::string code;
  /// The `__global__` function to launch: its symbol name, so declare it `extern "C"` (or
  /// give the mangled name).
  std::string entry;
};

/// A CUDA module already compiled (PTX text, a cubin, or a fatbin from
/// `nvcc --fatbin`, e.g. embedded in the program) and the `__global__` function to take
/// from it (`DeviceContext::compile_function(CudaModule{...})`).
struct CudaModule {
  /// The module's bytes (PTX text needs no terminating zero; kiln adds one).
  std::string image;
  /// The function's symbol name in the module.
  std::string entry;
};

/// The kernel type of a `DeviceFunction` made from `CudaSource` or `CudaModule`: a
/// `__global__` function loaded on one CUDA context. Its arguments are passed by value as
/// the kernel's parameters, so they must be trivially copyable (pointers from device
/// buffers' `data()`, scalars, plain structs) and match the parameters' sizes, which
/// `enqueue_function` and `add_function` check.
struct CudaKernel {};

/// Options for `DeviceContext::compile_function`.
struct FunctionOptions {
  /// Name used in error messages, traces and graph dumps. Empty: derived from the kernel
  /// (the function's name for `compile_function<&fn>()`, the closure type otherwise).
  std::string name;
  /// Whether the kernel runs once per thread (CUDA style) or once per block.
  KernelForm form = KernelForm::per_thread;
};

namespace detail {

/// A backend's loaded device code (CUDA: the module, the function and its parameter
/// layout); defined by the backend.
struct DeviceCode;

/// What every launch of one compiled function shares.
struct FunctionInfo {
  std::string name;
  KernelForm form;
  std::shared_ptr<const DeviceCode> device_code;  // null for a host (CPU) callable
};

/// One argument of a device-code launch, as bytes.
struct ArgBytes {
  const void* data;
  std::size_t size;
};

/// Lays \p args out as the parameters of \p info's device code.
/// \throws UserError naming the kernel, the parameter and both sizes when the count or a
/// size differs from the kernel's parameters.
std::vector<unsigned char> pack_device_args(const FunctionInfo& info,
                                            std::span<const ArgBytes> args);

/// Runs blocks [begin, end) of a launch's grid (blocks numbered x fastest).
using BlockRunner = InlineFunction<void(std::uint64_t, std::uint64_t)>;

/// A kernel launch, arguments bound: what a stream or graph node runs. A host callable
/// has `run`; device code (`info->device_code`) has its parameters packed in `args`.
struct KernelLaunch {
  std::shared_ptr<const FunctionInfo> info;
  LaunchConfig config;
  BlockRunner run;
  std::vector<unsigned char> args;
};

/// Whether \p K can be launched with arguments \p A: a C++ callable invocable with
/// them, or device code with trivially copyable arguments.
template <class K, class... A>
concept LaunchableWith = (std::is_same_v<K, CudaKernel> &&
                          (std::is_trivially_copyable_v<std::decay_t<A>> && ...)) ||
                         (!std::is_same_v<K, CudaKernel> &&
                          std::is_invocable_v<const K&, const std::decay_t<A>&...>);

/// The kernel callable plus its copied arguments, run block by block.
template <class K, class... A>
struct BoundKernel {
  K kernel;
  std::tuple<A...> args;
  LaunchConfig config;
  KernelForm form;

  void operator()(std::uint64_t begin, std::uint64_t end) const {
    KernelIndices& idx = t_kernel_indices;
    idx.grid_dim = config.grid_dim;
    idx.block_dim = config.block_dim;
    idx.dynamic_shared = config.dynamic_shared_bytes == 0
                             ? nullptr
                             : block_shared_memory(config.dynamic_shared_bytes);
    const std::uint32_t gx = config.grid_dim.x, gy = config.grid_dim.y;
    std::uint32_t bx = 0, by = 0, bz = 0;
    if (begin != 0) {  // divisions cost more than a tiny kernel: only for later chunks
      const std::uint64_t plane = begin / gx;
      bx = static_cast<std::uint32_t>(begin % gx);
      by = static_cast<std::uint32_t>(plane % gy);
      bz = static_cast<std::uint32_t>(plane / gy);
    }
    const Dim3 bd = config.block_dim;
    for (std::uint64_t b = begin; b < end; ++b) {
      idx.block_idx.x = bx;
      idx.block_idx.y = by;
      idx.block_idx.z = bz;
      if (form == KernelForm::per_block) {
        idx.thread_idx = Dim3{0u, 0u, 0u};
        std::apply(kernel, args);
      } else {
        for (std::uint32_t tz = 0; tz < bd.z; ++tz)
          for (std::uint32_t ty = 0; ty < bd.y; ++ty)
            for (std::uint32_t tx = 0; tx < bd.x; ++tx) {
              idx.thread_idx.x = tx;
              idx.thread_idx.y = ty;
              idx.thread_idx.z = tz;
              std::apply(kernel, args);
            }
      }
      if (++bx == gx) {
        bx = 0;
        if (++by == gy) {
          by = 0;
          ++bz;
        }
      }
    }
  }
};

/// A kernel given as a compile-time function, wrapped so calls to it inline.
template <auto F>
struct StaticKernel {
  template <class... A>
  void operator()(A&&... args) const {
    F(std::forward<A>(args)...);
  }
};

/// Extracts "T" from the compiler's pretty function name; used for default kernel names.
std::string pretty_type_name(std::string_view pretty_function);

template <class T>
std::string type_name() {
  return pretty_type_name(__PRETTY_FUNCTION__);
}
template <auto F>
std::string value_name() {
  return pretty_type_name(__PRETTY_FUNCTION__);
}

}  // namespace detail

/// A kernel compiled for one context's device: a CPU callable plus its name and form, or
/// (`K = CudaKernel`) a `__global__` function loaded on a CUDA context.
///
/// Cheap to copy (the kernel object is copied; name and form are shared). Launch it with
/// `DeviceContext::enqueue_function`. Thread-safe to launch from several threads, provided
/// the kernel object itself can be called concurrently (it is called as `const K&`).
template <class K>
class DeviceFunction {
 public:
  /// The name used in errors and dumps.
  const std::string& name() const noexcept { return info_->name; }
  /// Per-thread or per-block invocation.
  KernelForm form() const noexcept { return info_->form; }
  /// The device the function was compiled for.
  Device device() const noexcept { return device_; }
  /// The kernel callable.
  const K& kernel() const noexcept { return kernel_; }

  /// Internal: binds \p args into a launch of this function (used by contexts and graphs).
  template <class... A>
  detail::KernelLaunch bind(const LaunchConfig& config, A&&... args) const {
    if constexpr (std::is_same_v<K, CudaKernel>) {
      const detail::ArgBytes views[sizeof...(A) + 1] = {detail::ArgBytes{&args, sizeof(args)}...,
                                                        detail::ArgBytes{nullptr, 0}};
      return detail::KernelLaunch{
          info_,
          config,
          {},
          detail::pack_device_args(*info_, std::span<const detail::ArgBytes>(views, sizeof...(A)))};
    } else {
      detail::KernelLaunch launch;  // member by member: no zeroing of the callable's storage
      bind_into(launch, config, std::forward<A>(args)...);
      return launch;
    }
  }

  /// Internal: binds \p args into \p launch in place (a graph node's own launch: no
  /// temporary moved in). C++ callables only.
  template <class... A>
  void bind_into(detail::KernelLaunch& launch, const LaunchConfig& config, A&&... args) const
      requires(!std::is_same_v<K, CudaKernel>) {
    using Bound = detail::BoundKernel<K, std::decay_t<A>...>;
    launch.info = info_;
    launch.config = config;
    launch.run.emplace(Bound{kernel_, std::tuple<std::decay_t<A>...>(std::forward<A>(args)...),
                             config, info_->form});
  }

  /// Internal: a launch of this CUDA kernel with each parameter's value given as bytes
  /// (checked as `bind` checks them; used by compiled plans).
  detail::KernelLaunch bind_bytes(
      const LaunchConfig& config,
      std::span<const detail::ArgBytes> args) const requires std::is_same_v<K, CudaKernel> {
    return detail::KernelLaunch{info_, config, {}, detail::pack_device_args(*info_, args)};
  }

 private:
  friend class DeviceContext;
  DeviceFunction(K k, std::shared_ptr<const detail::FunctionInfo> info, Device device)
      : kernel_(std::move(k)), info_(std::move(info)), device_(device) {}

  K kernel_;
  std::shared_ptr<const detail::FunctionInfo> info_;
  Device device_;
};

}  // namespace kiln
