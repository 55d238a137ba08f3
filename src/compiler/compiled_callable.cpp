// The compiler's pipeline: programs per graph (once), plans per concrete input shapes
// (memory + device graph, once), calls (copy in, replay, copy out).

#include "kiln/compiler/compiled_callable.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "compiler/cuda_launches.hpp"
#include "compiler/kernels.hpp"
#include "compiler/machine_memory.hpp"
#include "compiler/onednn_support.hpp"
#include "core/str.hpp"
#include "kiln/compiler/passes.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/runtime/device_graph.hpp"

namespace kiln {
namespace {

using compiler::Index;
using compiler::Kernel;
using compiler::Launch;
using compiler::View;
using detail::cat;

constexpr std::size_t kAlign = 64;

// ---- programs: one per graph ----------------------------------------------------------------

enum class StepKind { kernel, weight, constant, call, collective };

struct Step {
  StepKind kind = StepKind::kernel;
  Kernel kernel = nullptr;
  std::shared_ptr<const compiler::FusedProgram> fused;  // kiln.fused
  const ir::Graph* callee = nullptr;                    // calls
  std::string_view prefix{};                            // calls: kiln.prefix (in the IR)
};

struct Program {
  const ir::Graph* graph = nullptr;
  std::vector<Step> steps;  // one per op
};

// ---- plans: one per concrete input shapes ----------------------------------------------------

/// Where a value lives during a call: an arena slot or fixed storage (weights, constants).
struct Storage {
  std::int64_t arena_offset = -1;  // -1: fixed
  std::size_t device = 0;          // which of the callable's devices (arena) holds it
  std::byte* fixed = nullptr;
  std::size_t bytes = 0;
  DType dtype = DType::f32;
  Index shape;
  std::int64_t producer = -1;  // launch that writes it, -1: none (input, fixed)
  std::vector<std::size_t> readers;
  // A view: the bytes of storage `base` (never itself a view), read with `strides`
  // (elements; empty: contiguous). Its launch (a reshape or transpose) does not run.
  std::int64_t base = -1;
  Index strides;
};

/// Which storage a launch reads and writes (`Plan::in`, `Plan::out`: a range of the plan's
/// `io_storage`), and its kernel.
struct LaunchIo {
  std::size_t first = 0;  // into `Plan::io_storage`: the inputs, then the outputs
  std::uint32_t ins = 0, outs = 0;
  Kernel kernel = nullptr;
  std::size_t device = 0;  // which of the callable's devices runs it
};

/// One device's memory for a plan.
struct Arena {
  std::size_t bytes = 0;
  std::shared_ptr<std::byte> memory;  // host memory, or a CUDA context's device memory
};

struct Plan {
  std::vector<Storage> storage;
  std::vector<Launch> launches;
  std::vector<LaunchIo> io;             // per launch
  std::vector<std::size_t> io_storage;  // every launch's inputs and outputs, in launch order
  std::vector<View> launch_views;       // every launch's views (Launch::in and out)
  std::vector<std::size_t> inputs;      // storage of the entry arguments
  std::vector<std::size_t> outputs;     // storage of the entry results
  std::vector<std::string> labels;      // per launch: op, weight prefix, location (moved into
                                        // the graphs when they are recorded)
  // Per launch: not launched, because it runs as the epilogue of the launch before it or
  // because its result is a view of its input.
  std::vector<bool> absorbed;
  std::vector<bool> is_view;
  std::size_t epilogues = 0, views = 0;
  std::size_t bf16_handoffs = 0;                   // see hand_off_bf16
  std::vector<Arena> arenas;                       // per device: places can be reused only
                                                   // by the device's own later launches
  std::vector<std::optional<DeviceGraph>> graphs;  // per device with launches
  // CUDA: each output's bytes, copied back to the host after each call.
  std::vector<std::vector<std::byte>> host_outputs;
  // CUDA plans with a gather: where it reports an index out of range ({1, index, axis
  // length}), and that report's copy on the host after each call.
  std::shared_ptr<DeviceBuffer<std::int64_t>> cuda_error;
  std::array<std::int64_t, 3> host_error{};

  /// The storage launch \p i reads, in operand order, and the storage it writes.
  std::span<const std::size_t> in(std::size_t i) const {
    return {io_storage.data() + io[i].first, io[i].ins};
  }
  std::span<const std::size_t> out(std::size_t i) const {
    return {io_storage.data() + io[i].first + io[i].ins, io[i].outs};
  }
  /// The storage whose bytes \p s reads: itself, or the base of a view.
  std::size_t root(std::size_t s) const {
    return storage[s].base >= 0 ? static_cast<std::size_t>(storage[s].base) : s;
  }
  std::byte* address(std::size_t s) const {
    const Storage& st = storage[root(s)];
    return st.arena_offset >= 0 ? arenas[st.device].memory.get() + st.arena_offset : st.fixed;
  }
};

/// First-fit arena allocation with coalescing frees.
class ArenaAllocator {
 public:
  std::size_t allocate(std::size_t bytes) {
    bytes = std::max<std::size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= bytes) {
        const std::size_t at = it->first;
        if (it->second == bytes) {
          free_.erase(it);
        } else {
          it->first += bytes;
          it->second -= bytes;
        }
        return at;
      }
    const std::size_t at = end_;
    // Saturates: an arena past 2^64 bytes is refused by the size check that follows.
    end_ = bytes > SIZE_MAX - end_ ? SIZE_MAX : end_ + bytes;
    return at;
  }
  void release(std::size_t at, std::size_t bytes) {
    bytes = std::max<std::size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    auto it = std::lower_bound(free_.begin(), free_.end(), std::make_pair(at, std::size_t{0}));
    it = free_.insert(it, {at, bytes});
    if (std::next(it) != free_.end() && it->first + it->second == std::next(it)->first) {
      it->second += std::next(it)->second;
      free_.erase(std::next(it));
    }
    if (it != free_.begin() && std::prev(it)->first + std::prev(it)->second == it->first) {
      std::prev(it)->second += it->second;
      free_.erase(it);
    }
  }
  std::size_t peak() const { return end_; }

