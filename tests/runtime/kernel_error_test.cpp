// An exception inside a kernel or host function surfaces from synchronize(), naming the
// kernel; later work is skipped and counted; the context keeps working. On a GPU a kernel
// fault surfaces from synchronize() too, in the driver's words, and ends the context (CUDA
// errors are sticky): what follows a failure there is CUDA's, so those tests are the CPU's.

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "../error_matchers.hpp"
#include "backends.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

using testing::read_back;

class KernelErrors : public testing::OnEveryBackend {};
INSTANTIATE_TEST_SUITE_P(Backends, KernelErrors, ::testing::ValuesIn(testing::all_backends()),
                         testing::backend_name);

TEST_P(KernelErrors, SurfacesAtSynchronizeWithTheKernelName) {
  auto bad = kernel(
      [] {
        if (block_idx().x == 13) throw std::runtime_error("block 13 is unlucky");
      },
      {.name = "unlucky"});
  bad.enqueue(ctx, LaunchConfig{64, 1});  // spread over the workers
  if (gpu()) {
    KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError, "work on cuda:0", "failed",
                          "unspecified launch failure", "restart the process");
    return;
  }
  try {
    ctx.synchronize();
    FAIL() << "synchronize() should rethrow the kernel's exception";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kernel 'unlucky' failed on cpu:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("block 13 is unlucky"), std::string::npos) << msg;
    EXPECT_NE(msg.find("remains usable"), std::string::npos) << msg;
    // The original exception is nested inside.
    EXPECT_THROW(std::rethrow_if_nested(e), std::runtime_error);
  }
}

TEST_P(KernelErrors, LaterWorkIsSkippedAndCountedThenTheContextWorksAgain) {
  KILN_CPU_ONLY("a faulting CUDA kernel ends its context");
  auto out = ctx.enqueue_create_buffer<int>(1);
  ctx.enqueue_memset(out, 0);
  auto bad = kernel([] { throw std::logic_error("boom"); }, {.name = "bad"});
  auto store = kernel([](int* o, int v) { *o = v; });
  bad.enqueue(ctx, LaunchConfig{1, 1});
  store.enqueue(ctx, LaunchConfig{1, 1}, out.data(), 1);
  store.enqueue(ctx, LaunchConfig{1, 1}, out.data(), 2);
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError, "kernel 'bad'", "boom",
                        "2 later commands were skipped");
  EXPECT_NO_THROW(ctx.synchronize());    // the error was reported once
  EXPECT_EQ(read_back(ctx, out)[0], 0);  // the skipped stores did not run
  store.enqueue(ctx, LaunchConfig{1, 1}, out.data(), 3);
  EXPECT_EQ(read_back(ctx, out)[0], 3);
}

TEST_P(KernelErrors, FirstErrorWins) {
  KILN_CPU_ONLY("a faulting CUDA kernel ends its context");
  auto first = kernel([] { throw std::runtime_error("first"); }, {.name = "a"});
  first.enqueue(ctx, LaunchConfig{1, 1});
  ctx.enqueue_host_function([] { throw std::runtime_error("second"); });
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError, "kernel 'a'", "first");
}

TEST_P(KernelErrors, HostFunctionErrorsSurfaceToo) {
  ctx.enqueue_host_function([] { throw UserError("bad callback"); });
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError, "host function", "bad callback");
}

TEST_P(KernelErrors, EventsRecordedAfterAFailureStillComplete) {
  KILN_CPU_ONLY("a faulting CUDA kernel ends its context, its events with it");
  auto bad = kernel([] { throw std::runtime_error("x"); });
  auto event = ctx.create_event();
  bad.enqueue(ctx, LaunchConfig{1, 1});
  ctx.enqueue_record(event);
  event.synchronize();  // must not hang: records always run
  EXPECT_TRUE(event.is_complete());
  EXPECT_THROW(ctx.synchronize(), DeviceError);
}

}  // namespace
}  // namespace kiln
