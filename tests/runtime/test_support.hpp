#pragma once
// Shared helpers for runtime tests.

#include <gtest/gtest.h>

#include <vector>

#include "kiln/runtime/device_context.hpp"

namespace kiln::testing {

/// The CPU thread counts of what runs on the CPU alone (many host threads: the emulated
/// GPU serves one); every other runtime test runs on all of backends.hpp's backends.
inline const std::vector<int> kThreadCounts = {1, 2, 3};

/// Copies a device buffer into a std::vector (and synchronizes).
template <Element T>
std::vector<T> read_back(const DeviceContext& ctx, const DeviceBuffer<T>& buffer) {
  std::vector<T> out(buffer.size());
  ctx.enqueue_copy(out, buffer);
  ctx.synchronize();
  return out;
}

}  // namespace kiln::testing
