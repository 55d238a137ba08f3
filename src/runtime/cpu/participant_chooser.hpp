#pragma once
// Internal: whether a CPU graph's replay runs spread over its static schedule's
// participants or on one thread, chosen from what replays really cost.

#include <algorithm>
#include <cstdint>

namespace kiln::detail {

/// Chooses, replay by replay, between the two ways a CPU graph with a static schedule can
/// run: `spread` (each participant runs its list, waiting on the others across cores) and
/// `single` (every node in creation order on the draining thread). No cost model known
/// at instantiation says what a cross-core hand-off costs on this machine, how long the
/// nodes take, or whether another process holds a core now; timing the replays does.
///
/// It first times a few replays each way (the first of each discarded: cold caches, a
/// sleeping worker), keeps the faster by mean time, and from then on now and then times a few
/// replays the other way again (after 16 replays, doubling to 1024 while the choice holds), so a
/// core that becomes busy, or free again, moves the choice. `spread` must be faster by 3 %
/// to be chosen: two threads are never worth more risk than one. Not thread-safe: one
/// replay of a graph runs at a time.
class ParticipantChooser {
 public:
  enum class Mode : std::uint8_t { spread, single };

  /// How the next replay should run.
  Mode next() const noexcept { return trying_ ? other(current_) : current_; }

  /// Records that the replay `next()` chose took \p ns.
  void record(std::int64_t ns) noexcept {
    if (trying_) {
      if (++tried_ > kDiscard) tried_sum_ += ns;
      if (tried_ < kDiscard + kTrials) return;
      const std::int64_t tried = tried_sum_ / kTrials;
      const bool switch_mode = better(other(current_), tried, recent_mean());
      trying_ = false;
      tried_ = 0;
      if (switch_mode) {
        current_ = other(current_);
        ran_ = 0;  // the new mode's recent times are the trial's
        recent_fill(tried);
        interval_ = kFirstInterval;
      } else if (!exploring_) {
        interval_ = std::min(interval_ * 2, kLastInterval);
      }
      exploring_ = false;
      since_trial_ = 0;
      tried_sum_ = 0;
      return;
    }
    recent_[ran_++ % kRecent] = ns;
    if (exploring_ ? ran_ >= kDiscard + kTrials : ++since_trial_ >= interval_) trying_ = true;
  }

  Mode current() const noexcept { return current_; }

 private:
  static constexpr int kDiscard = 1;  // replays after a switch not counted
  static constexpr int kTrials = 3;   // replays counted per trial
  static constexpr int kRecent = 4;   // the current mode's last replays compared
  static constexpr std::uint32_t kFirstInterval = 16, kLastInterval = 1024;

  static Mode other(Mode m) noexcept { return m == Mode::spread ? Mode::single : Mode::spread; }
  /// Whether \p candidate, measured at \p candidate_ns, beats the current mode's \p ns.
  static bool better(Mode candidate, std::int64_t candidate_ns, std::int64_t ns) noexcept {
    // spread must beat single by 3 %, whichever of the two is running now.
    const bool spread_wins =
        candidate == Mode::spread ? candidate_ns * 100 < ns * 97 : ns * 100 < candidate_ns * 97;
    return candidate == Mode::spread ? spread_wins : !spread_wins;
  }
  /// The mean of the current mode's last replays. A mean, not a minimum: a participant
  /// that another process keeps off its core makes some replays very slow and leaves
  /// others fast, and the slow ones are what that mode costs.
  std::int64_t recent_mean() const noexcept {
    std::int64_t sum = 0;
    std::int64_t n = 0;
    const std::uint32_t counted = std::min<std::uint32_t>(ran_, kRecent);
    // During exploration the first replay is a warm-up: skip it when others exist.
    for (std::uint32_t k = 0; k < counted; ++k)
      if (!(exploring_ && k == 0 && counted > 1)) {
        sum += recent_[k];
        ++n;
      }
    return n == 0 ? 0 : sum / n;
  }
  void recent_fill(std::int64_t ns) noexcept {
    for (std::int64_t& r : recent_) r = ns;
    ran_ = kRecent;
  }

  Mode current_ = Mode::spread;
  bool exploring_ = true;  // the first comparison
  bool trying_ = false;    // replays now run the other mode
  int tried_ = 0;
  std::int64_t tried_sum_ = 0;
  std::int64_t recent_[kRecent] = {};
  std::uint32_t ran_ = 0;  // replays of current_ recorded (recent_ is a ring over them)
  std::uint32_t since_trial_ = 0;
  std::uint32_t interval_ = kFirstInterval;
};

}  // namespace kiln::detail
