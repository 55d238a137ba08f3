// Weights, name scopes and subgraph calls while staging.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <set>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/op_registry.hpp"
#include "stage/frame.hpp"

namespace kiln {

struct SubgraphCache::State {
  std::unordered_map<std::string, detail::CachedBody> bodies;  // by body key
};

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

/// The graphs a body needs in a module: the body, then every graph it calls, transitively.
std::vector<ir::Graph> body_and_callees(const ir::Module& module, const std::string& symbol) {
  std::vector<ir::Graph> out;
  std::vector<std::string> todo{symbol};
  std::set<std::string> seen{symbol};
  while (!todo.empty()) {
    const ir::Graph* g = module.find(todo.back());
    todo.pop_back();
    if (g == nullptr) continue;
    out.push_back(*g);
    for (std::size_t i = 0; i < g->num_ops(); ++i)
      if (const ir::Attribute* callee = g->op(i).find("callee"))
        if (seen.insert(callee->as_symbol().name).second) todo.push_back(callee->as_symbol().name);
  }
  return out;
}

/// Copies \p from into \p into as @name, with calls to the graphs in \p renamed redirected.
void copy_graph(const ir::Graph& from, ir::Module& into, const std::string& name,
                const std::map<std::string, std::string>& renamed) {
  ir::Graph& g = into.add_graph(name);
  std::vector<ir::Value> value(from.num_values());
  for (ir::Value a : from.arguments()) value[a.id] = g.add_argument(from.type(a));
  for (std::size_t i = 0; i < from.num_ops(); ++i) {
    const ir::OpView op = from.op(i);
    std::vector<ir::Value> operands;
    for (ir::Value v : op.operands()) operands.push_back(value[v.id]);
    std::vector<ir::NamedAttribute> attributes(op.attributes().begin(), op.attributes().end());
    for (ir::NamedAttribute& a : attributes)
      if (a.name == "callee")
        if (auto r = renamed.find(a.value.as_symbol().name); r != renamed.end())
          a.value = ir::Attribute(ir::SymbolRef{r->second});
    std::vector<ir::TensorType> types;
    for (std::size_t r = 0; r < op.num_results(); ++r) types.push_back(from.type(op.result(r)));
    const ir::OpView copy =
        g.add_op_typed(op.def(), operands, std::move(attributes), std::move(types), op.location());
    for (std::size_t r = 0; r < op.num_results(); ++r) value[op.result(r).id] = copy.result(r);
  }
  std::vector<ir::Value> results;
  for (ir::Value v : from.results()) results.push_back(value[v.id]);
  g.set_results(std::move(results));
}

/// A body from the shared cache, its graphs copied into this session's module (renamed
/// where the module has a graph of that name already).
std::unique_ptr<SubgraphBody> import_body(SessionState& session, const CachedBody& cached) {
  std::map<std::string, std::string> renamed;
  for (const ir::Graph& g : cached.graphs)
    renamed[g.name()] =
        session.module.find(g.name()) == nullptr && session.symbol_uses[g.name()] == 0
            ? g.name()
            : unique_symbol(session, g.name());
  for (const ir::Graph& g : cached.graphs) {
    ++session.symbol_uses[renamed[g.name()]];
    copy_graph(g, session.module, renamed[g.name()], renamed);
  }
  auto body = std::make_unique<SubgraphBody>(cached.body);
  body->symbol = renamed[cached.body.symbol];
  return body;
}

/// This call's body: traced here, or, with a shared SubgraphCache, taken from it when an
/// earlier `stage` call traced it (and stored there when traced here).
std::unique_ptr<SubgraphBody> body_for(Frame& caller, const SubgraphCall& call,
                                       const std::vector<ir::Value>& operands,
                                       const TraceBody& trace, const std::string& key) {
  SessionState& session = caller.session();
  SubgraphCache* shared = session.options.subgraph_cache;
  if (shared == nullptr) return trace_body(caller, call, operands, trace);
  auto& cached = SubgraphCacheAccess::bodies(*shared);
  if (auto hit = cached.find(key); hit != cached.end()) return import_body(session, hit->second);
  std::unique_ptr<SubgraphBody> body = trace_body(caller, call, operands, trace);
  cached.emplace(key, CachedBody{body_and_callees(session.module, body->symbol), *body});
  return body;
}

}  // namespace

std::unordered_map<std::string, CachedBody>& SubgraphCacheAccess::bodies(SubgraphCache& cache) {
  return cache.state_->bodies;
}

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
      it = session.bodies.emplace(key, body_for(caller, call, operands, trace, key)).first;
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

SubgraphCache::SubgraphCache() : state_(std::make_unique<State>()) {}
SubgraphCache::~SubgraphCache() = default;
std::size_t SubgraphCache::size() const noexcept { return state_->bodies.size(); }
void SubgraphCache::clear() { state_->bodies.clear(); }

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
