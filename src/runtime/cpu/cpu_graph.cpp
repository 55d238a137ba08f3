#include "runtime/cpu/cpu_graph.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::detail {

CpuGraphExec::CpuGraphExec(GraphNodeDescs descs, int participants) : topology_(std::move(descs)) {
  const auto n = static_cast<std::uint32_t>(topology_.size());
  nodes_.resize(n);
  std::uint32_t others = 0;
  for (std::uint32_t i = 0; i < n; ++i)
    others += topology_[i].kind == GraphNodeKind::kernel ? 0 : 1;
  works_.resize(others);
  // A chain: one root, no node with two predecessors or two successors.
  std::vector<bool> has_successor(is_chain_ ? n : 0);
  std::uint32_t roots = 0;
  for (std::uint32_t i = 0, other = 0; i < n; ++i) {
    const NodeIndices& deps = topology_[i].dependencies;
    if (is_chain_) {
      roots += deps.empty() ? 1 : 0;
      if (deps.size() > 1 || roots > 1) is_chain_ = false;
      for (std::uint32_t dep : deps) {
        if (has_successor[dep]) is_chain_ = false;
        has_successor[dep] = true;
      }
    }
    if (topology_[i].kind == GraphNodeKind::kernel)
      set_kernel(i);
    else
      set_work(i, topology_.parameters(i), works_[other++]);
  }
  if (!is_chain_ && participants > 1) schedule(participants);
}

void CpuGraphExec::schedule(int participants) {
  // List scheduling in creation (topological) order with unit-ish costs: a node costs its
  // block count, waiting on another participant costs kHandOff more (a cache-line transfer
  // is worth a few tiny nodes). Each node goes where it can start first; ties stay with
  // the participant of its first dependency, so chains inside a DAG are not split.
  constexpr double kHandOff = 8.0;
  const auto p_count = static_cast<std::uint32_t>(participants);
  const auto n = static_cast<std::uint32_t>(nodes_.size());
  std::vector<std::uint32_t> where(n);
  std::vector<double> finish(n);
  std::vector<double> free_at(p_count, 0.0);
  std::vector<std::vector<std::uint32_t>> lists(p_count);
  for (std::uint32_t i = 0; i < n; ++i) {
    const Node& node = nodes_[i];
    const NodeIndices& deps = topology_[i].dependencies;
    const std::uint32_t preferred = deps.empty() ? 0 : where[deps[0]];
    std::uint32_t best = preferred;
    double best_start = 0;
    for (std::uint32_t k = 0; k < p_count; ++k) {
      const std::uint32_t p = (preferred + k) % p_count;
      double start = free_at[p];
      for (std::uint32_t dep : deps)
        start = std::max(start, finish[dep] + (where[dep] == p ? 0.0 : kHandOff));
      if (k == 0 || start < best_start) {
        best = p;
        best_start = start;
      }
    }
    where[i] = best;
    finish[i] = best_start + static_cast<double>(std::max<std::uint64_t>(1, node.blocks));
    free_at[best] = finish[i];
    lists[best].push_back(i);
  }
  // Compact to the participants that got work; record each node's place in its list.
  std::vector<std::uint32_t> list_of(p_count, 0);
  std::vector<std::uint32_t> position(n);
  for (std::uint32_t p = 0; p < p_count; ++p) {
    if (lists[p].empty()) continue;
    list_of[p] = lists_++;
    list_begin_.push_back(static_cast<std::uint32_t>(order_.size()));
    for (std::uint32_t i : lists[p]) {
      position[i] = static_cast<std::uint32_t>(order_.size()) - list_begin_.back();
      order_.push_back(i);
    }
  }
  list_begin_.push_back(static_cast<std::uint32_t>(order_.size()));
  if (lists_ < 2) {  // everything landed on one participant: run it as a sequence
    order_.clear();
    list_begin_.clear();
    lists_ = 0;
    return;
  }
  // Cross-participant waits, reduced to the latest node per other participant (a list
  // runs in order, so waiting for its latest dependency covers the earlier ones).
  std::vector<std::uint32_t> need(lists_);
  for (std::uint32_t i = 0; i < n; ++i) {
    Node& node = nodes_[i];
    const std::uint32_t mine = list_of[where[i]];
    std::fill(need.begin(), need.end(), 0);
    for (std::uint32_t dep : topology_[i].dependencies) {
      const std::uint32_t theirs = list_of[where[dep]];
      if (theirs == mine) continue;
      need[theirs] = std::max(need[theirs], position[dep] + 1);
      nodes_[dep].publish = true;
    }
    node.first_wait = static_cast<std::uint32_t>(waits_.size());
    for (std::uint32_t q = 0; q < lists_; ++q)
      if (need[q] != 0) waits_.push_back({q, need[q]});
    node.wait_count = static_cast<std::uint32_t>(waits_.size()) - node.first_wait;
  }
  progress_ = std::make_unique<Progress[]>(lists_);
  seen_stride_ = (lists_ + 15) / 16 * 16;
  seen_.assign(lists_ * seen_stride_, 0);
}

