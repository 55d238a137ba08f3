// Weights, name scopes and subgraph calls while staging.

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/op_registry.hpp"
#include "stage/frame.hpp"

namespace kiln {
namespace detail {

std::string qualified(const Frame& frame, const std::string& name) {
  std::string out;
  for (const std::string& part : frame.prefix) {
    if (!out.empty()) out += '.';
    out += part;
  }
  if (!name.empty()) {
    if (!out.empty()) out += '.';
    out += name;
  }
  return out;
}

std::uint64_t next_subgraph_instance() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

bool subgraphs_enabled() {
  const Frame* frame = current_frame();
  return frame != nullptr && frame->session().options.subgraphs;
}

namespace {

// The body key: identity (name, or callable type and object), argument tree, operand
// types, prefix presence. Built by appending (staging calls it at every call site).
void append_tree(std::string& key, const TreeDef& t) {
  key += static_cast<char>('0' + static_cast<int>(t.kind()));
  key += t.type();
  key += '=';
  key += t.value();
  for (const std::string& k : t.keys()) (key += k) += ',';
  key += '(';
  for (const TreeDef& c : t.children()) append_tree(key, c);
  key += ')';
}

std::string body_key(const SubgraphCall& call, const ir::Graph& graph,
                     const std::vector<ir::Value>& operands) {
  std::string key;
  key.reserve(160);
  if (call.options->name.empty()) {
    key += call.callable->name();
    key += '@';
    key += std::to_string(call.instance);
  } else {
    key += "name:";
    key += call.options->name;
  }
  key += '|';
  append_tree(key, call.in_tree);
  for (ir::Value v : operands) {
    const ir::TensorType& t = graph.type(v);
    key += '|';
    key += name(t.dtype);
    for (const Dim& d : t.shape.dims()) {
      key += ' ';
      key += d.is_static() ? std::to_string(d.size()) : d.symbol();
    }
    key += '@';
    key += t.device.str();
  }
  key += call.options->prefix.empty() ? "|-" : "|+";
  return key;
}

std::string unique_symbol(SessionState& session, const std::string& wanted) {
  int& uses = session.symbol_uses[wanted];
  std::string symbol = uses == 0 ? wanted : cat(wanted, "_", uses);
  ++uses;
  while (session.module.find(symbol) != nullptr) symbol = cat(wanted, "_", uses++);
  return symbol;
}

// Traces a new body for \p call into its own graph of the module.
std::unique_ptr<SubgraphBody> trace_body(Frame& caller, const SubgraphCall& call,
                                         const std::vector<ir::Value>& operands,
                                         const TraceBody& trace) {
  SessionState& session = caller.session();
  auto body = std::make_unique<SubgraphBody>();
  body->symbol =
      unique_symbol(session, call.options->name.empty() ? "subgraph" : call.options->name);
  ir::Graph& graph = session.module.add_graph(body->symbol);
  auto frame = std::make_shared<Frame>(graph, session, &caller);
  session.frames.push_back(frame);
  std::vector<Tensor> inputs;
  for (ir::Value v : operands) {
    const ir::TensorType& t = caller.graph().type(v);
    inputs.push_back(Tensor::traced(frame, graph.add_argument(t).id, to_layout(t)));
  }
  set_current_frame(frame.get());
  try {
    auto [leaves, tree] = trace(inputs, body->prototype);
    graph.set_results(output_values(*frame, leaves, tree, cat("subgraph @", body->symbol)));
  } catch (...) {
    set_current_frame(&caller);
    throw;
  }
  set_current_frame(&caller);
  for (ir::Value v : graph.results()) {
    body->result_types.push_back(graph.type(v));
    body->result_layouts.push_back(to_layout(graph.type(v)));
  }
  return body;
}

}  // namespace

SubgraphResult call_subgraph(SubgraphCall call, const TraceBody& trace) {
  Frame& caller = require_frame("as_subgraph", call.where);
  SessionState& session = caller.session();
  std::vector<ir::Value> operands;
  for (std::size_t i = 0; i < call.in_leaves.size(); ++i)
    operands.push_back(value_of(caller, call.in_leaves[i], "subgraph call", call.where,
                                Role{"argument leaf", i, &call.in_tree}));
  LastCall& last = session.last_calls[{std::type_index(*call.callable), call.instance}];
  const bool same_as_last =
      last.body != nullptr && *last.callable == *call.callable && last.name == call.options->name &&
      last.has_prefix == !call.options->prefix.empty() && last.tree == call.in_tree &&
      last.types.size() == operands.size() &&
      std::equal(operands.begin(), operands.end(), last.types.begin(),
                 [&](ir::Value v, const ir::TensorType& t) { return caller.graph().type(v) == t; });
  if (!same_as_last) {
    const std::string key = body_key(call, caller.graph(), operands);
    auto it = session.bodies.find(key);
    if (it == session.bodies.end())
      it = session.bodies.emplace(key, trace_body(caller, call, operands, trace)).first;
    last.callable = call.callable;
    last.name = call.options->name;
    last.has_prefix = !call.options->prefix.empty();
    last.tree = call.in_tree;
    last.types.clear();
    for (ir::Value v : operands) last.types.push_back(caller.graph().type(v));
    last.body = it->second.get();
  }
  const SubgraphBody& body = *last.body;
  std::vector<ir::NamedAttribute> attrs{{"callee", ir::SymbolRef{body.symbol}}};
  if (const std::string prefix = qualified(caller, call.options->prefix); !prefix.empty())
    attrs.push_back({"kiln.prefix", prefix});
  static const ir::OpDef& call_op = ir::lookup_op("func.call");
  const ir::OpView op =
      caller.graph().add_op_typed(call_op, operands, std::move(attrs), body.result_types);
  SubgraphResult result{{}, &body.prototype};
  const auto self = caller.shared_from_this();
  result.leaves.reserve(op.num_results());
  for (std::size_t r = 0; r < op.num_results(); ++r)
    result.leaves.push_back(Tensor::traced(self, op.result(r).id, body.result_layouts[r]));
  return result;
}

}  // namespace detail

Tensor weight(const std::string& name, TensorLayout layout, Loc where) {
  detail::Frame& frame = detail::require_frame("kiln::weight", where);
  if (name.empty())
    throw UserError(detail::cat("kiln::weight at ", detail::where_string(where),
                                ": a weight needs a non-empty name"));
  const std::string full = detail::qualified(frame, name);
  if (auto it = frame.weights.find(full); it != frame.weights.end()) {
    const TensorLayout existing = detail::to_layout(frame.graph().type(ir::Value{it->second}));
    if (existing != layout)
      throw UserError(detail::cat("kiln::weight at ", detail::where_string(where), ": weight '",
                                  full, "' was declared as ", existing, " and now as ", layout,
                                  "; one name, one layout"));
    return Tensor::traced(frame.shared_from_this(), it->second, std::move(layout));
  }
  const ir::Value v = frame.graph()
                          .add_op_typed(ir::lookup_op("kiln.weight"), {}, {{"name", full}},
                                        {detail::to_ir(layout)}, detail::location_of(where))
                          .result(0);
  frame.weights.emplace(full, v.id);
  return Tensor::traced(frame.shared_from_this(), v.id, std::move(layout));
}

name_scope::name_scope(const std::string& name) {
  detail::Frame* frame = detail::current_frame();
  if (frame == nullptr)
    throw UserError(
        "kiln::name_scope: no function is being staged; open scopes inside a "
        "function traced by kiln::stage");
  saved_ = frame->prefix.size();
  if (!name.empty()) frame->prefix.push_back(name);
}

name_scope::~name_scope() {
  if (detail::Frame* frame = detail::current_frame();
      frame != nullptr && frame->prefix.size() > saved_)
    frame->prefix.resize(saved_);
}

}  // namespace kiln
