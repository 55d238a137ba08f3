#include "kiln/runtime/device_event.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using testing::read_back;

TEST(DeviceEvent, OrdersWorkAcrossContexts) {
  DeviceContext producer;
  DeviceContext consumer;
  auto value = producer.enqueue_create_buffer<int>(1);
  auto seen = consumer.enqueue_create_buffer<int>(1);
  producer.enqueue_memset(value, 0);
  producer.synchronize();
  auto slow_store = producer.compile_function([](int* v) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    *v = 42;
  });
  auto load = consumer.compile_function([](const int* from, int* to) { *to = *from; });
  auto ready = producer.create_event();
  producer.enqueue_function(slow_store, LaunchConfig{1, 1}, value.data());
  producer.enqueue_record(ready);
  consumer.enqueue_wait(ready);
  consumer.enqueue_function(load, LaunchConfig{1, 1}, value.data(), seen.data());
  EXPECT_EQ(read_back(consumer, seen)[0], 42);
  producer.synchronize();
}

TEST(DeviceEvent, MeasuresElapsedTime) {
  DeviceContext ctx;
  auto start = ctx.create_event();
  auto stop = ctx.create_event();
  ctx.enqueue_record(start);
  ctx.enqueue_host_function([] { std::this_thread::sleep_for(std::chrono::milliseconds(15)); });
  ctx.enqueue_record(stop);
  stop.synchronize();
  EXPECT_TRUE(start.is_complete());
  EXPECT_GE(DeviceEvent::elapsed_ms(start, stop), 14.0);
}

TEST(DeviceEvent, UnrecordedEventsAreCompleteAndWaitingOnThemIsANoOp) {
  DeviceContext ctx;
  auto never = ctx.create_event();
  EXPECT_TRUE(never.is_complete());
  ctx.enqueue_wait(never);
  ctx.synchronize();
  KILN_EXPECT_THROW_MSG(DeviceEvent::elapsed_ms(never, never), UserError, "never recorded",
                        "enqueue_record");
}

TEST(DeviceEvent, ElapsedTimeOfAnIncompleteEventIsAnError) {
  DeviceContext ctx;
  auto start = ctx.create_event();
  auto stop = ctx.create_event();
  ctx.enqueue_record(start);
  std::atomic<bool> release{false};
  ctx.enqueue_host_function([&release] {
    while (!release.load()) std::this_thread::yield();
  });
  ctx.enqueue_record(stop);
  start.synchronize();
  KILN_EXPECT_THROW_MSG(DeviceEvent::elapsed_ms(start, stop), UserError,
                        "end event has not "
                        "completed");
  release.store(true);
  ctx.synchronize();
  EXPECT_GE(DeviceEvent::elapsed_ms(start, stop), 0.0);
}

}  // namespace
}  // namespace kiln
