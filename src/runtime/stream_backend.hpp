#pragma once
// Internal: the interface every backend implements (CPU and CUDA). One object per
// stream. The operations map one-to-one onto CUDA's: allocate ~ cuMemAllocAsync,
// launch ~ cuLaunchKernel, copy/fill ~ cuMemcpyAsync/cuMemsetD*Async, host_function ~
// cuLaunchHostFunc, record/wait ~ cuEventRecord/cuStreamWaitEvent,
// synchronize ~ cuStreamSynchronize.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/runtime/device_function.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "kiln/runtime/inline_function.hpp"
#include "kiln/runtime/profiler.hpp"
#include "runtime/device_code.hpp"

namespace kiln::detail {

/// A backend's event. Thread-safe.
class EventState {
 public:
  virtual ~EventState() = default;
  virtual bool is_complete() const = 0;
  virtual void synchronize() const = 0;
  /// Milliseconds from \p start's completion to this event's. \throws UserError if either
  /// is unrecorded, incomplete, or of another backend.
  virtual double elapsed_ms_since(const EventState& start) const = 0;
};

/// A backend's instantiated graph (CPU: a flat node array with successor lists; CUDA: a
/// CUgraphExec). Immutable after instantiation; replays share it.
class GraphExec {
 public:
  virtual ~GraphExec() = default;
  virtual std::size_t size() const = 0;
  virtual std::string to_dot() const = 0;
  /// Why the last update instantiated the graph again rather than updating it in place.
  virtual std::string last_update_fallback() const { return {}; }
};

/// One stream of one device. Every method is thread-safe.
class StreamBackend {
 public:
  virtual ~StreamBackend() = default;
  virtual Device device() const = 0;
  virtual int num_threads() const = 0;

  /// \throws DeviceError when memory runs out.
  virtual void* allocate(std::size_t bytes, bool host) = 0;
  /// Stream-ordered: the memory is reused only after work enqueued before this call ran.
  virtual void deallocate(void* ptr, std::size_t bytes, bool host) noexcept = 0;

  /// Loads device code (CUDA: compiles with NVRTC, loads the module, finds the entry).
  /// \throws UserError when the backend has no device code or the code does not load.
  virtual std::shared_ptr<const DeviceCode> load_device_code(const DeviceCodeRequest& request) = 0;

  virtual void launch(KernelLaunch kernel) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill(void* dst, std::size_t count, const void* pattern,
                    std::size_t pattern_size) = 0;
  virtual void host_function(HostCallback fn) = 0;
  /// Calls \p fn with the backend's native stream (CUDA: the CUstream) for another library
  /// to enqueue on. Only CUDA streams have one (DeviceContext checks before calling).
  virtual void cuda_work(CudaWork fn) = 0;

  virtual std::shared_ptr<EventState> create_event() = 0;
  virtual void record(const std::shared_ptr<EventState>& event) = 0;
  virtual void wait(const std::shared_ptr<EventState>& event) = 0;
  /// Instantiates recorded nodes (dependencies point only to earlier nodes).
  virtual std::shared_ptr<const GraphExec> instantiate_graph(GraphNodeDescs nodes) = 0;
  /// Enqueues one replay of \p graph, which must come from this backend.
  virtual void launch_graph(std::shared_ptr<const GraphExec> graph) = 0;
  /// launch_graph(graph), then synchronize(): for a caller that waits at once (a compiled
  /// call), which a backend may serve on the calling thread without waking its own.
  virtual void launch_graph_and_synchronize(std::shared_ptr<const GraphExec> graph) {
    launch_graph(std::move(graph));
    synchronize();
  }
  /// Checks that \p nodes have \p graph's topology (else throws UserError saying what
  /// differs), then gives \p graph their parameters in stream order: replays enqueued
  /// before see the old ones, replays enqueued after the new (~ cuGraphExecUpdate).
  virtual void update_graph(const std::shared_ptr<const GraphExec>& graph,
                            GraphNodeDescs nodes) = 0;

  /// Waits for all enqueued work; throws the first error since the last synchronize.
  virtual void synchronize() = 0;

  /// Graph replays enqueued after this call record their nodes into \p profiler.
  virtual void set_profiler(std::shared_ptr<Profiler> profiler) = 0;
  virtual std::shared_ptr<Profiler> profiler() const = 0;
};

/// CPUs this process may run on (its affinity mask).
int cores_available();

/// The CPU backend: a stream over a worker pool of \p num_threads threads.
/// \p cores: where to pin the stream's thread (cores[0]) and worker i (cores[(i+1) % n]);
/// empty: not pinned.
std::shared_ptr<StreamBackend> make_cpu_stream(Device device, int num_threads,
                                               std::vector<int> cores = {});

/// The CUDA backend on \p device through the loaded driver (defined only in builds with
/// the CUDA code paths). \throws UserError when this machine cannot run it.
std::shared_ptr<StreamBackend> make_cuda_stream(Device device);

}  // namespace kiln::detail
