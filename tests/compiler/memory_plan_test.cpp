// The memory plan on its own (compiler/plan/memory_plan.hpp): plans made by hand, placed,
// and checked against liveness computed here independently.

#include "compiler/plan/memory_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

/// A plan made by hand: values and launches, nothing else (no IR, no kernels).
class HandPlan {
 public:
  /// A new value of \p bytes on \p device (an input when \p input).
  std::size_t value(std::size_t bytes, std::size_t device = 0, bool input = false) {
    Storage s;
    s.bytes = bytes;
    s.device = device;
    s.arena_offset = 0;
    plan.storage.push_back(s);
    if (input) plan.inputs.push_back(plan.storage.size() - 1);
    return plan.storage.size() - 1;
  }
  /// A weight or constant: fixed bytes, not in the arena.
  std::size_t fixed(std::size_t bytes, std::size_t device = 0) {
    const std::size_t s = value(bytes, device);
    plan.storage[s].arena_offset = -1;
    plan.storage[s].fixed = reinterpret_cast<std::byte*>(&plan);  // any address: never read
    return s;
  }
  /// A launch on \p device reading \p in and writing \p out (new values).
  std::size_t launch(const std::vector<std::size_t>& in, const std::vector<std::size_t>& out,
                     std::size_t device = 0, bool is_view = false) {
    const std::size_t i = plan.launches.size();
    plan.launches.emplace_back();
    plan.io.push_back({.first = plan.io_storage.size(),
                       .ins = static_cast<std::uint32_t>(in.size()),
                       .outs = static_cast<std::uint32_t>(out.size()),
                       .kernel = nullptr,
                       .device = device});
    plan.io_storage.insert(plan.io_storage.end(), in.begin(), in.end());
    plan.io_storage.insert(plan.io_storage.end(), out.begin(), out.end());
    for (std::size_t s : in) plan.storage[s].readers.push_back(i);
    for (std::size_t s : out) plan.storage[s].producer = static_cast<std::int64_t>(i);
    plan.is_view.push_back(is_view);
    plan.absorbed.push_back(is_view);
    plan.invariant.push_back(false);
    return i;
  }
  Plan plan;
};

