#pragma once
/// \file
/// `DeviceContext`: one device's in-order asynchronous stream, its memory, and its kernels.

#include <cstddef>
#include <cstring>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/runtime/device_buffer.hpp"
#include "kiln/runtime/device_event.hpp"
#include "kiln/runtime/device_function.hpp"
#include "kiln/runtime/inline_function.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln {

class Profiler;

namespace detail {
class StreamBackend;

/// A contiguous range whose elements are some kiln `Element` type (buffers, spans,
/// vectors, arrays).
template <class R>
concept ElementRange = requires(R& r) {
  {std::data(r)};
  {std::size(r)};
}
&&Element<std::remove_cvref_t<decltype(*std::data(std::declval<R&>()))>>;

template <class R>
using RangeElement = std::remove_cvref_t<decltype(*std::data(std::declval<R&>()))>;

template <class R>
concept WritableElementRange = ElementRange<R> &&
    !std::is_const_v<std::remove_reference_t<decltype(*std::data(std::declval<R&>()))>>;
}  // namespace detail

/// Options for constructing a `DeviceContext`.
struct DeviceContextOptions {
  /// Threads that run kernels (the stream's own thread included). 0: the value of the
  /// environment variable KILN_NUM_THREADS, else the cores available to the process
  /// shared out between the CPU devices (`cpu_device_count`), at least one each.
  int num_threads = 0;
  /// Cores to pin the context's threads to (CPU contexts): the stream's own thread to
  /// `pin_to_cores[0]`, worker i to `pin_to_cores[(i + 1) % size]`. A graph replay's static
  /// schedule gives each thread its own list of nodes, so pinned threads keep their data
  /// in their core's caches and never share a core with each other. Empty: not pinned
  /// (the operating system places them). Each core must be one this process may run on.
  std::vector<int> pin_to_cores{};
};

/// How many CPU devices this process exposes, `cpu:0` to `cpu:N-1`: virtual devices, each
/// a context with its own stream and share of the cores, so that multi-device programs
/// (sharding, collectives) run and are tested on one machine. Default: the environment
/// variable KILN_CPU_DEVICES, else 1.
/// \throws UserError if KILN_CPU_DEVICES is set to something other than a count >= 1.
int cpu_device_count();
/// Sets the number of CPU devices (for contexts created afterwards).
/// \throws UserError if \p count < 1.
void set_cpu_device_count(int count);

/// A device's in-order asynchronous stream plus the memory and kernels that go with it.
///
/// Every `enqueue_*` call returns at once; the work runs later, in enqueue order, on the
/// context's workers. `synchronize()` waits for everything enqueued so far and rethrows
/// the first error any of it raised. On the CPU device (`cpu:N`) a context owns a
/// persistent pool of worker threads (default: the cores this process may use, or
/// `KILN_NUM_THREADS`); a kernel's blocks are spread over them, and a thread blocked in
/// `synchronize()` runs queued work itself rather than sleeping.
///
/// `DeviceContext` is a cheap handle: copies share one stream. All members are
/// thread-safe; work enqueued from several threads is ordered by the order of the calls.
///
/// \code
///   kiln::DeviceContext ctx;                                   // cpu:0
///   auto x = ctx.enqueue_create_buffer<float>(1024);
///   auto scale = ctx.compile_function(
///       [](float* v, float s) { v[kiln::block_idx().x * kiln::block_dim().x +
///                                  kiln::thread_idx().x] *= s; });
///   ctx.enqueue_memset(x, 1.0f);
///   ctx.enqueue_function(scale, kiln::LaunchConfig{4, 256}, x.data(), 2.0f);
///   ctx.synchronize();                                         // x is all 2.0f
/// \endcode
class DeviceContext {
 public:
  using Options = DeviceContextOptions;

  /// A context on `cpu:0` with default options.
  DeviceContext();
  /// A context on \p device.
  /// \throws UserError for a device kind this build does not support, or bad options.
  explicit DeviceContext(Device device, Options options = {});

  /// The context's device.
  Device device() const;
  /// How many threads run this context's kernels.
  int num_threads() const;

  // ---- memory -------------------------------------------------------------------------

