#include "kiln/ir/verifier.hpp"

#include <algorithm>
#include <map>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::ir {
namespace {

using kiln::detail::cat;

class Verifier {
 public:
  explicit Verifier(const Module& module) : module_(module) {}

  std::vector<Diagnostic> run() {
    for (std::size_t i = 0; i < module_.num_graphs(); ++i) graph(module_.graph(i));
    call_cycles();
    return std::move(diagnostics_);
  }

 private:
  void report(const Graph& g, const OpView* op, std::string message) {
    diagnostics_.push_back(
        {op ? cat("@", g.name(), ", ", op->describe()) : cat("@", g.name()), std::move(message)});
  }

  void graph(const Graph& g) {
    for (std::size_t a = 0; a < g.arguments().size(); ++a)
      size(g, nullptr, g.arguments()[a], cat("argument ", a));
    for (std::size_t i = 0; i < g.num_ops(); ++i) {
      const OpView o = g.op(i);
      op(g, o);
      for (std::size_t r = 0; r < o.num_results(); ++r) size(g, &o, o.result(r), cat("result ", r));
    }
  }

  // Every static value fits kiln's limit, so that no size computed from it overflows.
  void size(const Graph& g, const OpView* op, Value v, const std::string& what) {
    const TensorType& t = g.type(v);
    if (!t.shape.is_static()) return;
    try {
      t.shape.num_bytes(size_of(t.dtype));
    } catch (const UserError& e) {
      report(g, op, cat(what, " (", t, "): ", e.what()));
    }
  }

  void op(const Graph& g, const OpView& op) {
    const OpDef& def = op.def();
    if (std::string problem = def.check(op.operands().size(), op.attributes()); !problem.empty()) {
      report(g, &op, cat(def.name, " ", problem));
      return;
    }
    // SSA dominance: one block per graph, so "defined before use" is "an argument or a
    // result of an earlier op".
    for (std::size_t i = 0; i < op.operands().size(); ++i) {
      const std::int64_t producer = g.producer(op.operand(i));
      if (producer >= static_cast<std::int64_t>(op.index())) {
        report(g, &op,
               cat("operand ", i, " is defined by op ", producer,
                   ", which does not come before its use"));
        return;
      }
    }
    if (def.infer != nullptr || def.verify != nullptr) rule(g, op, def);
    if (const Attribute* callee = op.find("callee")) call(g, op, callee->as_symbol().name);
  }

  // The op's own rules: its inference rule must give the stored result types.
  void rule(const Graph& g, const OpView& op, const OpDef& def) {
    std::vector<TensorType> operand_types;
    for (Value v : op.operands()) operand_types.push_back(g.type(v));
    std::vector<TensorType> results;
    for (std::size_t r = 0; r < op.num_results(); ++r) results.push_back(g.type(op.result(r)));
    const InferContext ctx(def.name, operand_types, op.attributes());
    try {
      if (def.infer != nullptr) {
        const std::vector<TensorType> expected = def.infer(ctx);
        if (expected.size() != results.size()) {
          report(g, &op,
                 cat(def.name, " produces ", expected.size(), " results but has ", results.size()));
        } else {
          for (std::size_t r = 0; r < results.size(); ++r)
            if (results[r] != expected[r])
              report(g, &op,
                     cat("result ", r, " is ", results[r], " but ", def.name,
                         " of these operands gives ", expected[r]));
        }
      }
      if (def.verify != nullptr) def.verify(ctx, results);
    } catch (const UserError& e) {
      report(g, &op, cat(def.name, ": ", e.what()));
    }
  }

  void call(const Graph& g, const OpView& op, const std::string& name) {
    const Graph* callee = module_.find(name);
    if (callee == nullptr) {
      report(g, &op, cat("calls @", name, ", which the module does not define"));
      return;
    }
    calls_[&g].push_back(callee);
    const std::span<const Value> operands = op.operands();
    if (callee->arguments().size() != operands.size()) {
      report(g, &op,
             cat("calls @", name, " with ", operands.size(), " operands but it takes ",
                 callee->arguments().size()));
    } else {
      for (std::size_t i = 0; i < operands.size(); ++i)
        if (g.type(operands[i]) != callee->type(callee->arguments()[i]))
          report(g, &op,
                 cat("operand ", i, " is ", g.type(operands[i]), " but @", name, " takes ",
                     callee->type(callee->arguments()[i])));
    }
    if (callee->results().size() != op.num_results()) {
      report(g, &op,
             cat("expects ", op.num_results(), " results from @", name, ", which returns ",
                 callee->results().size()));
    } else {
      for (std::size_t r = 0; r < op.num_results(); ++r)
        if (g.type(op.result(r)) != callee->type(callee->results()[r]))
          report(g, &op,
                 cat("result ", r, " is ", g.type(op.result(r)), " but @", name, " returns ",
                     callee->type(callee->results()[r])));
    }
  }

