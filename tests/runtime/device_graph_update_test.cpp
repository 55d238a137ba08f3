// DeviceGraph::update (new parameters, same topology) and recording contexts (eager
// enqueue calls captured as graph nodes).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <thread>
#include <vector>

#include "../error_matchers.hpp"
#include "backends.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::read_back;

void fill_value(float* out, int n, float value) {
  const auto i = static_cast<int>(block_idx().x * block_dim().x + thread_idx().x);
  if (i < n) out[i] = value;
}

class DeviceGraphUpdate : public testing::OnEveryBackend {
 protected:
  auto fill_kernel() const {
    return kernel([](float* out, int n, float value) { fill_value(out, n, value); },
                  {.name = "fill_value"});
  }
};
INSTANTIATE_TEST_SUITE_P(Backends, DeviceGraphUpdate, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_name);

TEST_P(DeviceGraphUpdate, NewBuffersScalarsAndGridSizesApplyToLaterReplaysOnly) {
  auto fill = fill_kernel();
  auto a = ctx.enqueue_create_buffer<float>(64);
  auto b = ctx.enqueue_create_buffer<float>(64);
  ctx.enqueue_memset(a, 0.0f);
  ctx.enqueue_memset(b, 0.0f);
  const auto build = [&](float* out, unsigned grid, float value) {
    return [&fill, out, grid, value](DeviceGraphBuilder& g) {
      auto first = fill.add(g, LaunchConfig{grid, 8}, {}, out, 64, value);
      g.add_empty(first);
    };
  };
  auto graph = DeviceGraph::create(ctx, build(a.data(), 2, 1.0f));
  graph.replay();  // enqueued before the update: runs with the old parameters
  graph.update(build(b.data(), 8, 2.0f));
  graph.replay();
  const auto got_a = read_back(ctx, a);
  const auto got_b = read_back(ctx, b);
  EXPECT_EQ(got_a[15], 1.0f);
  EXPECT_EQ(got_a[16], 0.0f) << "grid 2 x block 8 writes 16 elements";
  EXPECT_EQ(std::accumulate(got_b.begin(), got_b.end(), 0.0f), 128.0f);
}

TEST_P(DeviceGraphUpdate, CopyAndMemsetNodesTakeNewPointers) {
  std::vector<int> src1(16, 1), src2(16, 2), dst(16, 0);
  auto mid = ctx.enqueue_create_buffer<int>(16);
  const auto build = [&](std::vector<int>& src) {
    return [&](DeviceGraphBuilder& g) {
      auto clear = g.add_memset(mid, 0, {});
      auto in = g.add_copy(mid, src, clear);
      g.add_copy(dst, mid, in);
    };
  };
  auto graph = DeviceGraph::create(ctx, build(src1));
  graph.update(build(src2));
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(dst, src2);
}

TEST_P(DeviceGraphUpdate, ATopologyChangeIsAnErrorThatNamesTheDifferenceAndKeepsTheGraph) {
  auto fill = fill_kernel();
  auto other = kernel([](float* out, int, float v) { out[0] = v; });
  auto buf = ctx.enqueue_create_buffer<float>(4);
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& g) {
    auto n = fill.add(g, LaunchConfig{1, 4}, {}, buf.data(), 4, 3.0f);
    g.add_empty(n);
  });
  KILN_EXPECT_THROW_MSG(graph.update([&](DeviceGraphBuilder& g) {
    fill.add(g, LaunchConfig{1, 4}, {}, buf.data(), 4, 3.0f);
  }),
                        UserError, "the update has 1 nodes but the graph has 2");
  KILN_EXPECT_THROW_MSG(graph.update([&](DeviceGraphBuilder& g) {
    fill.add(g, LaunchConfig{1, 4}, {}, buf.data(), 4, 3.0f);
    g.add_empty({});
  }),
                        UserError, "node 1 depends on [] in the update but on [0] in the graph");
  KILN_EXPECT_THROW_MSG(graph.update([&](DeviceGraphBuilder& g) {
    auto n = fill.add(g, LaunchConfig{1, 4}, {}, buf.data(), 4, 3.0f);
    g.add_memset(buf, 0.0f, n);
  }),
                        UserError, "node 1 is a memset node in the update but a empty node");
  KILN_EXPECT_THROW_MSG(graph.update([&](DeviceGraphBuilder& g) {
    auto n = other.add(g, LaunchConfig{1, 4}, {}, buf.data(), 4, 3.0f);
    g.add_empty(n);
  }),
                        UserError, "only arguments and launch dimensions can change");
  graph.replay();
  EXPECT_EQ(read_back(ctx, buf), (std::vector<float>{3, 3, 3, 3}));
}

