#include "kiln/runtime/device_graph.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "../error_matchers.hpp"
#include "backends.hpp"
#include "kiln/core/error.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using testing::kThreadCounts;
using testing::read_back;

class DeviceGraphThreads : public testing::OnEveryBackend {};
INSTANTIATE_TEST_SUITE_P(Backends, DeviceGraphThreads, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_name);

TEST_P(DeviceGraphThreads, BuildRunsOnceAndReplaysRunTheNodesEachTime) {
  auto counter = ctx.enqueue_create_buffer<std::int64_t>(1);
  ctx.enqueue_memset(counter, std::int64_t{0});
  auto add = kernel([](std::int64_t* c, std::int64_t v) { *c += v; });
  int builds = 0;
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    ++builds;
    auto first = add.add(b, LaunchConfig{1, 1}, {}, counter.data(), std::int64_t{1});
    add.add(b, LaunchConfig{1, 1}, first, counter.data(), std::int64_t{10});
  });
  EXPECT_EQ(graph.size(), 2u);
  for (int i = 0; i < 5; ++i) graph.replay();
  EXPECT_EQ(read_back(ctx, counter)[0], 55);
  EXPECT_EQ(builds, 1);
}

TEST_P(DeviceGraphThreads, DependenciesOrderNodesInAFanOutFanInGraph) {
  // root -> N independent nodes -> join. Each middle node must see the root's write and
  // the join must see every middle node's write.
  constexpr int kWidth = 64;
  auto data = ctx.enqueue_create_buffer<std::int64_t>(kWidth + 1);
  auto set = kernel([](std::int64_t* d, int i, std::int64_t v) { d[i] = v; });
  auto copy_root = kernel([](std::int64_t* d, int i) { d[i] = d[0] + i; });
  auto sum = kernel([](std::int64_t* d, int n) {
    std::int64_t s = 0;
    for (int i = 1; i <= n; ++i) s += d[i];
    d[0] = s;
  });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto root = set.add(b, LaunchConfig{1, 1}, {}, data.data(), 0, std::int64_t{100});
    std::vector<DeviceGraphNode> middle;
    for (int i = 1; i <= kWidth; ++i)
      middle.push_back(copy_root.add(b, LaunchConfig{1, 1}, root, data.data(), i));
    auto join = b.add_empty(middle);
    sum.add(b, LaunchConfig{1, 1}, join, data.data(), kWidth);
  });
  for (int r = 0; r < 20; ++r) {
    graph.replay();
    const auto v = read_back(ctx, data);
    ASSERT_EQ(v[0], 100 * kWidth + kWidth * (kWidth + 1) / 2) << "replay " << r;
  }
}

TEST_P(DeviceGraphThreads, IndependentNodesRunInParallel) {
  KILN_CPU_ONLY("a CUDA graph may run independent host nodes one after another");
  if (threads() < 2) GTEST_SKIP() << "needs two workers";
  // Two roots that each wait for the other: only possible if they run at the same time.
  std::atomic<int> arrived{0};
  std::atomic<bool> both{true};
  auto rendezvous = [&] {
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < 2)
      if (std::chrono::steady_clock::now() > deadline) {
        both.store(false);
        return;
      }
  };
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    b.add_host_function(rendezvous, {});
    b.add_host_function(rendezvous, {});
  });
  graph.replay();
  ctx.synchronize();
  EXPECT_TRUE(both.load());
}

TEST_P(DeviceGraphThreads, CopyMemsetHostAndChildNodes) {
  constexpr std::size_t n = 1000;
  auto a = ctx.enqueue_create_buffer<float>(n);
  auto b = ctx.enqueue_create_buffer<float>(n);
  std::vector<float> out(n);
  std::vector<int> events;
  auto child = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& g) {
    g.add_host_function([&events] { events.push_back(2); }, {});
  });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& g) {
    auto fill = g.add_memset(a, 3.0f, {});
    auto copy = g.add_copy(b, a, fill);
    auto to_host = g.add_copy(out, b, copy);
    auto first = g.add_host_function([&events] { events.push_back(1); }, to_host);
    auto nested = g.add_child_graph(child, first);
    g.add_host_function([&events] { events.push_back(3); }, nested);
  });
  graph.replay();
  ctx.synchronize();
  for (float v : out) ASSERT_EQ(v, 3.0f);
  EXPECT_EQ(events, (std::vector<int>{1, 2, 3}));
}

