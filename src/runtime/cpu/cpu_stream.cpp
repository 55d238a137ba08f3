// The CPU backend's stream: an in-order queue of commands drained by one thread at a time
// (the stream's own thread, or a host thread blocked in synchronize()), with each kernel's
// blocks spread over a WorkerPool.

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/cpu/cpu_graph.hpp"
#include "runtime/cpu/cpu_work.hpp"
#include "runtime/cpu/worker_pool.hpp"
#include "runtime/stream_backend.hpp"

namespace kiln::detail {
namespace {

constexpr std::size_t kAlignment = 64;
constexpr int kDriverSpinIterations = 2000;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CpuEvent final : public EventState {
 public:
  /// Called at enqueue time: the number the matching completion will publish.
  std::uint64_t next_record() { return recorded_.fetch_add(1, std::memory_order_acq_rel) + 1; }
  std::uint64_t last_record() const { return recorded_.load(std::memory_order_acquire); }

  void complete(std::uint64_t record) {
    time_ns_.store(now_ns(), std::memory_order_relaxed);
    std::uint64_t seen = completed_.load(std::memory_order_relaxed);
    while (seen < record &&
           !completed_.compare_exchange_weak(seen, record, std::memory_order_acq_rel)) {
    }
    completed_.notify_all();
  }
  void wait_for(std::uint64_t record) const {
    for (std::uint64_t c; (c = completed_.load(std::memory_order_acquire)) < record;)
      completed_.wait(c, std::memory_order_acquire);
  }

  bool is_complete() const override {
    return completed_.load(std::memory_order_acquire) >= last_record();
  }
  void synchronize() const override { wait_for(last_record()); }
  double elapsed_ms_since(const EventState& start_state) const override {
    const auto* start = dynamic_cast<const CpuEvent*>(&start_state);
    if (!start)
      throw UserError(
          "DeviceEvent::elapsed_ms: the two events belong to different kinds of "
          "device; time events recorded on contexts of one backend");
    for (const CpuEvent* e : {start, this}) {
      const char* which = e == start ? "start" : "end";
      if (e->last_record() == 0)
        throw UserError(cat("DeviceEvent::elapsed_ms: the ", which,
                            " event was never recorded; call ctx.enqueue_record(event) first"));
      if (!e->is_complete())
        throw UserError(cat("DeviceEvent::elapsed_ms: the ", which,
                            " event has not completed yet; call event.synchronize() first"));
    }
    return static_cast<double>(time_ns_.load() - start->time_ns_.load()) / 1e6;
  }

 private:
  std::atomic<std::uint64_t> recorded_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::atomic<std::int64_t> time_ns_{0};
};

/// One unit of stream work: `blocks` blocks of `body`, named for error messages.
struct Command {
  BlockRunner body;
  std::uint64_t blocks = 1;
  std::shared_ptr<const FunctionInfo> kernel;  // set for kernel launches
  std::shared_ptr<const CpuGraphExec> graph;   // set for graph replays (body unused)
  std::shared_ptr<Profiler> profiler;          // graph replays: where nodes are recorded
  const char* label = "";                      // what it is, for other commands
  bool always_run = false;                     // runs even after an earlier failure
};

Command command(CpuWork work, const char* label) {
  Command c;
  c.body = std::move(work.body);
  c.blocks = work.blocks;
  c.label = label;
  return c;
}

class CpuStream final : public StreamBackend {
 public:
  CpuStream(Device device, int num_threads, std::vector<int> cores)
      : device_(device),
        num_threads_(num_threads),
        pool_(num_threads - 1, ("kiln-" + device.str()).c_str(), cores) {
    pending_.reserve(256);
    batch_.reserve(256);
    driver_ = std::thread([this] { driver_main(); });
    pthread_setname_np(driver_.native_handle(), ("kiln-" + device.str()).substr(0, 15).c_str());
    if (!cores.empty()) pin_thread(driver_.native_handle(), cores[0]);
  }

