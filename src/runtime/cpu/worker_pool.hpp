#pragma once
// Internal: the fork-join pool a CPU stream spreads a kernel's blocks over.

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/runtime/device_function.hpp"

namespace kiln::detail {

/// A fixed set of helper threads. `parallel_for` runs blocks [0, n) of a runner on the
/// calling thread plus every helper and returns when all blocks have run. Up to 64 blocks,
/// each participant (the caller is participant 0, helper i participant i + 1) first runs
/// its own even share of them, then takes any left unclaimed: so the same block of a
/// replayed kernel keeps running on the same core, with its data in that core's cache
/// (a batch-1 layer's slice of the weights), while a late participant's share is not
/// waited for. More blocks are claimed in chunks from a shared counter. Helpers spin
/// briefly, then sleep on a futex between jobs. `parallel_for` returns once every block
/// has run: it waits for helpers running blocks, not for helpers that have not woken
/// (a helper whose core another process holds finds the job closed when it gets there).
///
/// One `parallel_for` at a time (the owning stream has one draining thread).
/// Pins thread \p thread to core \p core. \throws UserError when the system refuses.
void pin_thread(pthread_t thread, int core);

class WorkerPool {
 public:
  /// \p cores: helper i is pinned to cores[(i + 1) % size] (cores[0] is the owner's);
  /// empty: no pinning.
  WorkerPool(int helpers, const char* thread_name, const std::vector<int>& cores = {});
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int helpers() const noexcept { return static_cast<int>(threads_.size()); }
  /// Runs \p body over blocks [0, n). Rethrows the first exception a block threw (the
  /// remaining blocks are then skipped).
  void parallel_for(std::uint64_t n, const BlockRunner& body);

 private:
  void stop_and_join() noexcept;
  struct Job {
    const BlockRunner* body = nullptr;
    std::uint64_t n = 0;
    std::uint64_t chunk = 1;
    /// The most blocks claimed as shares: one bit each in `claimed`.
    static constexpr std::uint64_t kMaxShared = 64;
    std::uint64_t participants = 1;
    std::atomic<std::uint64_t> next{0};     // more than 64 blocks: the next unclaimed one
    std::atomic<std::uint64_t> claimed{0};  // kMaxShared blocks: bit b set once b is claimed
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::exception_ptr error;
  };
  void helper_main(std::uint64_t participant);
  static void work(Job& job, std::uint64_t participant) noexcept;
  /// Runs blocks [begin, end) of \p job; false once a block has thrown.
  static bool run(Job& job, std::uint64_t begin, std::uint64_t end) noexcept;

  Job* job_ = nullptr;
  std::atomic<std::uint32_t> epoch_{0};
  std::atomic<std::uint32_t> open_{0};  // the epoch of the job helpers may enter; 0: none
  std::atomic<int> inside_{0};          // helpers inside a job's work now
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

/// Brief busy-wait hint for spin loops.
void cpu_relax() noexcept;

/// How long an idle thread polls before it sleeps: long enough to span the gaps between a
/// call's kernels (a kernel its caller runs alone may take 200 us), whose wait would
/// otherwise end in a wake-up that cost 50-70 us on a virtual machine; short enough not to
/// keep a shared core long after the work ends. A time, not a count of cpu_relax: a
/// pause takes 10 ns on some x86 cores and 140 on others.
inline constexpr std::chrono::microseconds kSpinTime{500};

/// Polls \p done (true when the wait is over) with cpu_relax between polls for up to
/// kSpinTime; \returns its last answer (false: the caller should sleep).
template <class Done>
bool spin_until(Done&& done) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

/// A test-and-test-and-set lock for critical sections of a few dozen instructions (the
/// stream queue). Unlike std::mutex it never sleeps in the kernel while the holder is
/// running; it yields the core if the holder was descheduled. BasicLockable.
class SpinMutex {
 public:
  void lock() noexcept {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          cpu_relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace kiln::detail