TEST_P(DeviceGraphThreads, ReplaysAreOrderedWithOtherStreamWork) {
  auto x = ctx.enqueue_create_buffer<std::int64_t>(1);
  auto triple = kernel([](std::int64_t* v) { *v *= 3; });
  auto inc = kernel([](std::int64_t* v) { *v += 1; });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    triple.add(b, LaunchConfig{1, 1}, {}, x.data());
  });
  ctx.enqueue_memset(x, std::int64_t{1});
  std::int64_t expected = 1;
  for (int i = 0; i < 10; ++i) {
    graph.replay();
    inc.enqueue(ctx, LaunchConfig{1, 1}, x.data());
    expected = expected * 3 + 1;
  }
  EXPECT_EQ(read_back(ctx, x)[0], expected);
}

// replay_and_synchronize (compiled calls' path, run on the calling thread on the CPU):
// ordered after work queued before it, done when it returns, and a failure thrown by it.
TEST_P(DeviceGraphThreads, ReplayAndSynchronizeWaitsForQueuedWorkAndThrowsFailures) {
  auto x = ctx.enqueue_create_buffer<std::int64_t>(1);
  auto triple = kernel([](std::int64_t* v) { *v *= 3; });
  auto inc = kernel([](std::int64_t* v) { *v += 1; });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    triple.add(b, LaunchConfig{1, 1}, {}, x.data());
  });
  ctx.enqueue_memset(x, std::int64_t{1});
  std::int64_t expected = 1;
  std::vector<std::int64_t> seen;
  for (int i = 0; i < 20; ++i) {
    for (int k = 0; k < i % 3; ++k) {
      inc.enqueue(ctx, LaunchConfig{1, 1}, x.data());  // queued, not waited for
      ++expected;
    }
    graph.replay_and_synchronize();
    expected *= 3;
    // On the CPU read without another synchronize: the replay must be done.
    EXPECT_EQ(gpu() ? read_back(ctx, x)[0] : *x.data(), expected) << "after replay " << i;
  }
  if (gpu()) return;  // a faulting GPU kernel ends its context
  auto bad = kernel([] { throw std::runtime_error("node exploded"); }, {.name = "exploding"});
  auto failing = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    bad.add(b, LaunchConfig{1, 1}, {});
  });
  KILN_EXPECT_THROW_MSG(failing.replay_and_synchronize(), DeviceError, "kernel 'exploding'",
                        "node exploded");
  graph.replay_and_synchronize();  // the context still works
  EXPECT_EQ(read_back(ctx, x)[0], expected * 3);
}

TEST_P(DeviceGraphThreads, AFailingNodeSurfacesAtSynchronizeNamingTheNode) {
  KILN_CPU_ONLY("a faulting CUDA kernel ends its context; the CPU skips the rest and goes on");
  auto out = ctx.enqueue_create_buffer<int>(1);
  ctx.enqueue_memset(out, 0);
  auto bad = kernel([] { throw std::runtime_error("node exploded"); }, {.name = "exploding"});
  auto store = kernel([](int* o) { *o = 7; });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto first = b.add_empty({});
    auto boom = bad.add(b, LaunchConfig{1, 1}, first);
    store.add(b, LaunchConfig{1, 1}, boom, out.data());
  });
  graph.replay();
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError, "graph node 1 (kernel 'exploding')",
                        "node exploded");
  EXPECT_EQ(read_back(ctx, out)[0], 0) << "the node after the failure must be skipped";
  // Graph and context still work.
  auto good = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    store.add(b, LaunchConfig{1, 1}, {}, out.data());
  });
  good.replay();
  EXPECT_EQ(read_back(ctx, out)[0], 7);
}

