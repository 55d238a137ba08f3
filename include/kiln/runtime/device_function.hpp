#pragma once
/// \file
/// `DeviceFunction`: a kernel prepared for launching on a context, made by
/// `DeviceContext::compile_function`.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/core/device.hpp"
#include "kiln/runtime/inline_function.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln {

/// Options for `DeviceContext::compile_function`.
struct FunctionOptions {
  /// Name used in error messages, traces and graph dumps. Empty: derived from the kernel
  /// (the function's name for `compile_function<&fn>()`, the closure type otherwise).
  std::string name;
  /// Whether the kernel runs once per thread (CUDA style) or once per block.
  KernelForm form = KernelForm::per_thread;
};

namespace detail {

/// What every launch of one compiled function shares.
struct FunctionInfo {
  std::string name;
  KernelForm form;
};

/// Runs blocks [begin, end) of a launch's grid (blocks numbered x fastest).
using BlockRunner = InlineFunction<void(std::uint64_t, std::uint64_t)>;

/// A host-executable kernel launch, arguments bound: what a CPU stream or graph node runs.
struct HostKernel {
  std::shared_ptr<const FunctionInfo> info;
  LaunchConfig config;
  BlockRunner run;
};

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

/// A kernel compiled for one context's device: a CPU callable plus its name and form.
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
  detail::HostKernel bind(const LaunchConfig& config, A&&... args) const {
    using Bound = detail::BoundKernel<K, std::decay_t<A>...>;
    return detail::HostKernel{
        info_, config,
        Bound{kernel_, std::tuple<std::decay_t<A>...>(std::forward<A>(args)...), config,
              info_->form}};
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
