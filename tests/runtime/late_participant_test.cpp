// A CPU graph's static schedule when a participant never shows up: a pool with fewer
// helpers than the schedule has lists (the extreme of a worker that has not woken, or
// whose core another process holds). The lists nobody starts must be taken over by the
// thread that waits on them, so a replay finishes, in dependency order, on the threads
// there are. Before the takeover existed these replays waited forever.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/runtime/profiler.hpp"
#include "runtime/cpu/cpu_graph.hpp"
#include "runtime/cpu/worker_pool.hpp"

namespace kiln::detail {
namespace {

/// A random DAG of host nodes: node i stores 1 + a mix of its dependencies' values, so a
/// dependency run late changes the result. \p throw_at: a node that throws (or -1).
struct RandomDag {
  std::vector<std::vector<std::uint32_t>> deps;
  std::vector<std::int64_t> expected;
  std::vector<std::int64_t> values;

  RandomDag(unsigned seed, int n) : deps(n), expected(n), values(n) {
    std::mt19937 rng(seed);
    for (int i = 1; i < n; ++i)
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
        deps[i].push_back(
            static_cast<std::uint32_t>(i - 1 - static_cast<int>(rng() % std::min(i, 24))));
    for (int i = 0; i < n; ++i) expected[i] = value(i, expected);
  }
  std::int64_t value(int i, const std::vector<std::int64_t>& v) const {
    std::int64_t s = 1;
    for (std::size_t j = 0; j < deps[i].size(); ++j)
      s = (s + v[deps[i][j]] * 3 + static_cast<std::int64_t>(j)) % 1000003;
    return s;
  }
  GraphNodeDescs descs(int throw_at = -1) {
    GraphNodeDescs out(deps.size());
    for (std::size_t i = 0; i < deps.size(); ++i) {
      out[i].kind = GraphNodeKind::host;
      for (std::uint32_t d : deps[i]) out[i].dependencies.push_back(d);
      const int at = static_cast<int>(i);
      out[i].work.emplace<HostCallback>([this, at, throw_at] {
        if (at == throw_at) throw std::runtime_error("node fails on purpose");
        values[at] = value(at, values);
      });
    }
    return out;
  }
};

TEST(LateParticipants, ListsNobodyStartsAreTakenOverAndEveryReplayIsExact) {
  for (int lists : {2, 3, 5}) {
    for (int helpers : {0, 1}) {
      if (helpers + 1 >= lists) continue;  // every list would have a thread
      for (unsigned seed : {1u, 2u, 3u}) {
        RandomDag dag(seed, 300);
        CpuGraphExec exec(dag.descs(), lists);
        ASSERT_GE(exec.scheduled_lists(), 2u) << "the random DAG should spread";
        WorkerPool pool(helpers, "late-test");
        Profiler profiler;  // a profiled replay always runs the static schedule
        for (int replay = 0; replay < 4; ++replay) {
          std::fill(dag.values.begin(), dag.values.end(), 0);
          const GraphFailure failure = exec.run(pool, &profiler);
          EXPECT_FALSE(failure.error);
          EXPECT_EQ(dag.values, dag.expected)
              << lists << " lists, " << helpers << " helpers, seed " << seed;
        }
      }
    }
  }
}

TEST(LateParticipants, AFailureInATakenOverListEndsTheReplayAndNamesTheNode) {
  RandomDag dag(7, 200);
  CpuGraphExec exec(dag.descs(150), 2);
  ASSERT_EQ(exec.scheduled_lists(), 2u);
  WorkerPool pool(0, "late-test");
  Profiler profiler;
  for (int replay = 0; replay < 2; ++replay) {
    const GraphFailure failure = exec.run(pool, &profiler);
    ASSERT_TRUE(failure.error);
    EXPECT_NE(failure.where.find("graph node 150"), std::string::npos) << failure.where;
    EXPECT_THROW(std::rethrow_exception(failure.error), std::runtime_error);
  }
}

}  // namespace
}  // namespace kiln::detail