 private:
  std::vector<std::pair<std::size_t, std::size_t>> free_;  // sorted by offset
  std::size_t end_ = 0;
};

std::string shape_key(const std::vector<Tensor>& inputs) {
  std::string key;
  for (const Tensor& t : inputs) {
    key += name(t.dtype());
    for (const Dim& d : t.shape().dims()) key += ' ' + std::to_string(d.size());
    key += '|';
  }
  return key;
}

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
    if (op.name() == "kiln.weight") {
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
    if (op.name() == "kiln.weight") {
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
  // and a launcher for each, and a communicator for each group of devices in a collective.
  // With a cluster, devices other processes drive have no context (null): their launches
  // are planned (so that every process makes the same communicators) but never run here.
  std::vector<Device> devices;
  std::vector<std::shared_ptr<DeviceContext>> contexts;
  std::vector<std::unique_ptr<DeviceFunction<void (*)(const Launch*, Kernel)>>> launch_fns;
  std::shared_ptr<Cluster> cluster;
  std::map<std::vector<std::size_t>, std::shared_ptr<Communicator>> communicators;
  std::map<const ir::Graph*, Program> programs;
  std::size_t expanded_ops = 0;  // the module's ops with calls expanded (ir::expanded_op_count)
  std::map<std::string, std::unique_ptr<Plan>> plans;
  Plan* last_plan = nullptr;  // the plan of the previous call: the common case, checked first
  // For each input leaf and axis with a symbolic dim: the (leaf, axis) where that symbol
  // first appears, so that calls check agreement without building a map.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> symbol_first_use;
  bool replay_graph;
  // The module runs on a CUDA context: plans in its memory, launches as CUDA kernels.
  bool on_cuda = false;
  compiler::CudaKernelCache cuda_kernels;
  // CUDA: device copies of weights and constants, by their host bytes.
  std::map<const std::byte*, std::shared_ptr<DeviceBuffer<std::uint8_t>>> device_copies;
  bool fuse_epilogues;
  bool prepack_weights;
  MatmulPrecision matmul_precision;
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
        matmul_precision(options.matmul_precision) {
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
      for (std::size_t d = 0; d < dims.size(); ++d)
        if (!dims[d].is_static())
          symbol_first_use[i][d] =
              first.emplace(dims[d].symbol(), std::make_pair(i, d)).first->second;
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
    on_cuda = ctx->device().is_cuda();
    for (const auto& c : contexts)
      launch_fns.push_back(
          c && !on_cuda
              ? std::make_unique<DeviceFunction<void (*)(const Launch*, Kernel)>>(
                    c->compile_function(+[](const Launch* l, Kernel k) { k(*l); },
                                        {.name = "kiln_kernel", .form = KernelForm::per_block}))
              : nullptr);
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
    compiler::FusedPrograms fused_programs;  // shared between ops that compute the same
    for (std::size_t g = 0; g < module.num_graphs(); ++g) {
      const ir::Graph& graph = module.graph(g);
      Program p{&graph, {}};
      p.steps.reserve(graph.num_ops());
      for (std::size_t i = 0; i < graph.num_ops(); ++i) {
        const ir::OpView op = graph.op(i);
        Step step;
        if (op.name() == "kiln.weight") {
          step.kind = StepKind::weight;
        } else if (op.name() == "kiln.constant") {
          step.kind = StepKind::constant;
        } else if (op.name() == "kiln.fused") {
          step.kernel = compiler::run_fused;
          step.fused = fused_programs.fused(*module.find(op.find("callee")->as_symbol().name));
        } else if (op.def().has(ir::OpTrait::elementwise)) {
          step.kernel = compiler::run_fused;
          step.fused = fused_programs.elementwise(graph, op);
        } else if (op.def().has(ir::OpTrait::collective)) {
          step.kind = StepKind::collective;
          step.kernel = compiler::run_collective;
        } else if (const ir::Attribute* callee = op.find("callee")) {
          step.kind = StepKind::call;
          step.callee = module.find(callee->as_symbol().name);
          if (const ir::Attribute* prefix = op.find("kiln.prefix"))
            step.prefix = prefix->as_string();
        } else {
          step.kernel = compiler::find_kernel(op.name());
          if (step.kernel == nullptr)
            throw UserError(
                cat("CompiledCallable: no CPU kernel for ", op.describe(), " in @", graph.name()));
        }
        if (on_cuda && (step.kind == StepKind::kernel || step.kind == StepKind::collective)) {
          if (const std::string why = compiler::cuda_unsupported(op.def()); !why.empty())
            throw UserError(cat("CompiledCallable on ", ctx->device(), ": ", op.describe(), " in @",
                                graph.name(), ": ", why));
        }
        p.steps.push_back(std::move(step));
      }
      programs.emplace(&graph, std::move(p));
      ++stats.bodies_compiled;
    }
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

  /// Enqueues a copy of \p n bytes on the context (host or device memory either side).
  void enqueue_copy_bytes(void* dst, const void* src, std::size_t n) const {
    ctx->enqueue_copy(std::span<std::uint8_t>(static_cast<std::uint8_t*>(dst), n),
                      std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(src), n));
  }

  /// CUDA: the device copy of the \p bytes fixed bytes at \p host (a weight or a
  /// constant), made on first use and kept for the callable's life.
  std::byte* device_copy(const std::byte* host, std::size_t bytes) {
    auto& copy = device_copies[host];
    if (!copy) {
      copy = std::make_shared<DeviceBuffer<std::uint8_t>>(
          ctx->enqueue_create_buffer<std::uint8_t>(std::max<std::size_t>(bytes, 1)));
      enqueue_copy_bytes(copy->data(), host, bytes);
    }
    return reinterpret_cast<std::byte*>(copy->data());
  }

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

  std::unique_ptr<Plan> make_plan(const std::vector<Tensor>& inputs) {
    auto plan = std::make_unique<Plan>();
    const ir::Graph& entry = module.entry();
    // About one launch and one value per op, calls expanded: reserved, so that a huge
    // module's lists do not grow by doubling to up to twice what they hold.
    plan->launches.reserve(expanded_ops);
    plan->io.reserve(expanded_ops);
    plan->labels.reserve(expanded_ops);
    plan->storage.reserve(expanded_ops + entry.arguments().size());
    std::map<std::string, std::int64_t> symbols;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Shape& want = entry.type(entry.arguments()[i]).shape;
      for (std::size_t d = 0; d < want.rank(); ++d)
        if (!want.dims()[d].is_static())
          symbols[want.dims()[d].symbol()] = inputs[i].shape().dims()[d].size();
    }
    const auto concrete = [&](const ir::TensorType& t) {
      Index out;
      for (const Dim& d : t.shape.dims())
        out.push_back(d.is_static() ? d.size() : symbols.at(d.symbol()));
      return out;
    };
    const auto new_storage = [&](const ir::TensorType& t) {
      Storage s;
      s.device = device_slot(t.device);
      s.dtype = t.dtype;
      s.shape = concrete(t);
      try {
        s.bytes = static_cast<std::size_t>(checked_tensor_bytes(s.shape, size_of(t.dtype)));
      } catch (const UserError& e) {
        throw UserError(cat("CompiledCallable: these input shapes make a value of ",
                            ir::to_string(t), " too big (", e.what(),
                            "); call it with smaller inputs"));
      }
      plan->storage.push_back(std::move(s));
      return plan->storage.size() - 1;
    };
    std::vector<std::size_t> args;
    for (ir::Value v : entry.arguments()) args.push_back(new_storage(entry.type(v)));
    plan->inputs = args;
    plan->outputs = instantiate(*plan, entry, args, "", new_storage);
    plan->absorbed.assign(plan->launches.size(), false);
    plan->is_view.assign(plan->launches.size(), false);
    if (!on_cuda) {  // views and epilogues are what the CPU kernels read and run
      fold_views(*plan);
      if (fuse_epilogues) absorb_epilogues(*plan);
    }
    assign_memory(*plan);
    for (std::size_t i = 1; i < plan->launches.size(); ++i)
      if (plan->absorbed[i] && !plan->is_view[i]) {
        check_epilogue_placement(*plan, i - 1, i);
        plan->launches[i - 1].epilogue = &plan->launches[i];
      }
    // A launch that writes nothing (every output empty) does not run: a kernel looping over
    // the 3 * 10^9 rows of an f32[3037000500, 0] would take minutes to write no bytes.
    // Collectives still run: their ranks meet.
    for (std::size_t i = 0; i < plan->launches.size(); ++i) {
      const std::span<const std::size_t> out = plan->out(i);
      const bool writes_nothing =
          !out.empty() && std::all_of(out.begin(), out.end(),
                                      [&](std::size_t s) { return plan->storage[s].bytes == 0; });
      const std::unique_ptr<compiler::PreparedLaunch>& prepared = plan->launches[i].prepared;
      const bool collective =
          prepared != nullptr && prepared->kind == compiler::PreparedLaunch::Kind::collective;
      if (writes_nothing && !collective) plan->absorbed[i] = true;
    }
    return plan;
  }

  // Turns reshapes of contiguous data and transposes whose readers all take strided
  // operands (matmuls, directly or through further reshapes and transposes) into views:
  // no copy runs, the readers read the original bytes. The base's liveness then covers
  // the views' readers.
  void fold_views(Plan& plan) {
    std::vector<bool> is_output(plan.storage.size(), false);
    for (std::size_t s : plan.outputs) is_output[s] = true;
    for (std::size_t i = 0; i < plan.launches.size(); ++i) {
      const Launch& l = plan.launches[i];
      if (l.fused != nullptr || plan.in(i).size() != 1 || plan.out(i).size() != 1) continue;
      const std::size_t in = plan.in(i)[0], out = plan.out(i)[0];
      const std::optional<Index> strides =
          compiler::view_strides(l.view(), plan.storage[in].shape, plan.storage[in].strides);
      if (!strides || !readers_take(plan, is_output, out, *strides)) continue;
      const std::size_t base = plan.root(in);
      Storage& view = plan.storage[out];
      view.base = static_cast<std::int64_t>(base);
      view.strides = *strides;
      view.producer = plan.storage[base].producer;
      view.arena_offset = -1;
      for (std::size_t r : view.readers) plan.storage[base].readers.push_back(r);
      plan.absorbed[i] = plan.is_view[i] = true;
      ++plan.views;
    }
  }

  // Whether every reader of \p s can read it laid out with \p strides.
  static bool readers_take(const Plan& plan, const std::vector<bool>& is_output, std::size_t s,
                           const Index& strides) {
    if (is_output[s]) return false;
    if (strides.empty()) return true;  // contiguous: any reader
    for (std::size_t r : plan.storage[s].readers) {
      const Launch& reader = plan.launches[r];
      const std::span<const std::size_t> in = plan.in(r);
      for (std::size_t k = 0; k < in.size(); ++k) {
        if (in[k] != s) continue;
        if (compiler::reads_strided(*reader.graph, reader.view(), k, plan.storage[s].shape,
                                    strides))
          continue;
        // A reshape or transpose of the view is fine if its own result is taken.
        if (reader.fused != nullptr || in.size() != 1 || plan.out(r).size() != 1) return false;
        const std::optional<Index> next =
            compiler::view_strides(reader.view(), plan.storage[s].shape, strides);
        if (!next || !readers_take(plan, is_output, plan.out(r)[0], *next)) return false;
      }
    }
    return true;
  }

  // Marks each elementwise launch that directly follows the matmul whose output it alone
  // reads, with that output's shape, to run inside the matmul tile by tile (bias, scale,
  // activation, residual add: the output is read back from cache instead of memory). The
  // matmul's operands then stay live until the epilogue's slot, so that the epilogue's
  // output is never placed over bytes a later tile still reads.
  void absorb_epilogues(Plan& plan) {
    std::vector<bool> is_output(plan.storage.size(), false);
    for (std::size_t s : plan.outputs) is_output[s] = true;
    for (std::size_t i = 0; i + 1 < plan.launches.size(); ++i) {
      const Launch& producer = plan.launches[i];
      const Launch& consumer = plan.launches[i + 1];
      if (plan.absorbed[i] || plan.out(i).size() != 1 || consumer.fused == nullptr ||
          plan.io[i].device != plan.io[i + 1].device)
        continue;
      const std::size_t s = plan.out(i)[0];
      const Storage& result = plan.storage[s];
      const std::vector<std::size_t>& readers = result.readers;
      const bool only_reader =
          !readers.empty() &&
          std::all_of(readers.begin(), readers.end(), [&](std::size_t r) { return r == i + 1; });
      if (!only_reader || is_output[s] || plan.storage[plan.out(i + 1)[0]].shape != result.shape ||
          !compiler::takes_epilogue(*producer.graph, producer.view(), *consumer.fused))
        continue;
      plan.absorbed[i + 1] = true;
      ++plan.epilogues;
      for (std::size_t in : plan.in(i)) plan.storage[plan.root(in)].readers.push_back(i + 1);
      // `kiln.matmul + kiln.fused @fused_3 layers.0 (nn.cpp:29)`: both ops before the
      // place, which traces may truncate.
      std::string epilogue = " + " + std::string(consumer.view().name());
      if (const ir::Attribute* callee = consumer.view().find("callee"))
        epilogue += " @" + callee->as_symbol().name;
      plan.labels[i].insert(producer.view().name().size(), epilogue);
    }
  }

  // Adds the launches of graph \p g (recursively for calls) and returns its results' storage.
  template <class NewStorage>
  std::vector<std::size_t> instantiate(Plan& plan, const ir::Graph& g,
                                       const std::vector<std::size_t>& args,
                                       const std::string& prefix, NewStorage& new_storage) {
    std::vector<std::size_t> where(g.num_values());
    for (std::size_t i = 0; i < args.size(); ++i) where[g.arguments()[i].id] = args[i];
    const Program& p = programs.at(&g);
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      const ir::OpView op = g.op(i);
      const Step& step = p.steps[i];
      std::vector<std::size_t> in;
      for (ir::Value v : op.operands()) in.push_back(where[v.id]);
      if (step.kind == StepKind::call) {
        const std::vector<std::size_t> results =
            instantiate(plan, *step.callee, in, join_prefix(prefix, step.prefix), new_storage);
        for (std::size_t r = 0; r < results.size(); ++r) where[op.result(r).id] = results[r];
        continue;
      }
      if (step.kind == StepKind::weight || step.kind == StepKind::constant) {
        const std::size_t s = new_storage(g.type(op.result(0)));
        if (step.kind == StepKind::weight) {
          const Tensor& w = weights.at(join_prefix(prefix, op.find("name")->as_string()));
          plan.storage[s].fixed = const_cast<std::byte*>(w.bytes().data());  // read only
        } else {
          plan.storage[s].fixed = reinterpret_cast<std::byte*>(
              const_cast<char*>(op.find("value")->as_dense().bytes.data()));  // read only
        }
        if (on_cuda)
          plan.storage[s].fixed = device_copy(plan.storage[s].fixed, plan.storage[s].bytes);
        where[op.result(0).id] = s;
        continue;
      }
      if (step.kind == StepKind::collective) {
        instantiate_collective(plan, g, i, prefix, step, in, where, new_storage);
        continue;
      }
      std::vector<std::size_t> results(op.num_results());
      std::iota(results.begin(), results.end(), std::size_t{0});
      const ir::Value on = op.num_results() > 0 ? op.result(0) : op.operand(0);
      add_launch(plan, g, i, prefix, step, in, results, device_slot(g.type(on).device), where,
                 new_storage);
    }
    std::vector<std::size_t> results;
    for (ir::Value v : g.results()) results.push_back(where[v.id]);
    return results;
  }