void CpuGraphExec::set_kernel(std::uint32_t i) {
  const KernelLaunch& launch = topology_[i].kernel();
  nodes_[i].body = &launch.run;
  nodes_[i].blocks = launch.config.grid_dim.count();
}

void CpuGraphExec::set_work(std::uint32_t i, GraphNodeDesc& d, CpuWork& work) {
  // Identity (kind, child graph) is fixed at instantiation: an update has the same, so
  // only the work changes here.
  nodes_[i].body = &work.body;
  work.blocks = 1;
  switch (d.kind) {
    case GraphNodeKind::kernel:
      throw InternalError("CpuGraphExec::set_work got a kernel node (see set_kernel)");
    case GraphNodeKind::copy:
      work = copy_work(d.copy().dst, d.copy().src, d.copy().bytes);
      break;
    case GraphNodeKind::memset:
      work = fill_work(d.memset().dst, d.memset().count, d.memset().pattern.data(),
                       d.memset().pattern_size);
      break;
    case GraphNodeKind::host:
      work.body = [f = std::move(d.host())](std::uint64_t, std::uint64_t) { f(); };
      break;
    case GraphNodeKind::empty:
      work.body = [](std::uint64_t, std::uint64_t) {};
      break;
    case GraphNodeKind::cuda_work:
      throw InternalError("a CUDA work node reached a CPU graph (the builder checks the device)");
    case GraphNodeKind::conditional: {
      GraphConditional& c = d.conditional();
      // bodies_ is in node order (instantiation adds them node by node).
      auto found = std::lower_bound(bodies_.begin(), bodies_.end(), i,
                                    [](const auto& b, std::uint32_t at) { return b.first < at; });
      if (found == bodies_.end() || found->first != i) {
        // Instantiation: the body runs inline, on one participant.
        bodies_.emplace_back(i, std::make_shared<CpuGraphExec>(std::move(*c.body), 1));
        found = bodies_.end() - 1;
      } else {  // an update: its topology was checked
        found->second->set_parameters(std::move(*c.body));
      }
      const CpuGraphExec* body = found->second.get();
      // Read through volatile: the body's nodes (or an earlier one) write it.
      const volatile std::int32_t* condition = c.condition;
      if (c.loop) {
        work.body = [body, condition](std::uint64_t, std::uint64_t) {
          while (*condition != 0) body->run_inline();
        };
      } else {
        work.body = [body, condition](std::uint64_t, std::uint64_t) {
          if (*condition != 0) body->run_inline();
        };
      }
      break;
    }
    case GraphNodeKind::child: {
      // The topology keeps the child alive; its identity cannot change in an update.
      const auto* child = dynamic_cast<const CpuGraphExec*>(d.child().get());
      work.body = [child](std::uint64_t, std::uint64_t) { child->run_inline(); };
      break;
    }
  }
  nodes_[i].blocks = work.blocks;
}