  /// A buffer of \p count elements in device memory (contents undefined).
  template <Element T>
  DeviceBuffer<T> enqueue_create_buffer(std::size_t count) const {
    return DeviceBuffer<T>(allocate(checked_bytes(count, sizeof(T)), /*host=*/false));
  }
  /// A buffer of \p count elements in host memory suited to copies with this device.
  template <Element T>
  HostBuffer<T> enqueue_create_host_buffer(std::size_t count) const {
    return HostBuffer<T>(allocate(checked_bytes(count, sizeof(T)), /*host=*/true));
  }

  /// Copies all of \p src into \p dst: buffers, `std::span`s, vectors, arrays. Host memory
  /// passed here must stay valid until the copy has run (e.g. until `synchronize()`).
  /// \throws UserError if the sizes differ.
  template <detail::WritableElementRange Dst, detail::ElementRange Src>
  requires std::is_same_v<detail::RangeElement<Dst>, detail::RangeElement<Src>>
  void enqueue_copy(Dst&& dst, const Src& src) const {
    using T = detail::RangeElement<Dst>;
    enqueue_copy_bytes(std::data(dst), std::size(dst) * sizeof(T), std::data(src),
                       std::size(src) * sizeof(T), dtype_of<T>);
  }

  /// Sets every element of \p dst to \p value.
  template <detail::WritableElementRange Dst>
  void enqueue_memset(Dst&& dst, detail::RangeElement<Dst> value) const {
    using T = detail::RangeElement<Dst>;
    unsigned char pattern[sizeof(T)];
    std::memcpy(pattern, &value, sizeof(T));
    enqueue_fill(std::data(dst), std::size(dst), pattern, sizeof(T));
  }

  // ---- kernels ------------------------------------------------------------------------

  /// Prepares \p kernel, any C++ callable, for launches on this (CPU) context.
  /// \throws UserError on a CUDA context, whose kernels are CUDA code (below).
  template <class K>
  requires(!std::is_same_v<std::decay_t<K>, CudaSource> &&
           !std::is_same_v<std::decay_t<K>, CudaModule>)
      DeviceFunction<std::decay_t<K>> compile_function(K&& kernel, FunctionOptions options = {})
  const {
    if (options.name.empty()) options.name = detail::type_name<std::decay_t<K>>();
    return make_function<std::decay_t<K>>(std::forward<K>(kernel), std::move(options));
  }
  /// Prepares the function \p F (e.g. `compile_function<&my_kernel>()`); its name is the
  /// default kernel name, and calls to it are inlined into the block loop.
  template <auto F>
  DeviceFunction<detail::StaticKernel<F>> compile_function(FunctionOptions options = {}) const {
    if (options.name.empty()) options.name = detail::value_name<F>();
    return make_function<detail::StaticKernel<F>>(detail::StaticKernel<F>{}, std::move(options));
  }

  /// Compiles \p source with NVRTC for this context's GPU and loads its `entry` function.
  /// The name defaults to the entry. \throws UserError on a CPU context, with NVRTC's log
  /// when the source does not compile, or when the entry is not in it.
  DeviceFunction<CudaKernel> compile_function(const CudaSource& source,
                                              FunctionOptions options = {}) const;
  /// Loads the `entry` function of a compiled module (PTX, cubin, fatbin) on this context's
  /// GPU. \throws UserError on a CPU context, for an image the GPU cannot load, or when the
  /// entry is not in it.
  DeviceFunction<CudaKernel> compile_function(const CudaModule& module,
                                              FunctionOptions options = {}) const;

  /// Runs \p fn over `config.grid_dim` blocks of `config.block_dim` threads, with \p args
  /// copied now (as CUDA copies kernel parameters at launch). A CUDA kernel's arguments
  /// are its parameters' values: pass `buffer.data()` for a buffer.
  /// \throws UserError for a zero launch dimension, a function of another device, or CUDA
  /// arguments whose count or sizes differ from the kernel's parameters.
  template <class K, class... A>
  void enqueue_function(const DeviceFunction<K>& fn, const LaunchConfig& config,
                        A&&... args) const {
    static_assert(detail::LaunchableWith<K, A...>,
                  "enqueue_function: the kernel cannot be called with these argument types "
                  "(CUDA kernels take trivially copyable arguments: pass buffer.data())");
    check_function_device(fn.device(), fn.name());
    enqueue_kernel(fn.bind(config, std::forward<A>(args)...));
  }

