// The hot path of graph replay allocates nothing: every operator new in this program is
// counted (here; compiler/call_allocation_test.cpp reads the count too), and replays of
// warmed-up graphs (chain, fan-out/fan-in, random DAG, child graph) must leave the count
// unchanged. A separate program, so the replaced global allocator touches no other test.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include "../allocation_counter.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/runtime/device_graph.hpp"
#include "kiln/runtime/device_graph_cache.hpp"

std::atomic<std::size_t> g_allocations{0};

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void* operator new(std::size_t size, std::align_val_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace kiln {
namespace {

void tiny(int* counter) { ++*counter; }

class ReplayAllocation : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Threads, ReplayAllocation, ::testing::Values(1, 2, 3));

TEST_P(ReplayAllocation, ReplayAndSynchronizeAllocateNothing) {
  DeviceContext ctx(Device::cpu(), {.num_threads = GetParam()});
  auto fn = ctx.compile_function<&tiny>();
  std::vector<int> counters(4000, 0);
  auto child = DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {
    b.add_function(fn, LaunchConfig{1, 1}, {}, &counters[3999]);
  });
  std::vector<DeviceGraph> graphs;
  graphs.push_back(DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {  // chain
    auto prev = b.add_function(fn, LaunchConfig{1, 1}, {}, &counters[0]);
    for (int i = 1; i < 1000; ++i)
      prev = b.add_function(fn, LaunchConfig{1, 1}, prev, &counters[i]);
  }));
  graphs.push_back(DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {  // fan-out/fan-in
    auto root = b.add_empty({});
    std::vector<DeviceGraphNode> mid;
    for (int i = 1000; i < 2000; ++i)
      mid.push_back(b.add_function(fn, LaunchConfig{1, 1}, root, &counters[i]));
    b.add_child_graph(child, b.add_empty(mid));
  }));
  graphs.push_back(DeviceGraph::create(ctx, [&](DeviceGraphBuilder& b) {  // random DAG
    std::mt19937 rng(7);
    std::vector<DeviceGraphNode> nodes;
    for (int i = 2000; i < 3000; ++i) {
      std::vector<DeviceGraphNode> deps;
      for (std::size_t k = 0; k < 3 && !nodes.empty(); ++k)
        deps.push_back(nodes[rng() % nodes.size()]);
      nodes.push_back(b.add_function(fn, LaunchConfig{1, 1}, deps, &counters[i]));
    }
  }));
  for (const auto& g : graphs) g.replay();  // warm up
  ctx.synchronize();

  const std::size_t before = g_allocations.load();
  for (int r = 0; r < 50; ++r)
    for (const auto& g : graphs) g.replay();
  ctx.synchronize();
  const std::size_t allocations = g_allocations.load() - before;

  EXPECT_EQ(allocations, 0u) << "replay allocated " << allocations << " times";
  EXPECT_EQ(counters[0], 51);
  EXPECT_EQ(counters[1500], 51);
  EXPECT_EQ(counters[2999], 51);
  EXPECT_EQ(counters[3999], 51);
}

enum class Variant { small, large };

TEST(CacheHitAllocation, AHitAllocatesNothing) {
  // The acceptance key (the build callable and two integers), and one with every kind of
  // built-in input: a hit must neither allocate nor format.
  DeviceContext ctx(Device::cpu(), {.num_threads = 1});
  auto fn = ctx.compile_function<&tiny>();
  int counter = 0;
  DeviceGraphCache cache;
  const auto build = [&](DeviceGraphBuilder& b) {
    b.add_function(fn, LaunchConfig{1, 1}, {}, &counter);
  };
  auto buffer = ctx.enqueue_create_buffer<float>(16);
  const Shape shape{4, "batch"};
  const auto lookup = [&](int i) {
    auto a = DeviceGraph::create(ctx, build, cache, i, 64);
    auto b = DeviceGraph::create(ctx, build, cache, std::make_tuple(i, 2.5f, true), Variant::large,
                                 shape, Dim3{4, 2}, buffer, DType::f32, std::string_view("rows"));
    return a.size() + b.size();
  };
  for (int i = 0; i < 4; ++i) lookup(i);  // the misses: build and store
  const std::size_t hits_before = cache.hits();

  const std::size_t before = g_allocations.load();
  std::size_t nodes = 0;
  for (int r = 0; r < 1000; ++r) nodes += lookup(r % 4);
  const std::size_t allocations = g_allocations.load() - before;

  EXPECT_EQ(allocations, 0u) << "1000 rounds of cache hits allocated " << allocations << " times";
  EXPECT_EQ(cache.hits() - hits_before, 2000u);
  EXPECT_EQ(cache.size(), 8u);
  EXPECT_EQ(nodes, 2000u);
}

}  // namespace
}  // namespace kiln
