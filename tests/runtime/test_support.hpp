#pragma once
// Shared helpers for runtime tests.

#include <gtest/gtest.h>

#include <vector>

#include "kiln/runtime/device_context.hpp"

namespace kiln::testing {

/// Thread counts every runtime behaviour is checked at.
inline const std::vector<int> kThreadCounts = {1, 2, 3};

/// A fixture whose `ctx` runs on the test's parameter as its thread count; instantiate
/// with `::testing::ValuesIn(kThreadCounts)`.
class ContextPerThreadCount : public ::testing::TestWithParam<int> {
 protected:
  DeviceContext ctx{Device::cpu(), {.num_threads = GetParam()}};
};

/// Copies a device buffer into a std::vector (and synchronizes).
template <Element T>
std::vector<T> read_back(const DeviceContext& ctx, const DeviceBuffer<T>& buffer) {
  std::vector<T> out(buffer.size());
  ctx.enqueue_copy(out, buffer);
  ctx.synchronize();
  return out;
}

}  // namespace kiln::testing
