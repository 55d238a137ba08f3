// CompiledCallable: the public API and the plan cache. Compiling runs the stages of
// compiler/plan/plan.hpp: programs per graph (once, program.cpp), then per concrete input
// shapes a plan (instantiate.cpp, the rewrites of rewrites.hpp, memory_plan.cpp) that a
// lowering records (lowering/lowering.hpp: CPU or CUDA); a call copies in, replays, copies
// out.

#include "kiln/compiler/compiled_callable.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "compiler/cpu/onednn_support.hpp"
#include "compiler/cpu/weight_packs.hpp"
#include "compiler/lowering.hpp"
#include "compiler/machine_memory.hpp"
#include "compiler/ops/structural.hpp"
#include "compiler/plan/instantiate.hpp"
#include "compiler/plan/memory_plan.hpp"
#include "compiler/plan/program.hpp"
#include "compiler/plan/rewrites.hpp"
#include "core/str.hpp"
#include "kiln/compiler/passes.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/runtime/device_graph.hpp"

namespace kiln {
namespace {

using compiler::Launch;
using compiler::Plan;
using compiler::Storage;
using detail::cat;

std::string shape_key(const std::vector<Tensor>& inputs) {
  std::string key;
  for (const Tensor& t : inputs) {
    key += name(t.dtype());
    for (const Dim& d : t.shape().dims()) key += ' ' + std::to_string(d.size());
    key += '|';
  }
  return key;
}

/// `a.b`, or whichever is not empty.
std::string join_prefix(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) return std::string(a.empty() ? b : a);
  return cat(a, ".", b);
}

/// The error for weights that do not fit the module: the \p problems (missing, empty or of
/// the wrong type) one by one, the first ten of them, then the weights given that the module
/// does not read, \p unused, as one item naming the first five (a checkpoint of a whole
/// model given to one layer's module lists them all otherwise).
std::string weight_problems(const std::vector<std::string>& problems,
                            const std::vector<std::string>& unused) {
  constexpr std::size_t kProblems = 10, kUnused = 5;
  const std::size_t count = problems.size() + unused.size();
  std::vector<std::string> items(problems.begin(),
                                 problems.begin() + std::min(problems.size(), kProblems));
  if (problems.size() > kProblems)
    items.push_back(cat("and ", problems.size() - kProblems, " more"));
  if (unused.size() == 1) {
    items.push_back(cat("weight ", quote_name(unused[0]), " is not used by the module"));
  } else if (!unused.empty()) {
    std::string names;
    for (std::size_t i = 0; i < std::min(unused.size(), kUnused); ++i)
      names += cat(i == 0 ? "" : ", ", quote_name(unused[i]));
    if (unused.size() > kUnused) names += cat(" and ", unused.size() - kUnused, " more");
    items.push_back(cat(unused.size(), " weights are not used by the module: ", names));
  }
  std::string message = cat("CompiledCallable: ", count, " weight problem", count == 1 ? "" : "s",
                            ": ", detail::join(items, "; "));
  if (!unused.empty())
    message += "; bind only the weights the module reads (module_weights() lists them)";
  return message;
}

}  // namespace

/// The most weights (calls expanded) a module may name: far more than any model has, far
/// fewer than graphs that call the next twice, 64 deep, each with a weight, would.
constexpr std::uint64_t kMaxWeightNames = std::uint64_t{1} << 24;

/// How many weight ops each graph reaches, its calls expanded (each graph counted once,
/// saturating): weights_in[&g].
void count_weights(const ir::Module& module, const ir::Graph& g,
                   std::map<const ir::Graph*, std::uint64_t>& weights_in) {
  if (weights_in.count(&g) != 0) return;
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < g.num_ops(); ++i) {
    const ir::OpView op = g.op(i);
    std::uint64_t more = 0;
    if (compiler::is_op(op, compiler::weight_op())) {
      more = 1;
    } else if (const ir::Attribute* callee = op.find("callee")) {
      const ir::Graph& c = *module.find(callee->as_symbol().name);
      count_weights(module, c, weights_in);  // at most ir::kMaxCallDepth deep
      more = weights_in.at(&c);
    }
    n = n > UINT64_MAX - more ? UINT64_MAX : n + more;
  }
  weights_in.emplace(&g, n);
}

