// Weights, name scopes and subgraph calls while staging.

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/op_registry.hpp"
#include "stage/frame.hpp"

namespace kiln {
namespace detail {

std::string qualified(const Frame& frame, const std::string& name) {
  std::vector<std::string> parts = frame.prefix;
  if (!name.empty()) parts.push_back(name);
  return join(parts, ".");
}

bool subgraphs_enabled() {
  const Frame* frame = current_frame();
  return frame != nullptr && frame->session().options.subgraphs;
}

namespace {

std::string body_key(const SubgraphCall& call, const std::vector<ir::TensorType>& types,
                     const void* identity) {
  std::string key = call.options->name.empty()
                        ? cat("callable ", call.callable->name(), " @", identity)
                        : cat("name ", call.options->name);
  key += cat(" | tree ", call.in_tree.str(), " | types");
  for (const ir::TensorType& t : types) key += cat(" ", ir::to_string(t));
  key += call.options->prefix.empty() ? " | no prefix" : " | prefix";
  return key;
}

std::string unique_symbol(SessionState& session, const std::string& wanted) {
  int& uses = session.symbol_uses[wanted];
  std::string symbol = uses == 0 ? wanted : cat(wanted, "_", uses);
  ++uses;
  while (session.module.find(symbol) != nullptr) symbol = cat(wanted, "_", uses++);
  return symbol;
}

}  // namespace

SubgraphResult call_subgraph(SubgraphCall call, const TraceBody& trace) {
  Frame& caller = require_frame("as_subgraph", call.where);
  SessionState& session = caller.session();
  std::vector<ir::Value> operands;
  std::vector<ir::TensorType> types;
  const std::vector<std::string> paths = call.in_tree.leaf_paths();
  for (std::size_t i = 0; i < call.in_leaves.size(); ++i) {
    operands.push_back(value_of(caller, call.in_leaves[i], "subgraph call", call.where,
                                cat("argument leaf '", paths[i], "'")));
    types.push_back(caller.graph().type(operands.back()));
  }
  const std::string key = body_key(call, types, call.identity);
  auto it = session.bodies.find(key);
  if (it == session.bodies.end()) {
    auto body = std::make_unique<SubgraphBody>();
    body->symbol =
        unique_symbol(session, call.options->name.empty() ? "subgraph" : call.options->name);
    ir::Graph& graph = session.module.add_graph(body->symbol);
    auto frame = std::make_shared<Frame>(graph, session, &caller);
    session.frames.push_back(frame);
    std::vector<Tensor> inputs;
    for (const ir::TensorType& t : types)
      inputs.push_back(Tensor::traced(frame, graph.add_argument(t).id, to_layout(t)));
    set_current_frame(frame.get());
    try {
      auto [leaves, tree] = trace(inputs, body->prototype);
      graph.set_results(output_values(*frame, leaves, tree, cat("subgraph @", body->symbol)));
    } catch (...) {
      set_current_frame(&caller);
      throw;
    }
    set_current_frame(&caller);
    for (ir::Value v : graph.results()) body->result_types.push_back(graph.type(v));
    it = session.bodies.emplace(key, std::move(body)).first;
  }
  const SubgraphBody& body = *it->second;
  std::vector<ir::NamedAttribute> attrs{{"callee", ir::SymbolRef{body.symbol}}};
  if (const std::string prefix = qualified(caller, call.options->prefix); !prefix.empty())
    attrs.push_back({"kiln.prefix", prefix});
  const ir::OpView op = caller.graph().add_op_typed(ir::lookup_op("func.call"), operands,
                                                    std::move(attrs), body.result_types);
  SubgraphResult result{{}, &body.prototype};
  const auto self = caller.shared_from_this();
  for (std::size_t r = 0; r < op.num_results(); ++r)
    result.leaves.push_back(Tensor::traced(self, op.result(r).id, to_layout(body.result_types[r])));
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