  // Adds a launch of op \p i of \p g on device slot \p device, reading \p in and making
  // the op's results numbered \p results; returns its index.
  template <class NewStorage>
  std::size_t add_launch(Plan& plan, const ir::Graph& g, std::size_t i, const std::string& prefix,
                         const Step& step, const std::vector<std::size_t>& in,
                         const std::vector<std::size_t>& results, std::size_t device,
                         std::vector<std::size_t>& where, NewStorage& new_storage) {
    const ir::OpView op = g.op(i);
    const std::size_t launch = plan.launches.size();
    Launch l;
    l.graph = &g;
    l.op = static_cast<std::uint32_t>(i);
    l.fused = step.fused;
    plan.launches.push_back(std::move(l));
    plan.labels.push_back(launch_label(op, prefix));
    std::vector<std::size_t> out;
    for (std::size_t r : results) {
      const std::size_t s = new_storage(g.type(op.result(r)));
      plan.storage[s].producer = static_cast<std::int64_t>(launch);
      plan.storage[s].arena_offset = 0;  // placed by assign_memory
      where[op.result(r).id] = s;
      out.push_back(s);
    }
    for (std::size_t s : in) plan.storage[s].readers.push_back(launch);
    plan.io.push_back({.first = plan.io_storage.size(),
                       .ins = static_cast<std::uint32_t>(in.size()),
                       .outs = static_cast<std::uint32_t>(out.size()),
                       .kernel = step.kernel,
                       .device = device});
    plan.io_storage.insert(plan.io_storage.end(), in.begin(), in.end());
    plan.io_storage.insert(plan.io_storage.end(), out.begin(), out.end());
    return launch;
  }