/// Calls \p f(full_name, op, graph) for every weight op reachable from \p g, skipping the
/// calls that reach none (\p weights_in).
template <class F>
void for_each_weight_in(const ir::Module& module, const ir::Graph& g, const std::string& prefix,
                        const std::map<const ir::Graph*, std::uint64_t>& weights_in, F& f) {
  for (std::size_t i = 0; i < g.num_ops(); ++i) {
    const ir::OpView op = g.op(i);
    if (compiler::is_op(op, compiler::weight_op())) {
      f(join_prefix(prefix, op.find("name")->as_string()), op, g);
    } else if (const ir::Attribute* callee = op.find("callee")) {
      const ir::Graph& c = *module.find(callee->as_symbol().name);
      if (weights_in.at(&c) == 0) continue;
      const ir::Attribute* p = op.find("kiln.prefix");
      for_each_weight_in(module, c, join_prefix(prefix, p != nullptr ? p->as_string() : ""),
                         weights_in, f);
    }
  }
}

/// Calls \p f(full_name, op, graph) for every weight op the entry of \p module reaches
/// (once per call path). \throws UserError when the calls expand to more than
/// kMaxWeightNames of them, before calling \p f: such a walk would not end.
template <class F>
void for_each_weight(const ir::Module& module, F&& f) {
  std::map<const ir::Graph*, std::uint64_t> weights_in;
  count_weights(module, module.entry(), weights_in);
  if (const std::uint64_t n = weights_in.at(&module.entry()); n > kMaxWeightNames)
    throw UserError(cat("@", module.entry().name(), "'s calls expand to ",
                        n == UINT64_MAX ? std::string("2^64 or more") : cat(n),
                        " weights, more than kiln reads (", kMaxWeightNames,
                        "): call fewer graphs with weights from each graph"));
  for_each_weight_in(module, module.entry(), "", weights_in, f);
}

std::map<std::string, ir::TensorType> module_weights(const ir::Module& module) {
  std::map<std::string, ir::TensorType> out;
  for_each_weight(module, [&](const std::string& name, const ir::OpView& op, const ir::Graph& g) {
    out.emplace(name, g.type(op.result(0)));
  });
  return out;
}

namespace {

/// Counts a public call into an Impl for as long as it runs (see Impl::calls_inside).
class CallInside {
 public:
  explicit CallInside(std::atomic<int>& count) : count_(count) { count_.fetch_add(1); }
  ~CallInside() { count_.fetch_sub(1); }  // the last touch of the Impl: it may go at once
  CallInside(const CallInside&) = delete;
  CallInside& operator=(const CallInside&) = delete;

 private:
  std::atomic<int>& count_;
};

}  // namespace

struct CompiledCallable::Impl {
  StagedGraph staged;
  std::vector<std::string> input_paths;  // leaf paths of the inputs, for call-time messages
  // After the passes: shared with `staged` when there are none.
  std::shared_ptr<const ir::Module> optimized_module;
  const ir::Module& module;
  std::map<std::string, Tensor> weights;
  std::shared_ptr<DeviceContext> ctx;  // the first device's
  // The devices the module computes on (cpu:0 and up; one: whatever `ctx` is), a context
  // for each, and a communicator for each group of devices in a collective.
  // With a cluster, devices other processes drive have no context (null): their launches
  // are planned (so that every process makes the same communicators) but never run here.
  std::vector<Device> devices;
  std::vector<std::shared_ptr<DeviceContext>> contexts;
  std::shared_ptr<Cluster> cluster;
  std::map<std::vector<std::size_t>, std::shared_ptr<Communicator>> communicators;
  std::map<const ir::Graph*, compiler::Program> programs;
  std::size_t expanded_ops = 0;  // the module's ops with calls expanded (ir::expanded_op_count)
  std::map<std::string, std::unique_ptr<Plan>> plans;
  Plan* last_plan = nullptr;  // the plan of the previous call: the common case, checked first
  // For each input leaf and axis with a symbolic dim: the (leaf, axis) where that symbol
  // first appears, so that calls check agreement without building a map.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> symbol_first_use;
  bool replay_graph;
  // How plans become device work: CPU kernels, or CUDA kernels on a CUDA context.
  std::unique_ptr<compiler::Lowering> lowering;
  bool fuse_epilogues;
  bool prepack_weights;
  MatmulPrecision matmul_precision;
  bool winograd_convs;
  // The weights packed for oneDNN, shared by every plan (a new shape packs nothing twice).
  compiler::WeightPacks packs;
  Stats stats;
  std::mutex mutex;
  // Public calls inside this Impl now: its destructor waits for them (a callable destroyed
  // or assigned over while another thread is in a call stays alive until that call returns).
  std::atomic<int> calls_inside{0};

