#pragma once
// Internal: NCCL, loaded with dlopen on first use (it ships with the CUDA toolkit here),
// and the communicator that runs kiln's collectives through it.

#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime/collectives.hpp"

namespace kiln::detail {

struct Nccl {
#define KILN_NCCL_ENTRY(name) decltype(&::name) name = nullptr;
// clang-format off
#define KILN_NCCL_ENTRIES(X) \
  X(ncclCommInitAll) X(ncclCommDestroy) X(ncclGetErrorString) X(ncclGroupStart) X(ncclGroupEnd) \
  X(ncclAllReduce) X(ncclAllGather) X(ncclReduceScatter) X(ncclBroadcast) X(ncclReduce) \
  X(ncclSend) X(ncclRecv)
  // clang-format on
  KILN_NCCL_ENTRIES(KILN_NCCL_ENTRY)
#undef KILN_NCCL_ENTRY

  /// NCCL from the toolkit (KILN_NCCL_LIBRARY first, if set).
  /// \throws UserError saying why it cannot be loaded.
  static const Nccl& instance();
  /// Throws DeviceError naming \p what and NCCL's words unless \p r succeeded.
  void check(ncclResult_t r, const std::string& what) const;
};

/// NCCL ranks over \p devices through \p nccl; \p contexts (one per rank, on its device)
/// run `Communicator::run`'s synchronous calls.
/// \throws UserError for devices that are not distinct CUDA devices.
std::shared_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices,
                                                     std::vector<DeviceContext> contexts,
                                                     const Nccl& nccl);

}  // namespace kiln::detail
