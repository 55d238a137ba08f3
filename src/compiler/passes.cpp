// IR passes. Each rebuilds every graph op by op (the IR is append-only), mapping old values
// to new ones; a pass decides per op whether to copy it, drop it, or replace its results.

#include "kiln/compiler/passes.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "compiler/cpu/kernels.hpp"
#include "compiler/ops/elementwise.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "compiler/ops/structural.hpp"
#include "core/str.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"

namespace kiln::passes {
namespace {

using detail::cat;

/// Copies graphs op by op. `decide(op, mapped_operands)` returns either replacement values
/// for the op's results (the op is dropped) or nothing (the op is copied).
using Decide = std::function<std::optional<std::vector<ir::Value>>(
    const ir::OpView& op, const std::vector<ir::Value>& operands, ir::Graph& out)>;

ir::Module rebuild(const ir::Module& module, const std::function<Decide(const ir::Graph&)>& make) {
  ir::Module out(module.device());
  for (std::size_t g = 0; g < module.num_graphs(); ++g) {
    const ir::Graph& in = module.graph(g);
    ir::Graph& graph = out.add_graph(in.name());
    std::vector<ir::Value> map(in.num_values());
    for (ir::Value a : in.arguments()) map[a.id] = graph.add_argument(in.type(a));
    graph.copy_names(in);
    const Decide decide = make(in);
    for (std::size_t i = 0; i < in.num_ops(); ++i) {
      const ir::OpView op = in.op(i);
      std::vector<ir::Value> operands;
      for (ir::Value v : op.operands()) operands.push_back(map[v.id]);
      if (auto replaced = decide(op, operands, graph)) {
        for (std::size_t r = 0; r < replaced->size(); ++r) map[op.result(r).id] = (*replaced)[r];
        continue;
      }
      std::vector<ir::TensorType> types;
      for (std::size_t r = 0; r < op.num_results(); ++r) types.push_back(in.type(op.result(r)));
      const ir::OpView copy =
          graph.add_op_typed(op.def(), operands, {op.attributes().begin(), op.attributes().end()},
                             std::move(types), op.location());
      for (std::size_t r = 0; r < op.num_results(); ++r) map[op.result(r).id] = copy.result(r);
    }
    std::vector<ir::Value> results;
    for (ir::Value v : in.results()) results.push_back(map[v.id]);
    graph.set_results(std::move(results));
  }
  out.set_entry(module.entry().name());
  return out;
}

/// The value of every element of a constant op when they are all equal.
std::optional<double> splat_value(const ir::Graph& g, ir::Value v) {
  const std::int64_t p = g.producer(v);
  if (p < 0 || !compiler::is_op(g.op(static_cast<std::size_t>(p)), compiler::constant_op()))
    return std::nullopt;
  const ir::DenseData& d = g.op(static_cast<std::size_t>(p)).find("value")->as_dense();
  const std::vector<double> values =
      Tensor::from_bytes(d.dtype, d.shape, Device::cpu(), d.bytes.data(), d.bytes.size())
          .to_doubles();
  if (values.empty()) return std::nullopt;
  for (double x : values)  // bit for bit: -0.0 and 0.0 differ
    if (std::bit_cast<std::uint64_t>(x) != std::bit_cast<std::uint64_t>(values.front()))
      return std::nullopt;
  return values.front();
}

/// The op that produces \p v in \p g, if an op of \p name does.
std::optional<ir::OpView> made_by(const ir::Graph& g, ir::Value v, std::string_view name) {
  const std::int64_t p = g.producer(v);
  if (p < 0) return std::nullopt;
  const ir::OpView op = g.op(static_cast<std::size_t>(p));
  if (op.name() != name || op.num_results() != 1) return std::nullopt;
  return op;
}

/// Whether \p v is a constant whose every element is \p want, to a relative 1e-6 (the
/// constants of exported formulas are rounded to f32).
bool is_splat(const ir::Graph& g, ir::Value v, double want) {
  const std::optional<double> c = splat_value(g, v);
  return c && std::fabs(*c - want) <= 1e-6 * std::fabs(want);
}

/// The other operand of the commutative binary op of \p name that makes \p v from it and
/// a splat of \p c, or nullopt.
std::optional<ir::Value> times_constant(const ir::Graph& g, ir::Value v, std::string_view name,
                                        double c) {
  const std::optional<ir::OpView> op = made_by(g, v, name);
  if (!op || op->operands().size() != 2) return std::nullopt;
  for (std::size_t k = 0; k < 2; ++k)
    if (is_splat(g, op->operand(1 - k), c)) return op->operand(k);
  return std::nullopt;
}

/// Whether \p v is x³: pow(x, 3) or x·x·x in either grouping.
bool is_cube_of(const ir::Graph& g, ir::Value v, ir::Value x) {
  if (const std::optional<ir::OpView> p = made_by(g, v, "kiln.pow"))
    return p->operand(0) == x && is_splat(g, p->operand(1), 3.0);
  const std::optional<ir::OpView> m = made_by(g, v, "kiln.mul");
  if (!m) return false;
  for (std::size_t k = 0; k < 2; ++k) {
    if (m->operand(k) != x) continue;
    const std::optional<ir::OpView> sq = made_by(g, m->operand(1 - k), "kiln.mul");
    if (sq && sq->operand(0) == x && sq->operand(1) == x) return true;
  }
  return false;
}

/// GELU's input x and form ("none": erf, or "tanh") as exporters write it out op by op
/// (ONNX before opset 20 has no Gelu): the product of \p a and \p b with {a, b} =
/// {0.5 x, 1 + f(u)} or {x, 0.5 (1 + f(u))}, each product and sum with its operands in
/// either order, where f(u) is erf(x / √2) (or x · 1/√2), or tanh(√(2/π) (x + 0.044715
/// x³)). nullopt for anything else.
std::optional<std::pair<ir::Value, std::string>> gelu_input(const ir::Graph& g, ir::Value a,
                                                            ir::Value b) {
  // 1 + f(u): f's op and u.
  const auto one_plus = [&](ir::Value v) -> std::optional<ir::OpView> {
    const std::optional<ir::Value> t = times_constant(g, v, "kiln.add", 1.0);
    if (!t) return std::nullopt;
    if (std::optional<ir::OpView> f = made_by(g, *t, "kiln.tanh")) return f;
    return made_by(g, *t, "kiln.erf");
  };
  const auto tanh_inner = [&](ir::Value u, ir::Value x) {  // √(2/π) (x + 0.044715 x³)
    const std::optional<ir::Value> sum = times_constant(g, u, "kiln.mul", 0.7978845608028654);
    if (!sum) return false;
    const std::optional<ir::OpView> add = made_by(g, *sum, "kiln.add");
    if (!add) return false;
    for (std::size_t k = 0; k < 2; ++k) {
      if (add->operand(k) != x) continue;
      const std::optional<ir::Value> cube =
          times_constant(g, add->operand(1 - k), "kiln.mul", 0.044715);
      if (cube && is_cube_of(g, *cube, x)) return true;
    }
    return false;
  };
  const auto erf_inner = [&](ir::Value u, ir::Value x) {  // x / √2, or x · (1/√2)
    if (const std::optional<ir::OpView> d = made_by(g, u, "kiln.div"))
      return d->operand(0) == x && is_splat(g, d->operand(1), M_SQRT2);
    const std::optional<ir::Value> scaled = times_constant(g, u, "kiln.mul", M_SQRT1_2);
    return scaled && *scaled == x;
  };
  const auto form = [&](ir::OpView f, ir::Value x) -> std::optional<std::string> {
    if (f.name() == "kiln.tanh" && tanh_inner(f.operand(0), x)) return std::string("tanh");
    if (f.name() == "kiln.erf" && erf_inner(f.operand(0), x)) return std::string("none");
    return std::nullopt;
  };
  for (const auto& [p, q] : {std::pair{a, b}, std::pair{b, a}}) {
    if (const std::optional<ir::Value> x = times_constant(g, p, "kiln.mul", 0.5))
      if (const std::optional<ir::OpView> f = one_plus(q))
        if (std::optional<std::string> approximate = form(*f, *x))
          return std::pair{*x, *approximate};
    if (const std::optional<ir::Value> half = times_constant(g, q, "kiln.mul", 0.5))
      if (const std::optional<ir::OpView> f = one_plus(*half))
        if (std::optional<std::string> approximate = form(*f, p)) return std::pair{p, *approximate};
  }
  return std::nullopt;
}

/// Whether \p v is x²: pow(x, 2) or x·x.
bool is_square_of(const ir::Graph& g, ir::Value v, ir::Value x) {
  if (const std::optional<ir::OpView> p = made_by(g, v, "kiln.pow"))
    return p->operand(0) == x && is_splat(g, p->operand(1), 2.0);
  const std::optional<ir::OpView> m = made_by(g, v, "kiln.mul");
  return m && m->operand(0) == x && m->operand(1) == x;
}

/// RMSNorm's x, gamma and eps as exporters write it out op by op (Llama's, ONNX before
/// opset 23 has no RMSNormalization): the product of \p a and \p b with {a, b} = {gamma,
/// x · 1 / √(mean(x²) + eps)}, each product and sum with its operands in either order, the
/// mean over the last axis, kept; gamma one dim of x's last one. nullopt for anything else.
struct RmsNorm {
  ir::Value x, gamma;
  double eps = 0;
};
std::optional<RmsNorm> rms_norm_of(const ir::Graph& g, ir::Value a, ir::Value b) {
  // mean(x²) over the last axis, kept: its type is x's with the last dim 1.
  const auto mean_of_squares = [&](ir::Value v, ir::Value x) {
    const std::optional<ir::OpView> mean = made_by(g, v, "kiln.reduce_mean");
    if (!mean || !is_square_of(g, mean->operand(0), x)) return false;
    const std::vector<Dim>& in = g.type(x).shape.dims();
    const std::vector<Dim>& got = g.type(v).shape.dims();
    if (in.empty() || got.size() != in.size() || got.back() != Dim(1)) return false;
    return std::equal(in.begin(), in.end() - 1, got.begin());
  };
  for (const auto& [gamma, y] : {std::pair{a, b}, std::pair{b, a}}) {
    const std::vector<Dim>& w = g.type(gamma).shape.dims();
    const std::optional<ir::OpView> scaled = made_by(g, y, "kiln.mul");
    if (!scaled || w.size() != 1) continue;
    for (std::size_t j = 0; j < 2; ++j) {
      const ir::Value x = scaled->operand(j);
      const std::vector<Dim>& xs = g.type(x).shape.dims();
      if (xs.empty() || xs.back() != w[0] || g.type(gamma).dtype != g.type(x).dtype) continue;
      const std::optional<ir::OpView> inverse = made_by(g, scaled->operand(1 - j), "kiln.div");
      if (!inverse || !is_splat(g, inverse->operand(0), 1.0)) continue;
      const std::optional<ir::OpView> root = made_by(g, inverse->operand(1), "kiln.sqrt");
      if (!root) continue;
      const std::optional<ir::OpView> sum = made_by(g, root->operand(0), "kiln.add");
      if (!sum) continue;
      for (std::size_t k = 0; k < 2; ++k) {
        const std::optional<double> eps = splat_value(g, sum->operand(1 - k));
        if (eps && *eps >= 0 && mean_of_squares(sum->operand(k), x)) return RmsNorm{x, gamma, *eps};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

ir::Module dead_code_elimination(const ir::Module& module) {
  return rebuild(module, [](const ir::Graph& g) -> Decide {
    // Mark what the results need, walking the ops backwards.
    auto live = std::make_shared<std::vector<bool>>(g.num_values(), false);
    for (ir::Value v : g.results()) (*live)[v.id] = true;
    auto keep = std::make_shared<std::vector<bool>>(g.num_ops(), false);
    for (std::size_t i = g.num_ops(); i-- > 0;) {
      const ir::OpView op = g.op(i);
      for (std::size_t r = 0; r < op.num_results(); ++r)
        if ((*live)[op.result(r).id]) (*keep)[i] = true;
      if ((*keep)[i])
        for (ir::Value v : op.operands()) (*live)[v.id] = true;
    }
    return [keep](const ir::OpView& op, const std::vector<ir::Value>&,
                  ir::Graph&) -> std::optional<std::vector<ir::Value>> {
      if ((*keep)[op.index()]) return std::nullopt;
      return std::vector<ir::Value>(op.num_results());  // unused: any value will do
    };
  });
}

ir::Module common_subexpression_elimination(const ir::Module& module) {
  return rebuild(module, [&](const ir::Graph& g) -> Decide {
    struct Seen {
      std::vector<ir::NamedAttribute> attributes;
      std::vector<ir::TensorType> types;
      std::vector<ir::Value> results;
    };
    auto seen = std::make_shared<
        std::map<std::pair<std::string, std::vector<std::uint32_t>>, std::vector<Seen>>>();
    return [seen, &g](const ir::OpView& op, const std::vector<ir::Value>& operands,
                      ir::Graph& out) -> std::optional<std::vector<ir::Value>> {
      std::vector<std::uint32_t> ids;
      for (ir::Value v : operands) ids.push_back(v.id);
      std::vector<ir::TensorType> types;
      for (std::size_t r = 0; r < op.num_results(); ++r) types.push_back(g.type(op.result(r)));
      const std::vector<ir::NamedAttribute> attributes(op.attributes().begin(),
                                                       op.attributes().end());
      auto& bucket = (*seen)[{op.name(), ids}];
      for (const Seen& s : bucket)
        if (s.attributes == attributes && s.types == types) return s.results;
      // First of its kind: copy it here so later duplicates can point at it.
      const ir::OpView copy =
          out.add_op_typed(op.def(), operands, attributes, types, op.location());
      std::vector<ir::Value> results;
      for (std::size_t r = 0; r < copy.num_results(); ++r) results.push_back(copy.result(r));
      bucket.push_back({attributes, types, results});
      return results;
    };
  });
}

ir::Module fold_constants(const ir::Module& module) {
  return rebuild(module, [](const ir::Graph& g) -> Decide {
    return [&g](const ir::OpView& op, const std::vector<ir::Value>& operands,
                ir::Graph& out) -> std::optional<std::vector<ir::Value>> {
      if (op.def().infer == nullptr || op.operands().empty() || op.num_results() != 1)
        return std::nullopt;
      const ir::TensorType& type = g.type(op.result(0));
      if (!type.shape.is_static() || type.shape.num_elements() > 4096) return std::nullopt;
      for (ir::Value v : operands) {
        const std::int64_t p = out.producer(v);
        if (p < 0 || !compiler::is_op(out.op(static_cast<std::size_t>(p)), compiler::constant_op()))
          return std::nullopt;
      }
      // Evaluate the op alone with the reference interpreter.
      ir::Module tiny(type.device);
      ir::Graph& t = tiny.add_graph("fold");
      std::vector<ir::Value> args;
      for (ir::Value v : operands) {
        const ir::OpView c = out.op(static_cast<std::size_t>(out.producer(v)));
        args.push_back(t.add_op_typed(c.def(), {}, {c.attributes().begin(), c.attributes().end()},
                                      {out.type(v)})
                           .result(0));
      }
      t.set_results(
          {t.add_op_typed(op.def(), args, {op.attributes().begin(), op.attributes().end()}, {type})
               .result(0)});
      const Tensor value = reference_run(tiny, {}).at(0);
      ir::DenseData dense{
          type.dtype, type.shape,
          std::string(reinterpret_cast<const char*>(value.bytes().data()), value.bytes().size())};
      return std::vector<ir::Value>{out.add_op_typed(compiler::constant_op(), {},
                                                     {{"value", std::move(dense)}}, {type},
                                                     op.location())
                                        .result(0)};
    };
  });
}

ir::Module canonicalize(const ir::Module& module) {
  return rebuild(module, [](const ir::Graph& g) -> Decide {
    return [&g](const ir::OpView& op, const std::vector<ir::Value>& operands,
                ir::Graph& out) -> std::optional<std::vector<ir::Value>> {
      if (op.num_results() != 1) return std::nullopt;
      const ir::TensorType& result = g.type(op.result(0));
      const auto same_type = [&](ir::Value v) { return out.type(v) == result; };
      // Only folds exact for every input: x + 0.0 is +0.0 for x = -0.0, so for floats the
      // neutral element of add is -0.0 (x - 0.0 and x + -0.0 are x for every x).
      const auto identity = [&](std::size_t keep, std::size_t other, double neutral,
                                bool negative = false) -> std::optional<std::vector<ir::Value>> {
        const std::optional<double> c = splat_value(out, operands[other]);
        if (!c) return std::nullopt;
        const bool sign_ok = !is_floating(result.dtype) || std::signbit(*c) == negative;
        if (*c == neutral && sign_ok && same_type(operands[keep]))
          return std::vector<ir::Value>{operands[keep]};
        return std::nullopt;
      };
      // GELU written out op by op: one kiln.gelu (one pass, and oneDNN's post-op inside a
      // matmul).
      if (op.name() == "kiln.mul" && is_floating(result.dtype)) {
        if (const auto gelu = gelu_input(out, operands[0], operands[1]);
            gelu && same_type(gelu->first)) {
          const std::vector<ir::Value> input{gelu->first};
          std::vector<ir::NamedAttribute> attributes;
          if (gelu->second == "tanh") attributes.push_back({"approximate", gelu->second});
          return std::vector<ir::Value>{out.add_op_typed(ir::lookup_op("kiln.gelu"), input,
                                                         attributes, {result}, op.location())
                                            .result(0)};
        }
        // RMSNorm written out op by op: one kiln.rms_norm (one pass over each row, in cache).
        if (const auto norm = rms_norm_of(out, operands[0], operands[1]);
            norm && same_type(norm->x)) {
          const std::vector<ir::Value> inputs{norm->x, norm->gamma};
          const std::vector<ir::NamedAttribute> attributes{{"eps", norm->eps}};
          return std::vector<ir::Value>{out.add_op_typed(ir::lookup_op("kiln.rms_norm"), inputs,
                                                         attributes, {result}, op.location())
                                            .result(0)};
        }
      }
      // What may fold is the op's definition's (compiler/ops/): its algebra as data.
      if (const compiler::ElementwiseDef* e = compiler::find_elementwise(op.def())) {
        if (const std::optional<compiler::NeutralOperand>& n = e->neutral) {
          if (auto r = identity(0, 1, n->value, n->negative)) return r;
          if (n->either_side) return identity(1, 0, n->value, n->negative);
          return std::nullopt;
        }
        if (e->involution) {  // f(f(x)) is x
          const std::int64_t p = out.producer(operands[0]);
          if (p >= 0 && &out.op(static_cast<std::size_t>(p)).def() == e->op)
            return std::vector<ir::Value>{out.op(static_cast<std::size_t>(p)).operand(0)};
          return std::nullopt;
        }
        if (e->identity_on_same_type && same_type(operands[0]))
          return std::vector<ir::Value>{operands[0]};
        return std::nullopt;
      }
      const compiler::KernelDef* k = compiler::find_kernel_def(op.def());
      if (k != nullptr && k->returns_operand != nullptr && !operands.empty() &&
          k->returns_operand(op, same_type(operands[0])))
        return std::vector<ir::Value>{operands[0]};
      return std::nullopt;
    };
  });
}

ir::Module fuse_elementwise(const ir::Module& module) {
  ir::Module out(module.device());
  // Bodies are added as they are made; the graphs being rebuilt keep their order first.
  std::vector<std::pair<const ir::Graph*, ir::Graph*>> graphs;
  for (std::size_t g = 0; g < module.num_graphs(); ++g)
    graphs.emplace_back(&module.graph(g), &out.add_graph(module.graph(g).name()));
  // The bodies of kiln.fused ops already there (a module printed after fusion) stay as
  // they are: their ops are the body, fusing them again would nest kiln.fused ops.
  std::set<std::string> bodies;
  for (std::size_t g = 0; g < module.num_graphs(); ++g)
    for (std::size_t i = 0; i < module.graph(g).num_ops(); ++i)
      if (const ir::OpView op = module.graph(g).op(i); compiler::is_op(op, compiler::fused_op()))
        if (const ir::Attribute* callee = op.find("callee"))
          bodies.insert(callee->as_symbol().name);
  int next_body = 0;
  for (auto [in, graph] : graphs) {
    const bool is_body = bodies.count(in->name()) != 0;
    // Uses of every value (a graph result counts as a use outside any group).
    std::vector<int> uses(in->num_values(), 0);
    for (std::size_t i = 0; i < in->num_ops(); ++i)
      for (ir::Value v : in->op(i).operands()) ++uses[v.id];
    for (ir::Value v : in->results()) ++uses[v.id];
    // Groups, grown from roots backwards.
    std::vector<int> group(in->num_ops(), -1);
    std::vector<std::vector<std::size_t>> groups;
    for (std::size_t r = in->num_ops(); r-- > 0;) {
      const ir::OpView root = in->op(r);
      if (is_body || group[r] >= 0 || !root.def().has(ir::OpTrait::elementwise)) continue;
      const Shape& shape = in->type(root.result(0)).shape;
      std::vector<std::size_t> members{r};
      group[r] = static_cast<int>(groups.size());
      for (std::size_t k = 0; k < members.size(); ++k)
        for (ir::Value v : in->op(members[k]).operands()) {
          const std::int64_t p = in->producer(v);
          if (p < 0 || group[static_cast<std::size_t>(p)] >= 0) continue;
          const ir::OpView prod = in->op(static_cast<std::size_t>(p));
          if (!prod.def().has(ir::OpTrait::elementwise) || uses[v.id] != 1 ||
              in->type(v).shape != shape)
            continue;
          group[static_cast<std::size_t>(p)] = group[r];
          members.push_back(static_cast<std::size_t>(p));
        }
      if (members.size() < 2) {
        group[r] = -1;
        continue;
      }
      std::sort(members.begin(), members.end());
      groups.push_back(std::move(members));
    }
    // Rebuild: a group's root becomes one kiln.fused op, its other members disappear.
    std::vector<ir::Value> map(in->num_values());
    for (ir::Value a : in->arguments()) map[a.id] = graph->add_argument(in->type(a));
    graph->copy_names(*in);
    for (std::size_t i = 0; i < in->num_ops(); ++i) {
      const ir::OpView op = in->op(i);
      const int gi = group[i];
      if (gi >= 0 && groups[static_cast<std::size_t>(gi)].back() != i) continue;  // inside the body
      if (gi < 0) {
        std::vector<ir::Value> operands;
        for (ir::Value v : op.operands()) operands.push_back(map[v.id]);
        std::vector<ir::TensorType> types;
        for (std::size_t r = 0; r < op.num_results(); ++r) types.push_back(in->type(op.result(r)));
        const ir::OpView copy = graph->add_op_typed(
            op.def(), operands, {op.attributes().begin(), op.attributes().end()}, std::move(types),
            op.location());
        for (std::size_t r = 0; r < op.num_results(); ++r) map[op.result(r).id] = copy.result(r);
        continue;
      }
      // Outline the group into a body graph.
      const std::vector<std::size_t>& members = groups[static_cast<std::size_t>(gi)];
      std::string name;
      do name = cat("fused_", next_body++);
      while (module.find(name) != nullptr || out.find(name) != nullptr);
      ir::Graph& body = out.add_graph(name);
      std::vector<ir::Value> inner(in->num_values());
      std::vector<bool> bound(in->num_values(), false);
      std::vector<ir::Value> externals;
      for (std::size_t m : members) {
        const ir::OpView member = in->op(m);
        std::vector<ir::Value> operands;
        for (ir::Value v : member.operands()) {
          const std::int64_t p = in->producer(v);
          const bool internal = p >= 0 && group[static_cast<std::size_t>(p)] == gi;
          if (!internal && !bound[v.id]) {
            inner[v.id] = body.add_argument(in->type(v));
            bound[v.id] = true;
            externals.push_back(map[v.id]);
          }
          operands.push_back(inner[v.id]);
        }
        inner[member.result(0).id] =
            body.add_op_typed(member.def(), operands,
                              {member.attributes().begin(), member.attributes().end()},
                              {in->type(member.result(0))}, member.location())
                .result(0);
      }
      body.set_results({inner[op.result(0).id]});
      map[op.result(0).id] =
          graph
              ->add_op_typed(compiler::fused_op(), externals, {{"callee", ir::SymbolRef{name}}},
                             {in->type(op.result(0))}, op.location())
              .result(0);
    }
    std::vector<ir::Value> results;
    for (ir::Value v : in->results()) results.push_back(map[v.id]);
    graph->set_results(std::move(results));
  }
  out.set_entry(module.entry().name());
  return out;
}

std::vector<std::string> default_pipeline() {
  return {"canonicalize", "fold", "cse", "dce", "fuse"};
}

ir::Module run_passes(const ir::Module& module, const std::vector<std::string>& names) {
  static const std::map<std::string, ir::Module (*)(const ir::Module&)> kPasses = {
      {"canonicalize", canonicalize},
      {"fold", fold_constants},
      {"cse", common_subexpression_elimination},
      {"dce", dead_code_elimination},
      {"fuse", fuse_elementwise}};
  ir::Module current = module;
  for (const std::string& name : names) {
    auto it = kPasses.find(name);
    if (it == kPasses.end()) {
      std::vector<std::string> known;
      for (const auto& [n, f] : kPasses) known.push_back(n);
      throw UserError(cat("unknown pass '", name, "'; known passes: ", detail::join(known, ", ")));
    }
    current = it->second(current);
  }
  return current;
}

}  // namespace kiln::passes