std::string CpuGraphExec::topology_difference(const GraphNodeDescs& descs) const {
  if (std::string difference = topology_.difference(descs); !difference.empty()) return difference;
  for (const auto& [i, body] : bodies_)
    if (std::string difference = body->topology_difference(*descs[i].conditional().body);
        !difference.empty())
      return cat("in the body of conditional node ", i, ": ", difference);
  return {};
}

void CpuGraphExec::set_parameters(GraphNodeDescs descs) {
  std::scoped_lock lock(config_mutex_);
  for (std::uint32_t i = 0, other = 0; i < nodes_.size(); ++i) {
    if (descs[i].kind == GraphNodeKind::kernel) {
      // In place: the runner keeps its address, which nodes_[i] holds.
      KernelLaunch& launch = topology_.parameters(i).kernel();
      launch.run = std::move(descs[i].kernel().run);
      launch.config = descs[i].kernel().config;
      set_kernel(i);
    } else {
      set_work(i, descs[i], works_[other++]);
    }
  }
}

std::string CpuGraphExec::to_dot() const {
  std::scoped_lock lock(config_mutex_);  // an update may change launch dimensions
  return topology_.to_dot();
}

void CpuGraphExec::run_inline() const {
  for (const Node& node : nodes_) (*node.body)(0, node.blocks);
}

GraphFailure CpuGraphExec::run(WorkerPool& pool, Profiler* profiler) const {
  if (nodes_.empty()) return {};
  profiler_ = profiler;
  if (profiler != nullptr) replay_ = profiler->begin_replay();
  if (lists_ < 2) return run_in_order(pool);
  if (profiler != nullptr) return run_scheduled(pool);  // a trace shows the schedule
  const bool spread = chooser_.next() == ParticipantChooser::Mode::spread;
  const auto start = std::chrono::steady_clock::now();
  GraphFailure failure = spread ? run_scheduled(pool) : run_in_order(pool);
  chooser_.record(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  return failure;
}

GraphFailure CpuGraphExec::run_in_order(WorkerPool& pool) const {
  // Creation order is a topological order, so running nodes in it honours every edge.
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    try {
      if (node.blocks <= 1) {
        run_node_here(i);  // skip the pool for the common tiny node
      } else if (profiler_ == nullptr) {
        pool.parallel_for(node.blocks, *node.body);
      } else {
        const std::int64_t begin = profiler_->now_ns();
        pool.parallel_for(node.blocks, *node.body);
        profiler_->record(topology_.name(i), i, replay_, begin, profiler_->now_ns());
      }
    } catch (...) {
      return {std::current_exception(), topology_.describe(i)};
    }
  }
  return {};
}

GraphFailure CpuGraphExec::run_scheduled(WorkerPool& pool) const {
  for (std::uint32_t p = 0; p < lists_; ++p) {
    progress_[p].done.store(0, std::memory_order_relaxed);
    progress_[p].sleepers.store(0, std::memory_order_relaxed);
    progress_[p].claimed.store(false, std::memory_order_relaxed);
  }
  std::fill(seen_.begin(), seen_.end(), 0);
  failed_.store(false, std::memory_order_relaxed);
  failure_claimed_.store(false, std::memory_order_relaxed);
  failure_ = {};
  // One "block" per list. A thread takes a new list only after finishing its current one
  // (and those it took over), and every list waits only on earlier nodes, so every list
  // is eventually run and finishes.
  const BlockRunner participant = [this](std::uint64_t begin, std::uint64_t end) {
    for (; begin < end; ++begin)
      if (!progress_[begin].claimed.exchange(true, std::memory_order_acq_rel))
        run_lists(static_cast<std::uint32_t>(begin));
  };
  pool.parallel_for(lists_, participant);
  return std::move(failure_);
}

void CpuGraphExec::record_failure(std::uint32_t node) const {
  if (!failure_claimed_.exchange(true, std::memory_order_acq_rel))
    failure_ = {std::current_exception(), topology_.describe(node)};
  failed_.store(true, std::memory_order_relaxed);
}