  ~Impl() {
    // Polls rather than waits to be notified: a notifying call would touch this Impl after
    // its count said it was done. A destructor that races a call is rare; 1 ms is plenty.
    while (calls_inside.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  Impl(const StagedGraph& s, std::map<std::string, Tensor> w, CompileOptions options)
      : staged(s),
        input_paths(s.in_tree().leaf_paths()),
        optimized_module(options.passes.empty()
                             ? s.shared_graph()
                             : std::make_shared<const ir::Module>(
                                   passes::run_passes(s.graph(), options.passes))),
        module(*optimized_module),
        weights(std::move(w)),
        cluster(options.cluster ? options.cluster : Cluster::local()),
        replay_graph(options.replay_graph),
        fuse_epilogues(options.fuse_epilogues),
        prepack_weights(options.prepack_weights),
        matmul_precision(options.matmul_precision),
        winograd_convs(options.winograd_convs) {
    if (matmul_precision == MatmulPrecision::bf16 && !prepack_weights)
      throw UserError(
          "CompileOptions: matmul_precision bf16 rounds weights to bfloat16 as they are packed, "
          "so it needs prepack_weights = true");
    compiler::onednn::cap_isa();  // before any oneDNN kernel is chosen (KILN_CPU_ISA)
    open_devices(options.context);
    std::map<std::string, std::pair<std::size_t, std::size_t>> first;
    for (std::size_t i = 0; i < s.in_layouts().size(); ++i) {
      const std::vector<Dim>& dims = s.in_layouts()[i].shape.dims();
      symbol_first_use.emplace_back(dims.size());
      for (std::size_t d = 0; d < dims.size(); ++d) {
        if (dims[d].is_static()) continue;
        if (!dims[d].is_name())  // what a call's shapes bind: sizes and names
          throw UserError(cat("CompiledCallable: input ", i, " has dim '", dims[d].symbol(),
                              "' at axis ", d, " (", s.in_layouts()[i],
                              "); an input's symbolic dims must be single names, which "
                              "its data binds, not expressions"));
        symbol_first_use[i][d] =
            first.emplace(dims[d].symbol(), std::make_pair(i, d)).first->second;
      }
    }
  }

  // One context per device the module's values live on. A single-device module runs on
  // the given context (or a default one) whatever its device index, as before devices
  // were counted; a multi-device one gets the given context for its device and new ones
  // (sharing the cores) for the others.
  void open_devices(std::shared_ptr<DeviceContext> given) {
    std::map<std::pair<bool, int>, Device> used;
    for (std::size_t g = 0; g < module.num_graphs(); ++g) {
      const ir::Graph& graph = module.graph(g);
      for (std::size_t v = 0; v < graph.num_values(); ++v) {
        const Device d = graph.type(ir::Value{static_cast<std::uint32_t>(v)}).device;
        used.emplace(std::make_pair(d.is_cuda(), d.index()), d);
      }
    }
    for (const auto& [key, d] : used) devices.push_back(d);
    const bool any_cuda =
        std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
    if ((any_cuda || (given && given->device().is_cuda())) && devices.size() > 1)
      throw UserError(cat("CompiledCallable: the module computes on ", devices.size(),
                          " devices, one of them CUDA; compiled graphs on CUDA run on one GPU "
                          "so far (sharding across GPUs needs NCCL, not built yet)"));
    for (const Device& d : devices)  // (a context would refuse it; a given one is elsewhere)
      if (!d.is_cuda() && d.index() >= cpu_device_count() && cluster->owns(d))
        throw UserError(
            cat("CompiledCallable: the module computes on ", d, ", but this process has ",
                cpu_device_count(), " CPU device", cpu_device_count() == 1 ? "" : "s",
                " (cpu:0 to cpu:", cpu_device_count() - 1,
                "); set KILN_CPU_DEVICES=", d.index() + 1, " or call kiln::set_cpu_device_count(",
                d.index() + 1, ") first, or place the module on a device this process has"));
    if (any_cuda && !given) given = std::make_shared<DeviceContext>(devices[0]);
    if (devices.size() <= 1 && cluster->owns(devices.empty() ? Device::cpu() : devices[0])) {
      ctx = given ? given : std::make_shared<DeviceContext>();
      devices = {devices.empty() ? ctx->device() : devices[0]};
      contexts = {ctx};
    } else {
      for (const Device& d : devices) {
        if (!cluster->owns(d)) {
          contexts.push_back(nullptr);
        } else {
          contexts.push_back(given && given->device() == d ? given
                                                           : std::make_shared<DeviceContext>(d));
          if (!ctx) ctx = contexts.back();
        }
      }
      if (!ctx)
        throw UserError(cat("CompiledCallable: this process (", cluster->str(),
                            ") drives none of the module's devices"));
    }
    lowering = ctx->device().is_cuda()
                   ? compiler::cuda_lowering(ctx)
                   : compiler::cpu_lowering(contexts, replay_graph, matmul_precision);
  }

  /// The slot of \p d in `devices` (single-device modules: 0).
  std::size_t device_slot(const Device& d) const {
    if (devices.size() == 1) return 0;
    return static_cast<std::size_t>(std::find(devices.begin(), devices.end(), d) - devices.begin());
  }

  /// The communicator of the devices in \p slots (in that rank order), made on first use.
  const std::shared_ptr<Communicator>& communicator(const std::vector<std::size_t>& slots) {
    auto it = communicators.find(slots);
    if (it == communicators.end()) {
      std::vector<Device> group;
      for (std::size_t s : slots) group.push_back(devices[s]);
      it = communicators.emplace(slots, cluster->communicator(group)).first;
    }
    return it->second;
  }

  // Compiles every graph once and checks the weights against what the module declares.
  void compile() {
    programs = compiler::compile_programs(module, *lowering, ctx->device());
    stats.bodies_compiled += programs.size();
    check_expanded_size();
    // Weights are checked against the staged module (passes may drop unused ones).
    std::vector<std::string> problems;
    std::map<std::string, bool> needed;
    for_each_weight(
        staged.graph(), [&](const std::string& name, const ir::OpView& op, const ir::Graph& g) {
          needed[name] = true;
          auto it = weights.find(name);
          const ir::TensorType& want = g.type(op.result(0));
          if (it == weights.end()) {
            problems.push_back(cat("weight ", quote_name(name), " is missing (@", g.name(), ", ",
                                   op.describe(), ")"));
          } else if (!it->second.is_constant()) {
            problems.push_back(cat("weight ", quote_name(name), " holds no data"));
          } else if (it->second.dtype() != want.dtype || it->second.shape() != want.shape ||
                     it->second.device() != want.device) {
            problems.push_back(cat("weight ", quote_name(name), " is ", it->second.layout(),
                                   " but the module needs ", ir::to_string(want)));
          }
        });
    std::sort(problems.begin(), problems.end());
    problems.erase(std::unique(problems.begin(), problems.end()), problems.end());
    std::vector<std::string> unused;  // in name order (a map's)
    for (const auto& [name, t] : weights)
      if (needed.count(name) == 0) unused.push_back(name);
    if (!problems.empty() || !unused.empty()) throw UserError(weight_problems(problems, unused));
  }

  // ---- planning ----------------------------------------------------------------------------

  // What one planned op takes while it is planned and recorded (docs/benchmarks.md measures
  // about 1.3 KB): a module whose calls expand past memory / this is refused up front.
  static constexpr std::uint64_t kBytesPerPlannedOp = 2048;

  // Refuses a module whose calls expand to more ops than this machine can plan.
  void check_expanded_size() {
    const std::uint64_t ops = ir::expanded_op_count(module);  // 2^64 in a few kilobytes
    expanded_ops = static_cast<std::size_t>(std::min<std::uint64_t>(ops, SIZE_MAX));
    const std::size_t machine = compiler::memory_and_swap();
    if (machine == 0 || ops <= machine / kBytesPerPlannedOp) return;
    throw UserError(cat("CompiledCallable: @", module.entry().name(), "'s calls expand to ",
                        ops == UINT64_MAX ? std::string("2^64 or more") : cat(ops),
                        " ops, more than this machine's ", machine >> 20,
                        " MiB of memory and swap can plan (about ", kBytesPerPlannedOp,
                        " bytes each, at most ", machine / kBytesPerPlannedOp,
                        " ops): call fewer graphs from each graph, or fold repeated calls "
                        "into one"));
  }

  // A new plan for these inputs' shapes, every stage but recording (see plan.hpp).
  std::unique_ptr<Plan> make_plan(const std::vector<Tensor>& inputs) {
    const compiler::PlanSetup setup{
        .module = module,
        .programs = programs,
        .weights = weights,
        .expanded_ops = expanded_ops,
        .device_slot = [this](const Device& d) { return device_slot(d); },
        .communicator =
            [this](const std::vector<std::size_t>& slots) { return communicator(slots); },
        .lowering = *lowering};
    std::unique_ptr<Plan> plan = compiler::instantiate_plan(setup, inputs);
    if (lowering->rewrites_launches()) {
      compiler::fold_views(*plan);
      compiler::hoist_invariant(*plan);
      if (fuse_epilogues) compiler::absorb_epilogues(*plan);
      // bf16 plans run attention's batched matmuls in bf16 (BatchedBf16Matmul) instead.
      if (fuse_epilogues && matmul_precision == MatmulPrecision::f32) {
        compiler::absorb_attention(*plan);
        compiler::absorb_depthwise(*plan, prepack_weights);
        compiler::absorb_input_scales(*plan);
      }
    }
    const compiler::ArenaSizes sizes = compiler::place_values(*plan, devices.size());
    const auto too_big = [&](std::size_t bytes) {
      return UserError(compiler::arena_too_big(*plan, bytes, compiler::memory_and_swap()));
    };
    std::size_t need = 0;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      need += sizes.call[d] + sizes.kept[d];
      plan->arenas.push_back(lowering->call_arena(d, sizes.call[d]));
      if (!plan->arenas.back().memory) throw too_big(sizes.call[d]);
      compiler::Arena& kept = plan->kept.emplace_back();
      if (sizes.kept[d] == 0) continue;
      kept = {.bytes = sizes.kept[d], .memory = lowering->allocate_arena(sizes.kept[d])};
      if (!kept.memory) throw too_big(sizes.kept[d]);
    }
    stats.peak_arena_bytes = std::max(stats.peak_arena_bytes, need);
    compiler::bind_launches(*plan, prepack_weights, matmul_precision, &packs, winograd_convs);
    compiler::link_epilogues(*plan);
    compiler::link_attention(*plan);
    compiler::link_depthwise(*plan);
    compiler::link_input_scales(*plan);
    compiler::skip_empty_launches(*plan);
    return plan;
  }

  // The plan for these inputs' shapes, made (and recorded) on first use. Locked by caller.
  Plan& plan_for(const std::vector<Tensor>& inputs) {
    if (last_plan != nullptr && same_shapes(*last_plan, inputs)) {  // no key, no lookup
      ++stats.replays;
      return *last_plan;
    }
    const std::string key = shape_key(inputs);
    auto it = plans.find(key);
    if (it == plans.end()) {
      std::unique_ptr<Plan> plan = make_plan(inputs);
      lowering->record(*plan);
      ++stats.graph_builds;
      // Hoisted: invariant launches that run on their own (an invariant epilogue runs inside
      // its matmul and counts as an epilogue).
      std::size_t hoisted = 0;
      for (std::size_t i = 0; i < plan->launches.size(); ++i)
        hoisted += plan->invariant[i] && !plan->absorbed[i] ? 1 : 0;
      const auto in_kernel = static_cast<std::size_t>(
          std::count(plan->in_kernel.begin(), plan->in_kernel.end(), true));
      stats.launches = plan->launches.size() - plan->epilogues - plan->views - hoisted - in_kernel;
      stats.epilogues = plan->epilogues;
      stats.attentions = plan->attentions;
      stats.expansions = plan->expansions;
      stats.scaled_inputs = plan->scaled_inputs;
      stats.views = plan->views;
      stats.hoisted = hoisted;
      stats.packed_matmuls = static_cast<std::size_t>(
          std::count_if(plan->launches.begin(), plan->launches.end(),
                        [](const Launch& l) { return compiler::packed(l); }));
      stats.skinny_matmuls = static_cast<std::size_t>(
          std::count_if(plan->launches.begin(), plan->launches.end(),
                        [](const Launch& l) { return compiler::skinny(l); }));
      stats.epilogues_in_gemm = static_cast<std::size_t>(
          std::count_if(plan->launches.begin(), plan->launches.end(),
                        [](const Launch& l) { return compiler::epilogue_in_gemm(l); }));
      stats.bf16_handoffs = plan->bf16_handoffs;
      stats.packed_weight_bytes = packs.bytes();
      stats.isa = cpu_isa();
      stats.winograd_convs = static_cast<std::size_t>(
          std::count_if(plan->launches.begin(), plan->launches.end(),
                        [](const Launch& l) { return compiler::in_winograd(l); }));
      stats.bf16_matmuls = static_cast<std::size_t>(
          std::count_if(plan->launches.begin(), plan->launches.end(),
                        [](const Launch& l) { return compiler::in_bf16(l); }));
      ++stats.plans;
      it = plans.emplace(key, std::move(plan)).first;
      last_plan = it->second.get();
      count_arena_bytes();
      return *last_plan;
    }
    ++stats.replays;
    last_plan = it->second.get();
    return *last_plan;
  }

  // Stats::arena_bytes: every plan's arenas, each distinct memory once.
  void count_arena_bytes() {
    std::set<const std::byte*> counted;
    stats.arena_bytes = 0;
    for (const auto& [key, plan] : plans)
      for (const auto* arenas : {&plan->arenas, &plan->kept})
        for (const compiler::Arena& a : *arenas)
          if (a.memory && counted.insert(a.memory.get()).second) stats.arena_bytes += a.bytes;
  }

  static bool same_shapes(const Plan& plan, const std::vector<Tensor>& inputs) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Storage& st = plan.storage[plan.inputs[i]];
      const std::vector<Dim>& dims = inputs[i].shape().dims();
      if (inputs[i].dtype() != st.dtype || dims.size() != st.shape.size()) return false;
      for (std::size_t d = 0; d < dims.size(); ++d)
        if (dims[d].size() != st.shape[d]) return false;
    }
    return true;
  }

  std::vector<Tensor> execute(const std::vector<Tensor>& inputs) {
    std::scoped_lock lock(mutex);
    Plan& plan = run_plan(inputs);
    std::vector<Tensor> out;
    for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
      const std::size_t s = plan.outputs[i];
      const Storage& st = plan.storage[s];
      std::vector<Dim> dims(st.shape.begin(), st.shape.end());
      if (!contexts[st.device]) {  // another process computed it: no data here
        out.emplace_back(TensorLayout(st.dtype, Shape(std::move(dims)), devices[st.device]));
        continue;
      }
      out.push_back(Tensor::from_bytes(st.dtype, Shape(std::move(dims)), devices[st.device],
                                       lowering->host_output(plan, i), st.bytes));
    }
    return out;
  }

  void execute_into(const std::vector<Tensor>& inputs,
                    std::span<const std::span<std::byte>> outputs) {
    std::scoped_lock lock(mutex);
    Plan& plan = run_plan(inputs);
    if (outputs.size() != plan.outputs.size())
      throw UserError(cat("CompiledCallable::execute_into: ", outputs.size(),
                          " output buffers for ", plan.outputs.size(), " outputs"));
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const Storage& st = plan.storage[plan.outputs[i]];
      if (outputs[i].size() != st.bytes)
        throw UserError(cat("CompiledCallable::execute_into: output ", i, " is ", st.bytes,
                            " bytes but its buffer has ", outputs[i].size()));
      if (contexts[st.device])
        std::memcpy(outputs[i].data(), lowering->host_output(plan, i), st.bytes);
    }
  }

  std::vector<std::size_t> output_bytes(const std::vector<Tensor>& inputs) {
    std::scoped_lock lock(mutex);
    std::vector<std::size_t> out;
    const Plan& plan = plan_for(inputs);
    for (std::size_t s : plan.outputs) out.push_back(plan.storage[s].bytes);
    return out;
  }

  // Copies the inputs in, runs the plan for their shapes and waits for it. Locked by caller.
  Plan& run_plan(const std::vector<Tensor>& inputs) {
    Plan& plan = plan_for(inputs);
    lowering->run(plan, inputs);
    return plan;
  }
};