  // A collective op: one launch per participating device, each running its rank's part
  // over the communicator of those devices. A transfer is a two-rank broadcast: the
  // source device sends (a launch with no result), the destination receives.
  template <class NewStorage>
  void instantiate_collective(Plan& plan, const ir::Graph& g, std::size_t i,
                              const std::string& prefix, const Step& step,
                              const std::vector<std::size_t>& in, std::vector<std::size_t>& where,
                              NewStorage& new_storage) {
    const ir::OpView op = g.op(i);
    std::vector<std::size_t> slots;
    for (ir::Value v : op.operands()) slots.push_back(device_slot(g.type(v).device));
    if (op.name() == "kiln.transfer") slots.push_back(device_slot(g.type(op.result(0)).device));
    const std::shared_ptr<Communicator>& comm = communicator(slots);
    for (std::size_t rank = 0; rank < slots.size(); ++rank) {
      const bool sends_only = op.name() == "kiln.transfer" && rank == 0;
      const bool receives_only = op.name() == "kiln.transfer" && rank == 1;
      const std::size_t launch =
          add_launch(plan, g, i, prefix, step,
                     receives_only ? std::vector<std::size_t>{} : std::vector{in[rank]},
                     sends_only ? std::vector<std::size_t>{}
                                : std::vector{receives_only ? std::size_t{0} : rank},
                     slots[rank], where, new_storage);
      plan.launches[launch].prepared = compiler::make_collective(comm, static_cast<int>(rank));
    }
  }

