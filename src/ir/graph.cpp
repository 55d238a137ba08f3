#include "kiln/ir/graph.hpp"

#include <algorithm>
#include <ostream>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"

namespace kiln::ir {

// ---- OpView ------------------------------------------------------------------------------

const OpDef& OpView::def() const { return *graph_->ops_[index_].def; }

std::span<const Value> OpView::operands() const {
  const auto& r = graph_->ops_[index_];
  return {graph_->operands_.data() + r.first_operand, r.num_operands};
}

std::size_t OpView::num_results() const { return graph_->ops_[index_].num_results; }

Value OpView::result(std::size_t i) const {
  const auto& r = graph_->ops_[index_];
  if (i >= r.num_results)
    throw UserError(
        detail::cat(describe(), " has ", r.num_results, " results; result ", i, " does not exist"));
  return Value{r.first_result + static_cast<std::uint32_t>(i)};
}

std::span<const NamedAttribute> OpView::attributes() const {
  const auto& r = graph_->ops_[index_];
  return {graph_->attributes_.data() + r.first_attribute, r.num_attributes};
}

const Attribute* OpView::find(std::string_view name) const {
  for (const NamedAttribute& a : attributes())
    if (a.name == name) return &a.value;
  return nullptr;
}

const Location& OpView::location() const {
  static const Location kUnknown;
  const auto& r = graph_->ops_[index_];
  return r.location == Graph::kArgument ? kUnknown : graph_->locations_[r.location];
}

std::string OpView::describe() const {
  std::string out = detail::cat("op ", index_, " ('", name(), "')");
  if (const Location& loc = location(); loc.known())
    out += detail::cat(" at ", loc.file, ":", loc.line, ":", loc.column);
  return out;
}

// ---- Graph -------------------------------------------------------------------------------

Value Graph::add_argument(TensorType type) {
  const auto id = static_cast<std::uint32_t>(values_.size());
  values_.push_back({std::move(type), kArgument, static_cast<std::uint32_t>(arguments_.size())});
  arguments_.push_back(Value{id});
  return Value{id};
}

namespace {
const std::string kNoName;
void set_name(std::vector<std::string>& names, std::size_t index, std::string name) {
  if (names.size() <= index) names.resize(index + 1);
  names[index] = std::move(name);
}
}  // namespace

void Graph::set_argument_name(std::size_t index, std::string name) {
  set_name(argument_names_, index, std::move(name));
}
const std::string& Graph::argument_name(std::size_t index) const noexcept {
  return index < argument_names_.size() ? argument_names_[index] : kNoName;
}
void Graph::set_result_name(std::size_t index, std::string name) {
  set_name(result_names_, index, std::move(name));
}
const std::string& Graph::result_name(std::size_t index) const noexcept {
  return index < result_names_.size() ? result_names_[index] : kNoName;
}

void Graph::check_operand(Value v, std::string_view op) const {
  if (v.id >= values_.size())
    throw UserError(detail::cat(op, ": operand ", (v.valid() ? detail::cat("%", v.id) : "<none>"),
                                " is not a value of graph @", name_,
                                "; use values returned by this graph's add_argument/add_op"));
}

OpView Graph::add_op(std::string_view name, std::span<const Value> operands,
                     std::vector<NamedAttribute> attributes, Location location) {
  const OpDef& def = lookup_op(name);
  std::sort(attributes.begin(), attributes.end(),
            [](const NamedAttribute& a, const NamedAttribute& b) { return a.name < b.name; });
  const auto where = [&] {
    return location.known()
               ? detail::cat(name, " at ", location.file, ":", location.line, ":", location.column)
               : std::string(name);
  };
  if (std::string problem = def.check(operands.size(), attributes); !problem.empty())
    throw UserError(detail::cat(where(), ": ", problem));
  if (def.infer == nullptr)
    throw UserError(detail::cat(where(),
                                ": has no inference rule; create it with add_op_typed and "
                                "its result types"));
  std::vector<TensorType> operand_types;
  operand_types.reserve(operands.size());
  for (Value v : operands) {
    check_operand(v, name);
    operand_types.push_back(values_[v.id].type);
  }
  std::vector<TensorType> results;
  try {
    results = def.infer(InferContext(def.name, operand_types, attributes));
  } catch (const UserError& e) {
    std::vector<std::string> types;
    for (const TensorType& t : operand_types) types.push_back(to_string(t));
    throw UserError(detail::cat(
        where(), ": ", e.what(),
        " (operands: ", types.empty() ? std::string("none") : detail::join(types, ", "), ")"));
  }
  return add_op_typed(def, operands, std::move(attributes), std::move(results),
                      std::move(location));
}

OpView Graph::add_op_typed(const OpDef& def, std::span<const Value> operands,
                           std::vector<NamedAttribute> attributes, std::vector<TensorType> results,
                           Location location) {
  for (Value v : operands) check_operand(v, def.name);
  const auto by_name = [](const NamedAttribute& a, const NamedAttribute& b) {
    return a.name < b.name;
  };
  if (!std::is_sorted(attributes.begin(), attributes.end(), by_name))
    std::sort(attributes.begin(), attributes.end(), by_name);
  const auto index = static_cast<std::uint32_t>(ops_.size());
  OpRecord r{};
  r.def = &def;
  r.first_operand = static_cast<std::uint32_t>(operands_.size());
  r.num_operands = static_cast<std::uint32_t>(operands.size());
  operands_.insert(operands_.end(), operands.begin(), operands.end());
  r.first_result = static_cast<std::uint32_t>(values_.size());
  r.num_results = static_cast<std::uint32_t>(results.size());
  for (std::uint32_t i = 0; i < results.size(); ++i)
    values_.push_back({std::move(results[i]), index, i});
  r.first_attribute = static_cast<std::uint32_t>(attributes_.size());
  r.num_attributes = static_cast<std::uint32_t>(attributes.size());
  std::move(attributes.begin(), attributes.end(), std::back_inserter(attributes_));
  r.location = kArgument;
  if (location.known()) {
    r.location = static_cast<std::uint32_t>(locations_.size());
    locations_.push_back(std::move(location));
  }
  ops_.push_back(r);
  return OpView(*this, index);
}

void Graph::set_results(std::vector<Value> results) {
  for (Value v : results) check_operand(v, "set_results");
  results_ = std::move(results);
}

const TensorType& Graph::type(Value value) const {
  check_operand(value, "type");
  return values_[value.id].type;
}

std::int64_t Graph::producer(Value value) const {
  check_operand(value, "producer");
  const auto p = values_[value.id].producer;
  return p == kArgument ? -1 : static_cast<std::int64_t>(p);
}

std::uint32_t Graph::position(Value value) const {
  check_operand(value, "position");
  return values_[value.id].position;
}

// ---- Module ------------------------------------------------------------------------------

Module::Module(const Module& other) : device_(other.device_), entry_(other.entry_) {
  graphs_.reserve(other.graphs_.size());
  for (const auto& g : other.graphs_) {
    graphs_.push_back(std::make_unique<Graph>(*g));
    by_name_.emplace(graphs_.back()->name(), graphs_.size() - 1);
  }
}

Module& Module::operator=(const Module& other) {
  if (this != &other) *this = Module(other);
  return *this;
}

Graph& Module::add_graph(std::string name) {
  if (name.empty()) throw UserError("Module::add_graph: a graph needs a non-empty name");
  if (find(name) != nullptr)
    throw UserError(detail::cat("Module::add_graph: the module has a graph named @", name,
                                " already; symbol names must be unique"));
  graphs_.push_back(std::make_unique<Graph>(std::move(name)));
  by_name_.emplace(graphs_.back()->name(), graphs_.size() - 1);
  return *graphs_.back();
}

void Module::set_entry(std::string_view name) {
  if (const auto it = by_name_.find(name); it != by_name_.end()) {
    entry_ = it->second;
    return;
  }
  throw UserError(detail::cat("Module::set_entry: no graph named @", name));
}

const Graph& Module::entry() const {
  if (graphs_.empty()) throw UserError("Module::entry: the module has no graph");
  return *graphs_[entry_];
}
Graph& Module::entry() {
  return const_cast<Graph&>(static_cast<const Module&>(*this).entry());  // NOLINT
}

const Graph* Module::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : graphs_[it->second].get();
}
Graph* Module::find(std::string_view name) {
  return const_cast<Graph*>(static_cast<const Module&>(*this).find(name));  // NOLINT
}

std::string Module::str() const { return print(*this); }
std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.str(); }

}  // namespace kiln::ir
