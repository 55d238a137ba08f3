// Runtime micro-benchmarks (issue: foundation).
//
//   bench_runtime [--benchmark_format=json] [--benchmark_repetitions=5]
//
// 1. EnqueueEmptyKernel: cost per launch of an empty kernel (enqueue + run), synchronizing
//    every 256 launches; EnqueueSynchronize: one launch + synchronize round trip.
// 2. Triad a[i] = b[i] + s * c[i] over 64 M floats: each iteration runs a plain loop and
//    then the same loop as a kiln per-block kernel, side by side; the counters report both
//    bandwidths and kiln's fraction of the plain loop's (`kiln_vs_loop`). The plain loop is
//    single-threaded; compare it with the threads:1 row (threads:2 is shown for context).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "kiln/kiln.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void BM_EnqueueEmptyKernel(benchmark::State& state) {
  kiln::DeviceContext ctx(kiln::Device::cpu(), {.num_threads = static_cast<int>(state.range(0))});
  auto empty = ctx.compile_function([] {}, {.name = "empty"});
  std::size_t i = 0;
  for (auto _ : state) {
    ctx.enqueue_function(empty, kiln::LaunchConfig{1, 1});
    if (++i % 256 == 0) ctx.synchronize();
  }
  ctx.synchronize();
  state.counters["threads"] = static_cast<double>(state.range(0));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EnqueueEmptyKernel)->Arg(1)->Arg(2)->ArgName("threads");

void BM_EnqueueSynchronize(benchmark::State& state) {
  kiln::DeviceContext ctx(kiln::Device::cpu(), {.num_threads = static_cast<int>(state.range(0))});
  auto empty = ctx.compile_function([] {}, {.name = "empty"});
  for (auto _ : state) {
    ctx.enqueue_function(empty, kiln::LaunchConfig{1, 1});
    ctx.synchronize();
  }
  state.counters["threads"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_EnqueueSynchronize)->Arg(1)->Arg(2)->ArgName("threads");

// Baseline for the launch numbers above: calling the same empty lambda through a
// type-erased std::function-like indirection, with no queue.
void BM_IndirectCallBaseline(benchmark::State& state) {
  kiln::detail::BlockRunner f = [](std::uint64_t, std::uint64_t) {};
  for (auto _ : state) {
    f(0, 1);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_IndirectCallBaseline);

constexpr std::size_t kTriadElements = std::size_t{64} << 20;  // 64 M floats
constexpr std::uint32_t kTriadBlock = 1 << 16;                 // elements per kiln block

void triad_range(float* a, const float* b, const float* c, float s, std::size_t begin,
                 std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  kiln::DeviceContext ctx(kiln::Device::cpu(), {.num_threads = threads});
  const std::size_t n = kTriadElements;
  auto a = ctx.enqueue_create_buffer<float>(n);
  auto b = ctx.enqueue_create_buffer<float>(n);
  auto c = ctx.enqueue_create_buffer<float>(n);
  ctx.enqueue_memset(a, 0.0f);
  ctx.enqueue_memset(b, 1.0f);
  ctx.enqueue_memset(c, 2.0f);
  ctx.synchronize();
  auto triad = ctx.compile_function(
      [](float* pa, const float* pb, const float* pc, float s, std::size_t count) {
        const std::size_t begin = std::size_t{kiln::block_idx().x} * kiln::block_dim().x;
        triad_range(pa, pb, pc, s, begin, std::min(count, begin + kiln::block_dim().x));
      },
      {.name = "triad", .form = kiln::KernelForm::per_block});
  const auto grid = static_cast<std::uint32_t>((n + kTriadBlock - 1) / kTriadBlock);

  double loop_seconds = 0, kiln_seconds = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    triad_range(a.data(), b.data(), c.data(), 3.0f, 0, n);
    benchmark::ClobberMemory();
    auto t1 = Clock::now();
    ctx.enqueue_function(triad, kiln::LaunchConfig{grid, kTriadBlock}, a.data(), b.data(), c.data(),
                         3.0f, n);
    ctx.synchronize();
    auto t2 = Clock::now();
    loop_seconds += std::chrono::duration<double>(t1 - t0).count();
    kiln_seconds += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(std::chrono::duration<double>(t2 - t1).count());
  }
  const double bytes =
      3.0 * sizeof(float) * static_cast<double>(n) * static_cast<double>(state.iterations());
  state.counters["threads"] = threads;
  state.counters["loop_GBps"] = bytes / loop_seconds / 1e9;
  state.counters["kiln_GBps"] = bytes / kiln_seconds / 1e9;
  state.counters["kiln_vs_loop"] = loop_seconds / kiln_seconds;
}
BENCHMARK(BM_Triad)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
