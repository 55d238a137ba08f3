// The CUDA lowering (see lowering.hpp): one CUDA graph of the launches in program order
// (generated CUDA kernels, cuBLAS GEMMs captured into it, copies), device copies of the
// weights, and host buffers the outputs are copied back into after each call.

#include "compiler/lowering.hpp"

#include "compiler/cuda/launches.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {
namespace {

/// A CUDA plan's own state.
struct CudaPlan final : LoweredPlan {
  std::vector<std::vector<std::byte>> host_outputs;  // each output's bytes after a call
  // Plans with a gather: where it reports an index out of range ({1, index, axis length}),
  // and that report's copy on the host after each call.
  std::shared_ptr<DeviceBuffer<std::int64_t>> error;
  std::array<std::int64_t, 3> host_error{};
  std::vector<std::shared_ptr<void>> keep;  // what the graph reads besides the arena
};

class CudaLowering final : public Lowering {
 public:
  explicit CudaLowering(std::shared_ptr<DeviceContext> ctx) : ctx_(std::move(ctx)) {}

  std::string unsupported(const ir::OpDef& op) const override { return cuda_unsupported(op); }
  bool rewrites_launches() const override { return false; }

  // The device copy of the \p bytes fixed bytes at \p host (a weight or a constant), made
  // on first use and kept for the callable's life.
  std::byte* fixed_bytes(std::byte* host, std::size_t bytes) override {
    auto& copy = device_copies_[host];
    if (!copy) {
      copy = std::make_shared<DeviceBuffer<std::uint8_t>>(
          ctx_->enqueue_create_buffer<std::uint8_t>(std::max<std::size_t>(bytes, 1)));
      copy_bytes(copy->data(), host, bytes);
    }
    return reinterpret_cast<std::byte*>(copy->data());
  }

  std::shared_ptr<std::byte> allocate_arena(std::size_t bytes) override {
    auto buffer = std::make_shared<DeviceBuffer<std::uint8_t>>(
        ctx_->enqueue_create_buffer<std::uint8_t>(bytes));
    return {buffer, reinterpret_cast<std::byte*>(buffer->data())};
  }

  void record(Plan& plan) override {
    auto state = std::make_unique<CudaPlan>();
    for (std::size_t i = 0; i < plan.launches.size() && !state->error; ++i)
      if (const KernelDef* def = find_kernel_def(plan.launches[i].view().def());
          def != nullptr && def->reports_errors) {
        state->error = std::make_shared<DeviceBuffer<std::int64_t>>(
            ctx_->enqueue_create_buffer<std::int64_t>(3));
        ctx_->enqueue_memset(*state->error, std::int64_t{0});
      }
    long long* const error =
        state->error ? reinterpret_cast<long long*>(state->error->data()) : nullptr;
    plan.graphs.resize(1);
    CudaRecording recording{kernels_, state->keep};
    plan.graphs[0] = DeviceGraph::create(*ctx_, [&](DeviceGraphBuilder& b) {
      b.reserve(plan.launches.size());
      bool first = true;
      for (std::size_t i = 0; i < plan.launches.size(); ++i) {
        if (plan.absorbed[i]) continue;  // writes nothing (CUDA plans absorb nothing else)
        const DeviceGraphDependencies after =
            first ? DeviceGraphDependencies{} : DeviceGraphDependencies{b.last_node()};
        first = false;
        const DeviceGraphNode node =
            add_cuda_launch(b, *ctx_, plan.launches[i], after, recording, error);
        b.set_label(node, std::move(plan.labels[i]));  // the graph's from now on
      }
    });
    std::vector<std::string>().swap(plan.labels);
    for (std::size_t s : plan.outputs) state->host_outputs.emplace_back(plan.storage[s].bytes);
    ctx_->synchronize();  // the weights' and tables' copies
    plan.lowered = std::move(state);
  }

  // The inputs copied to the device, one replay, the outputs copied back.
  void run(Plan& plan, const std::vector<Tensor>& inputs) override {
    CudaPlan& state = static_cast<CudaPlan&>(*plan.lowered);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      copy_bytes(plan.address(plan.inputs[i]), inputs[i].bytes().data(),
                 plan.storage[plan.inputs[i]].bytes);
    plan.graphs[0]->replay();
    for (std::size_t i = 0; i < plan.outputs.size(); ++i)
      copy_bytes(state.host_outputs[i].data(), plan.address(plan.outputs[i]),
                 state.host_outputs[i].size());
    if (state.error) ctx_->enqueue_copy(state.host_error, *state.error);
    ctx_->synchronize();
    if (state.error && state.host_error[0] != 0) {
      ctx_->enqueue_memset(*state.error, std::int64_t{0});
      ctx_->synchronize();
      // The op that reported it: 1 gather, 2 gather_elements, 3 gather_nd, 4 scatter_nd,
      // 5 scatter_elements.
      const std::int64_t op = state.host_error[0];
      const bool gather = op == 1;
      throw UserError(detail::cat("CompiledCallable on ", ctx_->device(), ": ",
                                  gather    ? "a gather's"
                                  : op == 2 ? "a gather_elements'"
                                  : op == 3 ? "a gather_nd's"
                                  : op == 4 ? "a scatter_nd's"
                                            : "a scatter_elements'",
                                  " index ", state.host_error[1], " is outside [",
                                  gather ? 0 : -state.host_error[2], ", ", state.host_error[2],
                                  "); the outputs of this call are not valid"));
    }
  }

  const std::byte* host_output(const Plan& plan, std::size_t i) const override {
    return static_cast<const CudaPlan&>(*plan.lowered).host_outputs[i].data();
  }

 private:
  /// Enqueues a copy of \p n bytes (host or device memory either side).
  void copy_bytes(void* dst, const void* src, std::size_t n) const {
    ctx_->enqueue_copy(std::span<std::uint8_t>(static_cast<std::uint8_t*>(dst), n),
                       std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(src), n));
  }

  std::shared_ptr<DeviceContext> ctx_;
  CudaKernelCache kernels_;
  // Device copies of weights and constants, by their host bytes.
  std::map<const std::byte*, std::shared_ptr<DeviceBuffer<std::uint8_t>>> device_copies_;
};

}  // namespace

std::unique_ptr<Lowering> cuda_lowering(std::shared_ptr<DeviceContext> ctx) {
  return std::make_unique<CudaLowering>(std::move(ctx));
}

}  // namespace kiln::compiler