TEST_P(DeviceGraphThreads, AFailureInsideAParallelDagSkipsTheRestAndEndsTheReplay) {
  KILN_CPU_ONLY("a faulting CUDA kernel ends its context; the CPU skips the rest and goes on");
  auto out = ctx.enqueue_create_buffer<int>(1);
  ctx.enqueue_memset(out, 0);
  auto bad = kernel(
      [](int i) {
        if (i == 17) throw std::runtime_error("middle node failed");
      },
      {.name = "maybe_fail"});
  auto store = kernel([](int* o) { *o = 7; });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto root = b.add_empty({});
    std::vector<DeviceGraphNode> middle;
    for (int i = 0; i < 64; ++i) middle.push_back(bad.add(b, LaunchConfig{1, 1}, root, i));
    store.add(b, LaunchConfig{1, 1}, b.add_empty(middle), out.data());
  });
  graph.replay();
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError, "graph node 18 (kernel 'maybe_fail')",
                        "middle node failed");
  EXPECT_EQ(read_back(ctx, out)[0], 0) << "the join after the failure must be skipped";
}

TEST_P(DeviceGraphThreads, RandomDagsComputeWhatASequentialRunComputes) {
  // Node i stores 1 + the sum of its dependencies' values: any dependency run out of order
  // changes the result. Several seeds and widths exercise the schedule's cross-worker waits.
  auto node_fn = kernel([](std::int64_t* v, int i, const int* deps, int k) {
    std::int64_t s = 1;
    for (int j = 0; j < k; ++j) s = (s + v[deps[j]] * 3 + j) % 1000003;
    v[i] = s;
  });
  for (unsigned seed : {1u, 2u, 3u}) {
    constexpr int kNodes = 400;
    std::mt19937 rng(seed);
    std::vector<std::vector<int>> deps(kNodes);
    for (int i = 1; i < kNodes; ++i) {
      const int window = std::min(i, 2 + static_cast<int>(seed) * 10);
      for (int k = static_cast<int>(rng() % 4); k > 0; --k)
        deps[i].push_back(i - 1 - static_cast<int>(rng() % window));
    }
    std::vector<std::int64_t> expected(kNodes);
    for (int i = 0; i < kNodes; ++i) {
      std::int64_t s = 1;
      for (std::size_t j = 0; j < deps[i].size(); ++j)
        s = (s + expected[deps[i][j]] * 3 + static_cast<std::int64_t>(j)) % 1000003;
      expected[i] = s;
    }
    // Each node's dependency list, in device memory (a GPU kernel cannot read the host's).
    std::vector<int> flat, first;
    for (const auto& d : deps) {
      first.push_back(static_cast<int>(flat.size()));
      flat.insert(flat.end(), d.begin(), d.end());
    }
    flat.push_back(0);  // never empty
    auto dep_lists = ctx.enqueue_create_buffer<int>(flat.size());
    ctx.enqueue_copy(dep_lists, flat);
    auto values = ctx.enqueue_create_buffer<std::int64_t>(kNodes);
    auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
      std::vector<DeviceGraphNode> nodes;
      for (int i = 0; i < kNodes; ++i) {
        std::vector<DeviceGraphNode> on;
        for (int d : deps[i]) on.push_back(nodes[d]);
        nodes.push_back(node_fn.add(b, LaunchConfig{1, 1}, on, values.data(), i,
                                    dep_lists.data() + first[i], static_cast<int>(deps[i].size())));
      }
    });
    for (int r = 0; r < 20; ++r) {
      ctx.enqueue_memset(values, std::int64_t{0});
      graph.replay();
    }
    EXPECT_EQ(read_back(ctx, values), expected) << "seed " << seed;
  }
}

