#pragma once
/// \file
/// `DeviceEvent`: a marker in a context's stream, for ordering work across contexts and
/// for timing.

#include <memory>

namespace kiln {

namespace detail {
class EventState;
}

/// A point in a stream. Made by `DeviceContext::create_event()`; recorded with
/// `enqueue_record`; waited on (by any context) with `enqueue_wait`.
///
/// As with CUDA events, a wait targets the most recent record enqueued before the wait
/// itself; waiting on an event never recorded does nothing. Copies share one event.
/// Thread-safe.
class DeviceEvent {
 public:
  /// True when the last enqueued record has run (or the event was never recorded).
  bool is_complete() const;
  /// Blocks the host until the last enqueued record has run.
  void synchronize() const;
  /// Milliseconds between two completed records.
  /// \throws UserError if either event was never recorded or has not completed yet.
  static double elapsed_ms(const DeviceEvent& start, const DeviceEvent& end);

 private:
  friend class DeviceContext;
  explicit DeviceEvent(std::shared_ptr<detail::EventState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::EventState> state_;
};

}  // namespace kiln