CompiledCallable::CompiledCallable(const StagedGraph& staged, std::map<std::string, Tensor> weights,
                                   CompileOptions options)
    : impl_(std::make_unique<Impl>(staged, std::move(weights), std::move(options))) {
  impl_->compile();
}

CompiledCallable::CompiledCallable(const StagedGraph& staged, const SafetensorsFile& weights,
                                   CompileOptions options) try
    : CompiledCallable(staged, weights.tensors(), std::move(options)) {
} catch (const UserError& e) {  // the weights' problems, named by their file
  if (std::string_view(e.what()).find("weight problem") == std::string_view::npos) throw;
  throw UserError(cat(weights.path(), ": ", e.what()));
}

CompiledCallable::CompiledCallable(CompiledCallable&&) noexcept = default;
CompiledCallable& CompiledCallable::operator=(CompiledCallable&&) noexcept = default;
CompiledCallable::~CompiledCallable() = default;

const StagedGraph& CompiledCallable::staged() const { return impl_->staged; }
const std::shared_ptr<DeviceContext>& CompiledCallable::context() const { return impl_->ctx; }

std::string CompiledCallable::plan_dot(const std::vector<Tensor>& inputs) {
  const CallInside inside(impl_->calls_inside);
  check_inputs(inputs);
  std::scoped_lock lock(impl_->mutex);
  std::string dot;  // one digraph per device
  for (const std::optional<DeviceGraph>& g : impl_->plan_for(inputs).graphs)
    if (g) dot += g->to_dot();
  return dot;
}
const ir::Module& CompiledCallable::optimized() const { return impl_->module; }
CompiledCallable::Stats CompiledCallable::stats() const {
  const CallInside inside(impl_->calls_inside);
  std::scoped_lock lock(impl_->mutex);
  return impl_->stats;
}

