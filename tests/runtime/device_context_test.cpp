#include "kiln/runtime/device_context.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include "../error_matchers.hpp"
#include "backends.hpp"
#include "kiln/core/error.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using testing::read_back;

class DeviceContextThreads : public testing::OnEveryBackend {
 protected:
  // Each thread writes its coordinates into its own slot; every slot must be written
  // exactly once with the right values.
  void check_indexing(Dim3 grid, Dim3 block) const;
};

INSTANTIATE_TEST_SUITE_P(Backends, DeviceContextThreads,
                         ::testing::ValuesIn(testing::all_backends()), testing::backend_name);

TEST_P(DeviceContextThreads, ReportsItsDeviceAndThreads) {
  EXPECT_EQ(ctx.device(), gpu() ? Device::cuda(0) : Device::cpu());
  if (!gpu()) {
    EXPECT_EQ(ctx.num_threads(), threads());
  }
}

TEST_P(DeviceContextThreads, RunsWorkInEnqueueOrder) {
  // x = 3x + k is not commutative across steps, so any reordering changes the result.
  auto x = ctx.enqueue_create_buffer<std::int64_t>(1);
  ctx.enqueue_memset(x, std::int64_t{1});
  auto step = kernel([](std::int64_t* v, std::int64_t k) { *v = *v * 3 + k; });
  std::int64_t expected = 1;
  for (std::int64_t k = 0; k < 30; ++k) {
    step.enqueue(ctx, LaunchConfig{1, 1}, x.data(), k);
    expected = expected * 3 + k;
  }
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) ctx.enqueue_host_function([&order, i] { order.push_back(i); });
  EXPECT_EQ(read_back(ctx, x)[0], expected);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

void DeviceContextThreads::check_indexing(Dim3 grid, Dim3 block) const {
  const std::uint64_t total = grid.count() * block.count();
  auto out = ctx.enqueue_create_buffer<std::int64_t>(total * 6);
  ctx.enqueue_memset(out, std::int64_t{-1});
  auto fn = kernel([](std::int64_t* o) {
    const Dim3 b = block_idx(), t = thread_idx(), bd = block_dim(), gd = grid_dim();
    const std::uint64_t block_linear = b.x + gd.x * (b.y + std::uint64_t{gd.y} * b.z);
    const std::uint64_t thread_linear = t.x + bd.x * (t.y + std::uint64_t{bd.y} * t.z);
    std::int64_t* slot = o + 6 * (block_linear * bd.count() + thread_linear);
    slot[0] = b.x, slot[1] = b.y, slot[2] = b.z, slot[3] = t.x, slot[4] = t.y, slot[5] = t.z;
  });
  fn.enqueue(ctx, LaunchConfig{grid, block}, out.data());
  const auto v = read_back(ctx, out);
  std::uint64_t i = 0;
  for (std::uint32_t bz = 0; bz < grid.z; ++bz)
    for (std::uint32_t by = 0; by < grid.y; ++by)
      for (std::uint32_t bx = 0; bx < grid.x; ++bx)
        for (std::uint32_t tz = 0; tz < block.z; ++tz)
          for (std::uint32_t ty = 0; ty < block.y; ++ty)
            for (std::uint32_t tx = 0; tx < block.x; ++tx, ++i) {
              const std::vector<std::int64_t> want = {bx, by, bz, tx, ty, tz};
              const std::vector<std::int64_t> got(v.begin() + 6 * i, v.begin() + 6 * i + 6);
              ASSERT_EQ(got, want) << "slot " << i;
            }
}

TEST_P(DeviceContextThreads, IndexesGridsAndBlocksIn1D) { check_indexing({37}, {5}); }
TEST_P(DeviceContextThreads, IndexesGridsAndBlocksIn2D) { check_indexing({3, 4}, {2, 5}); }
TEST_P(DeviceContextThreads, IndexesGridsAndBlocksIn3D) { check_indexing({2, 3, 4}, {3, 1, 2}); }

TEST_P(DeviceContextThreads, PerBlockKernelsRunOncePerBlock) {
  KILN_CPU_ONLY("the per_block form and 4096-thread blocks are the CPU's");
  constexpr std::size_t n = 100'000;
  constexpr std::uint32_t per_block = 4096;
  const std::uint32_t blocks = (n + per_block - 1) / per_block;
  auto x = ctx.enqueue_create_buffer<float>(n);
  std::atomic<int> calls{0};
  auto fill = kernel(
      [&calls](float* v, std::size_t count) {
        calls.fetch_add(1, std::memory_order_relaxed);
        EXPECT_EQ(thread_idx(), (Dim3{0, 0, 0}));
        const std::size_t begin = std::size_t{block_idx().x} * block_dim().x;
        const std::size_t end = std::min(count, begin + block_dim().x);
        for (std::size_t i = begin; i < end; ++i) v[i] = static_cast<float>(i);
      },
      {.name = "iota", .form = KernelForm::per_block});
  EXPECT_EQ(fill.name(), "iota");
  fill.enqueue(ctx, LaunchConfig{blocks, per_block}, x.data(), n);
  const auto v = read_back(ctx, x);
  EXPECT_EQ(calls.load(), static_cast<int>(blocks));
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], static_cast<float>(i)) << i;
}