  ~CpuStream() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    driver_.join();  // the driver drains what is left first
  }

  Device device() const override { return device_; }
  int num_threads() const override { return num_threads_; }

  void* allocate(std::size_t bytes, bool /*host*/) override {
    if (bytes == 0) return nullptr;
    void* p = ::operator new (bytes, std::align_val_t{kAlignment}, std::nothrow);
    if (!p)
      throw DeviceError(cat("out of memory on ", device_, ": could not allocate ", bytes,
                            " bytes; free some buffers or use smaller ones"),
                        ENOMEM);
    return p;
  }

  void deallocate(void* ptr, std::size_t /*bytes*/, bool /*host*/) noexcept override {
    if (!ptr) return;
    {
      std::lock_guard lock(mutex_);
      if (enqueued_.load() != completed_.load()) {
        // Work still queued may use the memory: free it in stream order.
        Command c;
        c.body = [ptr](std::uint64_t, std::uint64_t) {
          ::operator delete (ptr, std::align_val_t{kAlignment});
        };
        c.label = "free";
        c.always_run = true;
        push_locked(std::move(c));
        return;
      }
    }
    ::operator delete (ptr, std::align_val_t{kAlignment});
  }

  std::shared_ptr<const DeviceCode> load_device_code(const DeviceCodeRequest& request) override {
    throw UserError(cat("compile_function: '", request.name,
                        "' is CUDA code, which runs only on a ", "CUDA context (cuda:N), not on ",
                        device_, "; create the context with kiln::Device::cuda()"));
  }

  void launch(KernelLaunch kernel) override {
    Command c;
    c.blocks = kernel.config.grid_dim.count();
    c.body = std::move(kernel.run);
    c.kernel = std::move(kernel.info);
    push(std::move(c));
  }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    push(command(copy_work(dst, src, bytes), "enqueue_copy"));
  }

  void fill(void* dst, std::size_t count, const void* pattern, std::size_t size) override {
    push(command(fill_work(dst, count, pattern, size), "enqueue_memset"));
  }

  void host_function(HostCallback fn) override {
    Command c;
    c.body = [f = std::move(fn)](std::uint64_t, std::uint64_t) { f(); };
    c.label = "host function";
    push(std::move(c));
  }

  void cuda_work(CudaWork) override {
    throw InternalError("CUDA work reached a CPU stream (DeviceContext checks the device)");
  }

  std::shared_ptr<const GraphExec> instantiate_graph(GraphNodeDescs nodes) override {
    // A static schedule over more participants than cores would wait on descheduled ones.
    return std::make_shared<CpuGraphExec>(std::move(nodes),
                                          std::min(num_threads_, cores_available()));
  }

  void launch_graph(std::shared_ptr<const GraphExec> graph) override {
    Command c;
    c.graph = as_cpu_graph(std::move(graph), "DeviceGraph::replay");
    c.profiler = profiler_.load(std::memory_order_acquire);
    c.label = "graph replay";
    push(std::move(c));
  }

  // The driver is left asleep: synchronize runs the queue on the calling thread (or waits
  // for a drainer already running, whose loop takes the replay too). Waking it would cost
  // a system call a call, and on a core shared with the caller its polling afterwards.
  void launch_graph_and_synchronize(std::shared_ptr<const GraphExec> graph) override {
    Command c;
    c.graph = as_cpu_graph(std::move(graph), "DeviceGraph::replay_and_synchronize");
    c.profiler = profiler_.load(std::memory_order_acquire);
    c.label = "graph replay";
    {
      std::unique_lock lock(mutex_);
      push_locked(std::move(c));
    }
    synchronize();
  }

  void set_profiler(std::shared_ptr<Profiler> profiler) override {
    profiler_.store(std::move(profiler), std::memory_order_release);
  }
  std::shared_ptr<Profiler> profiler() const override {
    return profiler_.load(std::memory_order_acquire);
  }

