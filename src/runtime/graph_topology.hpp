#pragma once
// Internal: what every backend's instantiated graph keeps of its nodes: the builder's node
// descriptions themselves, taken without a copy (a graph of 10^5 nodes is built in about
// a millisecond, so each node is written once). Kinds, dependencies, kernel functions and
// child graphs are what an update must keep; labels and launch dimensions are what DOT
// output and messages show.

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime/device_graph.hpp"

namespace kiln::detail {

const char* kind_name(GraphNodeKind kind);

class GraphTopology {
 public:
  /// Takes \p descs as they are (no copy): a backend runs or reads them from here.
  explicit GraphTopology(GraphNodeDescs descs) : nodes_(std::move(descs)) {}

  std::size_t size() const noexcept { return nodes_.size(); }
  const GraphNodeDesc& operator[](std::uint32_t i) const { return nodes_[i]; }
  /// For the backend that owns this topology: it may take a node's parameters (a CUDA
  /// kernel's argument bytes, a host callback) but not change its identity.
  GraphNodeDesc& parameters(std::uint32_t i) { return nodes_[i]; }
  GraphNodeDescs& parameters() { return nodes_; }  // the same for every node; never resized

  /// Node \p i's label, else its kernel's name, else its kind's: what traces show.
  const std::string& name(std::uint32_t i) const;

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
  GraphNodeDescs nodes_;
};

}  // namespace kiln::detail
