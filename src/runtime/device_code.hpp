#pragma once
// Internal: what a backend's loaded device code shares with the backend-neutral layer:
// the layout of the kernel's parameters, so launches can be checked and packed before they
// reach a stream or a graph.

#include <cstddef>
#include <string>
#include <vector>

#include "kiln/runtime/device_function.hpp"

namespace kiln::detail {

struct DeviceCode {
  struct Param {
    std::size_t offset = 0;
    std::size_t size = 0;
  };
  std::vector<Param> params;   // in declaration order
  std::size_t args_bytes = 0;  // the packed parameter block: end of the last parameter

  virtual ~DeviceCode() = default;
};

/// What `compile_function` asks a backend to load.
struct DeviceCodeRequest {
  std::string text;      // CUDA C++ source, or a module image
  bool compile = false;  // text is source for NVRTC
  std::string entry;
  std::string name;  // for messages
};

}  // namespace kiln::detail
