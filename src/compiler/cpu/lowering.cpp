// The CPU lowering (see lowering.hpp): each launch runs its CPU kernel as one kernel node
// of its device's graph, the nodes of a device in a chain in program order.

#include "compiler/lowering.hpp"

#include <cstring>
#include <exception>
#include <new>

#include "compiler/machine_memory.hpp"
#include "compiler/plan/memory_plan.hpp"
#include "compiler/plan/rewrites.hpp"

namespace kiln::compiler {
namespace {

/// The device function every launch runs: the launch's kernel on the launch.
using LaunchFunction = DeviceFunction<void (*)(const Launch*, Kernel)>;

class CpuLowering final : public Lowering {
 public:
  CpuLowering(std::vector<std::shared_ptr<DeviceContext>> contexts, bool replay_graph,
              MatmulPrecision precision)
      : contexts_(std::move(contexts)), replay_graph_(replay_graph), precision_(precision) {
    for (const auto& c : contexts_)
      launch_fns_.push_back(c ? std::make_unique<LaunchFunction>(c->compile_function(
                                    +[](const Launch* l, Kernel k) { k(*l); },
                                    {.name = "kiln_kernel", .form = KernelForm::per_block}))
                              : nullptr);
  }

  std::string unsupported(const ir::OpDef&) const override { return {}; }
  bool rewrites_launches() const override { return true; }
  std::byte* fixed_bytes(std::byte* host, std::size_t) override { return host; }

  std::shared_ptr<std::byte> allocate_arena(std::size_t bytes) override {
    const std::size_t machine = memory_and_swap();  // Linux overcommits: check first
    auto* memory = machine != 0 && bytes > machine
                       ? nullptr
                       : static_cast<std::byte*>(
                             ::operator new (bytes, std::align_val_t{kArenaAlign}, std::nothrow));
    if (memory == nullptr) return nullptr;
    return {memory, [](std::byte* p) { ::operator delete (p, std::align_val_t{kArenaAlign}); }};
  }

  // One arena per device for every plan's calls, grown as a plan needs more: a new shape no
  // bigger than the largest so far touches no new page (on this project's machines a first
  // touch costs about 0.5 ms a MiB). It grows to at least twice its size, since pages
  // nobody touches take no memory; the plans made before keep the arena they were bound
  // to, so at most about as much again stays allocated.
  Arena call_arena(std::size_t device, std::size_t bytes) override {
    if (device >= shared_arenas_.size()) shared_arenas_.resize(device + 1);
    Arena& shared = shared_arenas_[device];
    if (bytes <= shared.bytes) return shared;
    const std::size_t machine = memory_and_swap();
    std::size_t grown = std::max(bytes, shared.bytes * 2);
    if (machine != 0 && grown > machine) grown = bytes;
    std::shared_ptr<std::byte> memory = allocate_arena(grown);
    if (!memory) return {};
    shared = {.bytes = grown, .memory = std::move(memory)};
    return shared;
  }

  // Records the launches as a chain in program order: each kernel spreads its blocks over
  // every worker, which on a few cores beats running independent small kernels side by
  // side. Every data and arena-reuse dependency points backwards in program order, so the
  // chain honours them all without listing them.
  // One graph per device, of that device's launches. Devices meet only in collectives,
  // whose launches block until every rank has reached them.
  void record(Plan& plan) override {
    for (std::size_t i = 0; i < plan.launches.size(); ++i) {
      // A launch run inside another's kernel (attention's softmax and context matmul, an
      // expansion's depthwise conv) needs no state of its own: that kernel reads only its
      // views. Elementwise ones (epilogues) it runs through their prepared strides.
      const bool unused = plan.in_kernel[i] && !plan.launches[i].fused;
      if (contexts_[plan.io[i].device] && !unused)
        prepare(plan.launches[i], contexts_[plan.io[i].device]->num_threads());
    }
    if (precision_ == MatmulPrecision::bf16) hand_off_bf16(plan);
    run_invariant(plan);
    plan.graphs.resize(contexts_.size());
    for (std::size_t d = 0; d < contexts_.size(); ++d) {
      if (!contexts_[d]) continue;  // another process's device
      const auto runs_here = [&](std::size_t i) {
        return plan.io[i].device == d && !plan.absorbed[i] && !plan.invariant[i];
      };
      std::size_t nodes = 0;
      for (std::size_t i = 0; i < plan.launches.size(); ++i) nodes += runs_here(i) ? 1 : 0;
      if (nodes == 0 && d != first_device()) continue;  // the first device has a graph
      plan.graphs[d] = DeviceGraph::create(*contexts_[d], [&](DeviceGraphBuilder& b) {
        b.reserve(nodes);
        bool first = true;
        for (std::size_t i = 0; i < plan.launches.size(); ++i) {
          if (!runs_here(i)) continue;
          const DeviceGraphDependencies after =
              first ? DeviceGraphDependencies{} : DeviceGraphDependencies{b.last_node()};
          first = false;
          const DeviceGraphNode node =
              b.add_function(*launch_fns_[d], LaunchConfig{plan.launches[i].blocks, 1}, after,
                             &plan.launches[i], plan.io[i].kernel);
          b.set_label(node, std::move(plan.labels[i]));  // the graph's from now on
        }
      });
    }
    std::vector<std::string>().swap(plan.labels);  // moved into the graphs (plan_dot, traces)
  }

