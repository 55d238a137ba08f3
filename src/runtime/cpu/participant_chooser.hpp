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
/// sleeping worker) and keeps the faster by mean time. From then on it times a few
/// replays the other way again now and then: after 16 replays, then at intervals that
/// double while the choice holds and are long enough for those trials to cost about 3 %
/// (a trial of a mode twice as slow as the current one ends after one counted replay), up
/// to 16384; and at once when the current mode becomes twice as slow as when it was
/// chosen (for one thread: every one of its last few replays). So a core that becomes busy moves
/// the choice within a few replays, and one that becomes free again within an interval. `spread`
/// must be faster by 3 % to be chosen: two threads are never worth more risk than one. Not
/// thread-safe: one replay of a graph runs at a time.
class ParticipantChooser {
 public:
  enum class Mode : std::uint8_t { spread, single };

  /// How the next replay should run.
  Mode next() const noexcept { return trying_ ? other(current_) : current_; }

  /// Records that the replay `next()` chose took \p ns.
  void record(std::int64_t ns) noexcept {
    if (trying_) {
      record_trial(ns);
      return;
    }
    recent_[ran_++ % kRecent] = ns;
    if (exploring_) {
      if (ran_ >= kDiscard + kTrials) start_trial();
      return;
    }
    // A trial when one is due, or at once when the current mode has become much slower
    // than when it was chosen (another process took a core, or gave it back). Spreading
    // is left on a slow mean (a participant kept off its core now and then is what it
    // costs); one thread only on a slowdown every recent replay shows, since a lone slow
    // replay (cold caches after the caller paused) says nothing for spreading.
    const std::int64_t recent = current_ == Mode::spread ? recent_mean() : recent_min();
    if (++since_trial_ >= interval_ || (ran_ >= kRecent && recent > 2 * chosen_at_)) {
      if (since_trial_ < interval_) interval_ = kFirstInterval;
      start_trial();
    }
  }

  Mode current() const noexcept { return current_; }

 private:
  static constexpr int kDiscard = 1;  // replays after a switch not counted
  static constexpr int kTrials = 3;   // replays counted per trial
  static constexpr int kRecent = 4;   // the current mode's last replays compared
  static constexpr std::uint32_t kFirstInterval = 16, kLastInterval = 16384;

  void start_trial() noexcept {
    trying_ = true;
    tried_ = 0;
    tried_sum_ = 0;
    trial_cost_ = 0;
    baseline_ = recent_mean();
  }

  void record_trial(std::int64_t ns) noexcept {
    trial_cost_ += ns;
    const bool warm_up = ++tried_ <= kDiscard;
    if (!warm_up) tried_sum_ += ns;
    // A mode clearly worse ends its trial early: a schedule that sleeps on every hand-off
    // can cost 40 replays of the other kind per replay.
    const bool hopeless = baseline_ > 0 && (warm_up ? ns > 8 * baseline_ : ns > 2 * baseline_);
    if (!hopeless && tried_ < kDiscard + kTrials) return;
    const int counted = tried_ - kDiscard;
    const std::int64_t tried = counted > 0 ? tried_sum_ / counted : ns;
    const bool switch_mode = !hopeless && better(other(current_), tried, baseline_);
    trying_ = false;
    if (switch_mode) {
      current_ = other(current_);
      recent_fill(tried);  // the new mode's recent times are the trial's
      chosen_at_ = tried;
      interval_ = kFirstInterval;
    } else {
      chosen_at_ = baseline_;
      // Trials of the other mode should cost at most ~3 % of the replays between them.
      const std::int64_t affordable =
          baseline_ > 0 ? 32 * trial_cost_ / baseline_ : std::int64_t{kLastInterval};
      const std::int64_t next = std::max<std::int64_t>(
          exploring_ ? kFirstInterval : std::int64_t{interval_} * 2, affordable);
      interval_ = static_cast<std::uint32_t>(std::min<std::int64_t>(next, kLastInterval));
    }
    exploring_ = false;
    since_trial_ = 0;
  }

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
  std::int64_t recent_min() const noexcept {
    const std::uint32_t counted = std::min<std::uint32_t>(ran_, kRecent);
    std::int64_t least = counted == 0 ? 0 : recent_[0];
    for (std::uint32_t k = 1; k < counted; ++k) least = std::min(least, recent_[k]);
    return least;
  }
  void recent_fill(std::int64_t ns) noexcept {
    for (std::int64_t& r : recent_) r = ns;
    ran_ = kRecent;
  }

  Mode current_ = Mode::spread;
  bool exploring_ = true;  // the first comparison
  bool trying_ = false;    // replays now run the other mode
  int tried_ = 0;
  std::int64_t tried_sum_ = 0;   // the trial's counted replays
  std::int64_t trial_cost_ = 0;  // all its replays
  std::int64_t baseline_ = 0;    // the current mode's recent mean when the trial began
  std::int64_t chosen_at_ = 0;   // the current mode's mean when it was last chosen
  std::int64_t recent_[kRecent] = {};
  std::uint32_t ran_ = 0;  // replays of current_ recorded (recent_ is a ring over them)
  std::uint32_t since_trial_ = 0;
  std::uint32_t interval_ = kFirstInterval;
};

}  // namespace kiln::detail