  // An epilogue writes its output while other tiles of its matmul still read the operands.
  static void check_epilogue_placement(const Plan& plan, std::size_t producer,
                                       std::size_t epilogue) {
    const Storage& out = plan.storage[plan.out(epilogue)[0]];
    for (std::size_t s : plan.in(producer)) {
      const Storage& in = plan.storage[plan.root(s)];
      if (in.arena_offset >= 0 && in.arena_offset < out.arena_offset + std::int64_t(out.bytes) &&
          out.arena_offset < in.arena_offset + std::int64_t(in.bytes))
        throw InternalError(cat("CompiledCallable: the epilogue of ", plan.labels[producer],
                                " writes over an operand it is still reading"));
    }
  }

  // The error for an arena of \p bytes that cannot be allocated: how much, and the largest
  // value in it, by the launch that makes it (attention's scores, say, at a long sequence).
  static std::string arena_too_big(const Plan& plan, std::size_t bytes, std::size_t machine) {
    const auto gib = [](std::size_t b) { return cat(static_cast<double>(b) / (1u << 30), " GiB"); };
    std::size_t largest = 0, most = 0;  // among the values in the arena
    for (std::size_t s = 0; s < plan.storage.size(); ++s)
      if (plan.storage[s].arena_offset >= 0 && plan.storage[s].bytes > most) {
        largest = s;
        most = plan.storage[s].bytes;
      }
    const Storage& big = plan.storage[largest];
    return cat(
        "CompiledCallable: these input shapes need ", gib(bytes),
        " for the values of one call, more than ",
        machine != 0 && bytes > machine ? cat("this machine's memory and swap (", gib(machine), ")")
                                        : std::string("could be allocated"),
        "; the largest is ", big.dtype, "[", detail::join(big.shape, ", "), "] (", gib(big.bytes),
        ")",
        big.producer >= 0 ? cat(", made by ", plan.labels[static_cast<std::size_t>(big.producer)])
                          : std::string(", an input"),
        "; call it with smaller inputs");
  }

