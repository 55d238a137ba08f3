#pragma once
/// \file
/// The graph IR: a `Module` of `Graph`s; a graph has typed arguments, ops in order, and
/// results. Storage is index-based (values and ops are numbers into flat arrays), so a
/// graph of 100 000 ops builds, prints, parses and verifies in well under a second.
///
/// \code
///   kiln::ir::Module module;
///   kiln::ir::Graph& g = module.add_graph("main");
///   auto x = g.add_argument({kiln::DType::f32, {"batch", 4}, kiln::Device::cpu()});
///   auto y = g.add_op("kiln.add", {x, x}).result(0);
///   g.set_results({y});
///   std::cout << module.str();   // MLIR
/// \endcode

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/ir/attribute.hpp"
#include "kiln/ir/op_registry.hpp"
#include "kiln/ir/type.hpp"

namespace kiln::ir {

/// A value of one graph: an argument or an op result. A plain number; meaningful only with
/// its graph.
struct Value {
  static constexpr std::uint32_t kNone = 0xffffffffu;
  std::uint32_t id = kNone;
  bool valid() const noexcept { return id != kNone; }
  friend bool operator==(Value, Value) = default;
};

/// Where an op came from in the user's source (staging records `SourceLocation`).
struct Location {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  bool known() const noexcept { return line != 0; }
  friend bool operator==(const Location&, const Location&) = default;
};

class Graph;

/// A read-only view of one op of a graph. Cheap to copy; valid while the graph lives and
/// is not changed.
class OpView {
 public:
  OpView(const Graph& graph, std::uint32_t index) : graph_(&graph), index_(index) {}
  std::uint32_t index() const noexcept { return index_; }
  const OpDef& def() const;
  const std::string& name() const { return def().name; }
  std::span<const Value> operands() const;
  Value operand(std::size_t i) const { return operands()[i]; }
  std::size_t num_results() const;
  Value result(std::size_t i) const;
  /// Sorted by name.
  std::span<const NamedAttribute> attributes() const;
  /// The attribute \p name, or nullptr.
  const Attribute* find(std::string_view name) const;
  const Location& location() const;
  /// For messages: `op 12 ('kiln.matmul') at model.cpp:40:7`.
  std::string describe() const;

 private:
  const Graph* graph_;
  std::uint32_t index_;
};

/// One graph: typed arguments, ops in order (each op's operands are arguments or results
/// of earlier ops), and results. Not thread-safe to change; safe to read concurrently.
class Graph {
 public:
  explicit Graph(std::string name) : name_(std::move(name)) {}

  const std::string& name() const noexcept { return name_; }

  /// Adds an argument (an input of the graph).
  Value add_argument(TensorType type);

  /// Appends an op whose result types are inferred by its registered rule.
  /// \throws UserError naming the op, the operand types and the location when the op is
  /// unknown, the operands or attributes do not fit its spec, or inference fails.
  OpView add_op(std::string_view name, std::span<const Value> operands,
                std::vector<NamedAttribute> attributes = {}, Location location = {});
  OpView add_op(std::string_view name, std::initializer_list<Value> operands,
                std::vector<NamedAttribute> attributes = {}, Location location = {}) {
    return add_op(name, std::span<const Value>(operands.begin(), operands.size()),
                  std::move(attributes), std::move(location));
  }
  /// Appends an op with the given result types, unchecked (the verifier checks them): for
  /// ops without an inference rule (weights, calls) and for the parser.
  /// \throws UserError for an unknown op or an operand that is not a value of this graph.
  OpView add_op_typed(const OpDef& def, std::span<const Value> operands,
                      std::vector<NamedAttribute> attributes, std::vector<TensorType> results,
                      Location location = {});

  /// Sets the graph's results (what its `return` returns).
  void set_results(std::vector<Value> results);