void CompiledCallable::check_tree(const TreeDef& tree) const {
  const CallInside inside(impl_->calls_inside);
  // The call's tree is a tuple of the arguments, like the staged one.
  if (std::string difference = impl_->staged.in_tree().difference(tree); !difference.empty())
    throw UserError(cat("CompiledCallable: the arguments differ from the staged ones ", difference,
                        " (staged: ", impl_->staged.in_tree().str(), ")"));
}

std::vector<Tensor> CompiledCallable::run(const std::vector<Tensor>& inputs) {
  const CallInside inside(impl_->calls_inside);
  check_inputs(inputs);
  return impl_->execute(inputs);
}

void CompiledCallable::check_inputs(const std::vector<Tensor>& inputs) const {
  // Allocates nothing unless something is wrong: messages are built on the error paths.
  const std::vector<TensorLayout>& layouts = impl_->staged.in_layouts();
  const std::vector<std::string>& paths = impl_->input_paths;
  if (inputs.size() != layouts.size())
    throw UserError(
        cat("CompiledCallable: expected ", layouts.size(), " input tensors, got ", inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const TensorLayout& want = layouts[i];
    const auto leaf = [&] { return cat("input leaf '", paths[i], "'"); };
    if (!t.is_constant())
      throw UserError(cat("CompiledCallable: ", leaf(), " holds no data (", t, ")"));
    if (t.dtype() != want.dtype || t.rank() != want.shape.rank() || t.device() != want.device)
      throw UserError(cat("CompiledCallable: ", leaf(), " is ", t.layout(),
                          " but the staged graph takes ", want));
    for (std::size_t d = 0; d < t.rank(); ++d) {
      const std::int64_t size = t.shape().dims()[d].size();
      const Dim& w = want.shape.dims()[d];
      if (w.is_static() && w.size() != size)
        throw UserError(cat("CompiledCallable: ", leaf(), " has ", size, " at axis ", d,
                            " where the staged graph has ", w.size(), " (", want, ")"));
      if (!w.is_static()) {  // must agree with the dim's first use
        const auto [j, e] = impl_->symbol_first_use[i][d];
        const std::int64_t first = inputs[j].shape().dims()[e].size();
        if (first != size)
          throw UserError(cat("CompiledCallable: dim '", w.symbol(), "' is ", first, " at ",
                              paths[j], " axis ", e, " but ", size, " at ", leaf(), " axis ", d));
      }
    }
  }
}

std::vector<Tensor> CompiledCallable::execute_raw(const std::vector<Tensor>& inputs) {
  const CallInside inside(impl_->calls_inside);
  return impl_->execute(inputs);
}

void CompiledCallable::execute_into(const std::vector<Tensor>& inputs,
                                    std::span<const std::span<std::byte>> outputs) {
  const CallInside inside(impl_->calls_inside);
  impl_->execute_into(inputs, outputs);
}

std::vector<std::size_t> CompiledCallable::output_bytes(const std::vector<Tensor>& inputs) {
  const CallInside inside(impl_->calls_inside);
  check_inputs(inputs);
  return impl_->output_bytes(inputs);
}

}  // namespace kiln