  // Liveness-based placement in one arena per device, linear in the number of launches.
  void assign_memory(Plan& plan) {
    std::vector<ArenaAllocator> arenas(devices.size());  // one per device
    const auto release = [&](std::size_t s) {
      const Storage& st = plan.storage[s];
      arenas[st.device].release(static_cast<std::size_t>(st.arena_offset), st.bytes);
    };
    const std::size_t n = plan.launches.size();
    std::vector<std::size_t> last_use(plan.storage.size(), 0);
    std::vector<bool> keep(plan.storage.size(), false);
    for (std::size_t s : plan.outputs) keep[s] = true;
    for (std::size_t s = 0; s < plan.storage.size(); ++s)
      for (std::size_t r : plan.storage[s].readers) last_use[s] = std::max(last_use[s], r);
    std::vector<std::vector<std::size_t>> free_after(n);
    // Inputs live from the start to their last use (or the end when they are outputs).
    const auto place = [&](std::size_t s) {
      Storage& st = plan.storage[s];
      st.arena_offset = static_cast<std::int64_t>(arenas[st.device].allocate(st.bytes));
    };
    for (std::size_t s : plan.inputs) place(s);
    for (std::size_t s : plan.inputs)
      if (!keep[s] && !plan.storage[s].readers.empty()) free_after[last_use[s]].push_back(s);
    for (std::size_t i = 0; i < n; ++i) {
      if (plan.is_view[i]) {  // places nothing: its result is its input's bytes
        for (std::size_t s : free_after[i]) release(s);
        continue;
      }
      for (std::size_t s : plan.out(i)) {
        place(s);
        if (!keep[s]) {
          if (plan.storage[s].readers.empty()) {
            free_after[i].push_back(s);
          } else {
            free_after[last_use[s]].push_back(s);
          }
        }
      }
      for (std::size_t s : free_after[i]) release(s);
    }
    for (const ArenaAllocator& a : arenas) {
      Arena& arena = plan.arenas.emplace_back();
      arena.bytes = std::max<std::size_t>(a.peak(), kAlign);
      if (on_cuda) {
        auto buffer = std::make_shared<DeviceBuffer<std::uint8_t>>(
            ctx->enqueue_create_buffer<std::uint8_t>(arena.bytes));
        arena.memory =
            std::shared_ptr<std::byte>(buffer, reinterpret_cast<std::byte*>(buffer->data()));
      } else {
        const std::size_t machine = compiler::memory_and_swap();  // Linux overcommits
        auto* bytes = machine != 0 && arena.bytes > machine
                          ? nullptr
                          : static_cast<std::byte*>(::operator new (
                                arena.bytes, std::align_val_t{kAlign}, std::nothrow));
        if (bytes == nullptr) throw UserError(arena_too_big(plan, arena.bytes, machine));
        arena.memory = {bytes,
                        [](std::byte* p) { ::operator delete (p, std::align_val_t{kAlign}); }};
      }
    }
    // One view per launch input and output, in one list (sized once: the launches hold
    // spans into it), each reading its shape and strides from its value's record.
    plan.launch_views.reserve(plan.io_storage.size());
    for (std::size_t s : plan.io_storage)
      plan.launch_views.push_back(
          {plan.address(s), plan.storage[s].dtype, plan.storage[s].shape, plan.storage[s].strides});
    for (std::size_t i = 0; i < n; ++i) {
      Launch& l = plan.launches[i];
      const LaunchIo& io = plan.io[i];
      l.in = std::span<const View>(plan.launch_views).subspan(io.first, io.ins);
      l.out = std::span<const View>(plan.launch_views).subspan(io.first + io.ins, io.outs);
      const std::span<const std::size_t> in = plan.in(i);
      // A weight or constant: the same bytes for the plan's life.
      l.pack_rhs = prepack_weights && in.size() == 2 &&
                   plan.storage[plan.root(in[1])].arena_offset < 0 &&
                   plan.storage[plan.root(in[1])].fixed != nullptr;
      l.bf16 = matmul_precision == MatmulPrecision::bf16;
    }
  }

