// A plan's launches and values (see instantiate.hpp).

#include "compiler/plan/instantiate.hpp"

#include <algorithm>
#include <numeric>

#include "compiler/lowering.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {
namespace {

using detail::cat;

/// What a launch computes, for traces and DOT: `kiln.matmul layers.0.attn (model.cpp:12)`.
std::string launch_label(const ir::OpView& op, const std::string& prefix) {
  std::string label = op.name();
  if (const ir::Attribute* callee = op.find("callee")) label += " @" + callee->as_symbol().name;
  if (!prefix.empty()) label += " " + prefix;
  const ir::Location& loc = op.location();
  if (loc.known()) label += cat(" (", loc.file.substr(loc.file.rfind('/') + 1), ":", loc.line, ")");
  return label;
}

/// `a.b`, or whichever is not empty.
std::string join_prefix(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) return std::string(a.empty() ? b : a);
  return cat(a, ".", b);
}

/// One plan being made: graphs instantiated into it, calls recursively (at most
/// ir::kMaxCallDepth deep, which the verifier checks).
class Instantiation {
 public:
  Instantiation(const PlanSetup& setup, Plan& plan, const std::vector<Tensor>& inputs)
      : setup_(setup), plan_(plan) {
    const ir::Graph& entry = setup.module.entry();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Shape& want = entry.type(entry.arguments()[i]).shape;
      for (std::size_t d = 0; d < want.rank(); ++d)
        if (want.dims()[d].is_name())  // (CompiledCallable refuses other symbolic inputs)
          symbols_[want.dims()[d].symbol()] = inputs[i].shape().dims()[d].size();
    }
  }

  /// \p d's size for these inputs (a name's, or an expression's over them).
  std::int64_t dim_size(const Dim& d) const {
    return evaluate_dim(d, [&](const std::string& name) -> std::optional<std::int64_t> {
      const auto it = symbols_.find(name);
      if (it == symbols_.end()) return std::nullopt;
      return it->second;
    });
  }

  /// A new value of type \p t (its dims made concrete).
  std::size_t new_storage(const ir::TensorType& t) {
    Storage s;
    s.device = setup_.device_slot(t.device);
    s.dtype = t.dtype;
    for (const Dim& d : t.shape.dims()) s.shape.push_back(dim_size(d));
    try {
      s.bytes = static_cast<std::size_t>(checked_tensor_bytes(s.shape, size_of(t.dtype)));
    } catch (const UserError& e) {
      throw UserError(cat("CompiledCallable: these input shapes make a value of ", ir::to_string(t),
                          " too big (", e.what(), "); call it with smaller inputs"));
    }
    plan_.storage.push_back(std::move(s));
    return plan_.storage.size() - 1;
  }

  // Adds the launches of graph \p g (recursively for calls) and returns its results' storage.
  std::vector<std::size_t> instantiate(const ir::Graph& g, const std::vector<std::size_t>& args,
                                       const std::string& prefix) {
    std::vector<std::size_t> where(g.num_values());
    for (std::size_t i = 0; i < args.size(); ++i) where[g.arguments()[i].id] = args[i];
    const Program& p = setup_.programs.at(&g);
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      const ir::OpView op = g.op(i);
      const Step& step = p.steps[i];
      std::vector<std::size_t> in;
      for (ir::Value v : op.operands()) in.push_back(where[v.id]);
      if (step.kind == StepKind::call) {
        const std::vector<std::size_t> results =
            instantiate(*step.callee, in, join_prefix(prefix, step.prefix));
        for (std::size_t r = 0; r < results.size(); ++r) where[op.result(r).id] = results[r];
        continue;
      }
      if (step.kind == StepKind::weight || step.kind == StepKind::constant) {
        const std::size_t s = new_storage(g.type(op.result(0)));
        std::byte* host = nullptr;  // read only
        if (step.kind == StepKind::weight) {
          const Tensor& w = setup_.weights.at(join_prefix(prefix, op.find("name")->as_string()));
          host = const_cast<std::byte*>(w.bytes().data());
        } else {
          host = reinterpret_cast<std::byte*>(
              const_cast<char*>(op.find("value")->as_dense().bytes.data()));
        }
        plan_.storage[s].fixed = setup_.lowering.fixed_bytes(host, plan_.storage[s].bytes);
        where[op.result(0).id] = s;
        continue;
      }
      if (step.kind == StepKind::collective) {
        instantiate_collective(g, i, prefix, step, in, where);
        continue;
      }
      std::vector<std::size_t> results(op.num_results());
      std::iota(results.begin(), results.end(), std::size_t{0});
      const ir::Value on = op.num_results() > 0 ? op.result(0) : op.operand(0);
      add_launch(g, i, prefix, step, in, results, setup_.device_slot(g.type(on).device), where);
    }
    std::vector<std::size_t> results;
    for (ir::Value v : g.results()) results.push_back(where[v.id]);
    return results;
  }

 private:
  // Adds a launch of op \p i of \p g on device slot \p device, reading \p in and making
  // the op's results numbered \p results; returns its index.
  std::size_t add_launch(const ir::Graph& g, std::size_t i, const std::string& prefix,
                         const Step& step, const std::vector<std::size_t>& in,
                         const std::vector<std::size_t>& results, std::size_t device,
                         std::vector<std::size_t>& where) {
    const ir::OpView op = g.op(i);
    const std::size_t launch = plan_.launches.size();
    Launch l;
    l.graph = &g;
    l.op = static_cast<std::uint32_t>(i);
    l.fused = step.fused;
    plan_.launches.push_back(std::move(l));
    plan_.labels.push_back(launch_label(op, prefix));
    std::vector<std::size_t> out;
    for (std::size_t r : results) {
      const std::size_t s = new_storage(g.type(op.result(r)));
      plan_.storage[s].producer = static_cast<std::int64_t>(launch);
      plan_.storage[s].arena_offset = 0;  // placed by place_values
      where[op.result(r).id] = s;
      out.push_back(s);
    }
    for (std::size_t s : in) plan_.storage[s].readers.push_back(launch);
    plan_.io.push_back({.first = plan_.io_storage.size(),
                        .ins = static_cast<std::uint32_t>(in.size()),
                        .outs = static_cast<std::uint32_t>(out.size()),
                        .kernel = step.kernel,
                        .device = device});
    plan_.io_storage.insert(plan_.io_storage.end(), in.begin(), in.end());
    plan_.io_storage.insert(plan_.io_storage.end(), out.begin(), out.end());
    return launch;
  }

  // A collective op: one launch per participating device, each running its rank's part
  // over the communicator of those devices. A transfer is a two-rank broadcast: the
  // source device sends (a launch with no result), the destination receives.
  void instantiate_collective(const ir::Graph& g, std::size_t i, const std::string& prefix,
                              const Step& step, const std::vector<std::size_t>& in,
                              std::vector<std::size_t>& where) {
    const ir::OpView op = g.op(i);
    std::vector<std::size_t> slots;
    for (ir::Value v : op.operands()) slots.push_back(setup_.device_slot(g.type(v).device));
    const bool transfer = find_kernel_def(op.def())->variant == variant::transfer;
    if (transfer) slots.push_back(setup_.device_slot(g.type(op.result(0)).device));
    const std::shared_ptr<Communicator> comm = setup_.communicator(slots);
    for (std::size_t rank = 0; rank < slots.size(); ++rank) {
      const bool sends_only = transfer && rank == 0;
      const bool receives_only = transfer && rank == 1;
      const std::size_t launch = add_launch(
          g, i, prefix, step, receives_only ? std::vector<std::size_t>{} : std::vector{in[rank]},
          sends_only ? std::vector<std::size_t>{}
                     : std::vector{receives_only ? std::size_t{0} : rank},
          slots[rank], where);
      plan_.launches[launch].prepared = make_collective(comm, static_cast<int>(rank));
    }
  }

  const PlanSetup& setup_;
  Plan& plan_;
  std::map<std::string, std::int64_t> symbols_;  // the inputs' symbolic dims
};

}  // namespace

