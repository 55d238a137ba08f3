#pragma once
// Test helper: exposes N virtual CPU devices (cpu:0 ... cpu:N-1) while it lives.

#include "kiln/runtime/device_context.hpp"

namespace kiln::testing {

class CpuDevices {
 public:
  explicit CpuDevices(int count) : previous_(cpu_device_count()) { set_cpu_device_count(count); }
  ~CpuDevices() { set_cpu_device_count(previous_); }
  CpuDevices(const CpuDevices&) = delete;
  CpuDevices& operator=(const CpuDevices&) = delete;

 private:
  int previous_;
};

}  // namespace kiln::testing