  // bf16 plans: a bf16 weight matmul whose output (or fused epilogue's) only another bf16
  // weight matmul reads, as its left operand (an MLP's two layers), writes it as bf16 into
  // the first half of its storage for that matmul to read as it is; so does a layer or
  // RMS norm read only by bf16 weight matmuls (attention's Q, K and V; an MLP's first).
  void hand_off_bf16(Plan& plan) {
    if (matmul_precision != MatmulPrecision::bf16) return;
    std::vector<bool> is_output(plan.storage.size(), false);
    for (std::size_t s : plan.outputs) is_output[s] = true;
    for (std::size_t i = 0; i < plan.launches.size(); ++i) {
      Launch& producer = plan.launches[i];
      if (plan.absorbed[i] || plan.out(i).size() != 1) continue;
      const bool prepared_matmul =
          producer.prepared != nullptr &&
          producer.prepared->kind == compiler::PreparedLaunch::Kind::matmul;
      if (!prepared_matmul) {
        const std::size_t s = plan.out(i)[0];
        const Storage& out = plan.storage[s];
        if (is_output[s] || out.base >= 0 || out.arena_offset < 0) continue;
        // The launches that read it; an absorbed epilogue is listed among the readers of its
        // matmul's operands to keep them live, and may not read it itself.
        std::vector<Launch*> readers;
        bool others = false;
        for (std::size_t r : out.readers) {
          if (!plan.absorbed[r] && plan.io[r].device == plan.io[i].device)
            readers.push_back(&plan.launches[r]);
          else if (std::any_of(plan.in(r).begin(), plan.in(r).end(),
                               [&](std::size_t in) { return plan.root(in) == s; }))
            others = true;
        }
        if (!others && compiler::hand_off_bf16(producer, readers)) ++plan.bf16_handoffs;
        continue;
      }
      const std::size_t s = producer.epilogue != nullptr ? plan.out(i + 1)[0] : plan.out(i)[0];
      const Storage& out = plan.storage[s];
      if (is_output[s] || out.base >= 0 || out.arena_offset < 0 || out.readers.empty()) continue;
      // The one reader, and its absorbed epilogue (listed to keep the operand live).
      const std::size_t j = out.readers[0];
      const bool one_reader =
          std::all_of(out.readers.begin(), out.readers.end(), [&](std::size_t r) {
            return r == j ||
                   (r == j + 1 && plan.absorbed[r] && plan.launches[j].epilogue != nullptr);
          });
      if (!one_reader || plan.io[j].device != plan.io[i].device) continue;
      plan.bf16_handoffs += compiler::hand_off_bf16(producer, plan.launches[j]) ? 1 : 0;
    }
  }

  // Records the launches as a chain in program order: each kernel spreads its blocks over
  // every worker, which on a few cores beats running independent small kernels side by
  // side. Every data and arena-reuse dependency points backwards in program order, so the
  // chain honours them all without listing them.
  // One graph per device, of that device's launches. Devices meet only in collectives,
  // whose launches block until every rank has reached them.
  void record(Plan& plan) {
    if (on_cuda) {
      record_cuda(plan);
      return;
    }
    for (std::size_t i = 0; i < plan.launches.size(); ++i)
      if (contexts[plan.io[i].device])
        compiler::prepare(plan.launches[i], contexts[plan.io[i].device]->num_threads());
    hand_off_bf16(plan);
    plan.graphs.resize(devices.size());
    for (std::size_t d = 0; d < devices.size(); ++d) {
      if (!contexts[d]) continue;  // another process's device
      const auto runs_here = [&](std::size_t i) {
        return plan.io[i].device == d && !plan.absorbed[i];
      };
      bool any = false;
      for (std::size_t i = 0; i < plan.launches.size() && !any; ++i) any = runs_here(i);
      if (!any && contexts[d] != ctx) continue;  // the first device has a graph (maybe empty)
      std::size_t nodes = 0;
      for (std::size_t i = 0; i < plan.launches.size(); ++i) nodes += runs_here(i) ? 1 : 0;
      plan.graphs[d] = DeviceGraph::create(*contexts[d], [&](DeviceGraphBuilder& b) {
        b.reserve(nodes);
        bool first = true;
        for (std::size_t i = 0; i < plan.launches.size(); ++i) {
          if (!runs_here(i)) continue;
          const DeviceGraphDependencies after =
              first ? DeviceGraphDependencies{} : DeviceGraphDependencies{b.last_node()};
          first = false;
          const DeviceGraphNode node =
              b.add_function(*launch_fns[d], LaunchConfig{plan.launches[i].blocks, 1}, after,
                             &plan.launches[i], plan.io[i].kernel);
          b.set_label(node, std::move(plan.labels[i]));  // the graph's from now on
        }
      });
    }
    std::vector<std::string>().swap(plan.labels);  // moved into the graphs (plan_dot, traces)
    ++stats.graph_builds;
  }

