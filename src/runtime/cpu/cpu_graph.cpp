#include "runtime/cpu/cpu_graph.hpp"

#include <thread>

#include "core/str.hpp"

namespace kiln::detail {
namespace {

const char* kind_name(GraphNodeKind kind) {
  switch (kind) {
    case GraphNodeKind::kernel:
      return "kernel";
    case GraphNodeKind::copy:
      return "copy";
    case GraphNodeKind::memset:
      return "memset";
    case GraphNodeKind::host:
      return "host function";
    case GraphNodeKind::empty:
      return "empty";
    case GraphNodeKind::child:
      return "child graph";
  }
  return "?";
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

CpuGraphExec::CpuGraphExec(std::vector<GraphNodeDesc> descs) {
  const auto n = static_cast<std::uint32_t>(descs.size());
  nodes_.resize(n);
  std::vector<std::uint32_t> out_degree(n, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    GraphNodeDesc& d = descs[i];
    Node& node = nodes_[i];
    node.kind = d.kind;
    node.dependencies = std::move(d.dependencies);
    node.in_degree = static_cast<std::uint32_t>(node.dependencies.size());
    for (std::uint32_t dep : node.dependencies) ++out_degree[dep];
    set_parameters(node, d);
  }
  // Successor lists, flattened.
  std::uint32_t offset = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    nodes_[i].first_successor = offset;
    offset += out_degree[i];
    if (out_degree[i] > 1 || nodes_[i].in_degree > 1) is_chain_ = false;
    if (nodes_[i].in_degree == 0) roots_.push_back(i);
  }
  if (roots_.size() > 1) is_chain_ = false;
  successors_.resize(offset);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t dep : nodes_[i].dependencies) {
      Node& from = nodes_[dep];
      successors_[from.first_successor + from.successor_count++] = i;
    }
  pending_ = std::make_unique<std::atomic<std::uint32_t>[]>(n);
  ready_ = std::make_unique<std::atomic<std::uint32_t>[]>(n);
}

void CpuGraphExec::set_parameters(Node& node, GraphNodeDesc& d) {
  node.kernel = nullptr;
  node.child = nullptr;
  node.work.blocks = 1;
  switch (d.kind) {
    case GraphNodeKind::kernel:
      node.kernel = std::move(d.kernel.info);
      node.config = d.kernel.config;
      node.work.blocks = d.kernel.config.grid_dim.count();
      node.work.body = std::move(d.kernel.run);
      break;
    case GraphNodeKind::copy:
      node.work = copy_work(d.dst, d.src, d.bytes);
      break;
    case GraphNodeKind::memset:
      node.work = fill_work(d.dst, d.count, d.pattern.data(), d.pattern_size);
      break;
    case GraphNodeKind::host:
      node.work.body = [f = std::move(d.host)](std::uint64_t, std::uint64_t) { f(); };
      break;
    case GraphNodeKind::empty:
      node.work.body = [](std::uint64_t, std::uint64_t) {};
      break;
    case GraphNodeKind::child: {
      auto child = std::dynamic_pointer_cast<const CpuGraphExec>(d.child);
      node.child = std::move(d.child);
      node.work.body = [c = child.get()](std::uint64_t, std::uint64_t) { c->run_inline(); };
      break;
    }
  }
}

std::string CpuGraphExec::topology_difference(const std::vector<GraphNodeDesc>& descs) const {
  if (descs.size() != nodes_.size())
    return cat("the update has ", descs.size(), " nodes but the graph has ", nodes_.size());
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    const GraphNodeDesc& d = descs[i];
    if (d.kind != node.kind)
      return cat("node ", i, " is a ", kind_name(d.kind), " node in the update but a ",
                 kind_name(node.kind), " node in the graph");
    if (d.dependencies != node.dependencies)
      return cat("node ", i, " depends on [", join(d.dependencies, ", "),
                 "] in the update but on [", join(node.dependencies, ", "), "] in the graph");
    if (d.kind == GraphNodeKind::kernel && d.kernel.info != node.kernel)
      return cat("node ", i, " launches kernel '", d.kernel.info->name,
                 "' in the update but kernel '", node.kernel->name,
                 "' in the graph (only arguments and launch dimensions can change)");
    if (d.kind == GraphNodeKind::child && d.child != node.child)
      return cat("node ", i, " nests a different child graph in the update");
  }
  return {};
}

