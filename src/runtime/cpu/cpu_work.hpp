#pragma once
// Internal: how the CPU backend turns each kind of operation into block-parallel work.
// Used for stream commands and graph nodes alike, so both run the same code.

#include <cstddef>
#include <cstdint>

#include "kiln/runtime/device_function.hpp"

namespace kiln::detail {

/// `blocks` blocks of `body`: the unit the CPU backend runs.
struct CpuWork {
  BlockRunner body;
  std::uint64_t blocks = 1;
};

/// memmove of \p bytes, split into 1 MiB blocks.
CpuWork copy_work(void* dst, const void* src, std::size_t bytes);
/// \p count copies of a \p pattern_size-byte pattern (at most 16 bytes), in 1 MiB blocks.
CpuWork fill_work(void* dst, std::size_t count, const void* pattern, std::size_t pattern_size);

}  // namespace kiln::detail
