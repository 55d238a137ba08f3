// Device-graph replay cost per node, side by side with enqueueing the same kernels one by
// one on the context, as Google Benchmark counters (for tracking across commits; the
// comparison with oneTBB and OpenMP is bench_graph_peers).
//
//   bench_device_graph [--benchmark_format=json]
//
// Shapes: a chain of N empty kernels and a fan-out/fan-in 1 -> N -> 1. Counter
// `ns_per_node` is the cost of one node in one replay (replay + synchronize, divided by N).

#include <benchmark/benchmark.h>

#include <vector>

#include "kiln/kiln.hpp"

namespace {

enum Shape { kChain = 0, kFan = 1 };

kiln::DeviceGraph build(const kiln::DeviceContext& ctx, const kiln::DeviceFunction<void (*)()>& fn,
                        int shape, int n) {
  return kiln::DeviceGraph::create(ctx, [&](kiln::DeviceGraphBuilder& b) {
    if (shape == kChain) {
      auto prev = b.add_function(fn, kiln::LaunchConfig{1, 1}, {});
      for (int i = 1; i < n; ++i) prev = b.add_function(fn, kiln::LaunchConfig{1, 1}, prev);
    } else {
      auto root = b.add_empty({});
      std::vector<kiln::DeviceGraphNode> mid;
      for (int i = 0; i < n - 2; ++i)
        mid.push_back(b.add_function(fn, kiln::LaunchConfig{1, 1}, root));
      b.add_empty(mid);
    }
  });
}

void empty_kernel() {}

void BM_GraphReplay(benchmark::State& state) {
  const int shape = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  kiln::DeviceContext ctx(kiln::Device::cpu(), {.num_threads = threads});
  auto fn = ctx.compile_function(&empty_kernel, {.name = "empty"});
  auto graph = build(ctx, fn, shape, n);
  for (auto _ : state) {
    graph.replay();
    ctx.synchronize();
  }
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["threads"] = threads;
}

void BM_EnqueueOneByOne(benchmark::State& state) {
  const int n = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  kiln::DeviceContext ctx(kiln::Device::cpu(), {.num_threads = threads});
  auto fn = ctx.compile_function(&empty_kernel, {.name = "empty"});
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) ctx.enqueue_function(fn, kiln::LaunchConfig{1, 1});
    ctx.synchronize();
  }
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["threads"] = threads;
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "nodes", "threads"});
  for (int threads : {1, 2})
    for (int n : {1000, 10000})
      for (int shape : {kChain, kFan}) b->Args({shape, n, threads});
}
BENCHMARK(BM_GraphReplay)->Apply(shapes);
BENCHMARK(BM_EnqueueOneByOne)->Apply([](benchmark::internal::Benchmark* b) {
  b->ArgNames({"shape", "nodes", "threads"});
  for (int threads : {1, 2})
    for (int n : {1000, 10000}) b->Args({kChain, n, threads});
});

}  // namespace

BENCHMARK_MAIN();