TEST(DeviceGraph, AHundredThousandNodeGraphBuildsAndReplaysInOrder) {
  // Building is linear in nodes + edges; a graph this size must build, and every replay
  // (whichever number of participants it runs on) must honour every edge.
  constexpr int kNodes = 100000;
  DeviceContext ctx(Device::cpu(), {.num_threads = 2});
  std::vector<std::vector<int>> deps(kNodes);
  std::mt19937 rng(11);
  for (int i = 1; i < kNodes; ++i) {
    const int window = std::min(i, 64);
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k)
      deps[i].push_back(i - 1 - static_cast<int>(rng() % static_cast<unsigned>(window)));
  }
  std::vector<std::int64_t> expected(kNodes), values(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    std::int64_t s = i;
    for (int d : deps[i]) s = (s * 31 + expected[d]) % 1000003;
    expected[i] = s;
  }
  auto fn = ctx.compile_function([](std::int64_t* v, int i, const std::vector<int>* d) {
    std::int64_t s = i;
    for (int dep : *d) s = (s * 31 + v[dep]) % 1000003;
    v[i] = s;
  });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    b.reserve(kNodes);
    std::vector<DeviceGraphNode> nodes;
    nodes.reserve(kNodes);
    std::vector<DeviceGraphNode> on;
    for (int i = 0; i < kNodes; ++i) {
      on.clear();
      for (int d : deps[i]) on.push_back(nodes[d]);
      nodes.push_back(b.add_function(fn, LaunchConfig{1, 1}, on, values.data(), i, &deps[i]));
    }
  });
  EXPECT_EQ(graph.size(), static_cast<std::size_t>(kNodes));
  for (int r = 0; r < 12; ++r) {
    std::fill(values.begin(), values.end(), -1);
    graph.replay();
    ctx.synchronize();
    ASSERT_EQ(values, expected) << "replay " << r;
  }
}

TEST(DeviceGraph, DependencyListsKeptInVariablesStayValid) {
  // A single node or a braced list (short or long) put into a variable outlives the
  // temporaries it was made from; a copy of one refers to its own nodes.
  DeviceContext ctx(Device::cpu(), {.num_threads = 2});
  std::vector<int> order;
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    const auto log = [&order](int i) { return [&order, i] { order.push_back(i); }; };
    const DeviceGraphNode a = b.add_host_function(log(0), {});
    const DeviceGraphDependencies one = a;
    const DeviceGraphNode c = b.add_host_function(log(1), one);
    const DeviceGraphDependencies two{a, c};
    const DeviceGraphNode d = b.add_host_function(log(2), two);
    const DeviceGraphDependencies many{a, c, d, d, c, a};
    DeviceGraphDependencies copy = many;
    const DeviceGraphNode e = b.add_host_function(log(3), copy);
    b.add_host_function(log(4), DeviceGraphDependencies(std::vector<DeviceGraphNode>{e}));
  });
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(DeviceGraph, NodesOfAnotherBuilderAreRejected) {
  DeviceContext ctx;
  DeviceGraphNode leaked;
  DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) { leaked = b.add_empty({}); });
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) { b.add_empty(leaked); }), UserError,
      "node 0 of another graph builder", "only in the build callback");
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) { b.add_empty(DeviceGraphNode{}); }),
      UserError, "default-constructed DeviceGraphNode");
}

TEST(DeviceGraph, BadLaunchesAndCopiesAreRejectedWhileBuilding) {
  DeviceContext ctx;
  auto fn = ctx.compile_function([] {}, {.name = "k"});
  auto a = ctx.enqueue_create_buffer<float>(4);
  std::vector<float> b(5);
  KILN_EXPECT_THROW_MSG(DeviceGraph::create(ctx,
                                            [&](DeviceGraphBuilder& g) {
                                              g.add_function(fn, LaunchConfig{1, 0}, {});
                                            }),
                        UserError, "kernel 'k'", "block_dim (0, 1, 1)");
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(ctx, [&](DeviceGraphBuilder& g) { g.add_copy(a, b, {}); }), UserError,
      "destination holds 4 f32", "source holds 5");
}

