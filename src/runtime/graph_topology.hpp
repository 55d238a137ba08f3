#pragma once
// Internal: what every backend's instantiated graph keeps of its nodes apart from how it
// runs them: kinds, dependencies, kernel functions and child graphs (what an update must
// keep), plus labels and launch dimensions (what DOT output and messages show).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime/device_graph.hpp"

namespace kiln::detail {

const char* kind_name(GraphNodeKind kind);

class GraphTopology {
 public:
  struct Node {
    Node() {}  // NOLINT(modernize-use-equals-default): not zeroed before construction
    GraphNodeKind kind = GraphNodeKind::empty;
    NodeIndices dependencies;
    const FunctionInfo* kernel = nullptr;    // kernel nodes: kept alive in kernels_
    std::shared_ptr<const GraphExec> child;  // child nodes: kept alive with the graph
    LaunchConfig config;                     // kernel nodes; changes with updates
    bool loop = false;                       // conditional nodes: WHILE, not IF
    std::string label;                       // from the builder; may be empty
    /// The label, else the kernel's name, else the kind's: what traces show. (Computed,
    /// not stored: a graph of 10^6 nodes would hold every label twice.)
    const std::string& name() const;
  };

  /// Takes the identity of \p descs (their dependencies are moved out).
  explicit GraphTopology(GraphNodeDescs& descs);

  std::size_t size() const noexcept { return nodes_.size(); }
  const Node& operator[](std::uint32_t i) const { return nodes_[i]; }

  /// What differs between this topology and \p descs (node count, kinds, dependencies,
  /// kernel functions, child graphs), as a sentence; empty when they match.
  std::string difference(const GraphNodeDescs& descs) const;
  /// Takes the launch dimensions of \p descs (whose topology matches).
  void set_configs(const GraphNodeDescs& descs);

  /// "graph node 3 (kernel 'add': label)" for messages.
  std::string describe(std::uint32_t i) const;
  /// Graphviz DOT: one vertex per node (kind, label, kernel name, launch dims), one edge
  /// per dependency.
  std::string to_dot() const;

 private:
  std::vector<Node, RecyclingAllocator<Node>> nodes_;
  // The kernels the nodes launch, each once (one reference per kernel, not per node).
  std::vector<std::shared_ptr<const FunctionInfo>> kernels_;
};

}  // namespace kiln::detail