TEST_P(DeviceContextThreads, DynamicSharedMemoryIsOneBufferPerBlock) {
  KILN_CPU_ONLY("a CUDA kernel's shared memory is its own (CudaBackend tests it)");
  // Each block's threads write their slot of the block's shared memory; its last thread
  // sums them (threads of a per_thread block run in order on one worker). A buffer shared
  // between blocks, or one of the wrong size, gives other sums.
  constexpr std::uint32_t blocks = 64, threads = 32;
  auto sums = ctx.enqueue_create_buffer<std::int64_t>(blocks);
  auto fn = kernel([](std::int64_t* out) {
    auto* slots = dynamic_shared_memory<std::int64_t>();
    const std::uint32_t t = thread_idx().x, b = block_idx().x;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(slots) % 64, 0u);
    slots[t] = std::int64_t{b} * 1000 + t;
    if (t + 1 == block_dim().x) {
      std::int64_t sum = 0;
      for (std::uint32_t i = 0; i < block_dim().x; ++i) sum += slots[i];
      out[b] = sum;
    }
  });
  fn.enqueue(ctx, LaunchConfig{blocks, threads, threads * sizeof(std::int64_t)}, sums.data());
  const auto v = read_back(ctx, sums);
  for (std::uint32_t b = 0; b < blocks; ++b)
    ASSERT_EQ(v[b], std::int64_t{b} * 1000 * threads + threads * (threads - 1) / 2) << b;

  // None asked for: a null pointer.
  auto none = ctx.enqueue_create_buffer<int>(1);
  auto check = kernel([](int* out) { *out = dynamic_shared_memory<int>() == nullptr ? 1 : 0; },
                      {.name = "none", .form = KernelForm::per_block});
  check.enqueue(ctx, LaunchConfig{1, 1}, none.data());
  EXPECT_EQ(read_back(ctx, none)[0], 1);
}

TEST_P(DeviceContextThreads, CopiesBetweenHostAndDeviceAndBack) {
  constexpr std::size_t n = 3'000'000;  // several copy blocks
  std::vector<float> src(n);
  std::iota(src.begin(), src.end(), 0.0f);
  auto host = ctx.enqueue_create_host_buffer<float>(n);
  auto a = ctx.enqueue_create_buffer<float>(n);
  auto b = ctx.enqueue_create_buffer<float>(n);
  ctx.enqueue_copy(a, src);   // user memory -> device
  ctx.enqueue_copy(b, a);     // device -> device
  ctx.enqueue_copy(host, b);  // device -> host buffer
  ctx.synchronize();
  EXPECT_TRUE(std::equal(src.begin(), src.end(), host.begin()));
}

TEST_P(DeviceContextThreads, MemsetFillsEveryElementOfEachType) {
  auto f = ctx.enqueue_create_buffer<float>(1'000'003);
  auto h = ctx.enqueue_create_buffer<Half>(17);
  auto i8 = ctx.enqueue_create_buffer<std::int8_t>(33);
  auto d = ctx.enqueue_create_buffer<double>(5);
  ctx.enqueue_memset(f, 2.5f);
  ctx.enqueue_memset(h, Half(-1.5f));
  ctx.enqueue_memset(i8, std::int8_t{-7});
  ctx.enqueue_memset(d, 0.125);
  for (float v : read_back(ctx, f)) ASSERT_EQ(v, 2.5f);
  for (Half v : read_back(ctx, h)) ASSERT_EQ(static_cast<float>(v), -1.5f);
  for (std::int8_t v : read_back(ctx, i8)) ASSERT_EQ(v, -7);
  for (double v : read_back(ctx, d)) ASSERT_EQ(v, 0.125);
}

TEST(DeviceContext, EnqueueReturnsBeforeTheWorkRuns) {
  DeviceContext ctx;
  std::atomic<bool> released{false};
  std::atomic<bool> ran{false};
  auto wait_for_release = ctx.compile_function([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!released.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ran.store(released.load());
  });
  ctx.enqueue_function(wait_for_release, LaunchConfig{1, 1});
  released.store(true);  // only reachable if enqueue did not wait for the kernel
  ctx.synchronize();
  EXPECT_TRUE(ran.load());
}

void my_kernel(int*) {}

TEST(DeviceContext, StaticFunctionsAreNamedAfterTheFunction) {
  DeviceContext ctx;
  EXPECT_EQ(ctx.compile_function<&my_kernel>().name(), "kiln::my_kernel");
  EXPECT_EQ(ctx.compile_function([] {}, {.name = "named"}).name(), "named");
}