  void update_graph(const std::shared_ptr<const GraphExec>& graph, GraphNodeDescs nodes) override {
    auto exec = as_cpu_graph(graph, "DeviceGraph::update");
    if (std::string difference = exec->topology_difference(nodes); !difference.empty())
      throw UserError(
          cat("DeviceGraph::update: the build callback recorded a different "
              "topology: ",
              difference,
              "; an update can change only node parameters (buffers, scalars, "
              "launch dimensions): create a new graph instead"));
    // The stream made the graph and is the only one to run it, so it may change it.
    auto target = std::const_pointer_cast<CpuGraphExec>(std::move(exec));
    auto params = std::make_shared<GraphNodeDescs>(std::move(nodes));
    Command c;
    c.body = [target = std::move(target), params = std::move(params)](
                 std::uint64_t, std::uint64_t) { target->set_parameters(std::move(*params)); };
    c.label = "graph update";
    c.always_run = true;
    push(std::move(c));
  }

  std::shared_ptr<EventState> create_event() override { return std::make_shared<CpuEvent>(); }

  void record(const std::shared_ptr<EventState>& event) override {
    auto e = as_cpu_event(event, "enqueue_record");
    const std::uint64_t record = e->next_record();
    Command c;
    c.body = [e = std::move(e), record](std::uint64_t, std::uint64_t) { e->complete(record); };
    c.label = "event record";
    c.always_run = true;
    push(std::move(c));
  }

  void wait(const std::shared_ptr<EventState>& event) override {
    auto e = as_cpu_event(event, "enqueue_wait");
    const std::uint64_t record = e->last_record();
    if (record == 0) return;  // never recorded: nothing to wait for (as in CUDA)
    Command c;
    c.body = [e = std::move(e), record](std::uint64_t, std::uint64_t) { e->wait_for(record); };
    c.label = "event wait";
    c.always_run = true;
    push(std::move(c));
  }

  void synchronize() override {
    std::unique_lock lock(mutex_);
    const std::uint64_t target = enqueued_.load();
    while (completed_.load() < target) {
      if (!draining_) {
        drain(lock);  // take part: run the queue here rather than sleep
      } else {
        ++sync_waiters_;
        done_cv_.wait(lock);
        --sync_waiters_;
      }
    }
    if (!error_) return;
    std::exception_ptr error = std::exchange(error_, nullptr);
    const std::string where = std::exchange(error_where_, {});
    const std::uint64_t skipped = std::exchange(skipped_, 0);
    lock.unlock();
    const std::string what = describe(error);
    std::string message = cat(where, " failed on ", device_, ": ", what, ".");
    if (skipped > 0)
      message += cat(" ", skipped, " later command", skipped == 1 ? " was" : "s were", " skipped.");
    message += " The context remains usable.";
    try {
      std::rethrow_exception(error);
    } catch (...) {
      std::throw_with_nested(DeviceError(message));
    }
  }

 private:
  static std::shared_ptr<CpuEvent> as_cpu_event(const std::shared_ptr<EventState>& event,
                                                const char* what) {
    auto e = std::dynamic_pointer_cast<CpuEvent>(event);
    if (!e)
      throw UserError(cat(what,
                          ": the event was created by a context of another kind of "
                          "device; create it with a CPU context"));
    return e;
  }

  std::shared_ptr<const CpuGraphExec> as_cpu_graph(std::shared_ptr<const GraphExec> graph,
                                                   const char* what) const {
    auto exec = std::dynamic_pointer_cast<const CpuGraphExec>(std::move(graph));
    if (!exec)
      throw UserError(cat(what, ": the graph was instantiated for another kind of device than ",
                          device_, "; use it on the context that built it"));
    return exec;
  }