  // A graph must not call itself, directly or through others: it would never finish. And
  // calls nest at most kMaxCallDepth deep. Depth-first over the call graph with an
  // explicit stack, so that a long chain of calls cannot overflow this thread's stack.
  void call_cycles() {
    std::map<const Graph*, std::size_t> depth;  // finished graphs: their deepest call chain
    std::map<const Graph*, bool> on_path;
    struct Frame {
      const Graph* graph;
      std::size_t next = 0;  // the next callee to visit
    };
    for (std::size_t i = 0; i < module_.num_graphs(); ++i) {
      const Graph* root = &module_.graph(i);
      if (depth.count(root) != 0) continue;
      std::vector<Frame> path{{root}};
      on_path[root] = true;
      bool stop = false;
      while (!path.empty() && !stop) {
        Frame& top = path.back();
        const std::vector<const Graph*>& callees = calls_[top.graph];
        if (top.next == callees.size()) {  // all callees done: this graph's depth
          std::size_t d = 0;
          for (const Graph* c : callees) d = std::max(d, depth[c] + 1);
          depth[top.graph] = d;
          on_path[top.graph] = false;
          path.pop_back();
          continue;
        }
        const Graph* callee = callees[top.next++];
        if (depth.count(callee) != 0) continue;
        if (on_path[callee]) {
          std::vector<std::string> cycle;
          auto it = std::find_if(path.begin(), path.end(),
                                 [&](const Frame& f) { return f.graph == callee; });
          for (; it != path.end(); ++it) cycle.push_back("@" + it->graph->name());
          cycle.push_back("@" + callee->name());
          report(*callee, nullptr,
                 cat("calls itself through ", kiln::detail::join(cycle, " -> "),
                     "; subgraph calls must not form a cycle"));
          stop = true;  // depths mean nothing past a cycle
        } else {
          on_path[callee] = true;
          path.push_back({callee});
        }
      }
      if (stop) return;
    }
    for (std::size_t i = 0; i < module_.num_graphs(); ++i) {
      const Graph& g = module_.graph(i);
      if (depth[&g] > kMaxCallDepth) {
        report(g, nullptr,
               cat("its calls nest ", depth[&g], " deep, more than kiln's limit of ", kMaxCallDepth,
                   " (ir::kMaxCallDepth): inline some of the calls"));
        return;
      }
    }
  }

  const Module& module_;
  std::vector<Diagnostic> diagnostics_;
  std::map<const Graph*, std::vector<const Graph*>> calls_;
};

}  // namespace

std::vector<Diagnostic> verify(const Module& module) { return Verifier(module).run(); }

namespace {

std::uint64_t expanded_ops(const Module& module, const Graph& g,
                           std::map<const Graph*, std::uint64_t>& counted) {
  if (const auto it = counted.find(&g); it != counted.end()) return it->second;
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < g.num_ops(); ++i) {
    const OpView op = g.op(i);
    const Attribute* callee = op.name() == "func.call" ? op.find("callee") : nullptr;
    const Graph* body = callee != nullptr ? module.find(callee->as_symbol().name) : nullptr;
    // Recursion at most kMaxCallDepth deep in a verified module.
    const std::uint64_t ops = body != nullptr ? expanded_ops(module, *body, counted) : 1;
    n = n > UINT64_MAX - ops ? UINT64_MAX : n + ops;
  }
  counted.emplace(&g, n);
  return n;
}

}  // namespace

std::uint64_t expanded_op_count(const Module& module) {
  std::map<const Graph*, std::uint64_t> counted;
  return expanded_ops(module, module.entry(), counted);
}

void verify_or_throw(const Module& module) {
  const std::vector<Diagnostic> problems = verify(module);
  if (problems.empty()) return;
  std::string message =
      cat("the module has ", problems.size(), " problem", problems.size() == 1 ? "" : "s", ":");
  for (const Diagnostic& d : problems) message += cat("\n  ", d.where, ": ", d.message);
  throw UserError(message);
}

}  // namespace kiln::ir
