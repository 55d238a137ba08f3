#pragma once
// Internal: the CPU backend's instantiated device graph and its replay scheduler.

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/runtime/profiler.hpp"
#include "runtime/cpu/cpu_work.hpp"
#include "runtime/cpu/participant_chooser.hpp"
#include "runtime/cpu/worker_pool.hpp"
#include "runtime/graph_topology.hpp"
#include "runtime/stream_backend.hpp"

namespace kiln::detail {

/// The first failure in one replay: the exception and which node threw it.
struct GraphFailure {
  std::exception_ptr error;
  std::string where;
};

/// A device graph instantiated for the CPU: nodes in creation order (a topological order,
/// since dependencies point backwards) and a static schedule computed once. Replay does
/// no heap allocation and takes no lock:
///
/// - chains (no node with two successors or two predecessors) run node after node on the
///   draining thread, each node's blocks spread over the pool;
/// - other graphs run on a schedule made at instantiation by list scheduling: each node
///   goes to the participant where it can start first, counting a penalty for waiting on
///   another participant. At replay every participant runs its own list in order; a
///   dependency on the same participant costs nothing, one on another participant is an
///   acquire load of that participant's progress counter (cached, so it is re-read only
///   while the dependency is still running). A participant that waits on a list nobody
///   has started (its thread not yet woken, or kept off its core by another process)
///   takes that list over and runs it merged with its own, so a late thread costs
///   parallelism, not time.
///
/// Whether a replay runs on that schedule or on the draining thread alone (every node in
/// creation order) is chosen from the replays' own times (`ParticipantChooser`): a graph
/// whose hand-offs between cores cost more than its parallelism saves, or a replay while
/// another process holds a core, runs on one thread.
///
/// One replay at a time (replays come from one in-order stream).
class CpuGraphExec final : public GraphExec {
 public:
  /// \p participants: threads a replay may use (the stream's worker count).
  CpuGraphExec(GraphNodeDescs nodes, int participants);
  std::size_t size() const override { return nodes_.size(); }
  std::string to_dot() const override;
  /// How many participants the static schedule spreads a replay over (0: it runs in
  /// creation order on one thread).
  std::uint32_t scheduled_lists() const noexcept { return lists_; }

  /// Runs one replay on \p pool. After a node fails, later nodes are skipped; the first
  /// failure is returned.
  /// With \p profiler, each node's run is recorded in it (a child graph as one node).
  GraphFailure run(WorkerPool& pool, Profiler* profiler = nullptr) const;
  /// Runs every node in order on the calling thread (used for child graphs).
  void run_inline() const;

  /// What differs between this graph's topology (node count, kinds, dependencies, kernel
  /// functions, child graphs) and \p nodes; empty when they match.
  std::string topology_difference(const GraphNodeDescs& nodes) const;
  /// Replaces every node's parameters by those of \p nodes, whose topology must match.
  /// Must not run concurrently with a replay (the stream orders it between replays).
  void set_parameters(GraphNodeDescs nodes);

 private:
  struct Node {  // how node i runs; what it is lives in topology_[i]
    Node() {}    // NOLINT(modernize-use-equals-default): resize() must not zero nodes
    // Its kernel's runner inside topology_[i] (taken from the builder without a copy), or
    // the runner in works_ of another kind of node.
    const BlockRunner* body = nullptr;
    std::uint64_t blocks = 1;
    std::uint32_t first_wait = 0;  // into waits_: cross-participant dependencies
    std::uint32_t wait_count = 0;
    bool publish = false;  // a node on another participant depends on this one
  };
  /// "Wait until participant `participant` has finished `count` nodes of its list."
  struct Wait {
    std::uint32_t participant;
    std::uint32_t count;
  };
  /// A participant's list's progress in the current replay, on its own cache line.
  struct alignas(64) Progress {
    std::atomic<std::uint32_t> done{0};
    std::atomic<std::uint32_t> sleepers{0};  // participants blocked in done.wait()
    std::atomic<bool> claimed{false};        // a thread runs this list
  };
  /// The lists one thread runs in one replay: the one it claimed, plus any it took over
  /// from a participant that had not started (a worker not yet woken, or whose core
  /// another process holds). It runs their nodes merged in creation order, so every
  /// dependency inside them is done before its dependents.
  struct OwnedLists {
    static constexpr std::uint32_t kMax = 8;
    std::uint32_t count = 0;
    std::uint32_t list[kMax];
    std::uint32_t next[kMax];  // position in the list of its next node
  };

  /// Gives node \p i (not a kernel node) the parameters of \p desc (an update's, or the
  /// graph's own at instantiation): its work, and a conditional node's body. \p work is
  /// the node's slot in works_.
  void set_work(std::uint32_t i, GraphNodeDesc& desc, CpuWork& work);
  /// Points node \p i at its kernel's runner (in topology_) and launch dimensions.
  void set_kernel(std::uint32_t i);
  void schedule(int participants);
  GraphFailure run_in_order(WorkerPool& pool) const;
  GraphFailure run_scheduled(WorkerPool& pool) const;
  /// Runs list \p first, claimed by this thread, and any lists it takes over meanwhile.
  void run_lists(std::uint32_t first) const;
  void record_failure(std::uint32_t node) const;
  /// Waits until \p wait is met, or takes its list over (true: the caller runs it first).
  bool wait_or_take(std::uint32_t* seen, const Wait& wait, OwnedLists& owned) const;
  /// Runs node \p i's blocks on the calling thread (recording it when profiling).
  void run_node_here(std::uint32_t i) const;

  GraphTopology topology_;  // its launch configs guarded by config_mutex_
  // The work of nodes other than kernel nodes, in node order (sized once: nodes_ point in).
  std::vector<CpuWork> works_;
  // The bodies of conditional nodes, by node: instantiated with the graph, each run inline
  // on the thread that runs its node; an update gives them new parameters.
  std::vector<std::pair<std::uint32_t, std::shared_ptr<CpuGraphExec>>> bodies_;
  std::vector<Node, RecyclingAllocator<Node>> nodes_;
  mutable std::mutex config_mutex_;  // launch configs: written by updates, read by to_dot
  bool is_chain_ = true;
  // The static schedule: participant p runs order_[list_begin_[p] .. list_begin_[p + 1]).
  std::vector<std::uint32_t> order_;
  std::vector<std::uint32_t> list_begin_;
  std::vector<Wait> waits_;
  std::uint32_t lists_ = 0;  // participants with a non-empty list

  // Per-replay state, reset at the start of each replay.
  mutable std::unique_ptr<Progress[]> progress_;
  // seen_[p * seen_stride_ + q]: p's last view of q's progress (rows on separate lines).
  std::size_t seen_stride_ = 0;
  mutable std::vector<std::uint32_t> seen_;
  mutable Profiler* profiler_ = nullptr;  // of the current replay
  mutable std::uint64_t replay_ = 0;      // its number in profiler_
  mutable ParticipantChooser chooser_;    // spread over lists_ or on one thread
  mutable std::atomic<bool> failed_{false};
  mutable std::atomic<bool> failure_claimed_{false};
  mutable GraphFailure failure_;
};

}  // namespace kiln::detail