TEST_P(DeviceGraphUpdate, UpdatesRaceFreeWithReplaysFromAnotherThread) {
  KILN_CPU_ONLY("the fake CUDA driver serves one host thread");
  auto fill = fill_kernel();
  auto a = ctx.enqueue_create_buffer<float>(32);
  auto b = ctx.enqueue_create_buffer<float>(32);
  const auto build = [&](float* out, float value) {
    return [&fill, out, value](DeviceGraphBuilder& g) {
      auto root = g.add_empty({});
      auto left = fill.add(g, LaunchConfig{2, 8}, root, out, 16, value);
      auto right = fill.add(g, LaunchConfig{4, 8}, root, out, 32, value);
      g.add_empty({left, right});
    };
  };
  auto graph = DeviceGraph::create(ctx, build(a.data(), 1.0f));
  std::thread replayer([&] {
    for (int r = 0; r < 200; ++r) graph.replay();
  });
  for (int u = 0; u < 100; ++u) graph.update(build(u % 2 ? a.data() : b.data(), float(u)));
  replayer.join();
  graph.update(build(b.data(), 99.0f));
  graph.replay();
  EXPECT_EQ(read_back(ctx, b)[31], 99.0f);
}

TEST_P(DeviceGraphUpdate, RecordingContextCapturesEagerCodeAsAChain) {
  // Ordinary eager code, written against any DeviceContext.
  const auto eager = [this](const DeviceContext& c, DeviceBuffer<int>& buf, std::vector<int>& out,
                            int& host_calls) {
    auto inc = kernel([](int* p, int n) {
      for (int i = 0; i < n; ++i) p[i] += 1;
    });
    c.enqueue_memset(buf, 10);
    inc.enqueue(c, LaunchConfig{1, 1}, buf.data(), 8);
    inc.enqueue(c, LaunchConfig{1, 1}, buf.data(), 8);
    c.enqueue_copy(out, buf);
    c.enqueue_host_function([&host_calls] { ++host_calls; });
  };
  auto buf = ctx.enqueue_create_buffer<int>(8);
  std::vector<int> out(8, 0);
  int host_calls = 0;
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& g) {
    auto start = g.add_empty({});
    eager(g.recording_context(start), buf, out, host_calls);
    g.add_empty(g.last_node());
  });
  EXPECT_EQ(host_calls, 0) << "recording must not run anything";
  EXPECT_EQ(graph.size(), 7u);
  EXPECT_THAT(graph.to_dot(), HasSubstr("n4 -> n5"));
  graph.replay();
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(out, std::vector<int>(8, 12));
  EXPECT_EQ(host_calls, 2);
}

TEST_P(DeviceGraphUpdate, RecordingContextRejectsWhatCannotBeRecorded) {
  DeviceContext escaped;
  DeviceGraph::create(ctx, [&](DeviceGraphBuilder& g) {
    DeviceContext rec = g.recording_context();
    KILN_EXPECT_THROW_MSG(rec.synchronize(), UserError,
                          "synchronize cannot be recorded into a device graph");
    DeviceEvent e = rec.create_event();
    KILN_EXPECT_THROW_MSG(rec.enqueue_record(e), UserError, "enqueue_record cannot be recorded");
    KILN_EXPECT_THROW_MSG(e.is_complete(), UserError, "is_complete cannot be recorded");
    KILN_EXPECT_THROW_MSG(
        DeviceGraph::create(rec, [](DeviceGraphBuilder& inner) { inner.add_empty({}); }), UserError,
        "create graphs with the real context");
    auto buf = rec.enqueue_create_buffer<int>(4);  // memory is real, from the real context
    EXPECT_NE(buf.data(), nullptr);
    rec.enqueue_memset(buf, 1);
    escaped = rec;
  });
  std::vector<int> v(4);
  KILN_EXPECT_THROW_MSG(escaped.enqueue_copy(v, v), UserError,
                        "used after the build callback of its DeviceGraphBuilder returned");
}

TEST(DeviceGraphBuilderLastNode, ThrowsWhenTheGraphIsEmpty) {
  DeviceContext ctx(Device::cpu(), {.num_threads = 1});
  DeviceGraph::create(ctx, [](DeviceGraphBuilder& g) {
    KILN_EXPECT_THROW_MSG(g.last_node(), UserError, "no node has been added yet");
    g.add_empty({});
  });
}

}  // namespace
}  // namespace kiln