std::unique_ptr<Plan> instantiate_plan(const PlanSetup& setup, const std::vector<Tensor>& inputs) {
  auto plan = std::make_unique<Plan>();
  const ir::Graph& entry = setup.module.entry();
  // About one launch and one value per op, calls expanded: reserved, so that a huge
  // module's lists do not grow by doubling to up to twice what they hold.
  plan->launches.reserve(setup.expanded_ops);
  plan->io.reserve(setup.expanded_ops);
  plan->labels.reserve(setup.expanded_ops);
  plan->storage.reserve(setup.expanded_ops + entry.arguments().size());
  Instantiation instantiation(setup, *plan, inputs);
  std::vector<std::size_t> args;
  for (ir::Value v : entry.arguments()) args.push_back(instantiation.new_storage(entry.type(v)));
  plan->inputs = args;
  plan->outputs = instantiation.instantiate(entry, args, "");
  plan->absorbed.assign(plan->launches.size(), false);
  plan->is_view.assign(plan->launches.size(), false);
  plan->in_kernel.assign(plan->launches.size(), false);
  plan->invariant.assign(plan->launches.size(), false);
  return plan;
}

void bind_launches(Plan& plan, bool prepack_weights, MatmulPrecision precision, WeightPacks* packs,
                   bool winograd) {
  // One view per launch input and output, in one list (sized once: the launches hold
  // spans into it), each reading its shape and strides from its value's record.
  plan.launch_views.reserve(plan.io_storage.size());
  for (std::size_t s : plan.io_storage)
    plan.launch_views.push_back(
        {plan.address(s), plan.storage[s].dtype, plan.storage[s].shape, plan.storage[s].strides});
  const std::span<const View> views(plan.launch_views);
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    Launch& l = plan.launches[i];
    const LaunchIo& io = plan.io[i];
    l.in = views.subspan(io.first, io.ins);
    l.out = views.subspan(io.first + io.ins, io.outs);
    const std::span<const std::size_t> in = plan.in(i);
    // A weight or constant: the same bytes for the plan's life.
    l.pack_rhs = prepack_weights && in.size() >= 2 &&
                 plan.storage[plan.root(in[1])].arena_offset < 0 &&
                 plan.storage[plan.root(in[1])].fixed != nullptr;
    l.packs = l.pack_rhs ? packs : nullptr;
    l.bf16 = precision == MatmulPrecision::bf16;
    l.winograd = winograd;
  }
}

void skip_empty_launches(Plan& plan) {
  for (std::size_t i = 0; i < plan.launches.size(); ++i) {
    const std::span<const std::size_t> out = plan.out(i);
    const bool writes_nothing =
        !out.empty() && std::all_of(out.begin(), out.end(),
                                    [&](std::size_t s) { return plan.storage[s].bytes == 0; });
    const std::unique_ptr<PreparedLaunch>& prepared = plan.launches[i].prepared;
    const bool collective =
        prepared != nullptr && prepared->kind == PreparedLaunch::Kind::collective;
    // An attention kernel writes the context, not its own (scratch) output; an expansion
    // the depthwise conv's.
    const bool writes_elsewhere =
        plan.launches[i].softmax != nullptr || plan.launches[i].depthwise != nullptr;
    if (writes_nothing && !collective && !writes_elsewhere) plan.absorbed[i] = true;
  }
}

}  // namespace kiln::compiler
