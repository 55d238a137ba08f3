#pragma once
/// \file
/// `Profiler`: records when each device-graph node ran, and on which thread, while it is
/// attached to a context; writes what it saw as a Chrome trace (Perfetto, chrome://tracing).
///
/// \code
///   auto profiler = std::make_shared<kiln::Profiler>();
///   ctx.set_profiler(profiler);
///   graph.replay();
///   ctx.synchronize();
///   ctx.set_profiler(nullptr);
///   profiler->write_chrome_trace("trace.json");   // one slice per node per replay
/// \endcode
///
/// Events go into a buffer sized at construction: recording allocates nothing and takes no
/// lock (one atomic increment per node); events past the capacity are counted in
/// `dropped()`, not stored. With no profiler attached, replay pays one pointer test per
/// replay.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One node run by one replay.
struct ProfileEvent {
  std::array<char, 128> name{};  ///< the node's label or kernel name (truncated, 0-ended)
  std::uint32_t node = 0;        ///< position of the node in its graph
  std::uint32_t thread = 0;      ///< small id of the thread that ran it (see `thread_name`)
  std::uint64_t replay = 0;      ///< which replay (counted per profiler from 0)
  std::int64_t begin_ns = 0;     ///< since the profiler was created
  std::int64_t end_ns = 0;
};

class Profiler {
 public:
  /// \p capacity: how many events to keep.
  explicit Profiler(std::size_t capacity = std::size_t{1} << 16);
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// The events recorded so far, by start time. Call when no replay is running.
  std::vector<ProfileEvent> events() const;
  /// Events that did not fit.
  std::uint64_t dropped() const noexcept;
  /// Replays seen.
  std::uint64_t replays() const noexcept { return replays_.load(std::memory_order_relaxed); }
  /// Forgets every event (keeps the capacity).
  void clear();

  /// The events as Chrome trace JSON: one complete ("X") slice per event, times in
  /// microseconds, one track per thread, named after the thread.
  std::string chrome_trace() const;
  /// Writes `chrome_trace()` to \p path. \throws UserError when it cannot be written.
  void write_chrome_trace(const std::string& path) const;

  /// The name of the thread with small id \p thread (its OS name, e.g. `kiln-cpu:0`).
  static std::string thread_name(std::uint32_t thread);

  // ---- for backends ------------------------------------------------------------------
  /// Nanoseconds since the profiler was created.
  std::int64_t now_ns() const noexcept;
  /// Starts a replay; returns its number.
  std::uint64_t begin_replay() noexcept { return replays_.fetch_add(1, std::memory_order_relaxed); }
  /// Records that node \p node of replay \p replay ran from \p begin_ns to \p end_ns on
  /// the calling thread. Never allocates or blocks.
  void record(std::string_view name, std::uint32_t node, std::uint64_t replay,
              std::int64_t begin_ns, std::int64_t end_ns) noexcept;

 private:
  std::int64_t origin_ns_;
  std::vector<ProfileEvent> events_;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::uint64_t> replays_{0};
};

}  // namespace kiln
