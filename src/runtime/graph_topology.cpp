#include "runtime/graph_topology.hpp"

#include <array>

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

const std::string& GraphTopology::name(std::uint32_t i) const {
  static const std::array<std::string, 8> kinds = {
      kind_name(GraphNodeKind::kernel),    kind_name(GraphNodeKind::copy),
      kind_name(GraphNodeKind::memset),    kind_name(GraphNodeKind::host),
      kind_name(GraphNodeKind::empty),     kind_name(GraphNodeKind::child),
      kind_name(GraphNodeKind::cuda_work), kind_name(GraphNodeKind::conditional)};
  const GraphNodeDesc& node = nodes_[i];
  if (!node.label.empty()) return node.label;
  if (const auto* kernel = node.kernel_info()) return (*kernel)->name;
  return kinds.at(static_cast<std::size_t>(node.kind));
}

std::string GraphTopology::difference(const GraphNodeDescs& descs) const {
  if (descs.size() != nodes_.size())
    return cat("the update has ", descs.size(), " nodes but the graph has ", nodes_.size());
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const GraphNodeDesc& node = nodes_[i];
    const GraphNodeDesc& d = descs[i];
    if (d.kind != node.kind)
      return cat("node ", i, " is a ", kind_name(d.kind), " node in the update but a ",
                 kind_name(node.kind), " node in the graph");
    if (d.dependencies != node.dependencies)
      return cat("node ", i, " depends on [", join(d.dependencies, ", "),
                 "] in the update but on [", join(node.dependencies, ", "), "] in the graph");
    if (d.kind == GraphNodeKind::kernel && d.kernel().info != node.kernel().info)
      return cat("node ", i, " launches kernel '", d.kernel().info->name,
                 "' in the update but kernel '", node.kernel().info->name,
                 "' in the graph (only arguments and launch dimensions can change)");
    if (d.kind == GraphNodeKind::child && d.child() != node.child())
      return cat("node ", i, " nests a different child graph in the update");
    if (d.kind == GraphNodeKind::conditional && d.conditional().loop != node.conditional().loop)
      return cat("node ", i, " is ", d.conditional().loop ? "a while" : "an if",
                 " node in the update but ", node.conditional().loop ? "a while" : "an if",
                 " node in the graph");
  }
  return {};
}

void GraphTopology::set_configs(const GraphNodeDescs& descs) {
  for (std::uint32_t i = 0; i < nodes_.size(); ++i)
    if (const auto* k = std::get_if<KernelLaunch>(&descs[i].work))
      nodes_[i].kernel().config = k->config;
}

std::string GraphTopology::describe(std::uint32_t i) const {
  const GraphNodeDesc& node = nodes_[i];
  const std::string label = node.label.empty() ? "" : cat(": ", node.label);
  if (const auto* kernel = node.kernel_info())
    return cat("graph node ", i, " (kernel '", (*kernel)->name, "'", label, ")");
  return cat("graph node ", i, " (", kind_name(node.kind), label, ")");
}

std::string GraphTopology::to_dot() const {
  std::string out = "digraph kiln_device_graph {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const GraphNodeDesc& node = nodes_[i];
    std::string label = cat(i, ": ", kind_name(node.kind));
    if (!node.label.empty()) label += cat("\\n", dot_escape(node.label));
    if (node.kind == GraphNodeKind::kernel) {
      const KernelLaunch& k = node.kernel();
      label += cat(" '", dot_escape(k.info->name), "'\\ngrid ", k.config.grid_dim, " block ",
                   k.config.block_dim);  // \\n: DOT's line break
      if (k.config.dynamic_shared_bytes > 0)
        label += cat(" shared ", k.config.dynamic_shared_bytes, " B");
    }
    out += cat("  n", i, " [label=\"", label, "\"];\n");
    for (std::uint32_t dep : node.dependencies) out += cat("  n", dep, " -> n", i, ";\n");
  }
  return out + "}\n";
}

}  // namespace kiln::detail
