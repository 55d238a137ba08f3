#pragma once
// A host emulation of the CUDA driver entry points kiln uses, so that the CUDA backend's
// logic (argument packing, memsets, events, error reporting, the mapping of device graphs
// onto CUDA graphs and their updates) is tested on machines without a GPU. Device memory
// is host memory. Stream work is deferred, as on a GPU: each stream queues it and runs it
// in order only when something needs it done (a synchronisation, a synchronous copy or
// free, an event synchronisation or query, another stream's wait on an event recorded
// here), so a missing wait or synchronisation shows as stale data instead of passing by
// luck; frees on a stream happen in stream order; events complete when their work has run.
// Kernels are host functions registered by name, their parameters taken as CUDA takes them
// (`kernelParams` or `extra`); graphs are recorded node by node (tests inspect them) and,
// when launched, run in an order their edges allow but creation order would not give (of
// the ready nodes, the last created first), so that a missing edge shows. What it cannot show is
// that a real GPU agrees: tests/cuda/cuda_gpu_test.cpp runs the same backend on one
// (scripts/gpu-check.sh).

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cublas.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/cuda/nccl.hpp"

namespace kiln::testing {

/// A kernel the fake runs: \p run gets the packed parameter block and the launch shape.
struct FakeKernel {
  std::vector<std::size_t> param_sizes;  // laid out at natural alignment
  std::function<CUresult(const unsigned char* args, const unsigned grid[3],
                         const unsigned block[3])>
      run;
  int static_shared = 0;       // bytes of __shared__ it declares
  int max_dynamic_shared = 0;  // set with cuFuncSetAttribute (beyond the default limit)
};

/// A recorded CUDA graph node.
struct FakeNode {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::vector<const FakeNode*> dependencies;
  CUfunction function = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;        // dynamic shared memory
  std::vector<unsigned char> args;  // copied, as the driver copies kernel parameters
  CUDA_MEMCPY3D copy{};
  CUDA_MEMSET_NODE_PARAMS memset{};
  CUDA_HOST_NODE_PARAMS host{};
  std::shared_ptr<struct FakeGraph> child;  // child graph nodes; a conditional's body
  CUevent event = nullptr;                  // event record nodes
  // Conditional nodes: the handle, IF or WHILE, and the body handed to the caller (in
  // the node, as the driver's array lives as long as the node).
  CUgraphConditionalHandle condition = 0;
  CUgraphConditionalNodeType condition_type = CU_GRAPH_COND_TYPE_IF;
  CUgraph body_out = nullptr;
};

struct FakeGraph {
  std::vector<std::unique_ptr<FakeNode>> nodes;
  /// Index of \p node in this graph, or -1.
  int index_of(const FakeNode* node) const;
  /// A deep copy (dependencies pointing into the copy).
  std::shared_ptr<FakeGraph> clone() const;
};

/// The fake's state: one per process (the driver table holds plain function pointers).
struct FakeCuda {
  static FakeCuda& get();
  /// The driver table, every entry a fake.
  const detail::CudaDriver& driver() const;
  /// A cuBLAS whose GEMMs are host functions on the handle's stream (so that stream
  /// capture records them), computing what cuBLAS computes (column-major).
  const detail::Cublas& blas() const;
  /// An NCCL for the ranks of one thread: calls between ncclGroupStart and ncclGroupEnd
  /// (or one call, for a single rank) are matched across ranks by position and computed
  /// (f32; sums, gathers, broadcasts, point-to-point) in a host function on the first
  /// rank's stream. Calls that leave a rank out fail with ncclInvalidUsage: one thread
  /// cannot wait for another here.
  const detail::Nccl& nccl() const;
  /// Forgets everything but the registered kernels; the counters restart.
  void reset();

  int device_count = 1;
  int compute_capability = 90;
  bool refuse_updates = false;           // cuGraphExecUpdate fails (parameters changed)
  CUresult sticky_error = CUDA_SUCCESS;  // returned by the next cuStreamSynchronize

  std::map<std::string, FakeKernel> kernels;  // "kiln_set_conditional" is always there
  /// Conditional handles' values (cuGraphConditionalHandleCreate; set by the kernel
  /// kiln_set_conditional, as cudaGraphSetConditional sets them on a GPU), by handle.
  std::map<CUgraphConditionalHandle, unsigned> conditions;
  int conditional_nodes = 0;  // cuGraphAddNode calls that made one
  // What happened.
  int live_allocations = 0, live_streams = 0, live_contexts = 0, live_graph_execs = 0;
  int kernel_launches = 0, graph_launches = 0, graph_updates = 0, instantiations = 0;
  int captures = 0;                               // cuStreamBeginCapture calls
  int gemms = 0;                                  // GEMMs run
  std::vector<std::shared_ptr<void>> gemm_calls;  // what their host functions read
  int nccl_group_depth = 0;
  std::vector<std::shared_ptr<void>> nccl_pending;  // calls of the open group
  int nccl_launches = 0;                            // matched groups computed
  std::vector<std::shared_ptr<void>> nccl_calls;    // what their host functions read
  unsigned last_shared_bytes = 0;  // dynamic shared memory of the last kernel launched
  static constexpr int kSharedDefault = 48 << 10, kSharedOptIn = 227 << 10;
  CUcontext current_context = nullptr;  // this process's, not per thread: tests use one
  int context_switches = 0;             // cuCtxSetCurrent calls
  std::vector<std::string> loaded_images;
  std::shared_ptr<FakeGraph> last_instantiated;  // the template of the last instantiation
};

}  // namespace kiln::testing