void CpuGraphExec::set_parameters(std::vector<GraphNodeDesc> descs) {
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) set_parameters(nodes_[i], descs[i]);
}

std::string CpuGraphExec::describe(std::uint32_t i) const {
  const Node& node = nodes_[i];
  if (node.kernel) return cat("graph node ", i, " (kernel '", node.kernel->name, "')");
  return cat("graph node ", i, " (", kind_name(node.kind), ")");
}

std::string CpuGraphExec::to_dot() const {
  std::string out = "digraph kiln_device_graph {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    std::string label = cat(i, ": ", kind_name(node.kind));
    if (node.kernel)
      label += cat(" '", node.kernel->name, "'\\ngrid ", node.config.grid_dim, " block ",
                   node.config.block_dim);
    out += cat("  n", i, " [label=\"", dot_escape(label), "\"];\n");
    for (std::uint32_t dep : node.dependencies) out += cat("  n", dep, " -> n", i, ";\n");
  }
  return out + "}\n";
}

void CpuGraphExec::run_inline() const {
  for (const Node& node : nodes_) node.work.body(0, node.work.blocks);
}

GraphFailure CpuGraphExec::run(WorkerPool& pool) const {
  if (nodes_.empty()) return {};
  if (is_chain_ || pool.helpers() == 0) return run_chain(pool);
  return run_dag(pool);
}

GraphFailure CpuGraphExec::run_chain(WorkerPool& pool) const {
  // Creation order is a topological order, so running nodes in it honours every edge.
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    try {
      pool.parallel_for(node.work.blocks, node.work.body);
    } catch (...) {
      return {std::current_exception(), describe(i)};
    }
  }
  return {};
}

GraphFailure CpuGraphExec::run_dag(WorkerPool& pool) const {
  const auto n = static_cast<std::uint32_t>(nodes_.size());
  for (std::uint32_t i = 0; i < n; ++i) {
    pending_[i].store(nodes_[i].in_degree, std::memory_order_relaxed);
    ready_[i].store(0, std::memory_order_relaxed);
  }
  const auto roots = static_cast<std::uint32_t>(roots_.size());
  for (std::uint32_t r = 0; r < roots; ++r)
    ready_[r].store(roots_[r] + 1, std::memory_order_relaxed);
  ready_tail_.store(roots, std::memory_order_relaxed);
  ready_head_.store(0, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  failure_claimed_.store(false, std::memory_order_relaxed);
  failure_ = {};
  // One "block" per participant: each runs the scheduling loop until every node is done.
  const BlockRunner worker = [this](std::uint64_t begin, std::uint64_t end) {
    for (; begin < end; ++begin) run_dag_worker();
  };
  pool.parallel_for(static_cast<std::uint64_t>(pool.helpers()) + 1, worker);
  return std::move(failure_);
}

void CpuGraphExec::run_dag_worker() const {
  const auto n = static_cast<std::uint32_t>(nodes_.size());
  for (;;) {
    const std::uint32_t slot = ready_head_.fetch_add(1, std::memory_order_relaxed);
    if (slot >= n) return;
    // Every slot is filled exactly once per replay; wait for this one's node to be ready.
    std::uint32_t entry;
    for (int spins = 0; (entry = ready_[slot].load(std::memory_order_acquire)) == 0;) {
      if (++spins < 256) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
    const std::uint32_t i = entry - 1;
    const Node& node = nodes_[i];
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        node.work.body(0, node.work.blocks);
      } catch (...) {
        if (!failure_claimed_.exchange(true, std::memory_order_acq_rel))
          failure_ = {std::current_exception(), describe(i)};
        failed_.store(true, std::memory_order_relaxed);
      }
    }
    // Skipped nodes still release their successors, so every slot gets filled.
    for (std::uint32_t s = 0; s < node.successor_count; ++s) {
      const std::uint32_t next = successors_[node.first_successor + s];
      if (pending_[next].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::uint32_t at = ready_tail_.fetch_add(1, std::memory_order_relaxed);
        ready_[at].store(next + 1, std::memory_order_release);
      }
    }
  }
}

}  // namespace kiln::detail
