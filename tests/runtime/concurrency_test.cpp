// Many host threads launching small kernels, onto separate contexts and onto one shared
// context. Run under TSan in CI.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "../cpu_devices.hpp"
#include "kiln/runtime/device_context.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using testing::kThreadCounts;
using testing::read_back;

class Concurrency : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Threads, Concurrency, ::testing::ValuesIn(kThreadCounts));

TEST_P(Concurrency, ManySmallLaunchesFromSeveralHostThreadsOnSeparateContexts) {
  constexpr int kHostThreads = 4;
  constexpr int kLaunches = 300;
  const testing::CpuDevices devices(kHostThreads);
  std::vector<std::int64_t> results(kHostThreads, -1);
  std::vector<std::thread> hosts;
  for (int h = 0; h < kHostThreads; ++h) {
    hosts.emplace_back([&, h] {
      DeviceContext ctx(Device::cpu(h), {.num_threads = GetParam()});
      auto acc = ctx.enqueue_create_buffer<std::int64_t>(4);
      ctx.enqueue_memset(acc, std::int64_t{0});
      auto add = ctx.compile_function([](std::int64_t* a, std::int64_t v) {
        a[block_idx().x] += v;  // one block per slot: no two threads share a slot
      });
      for (int i = 0; i < kLaunches; ++i) {
        ctx.enqueue_function(add, LaunchConfig{4, 1}, acc.data(), std::int64_t{i});
        if (i % 97 == 0) ctx.synchronize();
      }
      const auto v = read_back(ctx, acc);
      results[h] = v[0] + v[1] + v[2] + v[3];
    });
  }
  for (auto& t : hosts) t.join();
  const std::int64_t expected = 4 * (std::int64_t{kLaunches} * (kLaunches - 1) / 2);
  for (int h = 0; h < kHostThreads; ++h) EXPECT_EQ(results[h], expected) << "host thread " << h;
}

TEST_P(Concurrency, SeveralHostThreadsShareOneContext) {
  DeviceContext ctx(Device::cpu(), {.num_threads = GetParam()});
  std::atomic<int> runs{0};
  auto count = ctx.compile_function([&runs] { runs.fetch_add(1, std::memory_order_relaxed); });
  std::vector<std::thread> hosts;
  for (int h = 0; h < 3; ++h)
    hosts.emplace_back([&] {
      for (int i = 0; i < 200; ++i) ctx.enqueue_function(count, LaunchConfig{2, 2});
      ctx.synchronize();
    });
  for (auto& t : hosts) t.join();
  ctx.synchronize();
  EXPECT_EQ(runs.load(), 3 * 200 * 4);
}

TEST_P(Concurrency, ContextsComeAndGoWhileWorkIsQueued) {
  for (int round = 0; round < 20; ++round) {
    DeviceContext ctx(Device::cpu(), {.num_threads = GetParam()});
    auto b = ctx.enqueue_create_buffer<float>(1 << 12);
    auto touch = ctx.compile_function([](float* v) { v[block_idx().x] = 1.0f; });
    ctx.enqueue_function(touch, LaunchConfig{1 << 12, 1}, b.data());
    // No synchronize: destroying the last handles must finish the queued work safely.
  }
}

}  // namespace
}  // namespace kiln
