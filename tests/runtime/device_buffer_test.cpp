#include "kiln/runtime/device_buffer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "../cpu_devices.hpp"
#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"

namespace kiln {
namespace {

TEST(DeviceBuffer, KnowsItsSizeTypeAndDevice) {
  const testing::CpuDevices devices(2);
  DeviceContext ctx(Device::cpu(1));
  auto b = ctx.enqueue_create_buffer<BFloat16>(100);
  EXPECT_EQ(b.size(), 100u);
  EXPECT_EQ(b.size_bytes(), 200u);
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_EQ(b.device(), Device::cpu(1));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u) << "buffers are 64-byte aligned";
}

TEST(DeviceBuffer, MovesOwnership) {
  DeviceContext ctx;
  auto a = ctx.enqueue_create_buffer<int>(8);
  int* p = a.data();
  DeviceBuffer<int> b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 8u);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  b = ctx.enqueue_create_buffer<int>(2);
  EXPECT_EQ(b.size(), 2u);
}

TEST(DeviceBuffer, EmptyBuffersAreValid) {
  DeviceContext ctx;
  auto e = ctx.enqueue_create_buffer<float>(0);
  EXPECT_TRUE(e.empty());
  ctx.enqueue_memset(e, 1.0f);
  ctx.enqueue_copy(e, ctx.enqueue_create_buffer<float>(0));
  ctx.synchronize();
}

TEST(DeviceBuffer, BuffersKeepTheirContextAlive) {
  DeviceBuffer<float> survivor;
  {
    DeviceContext ctx;
    survivor = ctx.enqueue_create_buffer<float>(4);
  }
  EXPECT_EQ(survivor.size(), 4u);
}

TEST(DeviceBuffer, ImpossibleSizesAreClearErrors) {
  DeviceContext ctx;
  KILN_EXPECT_THROW_MSG(ctx.enqueue_create_buffer<double>(std::size_t{1} << 62), UserError,
                        "too large");
  KILN_EXPECT_THROW_MSG(ctx.enqueue_create_buffer<float>(std::size_t{1} << 50), DeviceError,
                        "out of memory on cpu:0");
}

TEST(HostBuffer, IsDirectlyAccessible) {
  DeviceContext ctx;
  auto h = ctx.enqueue_create_host_buffer<std::int32_t>(4);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::int32_t>(i * i);
  int sum = 0;
  for (int v : h) sum += v;
  EXPECT_EQ(sum, 0 + 1 + 4 + 9);
  EXPECT_EQ(h.span().size(), 4u);
  EXPECT_EQ(h.dtype(), DType::i32);
}

}  // namespace
}  // namespace kiln
