#include "runtime/cpu/worker_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::detail {
void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

void pin_thread(pthread_t thread, int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (const int error = pthread_setaffinity_np(thread, sizeof set, &set); error != 0)
    throw UserError(cat("cannot pin a worker thread to core ", core, " (", std::strerror(error),
                        "); pin to cores this process may run on"));
}

WorkerPool::WorkerPool(int helpers, const char* thread_name, const std::vector<int>& cores) {
  threads_.reserve(static_cast<std::size_t>(std::max(helpers, 0)));
  try {
    for (int i = 0; i < helpers; ++i) {
      threads_.emplace_back([this, i] { helper_main(static_cast<std::uint64_t>(i) + 1); });
      const std::string name = std::string(thread_name).substr(0, 12) + "-w" + std::to_string(i);
      pthread_setname_np(threads_.back().native_handle(), name.substr(0, 15).c_str());
      if (!cores.empty())
        pin_thread(threads_.back().native_handle(),
                   cores[(static_cast<std::size_t>(i) + 1) % cores.size()]);
    }
  } catch (const UserError&) {  // a core the system refused
    stop_and_join();
    throw;
  } catch (const std::system_error& e) {  // the system's limit on threads (or memory)
    const std::size_t started = threads_.size();
    stop_and_join();
    throw UserError(cat("cannot start worker thread ", started + 2, " of ", helpers + 1, " (",
                        e.what(), "); ask for fewer threads (this machine runs ",
                        std::thread::hardware_concurrency(), " at once)"));
  }
}

WorkerPool::~WorkerPool() { stop_and_join(); }

void WorkerPool::stop_and_join() noexcept {
  stop_.store(true, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
  for (auto& t : threads_) t.join();
}

bool WorkerPool::run(Job& job, std::uint64_t begin, std::uint64_t end) noexcept {
  if (job.failed.load(std::memory_order_relaxed)) return false;
  try {
    (*job.body)(begin, end);
    return true;
  } catch (...) {
    std::lock_guard lock(job.error_mutex);
    if (!job.error) job.error = std::current_exception();
    job.failed.store(true, std::memory_order_relaxed);
    return false;
  }
}

void WorkerPool::work(Job& job, std::uint64_t participant) noexcept {
  static_assert(Job::kMaxShared <= sizeof(Job::claimed) * 8);
  if (job.n <= Job::kMaxShared) {
    // This participant's share first, then (if it has one) whatever is left unclaimed.
    const std::uint64_t first = job.n * participant / job.participants,
                        last = job.n * (participant + 1) / job.participants;
    const auto claim = [&](std::uint64_t b) {
      const std::uint64_t bit = std::uint64_t{1} << b;
      return (job.claimed.load(std::memory_order_relaxed) & bit) == 0 &&
             (job.claimed.fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
    };
    for (std::uint64_t b = first; b < last; ++b)
      if (claim(b) && !run(job, b, b + 1)) return;
    // The caller (participant 0) always sweeps: parallel_for waits for no helper that
    // has not started, so every block must be claimed when the caller's work returns.
    for (std::uint64_t i = 0; (first < last || participant == 0) && i < job.n; ++i) {
      const std::uint64_t b = (last + i) % job.n;
      if (claim(b) && !run(job, b, b + 1)) return;
    }
    return;
  }
  for (;;) {
    const std::uint64_t begin = job.next.fetch_add(job.chunk, std::memory_order_relaxed);
    if (begin >= job.n || !run(job, begin, std::min(job.n, begin + job.chunk))) return;
  }
}

void WorkerPool::parallel_for(std::uint64_t n, const BlockRunner& body) {
  const auto participants = static_cast<std::uint64_t>(threads_.size()) + 1;
  if (n <= 1 || threads_.empty()) {
    body(0, n);
    return;
  }
  Job job;
  job.body = &body;
  job.n = n;
  job.participants = participants;
  // Several chunks per participant balance uneven blocks; at least one block each.
  job.chunk = std::max<std::uint64_t>(1, n / (participants * 4));
  job_ = &job;
  const std::uint32_t epoch = epoch_.load(std::memory_order_relaxed) + 1;
  open_.store(epoch, std::memory_order_relaxed);
  epoch_.store(epoch, std::memory_order_release);  // publishes job_ and open_
  epoch_.notify_all();
  work(job, 0);
  // Every block is claimed now (the caller takes a late helper's share). Close the job,
  // then wait only for helpers inside it: one that has not woken yet (another process on
  // its core) finds the job closed and never touches it. seq_cst on both sides: either a
  // helper's entry is seen here, or the helper sees the job closed.
  open_.store(0, std::memory_order_seq_cst);
  if (!spin_until([this] { return inside_.load(std::memory_order_seq_cst) == 0; }))
    for (int r; (r = inside_.load(std::memory_order_seq_cst)) != 0;)
      inside_.wait(r, std::memory_order_acquire);
  job_ = nullptr;
  if (job.error) std::rethrow_exception(job.error);
}

void WorkerPool::helper_main(std::uint64_t participant) {
  std::uint32_t seen = 0;
  for (;;) {
    std::uint32_t e = seen;
    spin_until([&] { return (e = epoch_.load(std::memory_order_acquire)) != seen; });
    while (e == seen) {
      epoch_.wait(seen, std::memory_order_acquire);
      e = epoch_.load(std::memory_order_acquire);
    }
    seen = e;
    if (stop_.load(std::memory_order_acquire)) return;
    inside_.fetch_add(1, std::memory_order_seq_cst);
    if (open_.load(std::memory_order_seq_cst) == e) work(*job_, participant);
    if (inside_.fetch_sub(1, std::memory_order_acq_rel) == 1) inside_.notify_one();
  }
}

}  // namespace kiln::detail
