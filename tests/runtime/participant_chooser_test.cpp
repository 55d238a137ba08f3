// The choice between spreading a replay over participants and running it on one thread,
// fed synthetic replay times (so no test depends on this machine's timing).

#include "runtime/cpu/participant_chooser.hpp"

#include <gtest/gtest.h>

#include <functional>

namespace kiln::detail {
namespace {

using Mode = ParticipantChooser::Mode;

/// Runs \p replays replays whose time is \p cost(mode, replay); returns the total time.
std::int64_t simulate(ParticipantChooser& chooser, int replays, int first,
                      const std::function<std::int64_t(Mode, int)>& cost) {
  std::int64_t total = 0;
  for (int r = first; r < first + replays; ++r) {
    const std::int64_t t = cost(chooser.next(), r);
    total += t;
    chooser.record(t);
  }
  return total;
}

TEST(ParticipantChooser, PicksOneThreadWhenSpreadingIsSlower) {
  ParticipantChooser c;
  const std::int64_t total =
      simulate(c, 10000, 0, [](Mode m, int) { return m == Mode::spread ? 100 : 60; });
  EXPECT_EQ(c.current(), Mode::single);
  EXPECT_LE(total, 60 * 10000 * 102 / 100) << "the trials of the slower mode cost too much";
}

TEST(ParticipantChooser, KeepsSpreadingWhenItPays) {
  ParticipantChooser c;
  const std::int64_t total =
      simulate(c, 10000, 0, [](Mode m, int) { return m == Mode::spread ? 50 : 100; });
  EXPECT_EQ(c.current(), Mode::spread);
  EXPECT_LE(total, 50 * 10000 * 102 / 100);
}

TEST(ParticipantChooser, OneThreadWinsTiesAndNearTies) {
  ParticipantChooser tie;
  simulate(tie, 100, 0, [](Mode, int) { return 100; });
  EXPECT_EQ(tie.current(), Mode::single);
  ParticipantChooser near;  // spread 2 % faster: not worth a second core
  simulate(near, 100, 0, [](Mode m, int) { return m == Mode::spread ? 98 : 100; });
  EXPECT_EQ(near.current(), Mode::single);
}

TEST(ParticipantChooser, TheFirstReplayOfEachModeIsAWarmUp) {
  ParticipantChooser c;  // each mode's first replay is 100x slow (a sleeping worker)
  int spread_seen = 0, single_seen = 0;
  simulate(c, 200, 0, [&](Mode m, int) -> std::int64_t {
    if (m == Mode::spread) return ++spread_seen == 1 ? 5000 : 50;
    return ++single_seen == 1 ? 5000 : 100;
  });
  EXPECT_EQ(c.current(), Mode::spread);
}

TEST(ParticipantChooser, AParticipantOftenKeptOffItsCoreMakesSpreadingLose) {
  // Spread replays are fast when the other core is free and very slow when another
  // process holds it: their mean, not their best, is what spreading costs.
  ParticipantChooser c;
  const std::int64_t total = simulate(c, 10000, 0, [](Mode m, int r) -> std::int64_t {
    if (m == Mode::single) return 100;
    return r % 2 == 0 ? 20 : 500;
  });
  EXPECT_EQ(c.current(), Mode::single);
  EXPECT_LE(total, 100 * 10000 * 105 / 100);
}

TEST(ParticipantChooser, FollowsACoreThatBecomesBusyAndFreeAgain) {
  ParticipantChooser c;
  const auto quiet = [](Mode m, int) -> std::int64_t { return m == Mode::spread ? 50 : 100; };
  const auto busy = [](Mode m, int) -> std::int64_t { return m == Mode::spread ? 400 : 100; };
  simulate(c, 5000, 0, quiet);
  ASSERT_EQ(c.current(), Mode::spread);
  // Another process takes a core: within one trial interval (at most 1024 replays) the
  // replays run on one thread, and the busy stretch costs little more than one thread's.
  const std::int64_t busy_total = simulate(c, 20000, 5000, busy);
  EXPECT_EQ(c.current(), Mode::single);
  EXPECT_LE(busy_total, 100 * 20000 * 125 / 100);
  // The core is free again: spreading comes back within one trial interval.
  simulate(c, 20000, 25000, quiet);
  EXPECT_EQ(c.current(), Mode::spread);
}

TEST(ParticipantChooser, AModeFarSlowerIsRecheckedCheaply) {
  // A schedule that sleeps on each hand-off can be 40x slower than one thread: its
  // trials must end early and come rarely.
  ParticipantChooser c;
  const std::int64_t total = simulate(
      c, 20000, 0, [](Mode m, int) -> std::int64_t { return m == Mode::spread ? 4000 : 100; });
  EXPECT_EQ(c.current(), Mode::single);
  EXPECT_LE(total, 100 * 20000 * 110 / 100);
}

TEST(ParticipantChooser, TheBusyCoreIsNoticedWithinAFewReplays) {
  ParticipantChooser c;
  simulate(c, 50000, 0, [](Mode m, int) -> std::int64_t { return m == Mode::spread ? 50 : 100; });
  ASSERT_EQ(c.current(), Mode::spread);  // and trials are now far apart
  simulate(c, 20, 50000, [](Mode m, int) -> std::int64_t { return m == Mode::spread ? 400 : 100; });
  EXPECT_EQ(c.current(), Mode::single);
}

TEST(ParticipantChooser, LoneSlowReplaysOnOneThreadDoNotTriggerTrials) {
  // A caller that pauses between bursts makes the first replay after each pause slow
  // (cold caches, a sleeping stream thread). On one thread that says nothing for
  // spreading, whose trials here cost 40 replays each: they must stay rare.
  ParticipantChooser c;
  int spread_replays = 0;
  simulate(c, 20000, 0, [&](Mode m, int r) -> std::int64_t {
    if (m == Mode::spread) {
      ++spread_replays;
      return 4000;
    }
    return r % 50 == 0 ? 1000 : 100;
  });
  EXPECT_EQ(c.current(), Mode::single);
  EXPECT_LE(spread_replays, 30) << "a lone slow replay started a trial";
}

}  // namespace
}  // namespace kiln::detail