  static std::string describe(const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "an exception not derived from std::exception";
    }
  }

  void push(Command c) {
    std::unique_lock lock(mutex_);
    push_locked(std::move(c));
    const bool wake = driver_sleeping_;
    lock.unlock();
    if (wake) work_cv_.notify_one();
  }

  void push_locked(Command c) {
    pending_.push_back(std::move(c));
    enqueued_.store(enqueued_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // Runs queued commands until none are left. Called with the lock held and draining_
  // false; returns with the lock held. Each round swaps the whole pending queue out under
  // the lock and runs it with the lock released, so producers and the drainer meet once
  // per batch rather than once per command. The error state is only touched under the lock.
  void drain(std::unique_lock<SpinMutex>& lock) {
    draining_ = true;
    while (!pending_.empty()) {
      batch_.swap(pending_);
      bool failed = error_ != nullptr;
      lock.unlock();
      std::exception_ptr failure;
      std::string where;
      std::uint64_t skipped = 0;
      for (Command& c : batch_) {
        if (failed && !c.always_run) {
          ++skipped;
          continue;
        }
        if (c.graph) {
          GraphFailure f = c.graph->run(pool_, c.profiler.get());
          if (f.error) {
            failure = std::move(f.error);
            where = std::move(f.where);
            failed = true;
          }
          continue;
        }
        try {
          pool_.parallel_for(c.blocks, c.body);
        } catch (...) {
          failure = std::current_exception();
          where = c.kernel ? cat("kernel '", c.kernel->name, "'") : std::string(c.label);
          failed = true;
        }
      }
      const auto ran = static_cast<std::uint64_t>(batch_.size());
      batch_.clear();  // release closures (keeps capacity) before reporting completion
      lock.lock();
      if (failure && !error_) {
        error_ = std::move(failure);
        error_where_ = std::move(where);
      }
      skipped_ += skipped;
      completed_.store(completed_.load(std::memory_order_relaxed) + ran, std::memory_order_release);
      if (sync_waiters_ > 0) done_cv_.notify_all();
    }
    draining_ = false;
  }

  void driver_main() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!draining_ && !pending_.empty()) {
        drain(lock);
        continue;
      }
      if (stop_ && pending_.empty() && !draining_) return;
      // Poll briefly for the next command of a burst before sleeping.
      lock.unlock();
      for (int i = 0; i < kDriverSpinIterations && enqueued_.load(std::memory_order_acquire) ==
                                                       completed_.load(std::memory_order_acquire);
           ++i)
        cpu_relax();
      lock.lock();
      if ((!draining_ && !pending_.empty()) || stop_) continue;
      driver_sleeping_ = true;
      work_cv_.wait(lock, [this] { return stop_ || (!draining_ && !pending_.empty()); });
      driver_sleeping_ = false;
    }
  }

  const Device device_;
  const int num_threads_;
  WorkerPool pool_;

  SpinMutex mutex_;
  std::condition_variable_any work_cv_;  // the driver sleeps here
  std::condition_variable_any done_cv_;  // synchronize() sleeps here
  std::vector<Command> pending_;         // queued, not yet taken by a drainer
  std::vector<Command> batch_;           // being run by the drainer (its own, unlocked)
  // Counters read without the lock by the spinning driver, written under it.
  std::atomic<std::uint64_t> enqueued_{0};
  std::atomic<std::uint64_t> completed_{0};
  bool draining_ = false;
  bool driver_sleeping_ = false;
  bool stop_ = false;
  int sync_waiters_ = 0;

  // The first failure since the last synchronize (guarded by mutex_).
  std::exception_ptr error_;
  std::string error_where_;
  std::atomic<std::shared_ptr<Profiler>> profiler_;  // attached to replays enqueued next
  std::uint64_t skipped_ = 0;

  std::thread driver_;
};

}  // namespace

std::shared_ptr<StreamBackend> make_cpu_stream(Device device, int num_threads,
                                               std::vector<int> cores) {
  return std::make_shared<CpuStream>(device, num_threads, std::move(cores));
}

}  // namespace kiln::detail