/// The rounded size place_values gives a value.
std::size_t placed_bytes(std::size_t bytes) {
  return std::max(kArenaAlign, (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign);
}

/// Checks that no two values that are live at the same time share a byte of one arena, and
/// that every place lies inside its arena. A value is live from its producer's launch (the
/// start, for an input) through its last reader's (the end, for an output; its own
/// launch, for a value nobody reads); both ends inclusive, computed here from the lists.
/// An invariant launch's output is live for the whole call (it is written once, before).
void expect_no_overlap(const Plan& plan, const ArenaSizes& sizes) {
  const std::size_t n = plan.launches.size();
  std::vector<bool> is_output(plan.storage.size(), false);
  for (std::size_t s : plan.outputs) is_output[s] = true;
  struct Live {
    std::size_t s, first, last;
  };
  std::vector<Live> live;
  for (std::size_t s = 0; s < plan.storage.size(); ++s) {
    const Storage& st = plan.storage[s];
    if (st.arena_offset < 0) continue;  // fixed or a view
    const bool invariant =
        st.producer >= 0 && plan.invariant[static_cast<std::size_t>(st.producer)];
    const std::size_t first =
        st.producer < 0 || invariant ? 0 : static_cast<std::size_t>(st.producer);
    std::size_t last = first;
    for (std::size_t r : st.readers) last = std::max(last, r);
    if (is_output[s] || invariant) last = n;
    live.push_back({s, first, last});
    EXPECT_EQ(st.kept, invariant) << "value " << s;
    ASSERT_LE(static_cast<std::size_t>(st.arena_offset) + placed_bytes(st.bytes),
              (st.kept ? sizes.kept : sizes.call)[st.device])
        << "value " << s << " lies past the end of its arena on device " << st.device;
  }
  for (std::size_t a = 0; a < live.size(); ++a)
    for (std::size_t b = a + 1; b < live.size(); ++b) {
      const Storage &x = plan.storage[live[a].s], &y = plan.storage[live[b].s];
      if (x.device != y.device || x.kept != y.kept) continue;  // other arenas
      const bool same_time = live[a].first <= live[b].last && live[b].first <= live[a].last;
      const auto xo = static_cast<std::size_t>(x.arena_offset);
      const auto yo = static_cast<std::size_t>(y.arena_offset);
      const bool same_bytes = xo < yo + placed_bytes(y.bytes) && yo < xo + placed_bytes(x.bytes);
      EXPECT_FALSE(same_time && same_bytes)
          << "values " << live[a].s << " (launches " << live[a].first << ".." << live[a].last
          << ") and " << live[b].s << " (launches " << live[b].first << ".." << live[b].last
          << ") share bytes at " << xo << " and " << yo;
    }
}

TEST(ArenaAllocator, RoundsReusesTheFirstFitAndCoalesces) {
  ArenaAllocator a;
  EXPECT_EQ(a.allocate(1), 0u);  // rounded up to one 64-byte place
  EXPECT_EQ(a.allocate(100), 64u);
  EXPECT_EQ(a.allocate(64), 192u);
  EXPECT_EQ(a.peak(), 256u);
  a.release(0, 1);
  a.release(192, 64);
  EXPECT_EQ(a.allocate(64), 0u);  // the first place that fits, not the last freed
  a.release(0, 64);
  a.release(64, 100);  // coalesces with both neighbours: [0, 256) is free again
  EXPECT_EQ(a.allocate(256), 0u);
  EXPECT_EQ(a.peak(), 256u);
  EXPECT_EQ(a.allocate(0), 256u);  // an empty value still gets a place of its own
  EXPECT_EQ(a.peak(), 320u);
}

TEST(MemoryPlan, AChainReusesTwoPlacesWhateverItsLength) {
  HandPlan h;
  std::size_t prev = h.value(1000, 0, true);
  for (int i = 0; i < 50; ++i) {
    const std::size_t next = h.value(1000);
    h.launch({prev}, {next});
    prev = next;
  }
  h.plan.outputs = {prev};
  const ArenaSizes sizes = place_values(h.plan, 1);
  ASSERT_EQ(sizes.call.size(), 1u);
  EXPECT_EQ(sizes.call[0], 2 * placed_bytes(1000));
  EXPECT_EQ(sizes.kept[0], 0u);  // each launch reads one place, writes the other
  expect_no_overlap(h.plan, sizes);
}

TEST(MemoryPlan, OutputsAndInputsKeepTheirPlaces) {
  HandPlan h;
  const std::size_t x = h.value(256, 0, true);
  const std::size_t early = h.value(256);  // an output nobody reads after its launch
  h.launch({x}, {early});
  std::size_t prev = early;
  for (int i = 0; i < 10; ++i) {
    const std::size_t next = h.value(256);
    h.launch({i == 0 ? x : prev}, {next});
    prev = next;
  }
  h.plan.outputs = {early, prev};
  const ArenaSizes sizes = place_values(h.plan, 1);
  expect_no_overlap(h.plan, sizes);
  // The input is read by launch 1 and then freed; the early output never is.
  for (std::size_t s = 0; s < h.plan.storage.size(); ++s) {
    if (s == early) continue;
    EXPECT_NE(h.plan.storage[s].arena_offset, h.plan.storage[early].arena_offset) << s;
  }
}

TEST(MemoryPlan, AValueNobodyReadsIsFreedAfterItsLaunch) {
  HandPlan h;
  const std::size_t x = h.value(512, 0, true);
  const std::size_t unread = h.value(512);
  h.launch({x}, {unread});
  const std::size_t y = h.value(512);
  h.launch({x}, {y});
  h.plan.outputs = {y};
  const ArenaSizes sizes = place_values(h.plan, 1);
  EXPECT_EQ(h.plan.storage[y].arena_offset, h.plan.storage[unread].arena_offset);
  EXPECT_EQ(sizes.call[0], 2 * placed_bytes(512));
  expect_no_overlap(h.plan, sizes);
}

TEST(MemoryPlan, AViewPlacesNothingAndEachDeviceHasItsOwnArena) {
  HandPlan h;
  const std::size_t x = h.value(128, 0, true);
  const std::size_t v = h.value(128);
  h.launch({x}, {v}, 0, /*is_view=*/true);
  h.plan.storage[v].base = static_cast<std::int64_t>(x);
  h.plan.storage[v].arena_offset = -1;
  const std::size_t on1 = h.value(4096, 1);
  h.launch({x}, {on1}, 1);
  h.plan.outputs = {on1};
  const ArenaSizes sizes = place_values(h.plan, 2);
  ASSERT_EQ(sizes.call.size(), 2u);
  EXPECT_EQ(h.plan.storage[v].arena_offset, -1);  // still the base's bytes
  EXPECT_EQ(sizes.call[0], placed_bytes(128));
  EXPECT_EQ(sizes.call[1], placed_bytes(4096));
  EXPECT_EQ(h.plan.storage[on1].arena_offset, 0);
  expect_no_overlap(h.plan, sizes);
}

TEST(MemoryPlan, RandomProgramsNeverPlaceTwoLiveValuesOverEachOther) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    HandPlan h;
    const std::size_t devices = 1 + rng() % 2;
    std::vector<std::size_t> values;
    for (int i = 0; i < 1 + static_cast<int>(rng() % 3); ++i)
      values.push_back(h.value(rng() % 5000, rng() % devices, true));
    // Weights, and launches that read only them and each other's outputs: invariant (as
    // hoist_invariant marks them), wherever they fall among the others.
    std::vector<std::size_t> steady;
    for (int i = 0; i < 1 + static_cast<int>(rng() % 2); ++i)
      steady.push_back(h.fixed(rng() % 5000, rng() % devices));
    const int launches = 1 + static_cast<int>(rng() % 40);
    for (int l = 0; l < launches; ++l) {
      const bool invariant = rng() % 4 == 0;
      const std::vector<std::size_t>& from = invariant ? steady : values;
      std::vector<std::size_t> in;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k)
        in.push_back(rng() % 3 == 0 ? steady[rng() % steady.size()] : from[rng() % from.size()]);
      const std::size_t device = rng() % devices;
      std::vector<std::size_t> out;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 2); ++k)
        out.push_back(h.value(rng() % 3 == 0 ? 0 : rng() % 10000, device));
      const std::size_t i = h.launch(in, out, device);
      h.plan.invariant[i] = invariant;
      values.insert(values.end(), out.begin(), out.end());
      if (invariant) steady.insert(steady.end(), out.begin(), out.end());
    }
    h.plan.outputs = {values.back()};
    if (rng() % 2 == 0) h.plan.outputs.push_back(values[rng() % values.size()]);
    const ArenaSizes sizes = place_values(h.plan, devices);
    SCOPED_TRACE("round " + std::to_string(round));
    expect_no_overlap(h.plan, sizes);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace kiln::compiler