  /// Runs \p fn on the host, in stream order (e.g. to signal a host-side consumer).
  /// An exception it throws surfaces from the next `synchronize()`.
  template <class F>
  requires std::is_invocable_v < const std::decay_t<F>
  & > void enqueue_host_function(F&& fn) const {
    enqueue_host(detail::HostCallback(std::forward<F>(fn)));
  }

  /// Lets another CUDA library (cuBLAS, cuDNN, NCCL, kernels launched through the CUDA
  /// runtime) enqueue work in this context's stream order: calls \p fn(stream) now, on
  /// the calling thread, with the device's primary CUDA context current; `stream` is this
  /// context's `CUstream` (a `cudaStream_t`), passed as `void*`. \p fn should only enqueue
  /// asynchronous work on `stream` (work it puts on other streams is not ordered with this
  /// one). On a recording context the call adds a node, as
  /// `DeviceGraphBuilder::add_cuda_work` does. An exception \p fn throws propagates.
  /// \throws UserError on a CPU context.
  template <class F>
  requires std::is_invocable_v < const std::decay_t<F>
  &, void* > void enqueue_cuda_work(F&& fn) const {
    enqueue_cuda(detail::CudaWork(std::forward<F>(fn)));
  }

  // ---- ordering -----------------------------------------------------------------------

  /// A new, unrecorded event usable with any context.
  DeviceEvent create_event() const;
  /// Marks the current end of this stream in \p event.
  void enqueue_record(const DeviceEvent& event) const;
  /// Makes later work on this stream wait until \p event's latest record (enqueued before
  /// this call, possibly on another context) has run.
  void enqueue_wait(const DeviceEvent& event) const;
  /// Blocks until all work enqueued so far has run.
  /// \throws DeviceError naming the first kernel or command that failed since the last
  /// synchronize (its exception is nested). Work queued after a failure is skipped and
  /// counted in the message; the context is usable again afterwards.
  void synchronize() const;

  /// Attaches \p profiler (nullptr detaches): device-graph replays enqueued from now on
  /// record one event per node into it (see `kiln/runtime/profiler.hpp`). Replays already
  /// enqueued keep the profiler they were enqueued with.
  /// \throws UserError on a recording context.
  void set_profiler(std::shared_ptr<Profiler> profiler) const;
  /// The attached profiler, or nullptr.
  std::shared_ptr<Profiler> profiler() const;

  /// Internal: enqueues a bound kernel launch (used by graphs and tests).
  void enqueue_kernel(detail::KernelLaunch kernel) const;
  /// Internal: the backend behind this context.
  const std::shared_ptr<detail::StreamBackend>& backend() const noexcept { return impl_; }
  /// Internal: wraps an existing backend (used by graph recording).
  explicit DeviceContext(std::shared_ptr<detail::StreamBackend> backend)
      : impl_(std::move(backend)) {}

 private:
  template <class K>
  DeviceFunction<K> make_function(K kernel, FunctionOptions options) const {
    check_host_callable(options.name);
    auto info = std::make_shared<const detail::FunctionInfo>(
        detail::FunctionInfo{std::move(options.name), options.form, nullptr});
    return DeviceFunction<K>(std::move(kernel), std::move(info), device());
  }
  void check_host_callable(const std::string& name) const;
  DeviceFunction<CudaKernel> load_cuda(std::string code, bool compile, std::string entry,
                                       FunctionOptions options) const;
  static std::size_t checked_bytes(std::size_t count, std::size_t element_size);
  detail::Allocation allocate(std::size_t bytes, bool host) const;
  void enqueue_copy_bytes(void* dst, std::size_t dst_bytes, const void* src, std::size_t src_bytes,
                          DType dtype) const;
  void enqueue_fill(void* dst, std::size_t count, const void* pattern,
                    std::size_t pattern_size) const;
  void enqueue_host(detail::HostCallback fn) const;
  void enqueue_cuda(detail::CudaWork fn) const;
  void check_function_device(Device function_device, const std::string& name) const;

  std::shared_ptr<detail::StreamBackend> impl_;
};

}  // namespace kiln
