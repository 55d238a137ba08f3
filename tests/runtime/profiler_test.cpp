#include "kiln/runtime/profiler.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "../error_matchers.hpp"
#include "backends.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

/// root -> 8 labelled middles -> join: a DAG that the scheduler spreads over participants.
DeviceGraph fan_graph(const DeviceContext& ctx, const testing::Backend& backend,
                      DeviceBuffer<std::int64_t>& data) {
  const testing::Kernel set(ctx, backend, [](std::int64_t* d, int i) { d[i] = i; },
                            {.name = "set"});
  return DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto root = set.add(b, LaunchConfig{1, 1}, {}, data.data(), 0);
    b.set_label(root, "root");
    std::vector<DeviceGraphNode> middle;
    for (int i = 1; i <= 8; ++i) {
      middle.push_back(set.add(b, LaunchConfig{1, 1}, root, data.data(), i));
      b.set_label(middle.back(), "middle " + std::to_string(i));
    }
    b.add_empty(middle);  // unlabelled: named after its kind
  });
}

class ProfilerThreads : public testing::OnEveryBackend {};
INSTANTIATE_TEST_SUITE_P(Backends, ProfilerThreads, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_name);

TEST_P(ProfilerThreads, RecordsEveryNodeOfEveryReplayInDependencyOrder) {
  auto data = ctx.enqueue_create_buffer<std::int64_t>(9);
  const DeviceGraph graph = fan_graph(ctx, backend(), data);
  auto profiler = std::make_shared<Profiler>();
  ctx.set_profiler(profiler);
  EXPECT_EQ(ctx.profiler(), profiler);
  for (int r = 0; r < 3; ++r) graph.replay();
  ctx.synchronize();
  ctx.set_profiler(nullptr);
  graph.replay();  // detached: not recorded
  ctx.synchronize();

  const std::vector<ProfileEvent> events = profiler->events();
  ASSERT_EQ(events.size(), 3 * graph.size());
  EXPECT_EQ(profiler->replays(), 3u);
  EXPECT_EQ(profiler->dropped(), 0u);
  std::map<std::pair<std::uint64_t, std::uint32_t>, ProfileEvent> by_node;
  for (const ProfileEvent& e : events) {
    EXPECT_LE(e.begin_ns, e.end_ns);
    EXPECT_LT(e.replay, 3u);
    EXPECT_TRUE(by_node.emplace(std::make_pair(e.replay, e.node), e).second) << "node twice";
  }
  for (std::uint64_t r = 0; r < 3; ++r) {
    const ProfileEvent& root = by_node.at({r, 0});
    EXPECT_STREQ(root.name.data(), "root");
    for (std::uint32_t i = 1; i <= 8; ++i) {
      const ProfileEvent& m = by_node.at({r, i});
      EXPECT_EQ(std::string(m.name.data()), "middle " + std::to_string(i));
      EXPECT_GE(m.begin_ns, root.end_ns) << "a middle node started before the root ended";
      EXPECT_LE(m.end_ns, by_node.at({r, 9}).begin_ns) << "the join started too early";
    }
    EXPECT_STREQ(by_node.at({r, 9}).name.data(), "empty");
    if (r > 0) {
      EXPECT_GE(root.begin_ns, by_node.at({r - 1, 9}).end_ns) << "replays overlap";
    }
  }
}

TEST_P(ProfilerThreads, ChromeTraceHasOneSlicePerEventAndNamedThreads) {
  auto data = ctx.enqueue_create_buffer<std::int64_t>(9);
  const DeviceGraph graph = fan_graph(ctx, backend(), data);
  auto profiler = std::make_shared<Profiler>();
  ctx.set_profiler(profiler);
  graph.replay();
  graph.replay();
  ctx.synchronize();
  const nlohmann::json trace = nlohmann::json::parse(profiler->chrome_trace());
  std::set<std::uint32_t> threads_with_slices, named_threads;
  std::size_t slices = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") {
      ++slices;
      threads_with_slices.insert(e.at("tid").get<std::uint32_t>());
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_LT(e.at("args").at("replay").get<int>(), 2);
    } else if (e.at("name") == "thread_name") {
      named_threads.insert(e.at("tid").get<std::uint32_t>());
      EXPECT_FALSE(e.at("args").at("name").get<std::string>().empty());
    }
  }
  EXPECT_EQ(slices, 2 * graph.size());
  EXPECT_EQ(threads_with_slices, named_threads);
  EXPECT_EQ(trace.at("otherData").at("replays"), 2);
}

TEST(Profiler, CountsWhatDoesNotFitAndClears) {
  DeviceContext ctx(Device::cpu(), {.num_threads = 1});
  auto data = ctx.enqueue_create_buffer<std::int64_t>(9);
  const DeviceGraph graph = fan_graph(ctx, testing::Backend{1}, data);
  auto profiler = std::make_shared<Profiler>(4);
  ctx.set_profiler(profiler);
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(profiler->events().size(), 4u);
  EXPECT_EQ(profiler->dropped(), graph.size() - 4);
  profiler->clear();
  EXPECT_TRUE(profiler->events().empty());
  EXPECT_EQ(profiler->dropped(), 0u);
  KILN_EXPECT_THROW_MSG(profiler->write_chrome_trace("/nonexistent-dir/t.json"), UserError,
                        "/nonexistent-dir/t.json", "cannot write");
}

TEST(Profiler, LabelsNameNodesInDotAndFailures) {
  DeviceContext ctx(Device::cpu(), {.num_threads = 1});
  auto boom = ctx.compile_function([] { throw std::runtime_error("boom"); }, {.name = "boom"});
  const DeviceGraph graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    b.set_label(b.add_function(boom, LaunchConfig{1, 1}, {}), "kiln.matmul at model.cpp:3");
    KILN_EXPECT_THROW_MSG(b.set_label(DeviceGraphNode{}, "x"), UserError, "set_label");
  });
  EXPECT_NE(graph.to_dot().find("kiln.matmul at model.cpp:3"), std::string::npos);
  graph.replay();
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError,
                        "kernel 'boom': kiln.matmul at model.cpp:3");
}

TEST(Profiler, CannotBeAttachedToARecordingContext) {
  DeviceContext ctx;
  auto profiler = std::make_shared<Profiler>();
  KILN_EXPECT_THROW_MSG(
      DeviceGraph::create(
          ctx, [&](DeviceGraphBuilder& b) { b.recording_context().set_profiler(profiler); }),
      UserError, "set_profiler", "real context");
}

}  // namespace
}  // namespace kiln
