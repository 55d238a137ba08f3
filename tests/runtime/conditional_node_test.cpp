// Conditional nodes (IF and WHILE): whether and how often a body runs is decided by a
// device-side int32 at each replay, inside the replay.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_graph.hpp"

namespace kiln {
namespace {

void set_flag(std::int32_t* flag, const std::int32_t* value) { *flag = *value > 0 ? 1 : 0; }
void add_to(std::int64_t* sum, std::int64_t v) { *sum += v; }
// One step of a countdown loop: count one, step the counter down, say whether to go on.
void step(std::int32_t* left, std::int64_t* steps, std::int32_t* go_on) {
  ++*steps;
  --*left;
  *go_on = *left > 0 ? 1 : 0;
}

class ConditionalNodes : public ::testing::TestWithParam<int> {
 protected:
  DeviceContext ctx{Device::cpu(), {.num_threads = GetParam()}};
  DeviceFunction<detail::StaticKernel<& set_flag>> flag_fn = ctx.compile_function<&set_flag>();
  DeviceFunction<detail::StaticKernel<& add_to>> add_fn = ctx.compile_function<&add_to>();
  DeviceFunction<detail::StaticKernel<& step>> step_fn = ctx.compile_function<&step>();
};
INSTANTIATE_TEST_SUITE_P(Threads, ConditionalNodes, ::testing::Values(1, 2, 3));

TEST_P(ConditionalNodes, AnIfNodeRunsItsBodyOnlyWhenTheConditionIsSetAtReplay) {
  std::int32_t input = 0, flag = 0;
  std::int64_t sum = 0, after = 0;
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto decide = b.add_function(flag_fn, LaunchConfig{1, 1}, {}, &flag, &input);
    auto branch = b.add_if(
        &flag,
        [&](DeviceGraphBuilder& body) {
          auto one = body.add_function(add_fn, LaunchConfig{1, 1}, {}, &sum, std::int64_t{1});
          body.add_function(add_fn, LaunchConfig{1, 1}, one, &sum, std::int64_t{10});
        },
        decide);
    b.add_function(add_fn, LaunchConfig{1, 1}, branch, &after, std::int64_t{1});
  });
  std::int64_t expected = 0;
  for (int r = 0; r < 20; ++r) {
    input = r % 3 == 0 ? 5 : -1;  // the host changes what the first node reads
    graph.replay();
    ctx.synchronize();
    expected += r % 3 == 0 ? 11 : 0;
    ASSERT_EQ(sum, expected) << "replay " << r;
  }
  EXPECT_EQ(after, 20);  // what follows the IF node runs either way
}

TEST_P(ConditionalNodes, AWhileNodeLoopsAsManyTimesAsTheDeviceSays) {
  std::int32_t start = 0, left = 0, go_on = 0;
  std::int64_t steps = 0;
  const auto copy_start = [&] { left = start; };  // the loop's trip count, read at replay
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto init = b.add_host_function(copy_start, {});
    auto decide = b.add_function(flag_fn, LaunchConfig{1, 1}, init, &go_on, &left);
    b.add_while(
        &go_on,
        [&](DeviceGraphBuilder& body) {
          body.add_function(step_fn, LaunchConfig{1, 1}, {}, &left, &steps, &go_on);
        },
        decide);
  });
  for (std::int32_t n : {3, 0, 7, 1, 0, 12}) {
    start = n;
    steps = 0;
    graph.replay();
    ctx.synchronize();
    EXPECT_EQ(steps, n) << "a loop of " << n;
    EXPECT_EQ(left, n > 0 ? 0 : n);
  }
}

