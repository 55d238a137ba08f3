#include "kiln/runtime/device_event.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "../error_matchers.hpp"
#include "backends.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using testing::read_back;

class DeviceEvents : public testing::OnEveryBackend {};
INSTANTIATE_TEST_SUITE_P(Backends, DeviceEvents, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_name);

TEST_P(DeviceEvents, OrdersWorkAcrossContexts) {
  // Two contexts of one device: two CPU queues, or two streams of one GPU.
  const DeviceContext& producer = ctx;
  const DeviceContext consumer = another_context();
  auto value = producer.enqueue_create_buffer<int>(1);
  auto seen = consumer.enqueue_create_buffer<int>(1);
  producer.enqueue_memset(value, 0);
  producer.synchronize();
  auto slow_store = kernel([](int* v) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    *v = 42;
  });
  auto load = kernel([](const int* from, int* to) { *to = *from; });
  auto ready = producer.create_event();
  slow_store.enqueue(producer, LaunchConfig{1, 1}, value.data());
  producer.enqueue_record(ready);
  consumer.enqueue_wait(ready);
  load.enqueue(consumer, LaunchConfig{1, 1}, value.data(), seen.data());
  EXPECT_EQ(read_back(consumer, seen)[0], 42);
  producer.synchronize();
}

TEST_P(DeviceEvents, MeasuresElapsedTime) {
  auto start = ctx.create_event();
  auto stop = ctx.create_event();
  ctx.enqueue_record(start);
  ctx.enqueue_host_function([] { std::this_thread::sleep_for(std::chrono::milliseconds(15)); });
  ctx.enqueue_record(stop);
  stop.synchronize();
  EXPECT_TRUE(start.is_complete());
  EXPECT_GE(DeviceEvent::elapsed_ms(start, stop), 14.0);
}

TEST_P(DeviceEvents, UnrecordedEventsAreCompleteAndWaitingOnThemIsANoOp) {
  auto never = ctx.create_event();
  EXPECT_TRUE(never.is_complete());
  ctx.enqueue_wait(never);
  ctx.synchronize();
  KILN_EXPECT_THROW_MSG(DeviceEvent::elapsed_ms(never, never), UserError, "never recorded",
                        "enqueue_record");
}

TEST_P(DeviceEvents, ElapsedTimeOfAnIncompleteEventIsAnError) {
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
