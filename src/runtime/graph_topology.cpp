#include "runtime/graph_topology.hpp"

#include <array>
#include <unordered_set>

#include "core/str.hpp"

namespace kiln::detail {
namespace {

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

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
    case GraphNodeKind::cuda_work:
      return "CUDA work";
    case GraphNodeKind::conditional:
      return "conditional";
  }
  return "?";
}

GraphTopology::GraphTopology(GraphNodeDescs& descs) {
  nodes_.reserve(descs.size());
  std::unordered_set<const FunctionInfo*> kept;
  const FunctionInfo* last_kernel = nullptr;
  for (GraphNodeDesc& d : descs) {
    Node node;
    node.kind = d.kind;
    node.dependencies = std::move(d.dependencies);
    if (const auto* k = std::get_if<KernelLaunch>(&d.work)) {
      node.kernel = k->info.get();
      node.config = k->config;
      // Each kernel referenced once (runs of nodes launching one kernel are common).
      if (k->info.get() != last_kernel && kept.insert(k->info.get()).second)
        kernels_.push_back(k->info);
      last_kernel = k->info.get();
    }
    node.child = d.child();
    if (const auto* c = std::get_if<GraphConditional>(&d.work)) node.loop = c->loop;
    node.label = std::move(d.label);
    nodes_.push_back(std::move(node));
  }
}

const std::string& GraphTopology::Node::name() const {
  static const std::array<std::string, 8> kinds = {
      kind_name(GraphNodeKind::kernel),    kind_name(GraphNodeKind::copy),
      kind_name(GraphNodeKind::memset),    kind_name(GraphNodeKind::host),
      kind_name(GraphNodeKind::empty),     kind_name(GraphNodeKind::child),
      kind_name(GraphNodeKind::cuda_work), kind_name(GraphNodeKind::conditional)};
  if (!label.empty()) return label;
  if (kernel) return kernel->name;
  return kinds.at(static_cast<std::size_t>(kind));
}

std::string GraphTopology::difference(const GraphNodeDescs& descs) const {
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
    if (d.kind == GraphNodeKind::kernel && d.kernel().info.get() != node.kernel)
      return cat("node ", i, " launches kernel '", d.kernel().info->name,
                 "' in the update but kernel '", node.kernel->name,
                 "' in the graph (only arguments and launch dimensions can change)");
    if (d.kind == GraphNodeKind::child && d.child() != node.child)
      return cat("node ", i, " nests a different child graph in the update");
    if (d.kind == GraphNodeKind::conditional && d.conditional().loop != node.loop)
      return cat("node ", i, " is ", d.conditional().loop ? "a while" : "an if",
                 " node in the update but ", node.loop ? "a while" : "an if", " node in the graph");
  }
  return {};
}

void GraphTopology::set_configs(const GraphNodeDescs& descs) {
  for (std::uint32_t i = 0; i < nodes_.size(); ++i)
    if (const auto* k = std::get_if<KernelLaunch>(&descs[i].work)) nodes_[i].config = k->config;
}

std::string GraphTopology::describe(std::uint32_t i) const {
  const Node& node = nodes_[i];
  const std::string label = node.label.empty() ? "" : cat(": ", node.label);
  if (node.kernel) return cat("graph node ", i, " (kernel '", node.kernel->name, "'", label, ")");
  return cat("graph node ", i, " (", kind_name(node.kind), label, ")");
}

std::string GraphTopology::to_dot() const {
  std::string out = "digraph kiln_device_graph {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    std::string label = cat(i, ": ", kind_name(node.kind));
    if (!node.label.empty()) label += cat("\\n", dot_escape(node.label));
    if (node.kernel) {
      label += cat(" '", dot_escape(node.kernel->name), "'\\ngrid ", node.config.grid_dim,
                   " block ", node.config.block_dim);  // \\n: DOT's line break
      if (node.config.dynamic_shared_bytes > 0)
        label += cat(" shared ", node.config.dynamic_shared_bytes, " B");
    }
    out += cat("  n", i, " [label=\"", label, "\"];\n");
    for (std::uint32_t dep : node.dependencies) out += cat("  n", dep, " -> n", i, ";\n");
  }
  return out + "}\n";
}

}  // namespace kiln::detail