TEST(DeviceContext, ArgumentsAreCopiedAtEnqueue) {
  DeviceContext ctx;
  auto out = ctx.enqueue_create_buffer<int>(1);
  auto store = ctx.compile_function([](int* o, int v) { *o = v; });
  int value = 5;
  ctx.enqueue_function(store, LaunchConfig{1, 1}, out.data(), value);
  value = 9;  // must not affect the enqueued launch
  EXPECT_EQ(read_back(ctx, out)[0], 5);
}

TEST(DeviceContext, BuffersFreedBeforeTheirLastUseAreFreedInStreamOrder) {
  DeviceContext ctx;
  auto fill = ctx.compile_function([](float* v, std::size_t n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (std::size_t i = 0; i < n; ++i) v[i] = 1.0f;
  });
  {
    auto scratch = ctx.enqueue_create_buffer<float>(1 << 16);
    ctx.enqueue_function(fill, LaunchConfig{1, 1}, scratch.data(), scratch.size());
  }  // scratch dropped while the kernel may still be queued; ASan checks the write is safe
  ctx.synchronize();
}

TEST(DeviceContext, RejectsZeroLaunchDimensions) {
  DeviceContext ctx;
  auto fn = ctx.compile_function([] {}, {.name = "noop"});
  KILN_EXPECT_THROW_MSG(ctx.enqueue_function(fn, LaunchConfig{0, 32}), UserError, "'noop'",
                        "grid_dim (0, 1, 1)", ">= 1");
  KILN_EXPECT_THROW_MSG(ctx.enqueue_function(fn, LaunchConfig{4, {8, 0}}), UserError,
                        "block_dim (8, 0, 1)");
  KILN_EXPECT_THROW_MSG((void)(LaunchConfig{-1, 4}), UserError, "component -1 is out of range");
}

TEST(DeviceContext, RejectsCopiesOfDifferentSizes) {
  DeviceContext ctx;
  auto a = ctx.enqueue_create_buffer<float>(10);
  std::vector<float> b(12);
  KILN_EXPECT_THROW_MSG(ctx.enqueue_copy(a, b), UserError, "destination holds 10 f32",
                        "source holds 12");
}

TEST(DeviceContext, RejectsUnavailableDevicesAndBadThreadCounts) {
  // cuda:999 exists nowhere; without a GPU (or a CUDA build) cuda:0 does not either.
  KILN_EXPECT_THROW_MSG(DeviceContext(Device::cuda(999)), UserError, "cuda:999 is not available");
  try {
    DeviceContext gpu(Device::cuda(0));
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0 is not available"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("use a CPU device"), std::string::npos);
  }
  KILN_EXPECT_THROW_MSG(DeviceContext(Device::cpu(), {.num_threads = -1}), UserError,
                        "num_threads = -1");
}

TEST(DeviceContext, ThreadCountComesFromTheEnvironment) {
  ASSERT_EQ(setenv("KILN_NUM_THREADS", "3", 1), 0);
  EXPECT_EQ(DeviceContext().num_threads(), 3);
  ASSERT_EQ(setenv("KILN_NUM_THREADS", "many", 1), 0);
  KILN_EXPECT_THROW_MSG(DeviceContext(), UserError, "KILN_NUM_THREADS='many'");
  unsetenv("KILN_NUM_THREADS");
  EXPECT_GE(DeviceContext().num_threads(), 1);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(DeviceContextPinning, PinnedThreadsRunOnlyOnTheirCores) {
  // Every core this process may use, the last one named for all three threads: each block
  // not run by this (the test's) thread must run on that core.
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  int core = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) core = c;
  DeviceContext ctx(Device::cpu(), {.num_threads = 3, .pin_to_cores = {core}});
  constexpr int kLaunches = 4;
  std::vector<std::pair<std::thread::id, int>> seen(64 * kLaunches);
  auto fn = ctx.compile_function([](std::pair<std::thread::id, int>* out) {
    const auto i = kiln::block_idx().x;
    out[i] = {std::this_thread::get_id(), sched_getcpu()};
  });
  for (int r = 0; r < kLaunches; ++r) {
    ctx.enqueue_function(fn, LaunchConfig{64, 1}, seen.data() + 64 * r);
    // Not in synchronize (where this thread would run queued work): the context's own
    // threads run the launch.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ctx.synchronize();
  int checked = 0;
  for (const auto& [thread, cpu] : seen) {
    if (thread == std::this_thread::get_id()) continue;
    EXPECT_EQ(cpu, core);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no block ran on the context's own threads";
}

TEST(DeviceContextPinning, CoresTheProcessCannotUseAreRefused) {
  KILN_EXPECT_THROW_MSG(DeviceContext(Device::cpu(), {.num_threads = 1, .pin_to_cores = {-1}}),
                        UserError, "pin_to_cores names core -1", "its cores are [");
  KILN_EXPECT_THROW_MSG(
      DeviceContext(Device::cpu(), {.num_threads = 1, .pin_to_cores = {CPU_SETSIZE + 5}}),
      UserError, "which this process may not run on");
}

}  // namespace
}  // namespace kiln