  /// The names an argument or result carries for callers (an ONNX model's input and
  /// output names, which `kiln run --input NAME=FILE` takes); empty: none. They print as
  /// MLIR argument and result attributes, `{kiln.name = "input_ids"}`.
  void set_argument_name(std::size_t index, std::string name);
  const std::string& argument_name(std::size_t index) const noexcept;
  void set_result_name(std::size_t index, std::string name);
  const std::string& result_name(std::size_t index) const noexcept;
  /// Gives this graph \p other's argument and result names (passes that rebuild a graph).
  void copy_names(const Graph& other) {
    argument_names_ = other.argument_names_;
    result_names_ = other.result_names_;
  }

  std::span<const Value> arguments() const noexcept { return arguments_; }
  std::span<const Value> results() const noexcept { return results_; }
  std::size_t num_ops() const noexcept { return ops_.size(); }
  OpView op(std::size_t index) const { return OpView(*this, static_cast<std::uint32_t>(index)); }
  std::size_t num_values() const noexcept { return values_.size(); }
  /// \throws UserError if \p value is not a value of this graph.
  const TensorType& type(Value value) const;
  /// The op that produces \p value, or -1 for an argument.
  std::int64_t producer(Value value) const;
  /// Which result of its producer (or which argument) \p value is.
  std::uint32_t position(Value value) const;

  /// Graphviz DOT: ops as vertices (name and result types), values as edges.
  std::string to_dot() const;

 private:
  friend class OpView;
  static constexpr std::uint32_t kArgument = 0xffffffffu;
  struct ValueRecord {
    TensorType type;
    std::uint32_t producer;  // op index, or kArgument
    std::uint32_t position;  // result index, or argument index
  };
  struct OpRecord {
    const OpDef* def;
    std::uint32_t first_operand, num_operands;
    std::uint32_t first_result, num_results;
    std::uint32_t first_attribute, num_attributes;
    std::uint32_t location;  // index into locations_, or kArgument for none
  };
  void check_operand(Value v, std::string_view op) const;

  std::string name_;
  std::vector<ValueRecord> values_;
  std::vector<Value> arguments_;
  std::vector<OpRecord> ops_;
  std::vector<Value> operands_;
  std::vector<NamedAttribute> attributes_;
  std::vector<Location> locations_;
  std::vector<Value> results_;
  std::vector<std::string> argument_names_, result_names_;  // empty, or names by index
};

/// A module: graphs by symbol name, one of them the entry (the first added, unless
/// `set_entry` says otherwise), and the default device its text leaves implicit.
class Module {
 public:
  explicit Module(Device device = Device::cpu()) : device_(device) {}
  Module(Module&&) noexcept = default;
  Module& operator=(Module&&) noexcept = default;
  /// A deep copy (graphs are copied; ops keep pointing at the same registered OpDefs).
  Module(const Module& other);
  Module& operator=(const Module& other);

  /// Adds an empty graph. \throws UserError if the name is empty or taken.
  Graph& add_graph(std::string name);
  /// \throws UserError if no graph has that name.
  void set_entry(std::string_view name);

  /// The entry graph. \throws UserError for an empty module.
  const Graph& entry() const;
  Graph& entry();
  /// The graph named \p name, or nullptr.
  const Graph* find(std::string_view name) const;
  Graph* find(std::string_view name);
  std::size_t num_graphs() const noexcept { return graphs_.size(); }
  const Graph& graph(std::size_t i) const { return *graphs_[i]; }
  Graph& graph(std::size_t i) { return *graphs_[i]; }
  Device device() const noexcept { return device_; }

  /// The MLIR text of the whole module (see `kiln/ir/text.hpp`).
  std::string str() const;

 private:
  Device device_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  // Graph index by name (views of the graphs' own names, which never change): lookups in
  // constant time, so that a module of many graphs is built and checked in linear time.
  std::unordered_map<std::string_view, std::size_t> by_name_;
  std::size_t entry_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Module& module);

}  // namespace kiln::ir
