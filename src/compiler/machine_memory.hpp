#pragma once
// Internal: how much memory this machine has, to refuse an allocation that Linux would
// overcommit and then end the process for when it is touched.

#include <cstddef>

#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

namespace kiln::compiler {

/// This machine's memory and swap, in bytes (0 where unknown).
inline std::size_t memory_and_swap() {
#if defined(__linux__)
  struct sysinfo info {};
  if (sysinfo(&info) == 0)
    return (static_cast<std::size_t>(info.totalram) + info.totalswap) * info.mem_unit;
#endif
  return 0;
}

}  // namespace kiln::compiler