  // CUDA: one graph of the launches in program order (CUDA kernels, cuBLAS GEMMs captured
  // into it, copies), and host buffers for the outputs.
  void record_cuda(Plan& plan) {
    for (std::size_t i = 0; i < plan.launches.size() && !plan.cuda_error; ++i)
      if (plan.launches[i].view().name() == "kiln.gather") {
        plan.cuda_error = std::make_shared<DeviceBuffer<std::int64_t>>(
            ctx->enqueue_create_buffer<std::int64_t>(3));
        ctx->enqueue_memset(*plan.cuda_error, std::int64_t{0});
      }
    long long* const error =
        plan.cuda_error ? reinterpret_cast<long long*>(plan.cuda_error->data()) : nullptr;
    plan.graphs.resize(1);
    plan.graphs[0] = DeviceGraph::create(*ctx, [&](DeviceGraphBuilder& b) {
      b.reserve(plan.launches.size());
      bool first = true;
      for (std::size_t i = 0; i < plan.launches.size(); ++i) {
        if (plan.absorbed[i]) continue;  // writes nothing (CUDA plans absorb nothing else)
        const DeviceGraphDependencies after =
            first ? DeviceGraphDependencies{} : DeviceGraphDependencies{b.last_node()};
        first = false;
        const DeviceGraphNode node =
            compiler::add_cuda_launch(b, *ctx, plan.launches[i], after, cuda_kernels, error);
        b.set_label(node, std::move(plan.labels[i]));  // the graph's from now on
      }
    });
    std::vector<std::string>().swap(plan.labels);
    for (std::size_t s : plan.outputs) plan.host_outputs.emplace_back(plan.storage[s].bytes);
    ctx->synchronize();  // the weights' copies
    ++stats.graph_builds;
  }

  /// Where output \p i of \p plan is readable on the host after a call.
  const std::byte* host_output(const Plan& plan, std::size_t i) const {
    return on_cuda ? plan.host_outputs[i].data() : plan.address(plan.outputs[i]);
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
      record(*plan);
      std::size_t bytes = 0;
      for (const Arena& a : plan->arenas) bytes += a.bytes;
      stats.peak_arena_bytes = std::max(stats.peak_arena_bytes, bytes);
      stats.launches = plan->launches.size() - plan->epilogues - plan->views;
      stats.epilogues = plan->epilogues;
      stats.views = plan->views;
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
      stats.isa = cpu_isa();
      stats.bf16_matmuls = static_cast<std::size_t>(
          std::count_if(plan->launches.begin(), plan->launches.end(),
                        [](const Launch& l) { return compiler::in_bf16(l); }));
      ++stats.plans;
      it = plans.emplace(key, std::move(plan)).first;
      last_plan = it->second.get();
      return *last_plan;
    }
    ++stats.replays;
    last_plan = it->second.get();
    return *last_plan;
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
                                       host_output(plan, i), st.bytes));
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
      if (contexts[st.device]) std::memcpy(outputs[i].data(), host_output(plan, i), st.bytes);
    }
  }

  std::vector<std::size_t> output_bytes(const std::vector<Tensor>& inputs) {
    std::scoped_lock lock(mutex);
    std::vector<std::size_t> out;
    const Plan& plan = plan_for(inputs);
    for (std::size_t s : plan.outputs) out.push_back(plan.storage[s].bytes);
    return out;
  }

  // CUDA: the inputs copied to the device, one replay, the outputs copied back.
  void run_cuda(Plan& plan, const std::vector<Tensor>& inputs) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      enqueue_copy_bytes(plan.address(plan.inputs[i]), inputs[i].bytes().data(),
                         plan.storage[plan.inputs[i]].bytes);
    plan.graphs[0]->replay();
    for (std::size_t i = 0; i < plan.outputs.size(); ++i)
      enqueue_copy_bytes(plan.host_outputs[i].data(), plan.address(plan.outputs[i]),
                         plan.host_outputs[i].size());
    if (plan.cuda_error) ctx->enqueue_copy(plan.host_error, *plan.cuda_error);
    ctx->synchronize();
    if (plan.cuda_error && plan.host_error[0] != 0) {
      ctx->enqueue_memset(*plan.cuda_error, std::int64_t{0});
      ctx->synchronize();
      throw UserError(cat("CompiledCallable on ", ctx->device(), ": a gather's index ",
                          plan.host_error[1], " is outside [0, ", plan.host_error[2],
                          "); the outputs of this call are not valid"));
    }
  }

  // Copies the inputs in, runs the plan for their shapes and waits for it. Locked by caller.
  Plan& run_plan(const std::vector<Tensor>& inputs) {
    Plan& plan = plan_for(inputs);
    if (on_cuda) {
      run_cuda(plan, inputs);
      return plan;
    }
    for (std::size_t i = 0; i < inputs.size(); ++i)
      std::memcpy(plan.address(plan.inputs[i]), inputs[i].bytes().data(),
                  plan.storage[plan.inputs[i]].bytes);
    if (replay_graph) {
      for (const std::optional<DeviceGraph>& g : plan.graphs)
        if (g) g->replay();
    } else {
      for (std::size_t i = 0; i < plan.launches.size(); ++i)
        if (!plan.absorbed[i] && contexts[plan.io[i].device])
          contexts[plan.io[i].device]->enqueue_function(*launch_fns[plan.io[i].device],
                                                        LaunchConfig{plan.launches[i].blocks, 1},
                                                        &plan.launches[i], plan.io[i].kernel);
    }
    // Every device is waited for, even after one fails, so that none is still running
    // when the call returns; the first failure is rethrown.
    std::exception_ptr failure;
    for (const auto& c : contexts) {
      if (!c) continue;
      try {
        c->synchronize();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
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
