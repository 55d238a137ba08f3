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

#include "kiln/runtime/profiler.hpp"
#include "runtime/cuda/cuda_stream.hpp"
#include "runtime/graph_topology.hpp"

namespace kiln::detail {

class CudaGraphExec final : public GraphExec {
 public:
  /// \p setter: the kernel that copies a conditional node's int32 into its handle
  /// (`kiln_set_conditional`), needed when \p nodes hold conditional nodes.
  /// \p instantiate false: only the nodes' parameters (a conditional node's body, whose
  /// nodes its parent adds to the node's body graph).
  /// \throws DeviceError when the driver refuses a node or the instantiation; UserError
  /// for a conditional body holding what CUDA forbids there (host functions, CUDA work).
  CudaGraphExec(std::shared_ptr<const CudaStreamState> state, GraphNodeDescs nodes,
                std::shared_ptr<const CudaCode> setter = nullptr, bool instantiate = true);
  ~CudaGraphExec() override;
  CudaGraphExec(const CudaGraphExec&) = delete;
  CudaGraphExec& operator=(const CudaGraphExec&) = delete;

  std::size_t size() const override { return topology_.size(); }
  std::string to_dot() const override;
  std::string last_update_fallback() const override;

  /// Enqueues one replay on the stream (cuGraphLaunch).
  void launch() const;
  /// One replay that records each node's start and end into \p profiler: a twin of the
  /// graph with an event before and after every node (built on first use), launched, and
  /// waited for (profiled replays do not overlap).
  void launch_profiled(Profiler& profiler) const;
  /// Gives the graph \p nodes' parameters (their topology must match: checked, UserError
  /// naming the difference): cuGraphExecUpdate, else a new instantiation, whose reason
  /// last_update_fallback() then tells. Replays enqueued before keep the old parameters.
  void update(GraphNodeDescs nodes);
  /// The graph's current template (what a parent graph nests as a child).
  CUgraph graph() const;
  /// What differs between this graph's topology, conditional bodies included, and
  /// \p nodes; empty when they match.
  std::string topology_difference(const GraphNodeDescs& nodes) const;

 private:
  struct HostSlot {
    HostCallback fn;
    const CudaStreamState* state;
    std::string where;
  };
  /// What each kiln node becomes, kept so that the graph can be built again with events
  /// (profiling): driver parameters, and the child or captured graph the node nests.
  struct NodeParams {
    GraphNodeKind kind = GraphNodeKind::empty;
    CUDA_KERNEL_NODE_PARAMS kernel{};  // kernel (its `extra` set as it is added)
    std::vector<unsigned char> args;   // kernel: the packed parameters
    CUDA_MEMCPY3D copy{};
    std::vector<CUDA_MEMSET_NODE_PARAMS> memsets;
    CUDA_HOST_NODE_PARAMS host{};
    CUgraph graph = nullptr;  // child: a copy of its template; cuda_work: what was captured
    // conditional: the int32 read at replay, IF or WHILE, and the body (a template).
    CUdeviceptr condition = 0;
    bool loop = false;
    std::shared_ptr<CudaGraphExec> body;
  };
  /// The parameters of \p descs (host callbacks moved into new slots, CUDA work captured).
  std::vector<NodeParams> materialize(GraphNodeDescs& descs);
  /// Destroys the graphs \p params own and empties it.
  void release(std::vector<NodeParams>& params) const;
  /// A CUDA graph of \p params; with \p events, event i*2 recorded before node i and
  /// i*2+1 after it.
  CUgraph emit(const std::vector<NodeParams>& params, const std::vector<CUevent>* events) const;
  /// Adds \p params' nodes to \p graph (edges from this graph's topology); returns the
  /// CUDA nodes of those no other node depends on.
  std::vector<CUgraphNode> add_nodes(CUgraph graph, const std::vector<NodeParams>& params,
                                     const std::vector<CUevent>* events) const;
  /// Destroys the profiling twin and its events.
  void drop_profiled() const;
  /// What \p work enqueues on a stream in capture, as a graph; \p what names the node.
  CUgraph capture(const CudaWork& work, const std::string& what) const;
  static void run_host_slot(void* slot);
  /// Adds to \p graph, after \p deps, a launch of the setter: handle <- (*condition != 0).
  CUgraphNode add_setter(CUgraph graph, const std::vector<CUgraphNode>& deps,
                         CUgraphConditionalHandle handle, CUdeviceptr condition,
                         const std::string& what) const;
  /// Adds conditional node \p p to \p graph after \p deps: the setter, then the IF or
  /// WHILE node whose body nests p.body (and, in a WHILE, the setter again after it).
  CUgraphNode add_conditional(CUgraph graph, const std::vector<CUgraphNode>& deps,
                              const NodeParams& p, const std::string& what) const;

  std::shared_ptr<const CudaStreamState> state_;
  std::shared_ptr<const CudaCode> setter_;  // when the graph has conditional nodes
  GraphTopology topology_;                  // launch configs guarded by mutex_
  mutable std::mutex mutex_;                // orders launches and updates
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
  std::vector<NodeParams> params_;
  mutable CUgraphExec profiled_exec_ = nullptr;  // the twin with events, once profiled
  mutable std::vector<CUevent> events_;          // 2 per node, then the replay's origin
  // Host callbacks of every version of the graph: a replay enqueued before an update
  // still calls the old ones, so they live as long as the graph.
  std::deque<HostSlot> host_slots_;
  std::string fallback_;
};

}  // namespace kiln::detail