TEST(DeviceGraph, ARefusedLaunchLeavesNoNodeBehind) {
  // add_function binds straight into a new node; a refused launch (caught inside the
  // build callback) must take that node away again, so later nodes keep their indices.
  DeviceContext ctx;
  int runs = 0;
  auto fn = ctx.compile_function([&runs] { ++runs; }, {.name = "count"});
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    const DeviceGraphNode first = b.add_function(fn, LaunchConfig{1, 1}, {});
    EXPECT_THROW(b.add_function(fn, LaunchConfig{0, 1}, first), UserError);
    EXPECT_EQ(b.size(), 1u);
    const DeviceGraphNode second = b.add_function(fn, LaunchConfig{2, 1}, first);
    EXPECT_EQ(second.index(), 1u);
  });
  EXPECT_EQ(graph.size(), 2u);
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(runs, 3);  // one block, then two
}

TEST(DeviceGraph, ChildGraphsMustShareTheContext) {
  DeviceContext ctx, other;
  auto child = DeviceGraph::create(other, [](DeviceGraphBuilder& b) { b.add_empty({}); });
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) { b.add_child_graph(child, {}); }),
      UserError, "another context");
}

TEST(DeviceGraph, CopiesShareOneGraphAndOutliveTheirReplays) {
  DeviceContext ctx(Device::cpu(), {.num_threads = 2});
  std::atomic<int> runs{0};
  {
    auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
      auto slow = b.add_host_function(
          [&runs] {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            runs.fetch_add(1);
          },
          {});
      b.add_host_function([&runs] { runs.fetch_add(1); }, slow);
    });
    DeviceGraph copy = graph;
    copy.replay();
    graph.replay();
  }  // every handle gone while the replays may still be running
  ctx.synchronize();
  EXPECT_EQ(runs.load(), 4);
}

TEST(DeviceGraph, ReplaysOfSeveralGraphsFromSeveralThreads) {
  for (int threads : kThreadCounts) {
    DeviceContext ctx(Device::cpu(), {.num_threads = threads});
    constexpr int kHosts = 3;
    auto counts = ctx.enqueue_create_buffer<std::int64_t>(kHosts);
    ctx.enqueue_memset(counts, std::int64_t{0});
    auto inc = ctx.compile_function([](std::int64_t* c) { *c += 1; });
    std::vector<std::thread> hosts;
    for (int h = 0; h < kHosts; ++h)
      hosts.emplace_back([&, h] {
        auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
          auto prev = b.add_function(inc, LaunchConfig{1, 1}, {}, counts.data() + h);
          for (int i = 0; i < 9; ++i)
            prev = b.add_function(inc, LaunchConfig{1, 1}, prev, counts.data() + h);
        });
        for (int r = 0; r < 50; ++r) graph.replay();
      });
    for (auto& t : hosts) t.join();
    for (std::int64_t v : read_back(ctx, counts)) EXPECT_EQ(v, 500) << threads << " threads";
  }
}

TEST(DeviceGraph, ToDotShowsNodesKernelsAndEdges) {
  DeviceContext ctx;
  auto fn = ctx.compile_function([] {}, {.name = "scale"});
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto k = b.add_function(fn, LaunchConfig{{4, 2}, 128}, {});
    auto e = b.add_empty({});
    b.add_host_function([] {}, {k, e});
  });
  const std::string dot = graph.to_dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("0: kernel 'scale'"), std::string::npos) << dot;
  EXPECT_NE(dot.find("'scale'\\ngrid (4, 2, 1) block (128, 1, 1)"), std::string::npos) << dot;
  EXPECT_NE(dot.find("1: empty"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n0 -> n2;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n2;"), std::string::npos) << dot;
}

}  // namespace
}  // namespace kiln