  void run(Plan& plan, const std::vector<Tensor>& inputs) override {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      std::memcpy(plan.address(plan.inputs[i]), inputs[i].bytes().data(),
                  plan.storage[plan.inputs[i]].bytes);
    if (replay_graph_) {
      const DeviceGraph* only = nullptr;  // one device, the usual case: waited for here
      std::size_t graphs = 0, devices = 0;
      for (const std::optional<DeviceGraph>& g : plan.graphs)
        if (g) only = &*g, ++graphs;
      for (const auto& c : contexts_) devices += c ? 1 : 0;
      if (graphs == 1 && devices == 1) {
        only->replay_and_synchronize();
        return;
      }
      for (const std::optional<DeviceGraph>& g : plan.graphs)
        if (g) g->replay();
    } else {
      for (std::size_t i = 0; i < plan.launches.size(); ++i) {
        const std::size_t d = plan.io[i].device;
        if (!plan.absorbed[i] && !plan.invariant[i] && contexts_[d])
          contexts_[d]->enqueue_function(*launch_fns_[d], LaunchConfig{plan.launches[i].blocks, 1},
                                         &plan.launches[i], plan.io[i].kernel);
      }
    }
    // Every device is waited for, even after one fails, so that none is still running
    // when the call returns; the first failure is rethrown.
    std::exception_ptr failure;
    for (const auto& c : contexts_) {
      if (!c) continue;
      try {
        c->synchronize();
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
  }

  /// Runs the invariant launches (see hoist_invariant) once, in program order, into the
  /// places the plan keeps for them.
  void run_invariant(Plan& plan) {
    std::vector<bool> used(contexts_.size(), false);
    for (std::size_t i = 0; i < plan.launches.size(); ++i) {
      const std::size_t d = plan.io[i].device;
      if (!plan.invariant[i] || plan.absorbed[i] || !contexts_[d]) continue;
      contexts_[d]->enqueue_function(*launch_fns_[d], LaunchConfig{plan.launches[i].blocks, 1},
                                     &plan.launches[i], plan.io[i].kernel);
      used[d] = true;
    }
    for (std::size_t d = 0; d < contexts_.size(); ++d)
      if (used[d]) contexts_[d]->synchronize();
  }

  const std::byte* host_output(const Plan& plan, std::size_t i) const override {
    return plan.address(plan.outputs[i]);
  }

 private:
  /// The first device this process drives: its graph exists even when empty.
  std::size_t first_device() const {
    std::size_t d = 0;
    while (d < contexts_.size() && !contexts_[d]) ++d;
    return d;
  }

  std::vector<std::shared_ptr<DeviceContext>> contexts_;
  std::vector<std::unique_ptr<LaunchFunction>> launch_fns_;
  std::vector<Arena> shared_arenas_;  // per device: see call_arena
  bool replay_graph_;
  MatmulPrecision precision_;
};

}  // namespace

std::unique_ptr<Lowering> cpu_lowering(std::vector<std::shared_ptr<DeviceContext>> contexts,
                                       bool replay_graph, MatmulPrecision precision) {
  return std::make_unique<CpuLowering>(std::move(contexts), replay_graph, precision);
}

}  // namespace kiln::compiler