TEST_P(ConditionalNodes, NestInEachOtherAndInChildGraphs) {
  // A WHILE over rows whose body holds an IF (odd rows only), the whole as a child graph
  // of another graph, next to independent work.
  std::int32_t left = 0, go_on = 0, odd = 0;
  std::int64_t steps = 0, odd_sum = 0, other = 0;
  const auto parity = [&] { odd = left % 2; };
  auto child = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    auto decide = b.add_function(flag_fn, LaunchConfig{1, 1}, {}, &go_on, &left);
    b.add_while(
        &go_on,
        [&](DeviceGraphBuilder& body) {
          auto p = body.add_host_function(parity, {});
          auto maybe = body.add_if(
              &odd,
              [&](DeviceGraphBuilder& inner) {
                inner.add_function(add_fn, LaunchConfig{1, 1}, {}, &odd_sum, std::int64_t{1});
              },
              p);
          body.add_function(step_fn, LaunchConfig{1, 1}, maybe, &left, &steps, &go_on);
        },
        decide);
  });
  auto graph = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    b.add_child_graph(child, {});
    DeviceGraphDependencies previous;  // a chain beside the child, which may run in parallel
    for (int i = 0; i < 8; ++i)
      previous = b.add_function(add_fn, LaunchConfig{1, 1}, previous, &other, std::int64_t{1});
  });
  for (std::int32_t n : {5, 4, 0}) {
    left = n;
    steps = odd_sum = 0;
    graph.replay();
    ctx.synchronize();
    EXPECT_EQ(steps, n);
    EXPECT_EQ(odd_sum, (n + 1) / 2) << "rows " << n << ", " << n << "-1, ... with odd counts";
  }
  EXPECT_EQ(other, 24);
}

TEST_P(ConditionalNodes, AnUpdateChangesTheConditionAndTheBodysParameters) {
  std::int32_t flag_a = 1, flag_b = 0;
  std::int64_t sum = 0;
  const auto build = [&](const std::int32_t* flag, std::int64_t amount) {
    return [&, flag, amount](DeviceGraphBuilder& b) {
      b.add_if(flag,
               [&](DeviceGraphBuilder& body) {
                 body.add_function(add_fn, LaunchConfig{1, 1}, {}, &sum, amount);
               },
               {});
    };
  };
  auto graph = DeviceGraph::create(ctx, build(&flag_a, 1));
  graph.replay();
  graph.update(build(&flag_a, 100));  // the body's argument
  graph.replay();
  graph.update(build(&flag_b, 1000));  // the condition: flag_b is 0
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(sum, 101);

  // A body of another shape, or a WHILE for an IF, is a different topology.
  const auto two_nodes = [&](DeviceGraphBuilder& b) {
    b.add_if(&flag_a,
             [&](DeviceGraphBuilder& body) {
               body.add_function(add_fn, LaunchConfig{1, 1}, {}, &sum, std::int64_t{1});
               body.add_function(add_fn, LaunchConfig{1, 1}, {}, &sum, std::int64_t{1});
             },
             {});
  };
  KILN_EXPECT_THROW_MSG(graph.update(two_nodes), UserError,
                        "in the body of conditional node 0: the update has 2 nodes");
  const auto a_loop = [&](DeviceGraphBuilder& b) {
    b.add_while(&flag_a,
                [&](DeviceGraphBuilder& body) {
                  body.add_function(add_fn, LaunchConfig{1, 1}, {}, &sum, std::int64_t{1});
                },
                {});
  };
  KILN_EXPECT_THROW_MSG(graph.update(a_loop), UserError,
                        "node 0 is a while node in the update but an if node");
  graph.replay();  // unchanged by the refused updates: flag_b, 1000
  ctx.synchronize();
  EXPECT_EQ(sum, 101);
  flag_b = 1;
  graph.replay();
  ctx.synchronize();
  EXPECT_EQ(sum, 1101);
}

TEST(ConditionalNodeErrors, ANullConditionIsRefused) {
  DeviceContext ctx(Device::cpu(), {.num_threads = 1});
  const auto build = [](DeviceGraphBuilder& b) {
    b.add_while(nullptr, [](DeviceGraphBuilder&) {}, {});
  };
  KILN_EXPECT_THROW_MSG(DeviceGraph::create(ctx, build), UserError,
                        "add_while: the condition is a null pointer");
}

}  // namespace
}  // namespace kiln
