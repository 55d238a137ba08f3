#pragma once
// Internal: a device graph instantiated as a CUDA graph: every kiln node becomes CUDA
// graph nodes with the same dependencies (kernel, memcpy, memset, host, empty and
// child-graph nodes), instantiated once; a replay is one cuGraphLaunch.

#include <cuda.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_stream.hpp"
#include "runtime/graph_topology.hpp"

namespace kiln::detail {

class CudaGraphExec final : public GraphExec {
 public:
  /// \throws DeviceError when the driver refuses a node or the instantiation.
  CudaGraphExec(std::shared_ptr<const CudaStreamState> state, std::vector<GraphNodeDesc> nodes);
  ~CudaGraphExec() override;
  CudaGraphExec(const CudaGraphExec&) = delete;
  CudaGraphExec& operator=(const CudaGraphExec&) = delete;

  std::size_t size() const override { return topology_.size(); }
  std::string to_dot() const override;
  std::string last_update_fallback() const override;

  /// Enqueues one replay on the stream (cuGraphLaunch).
  void launch() const;
  /// Gives the graph \p nodes' parameters (their topology must match: checked, UserError
  /// naming the difference): cuGraphExecUpdate, else a new instantiation, whose reason
  /// last_update_fallback() then tells. Replays enqueued before keep the old parameters.
  void update(std::vector<GraphNodeDesc> nodes);
  /// The graph's current template (what a parent graph nests as a child).
  CUgraph graph() const;

 private:
  struct HostSlot {
    HostCallback fn;
    const CudaStreamState* state;
    std::string where;
  };
  /// A CUDA graph of \p descs (host callbacks moved into new slots).
  CUgraph build(std::vector<GraphNodeDesc>& descs);
  /// What \p work enqueues on a stream in capture, as a graph; \p what names the node.
  CUgraph capture(const CudaWork& work, const std::string& what) const;
  static void run_host_slot(void* slot);

  std::shared_ptr<const CudaStreamState> state_;
  GraphTopology topology_;    // launch configs guarded by mutex_
  mutable std::mutex mutex_;  // orders launches and updates
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  // Host callbacks of every version of the graph: a replay enqueued before an update
  // still calls the old ones, so they live as long as the graph.
  std::deque<HostSlot> host_slots_;
  std::string fallback_;
};

}  // namespace kiln::detail