void CpuGraphExec::run_lists(std::uint32_t first) const {
  OwnedLists owned;
  owned.list[0] = first;
  owned.next[0] = 0;
  owned.count = 1;
  for (;;) {
    // The owned list whose next node comes first in creation order (a topological order:
    // so that node's dependencies on owned lists have all run).
    std::uint32_t slot = 0;
    if (owned.count > 1) {
      std::uint32_t first_node = UINT32_MAX;
      for (std::uint32_t s = 0; s < owned.count; ++s) {
        const std::uint32_t k = list_begin_[owned.list[s]] + owned.next[s];
        if (k < list_begin_[owned.list[s] + 1] && order_[k] < first_node) {
          first_node = order_[k];
          slot = s;
        }
      }
      if (first_node == UINT32_MAX) return;
    }
    const std::uint32_t p = owned.list[slot];
    const std::uint32_t k = list_begin_[p] + owned.next[slot];
    if (k == list_begin_[p + 1]) return;  // one list, finished
    const std::uint32_t i = order_[k];
    const Node& node = nodes_[i];
    std::uint32_t* seen = &seen_[p * seen_stride_];
    bool took = false;
    for (std::uint32_t w = node.first_wait; !took && w < node.first_wait + node.wait_count; ++w)
      if (seen[waits_[w].participant] < waits_[w].count)
        took = wait_or_take(seen, waits_[w], owned);
    if (took) continue;  // the taken list's earlier nodes run first
    // After a failure the rest is skipped, but progress is still published so that no
    // participant waits forever.
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        run_node_here(i);
      } catch (...) {
        record_failure(i);
      }
    }
    const std::uint32_t done = ++owned.next[slot];
    if (node.publish) {
      Progress& mine = progress_[p];
      // seq_cst store then load pairs with the sleeper's increment then re-check: either
      // the sleeper sees the new count or this thread sees the sleeper and wakes it.
      mine.done.store(done, std::memory_order_seq_cst);
      if (mine.sleepers.load(std::memory_order_seq_cst) != 0) mine.done.notify_all();
    }
  }
}

void CpuGraphExec::run_node_here(std::uint32_t i) const {
  const Node& node = nodes_[i];
  if (profiler_ == nullptr) {
    (*node.body)(0, node.blocks);
    return;
  }
  const std::int64_t begin = profiler_->now_ns();
  (*node.body)(0, node.blocks);  // a failing node is not recorded
  profiler_->record(topology_.name(i), i, replay_, begin, profiler_->now_ns());
}

bool CpuGraphExec::wait_or_take(std::uint32_t* seen, const Wait& wait, OwnedLists& owned) const {
  // Spin (the dependency is usually a few nodes away), then yield, then sleep: a
  // participant descheduled by a busy machine must not be waited for on a spinning core.
  // A list still unclaimed after a short spin (a woken worker claims its list within a
  // microsecond) is taken over instead of waited for.
  Progress& theirs = progress_[wait.participant];
  std::uint32_t& view = seen[wait.participant];
  constexpr int kTakeAfter = 128, kYieldAfter = 256, kSleepAfter = 320;
  for (int round = 0;; ++round) {
    view = theirs.done.load(std::memory_order_acquire);
    if (view >= wait.count) return false;
    if (round >= kTakeAfter && owned.count < OwnedLists::kMax &&
        !theirs.claimed.load(std::memory_order_relaxed) &&
        !theirs.claimed.exchange(true, std::memory_order_acq_rel)) {
      owned.list[owned.count] = wait.participant;
      owned.next[owned.count] = 0;
      ++owned.count;
      return true;
    }
    if (round < kYieldAfter) {
      cpu_relax();
    } else if (round < kSleepAfter) {
      std::this_thread::yield();
    } else {
      theirs.sleepers.fetch_add(1, std::memory_order_seq_cst);
      view = theirs.done.load(std::memory_order_seq_cst);
      if (view < wait.count) theirs.done.wait(view, std::memory_order_acquire);
      theirs.sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace kiln::detail
