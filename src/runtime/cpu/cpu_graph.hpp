#pragma once
// Internal: the CPU backend's instantiated device graph and its replay scheduler.

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/cpu_work.hpp"
#include "runtime/cpu/worker_pool.hpp"
#include "runtime/stream_backend.hpp"

namespace kiln::detail {

/// The first failure in one replay: the exception and which node threw it.
struct GraphFailure {
  std::exception_ptr error;
  std::string where;
};

/// A device graph instantiated for the CPU: nodes in creation order (a topological order,
/// since dependencies point backwards), successor lists in one flat array, and the
/// per-replay counters. Replay does no heap allocation and takes no lock:
///
/// - chains (no node with two successors or two predecessors) run node after node on the
///   draining thread, each node's blocks spread over the pool;
/// - other graphs are scheduled by dependency counting: every participant claims the next
///   slot of a ready list (one atomic increment), runs that node, and appends each
///   successor whose count drops to zero.
///
/// One replay at a time (replays come from one in-order stream).
class CpuGraphExec final : public GraphExec {
 public:
  explicit CpuGraphExec(std::vector<GraphNodeDesc> nodes);
  std::size_t size() const override { return nodes_.size(); }
  std::string to_dot() const override;

  /// Runs one replay on \p pool. After a node fails, later nodes are skipped; the first
  /// failure is returned.
  GraphFailure run(WorkerPool& pool) const;
  /// Runs every node in order on the calling thread (used for child graphs).
  void run_inline() const;

  /// What differs between this graph's topology (node count, kinds, dependencies, kernel
  /// functions, child graphs) and \p nodes; empty when they match.
  std::string topology_difference(const std::vector<GraphNodeDesc>& nodes) const;
  /// Replaces every node's parameters by those of \p nodes, whose topology must match.
  /// Must not run concurrently with a replay (the stream orders it between replays).
  void set_parameters(std::vector<GraphNodeDesc> nodes);

 private:
  struct Node {
    CpuWork work;
    GraphNodeKind kind = GraphNodeKind::empty;
    std::uint32_t first_successor = 0;
    std::uint32_t successor_count = 0;
    std::uint32_t in_degree = 0;
    std::shared_ptr<const FunctionInfo> kernel;  // kernel nodes: name
    LaunchConfig config;                         // kernel nodes
    std::shared_ptr<const GraphExec> child;      // child nodes: kept alive
    std::vector<std::uint32_t> dependencies;     // for to_dot and messages
  };

  static void set_parameters(Node& node, GraphNodeDesc& desc);
  std::string describe(std::uint32_t node) const;
  GraphFailure run_chain(WorkerPool& pool) const;
  GraphFailure run_dag(WorkerPool& pool) const;
  void run_dag_worker() const;

  std::vector<Node> nodes_;
  std::vector<std::uint32_t> successors_;
  std::vector<std::uint32_t> roots_;
  bool is_chain_ = true;

  // Per-replay state, reset at the start of each replay.
  mutable std::unique_ptr<std::atomic<std::uint32_t>[]> pending_;  // unmet dependencies
  mutable std::unique_ptr<std::atomic<std::uint32_t>[]> ready_;    // node + 1; 0 = not yet
  mutable std::atomic<std::uint32_t> ready_head_{0};
  mutable std::atomic<std::uint32_t> ready_tail_{0};
  mutable std::atomic<bool> failed_{false};
  mutable std::atomic<bool> failure_claimed_{false};
  mutable GraphFailure failure_;
};

}  // namespace kiln::detail
