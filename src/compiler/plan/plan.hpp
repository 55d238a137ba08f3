#pragma once
// Internal: what CompiledCallable makes of a module, in two stages.
//
// A *program* per graph, made once per callable (program.hpp): one step per op, saying
// which kernel runs it or that it is a weight, a constant, a call or a collective.
//
// A *plan* per set of concrete input shapes, made on the first call with them: the entry's
// ops with calls expanded as launches, the values they read and write (storage), their
// places in one arena per device, and the device graphs that replay them. Each stage is
// one file:
//   instantiate.cpp       programs -> launches and storage, calls expanded
//   fold_views.cpp        reshapes and transposes that readers read in place: no launch
//   hoist_invariant.cpp   launches that read only weights and constants: run once
//   absorb_epilogues.cpp  elementwise launches run inside the matmul before them
//   absorb_attention.cpp  softmax(Q Kᵀ) V run as one kernel, the scores kept in cache
//   memory_plan.cpp       liveness and arena offsets, linear in the launches
//   instantiate.cpp       (bind_launches) each launch's views over the placed memory
// and a Lowering (compiler/lowering.hpp) prepares and records it: CPU kernels in CPU
// device graphs (after which bf16_handoff.cpp runs, on prepared launches), or CUDA
// kernels in a CUDA graph.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/cpu/kernels.hpp"
#include "kiln/runtime/device_graph.hpp"

namespace kiln::compiler {

// ---- programs: one per graph ----------------------------------------------------------------

enum class StepKind { kernel, weight, constant, call, collective };

/// How one op runs.
struct Step {
  StepKind kind = StepKind::kernel;
  Kernel kernel = nullptr;
  std::shared_ptr<const FusedProgram> fused;  // kiln.fused and elementwise ops
  const ir::Graph* callee = nullptr;          // calls
  std::string_view prefix{};                  // calls: kiln.prefix (in the IR)
};

struct Program {
  const ir::Graph* graph = nullptr;
  std::vector<Step> steps;  // one per op
};

// ---- plans: one per concrete input shapes ----------------------------------------------------

/// Where a value lives during a call: an arena slot or fixed storage (weights, constants).
struct Storage {
  std::int64_t arena_offset = -1;  // -1: fixed
  bool kept = false;       // an invariant launch's output: in the plan's kept arena, not the call's
  std::size_t device = 0;  // which of the callable's devices (arena) holds it
  std::byte* fixed = nullptr;
  std::size_t bytes = 0;  // 0 also for a value an attention kernel keeps in scratch
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

/// What a lowering keeps per plan besides its graphs (CUDA: the outputs' host copies).
struct LoweredPlan {
  LoweredPlan() = default;
  LoweredPlan(const LoweredPlan&) = delete;
  LoweredPlan& operator=(const LoweredPlan&) = delete;
  virtual ~LoweredPlan() = default;
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
  // Per launch: absorbed as a part of an earlier launch's kernel, not as an epilogue: the
  // softmax or the context matmul of an attention kernel that runs in the matmul before them
  // (see absorb_attention), the depthwise conv of an expansion (see absorb_depthwise), the
  // multiply that scales a conv's input (see absorb_input_scales).
  std::vector<bool> in_kernel;
  // Per launch: reads only weights, constants and other invariant launches' outputs, so it
  // runs once when the plan is recorded, not on each call (see hoist_invariant).
  std::vector<bool> invariant;
  std::size_t epilogues = 0, views = 0;
  std::size_t attentions = 0;     // attention kernels (each absorbs two launches)
  std::size_t expansions = 0;     // convs that run their depthwise conv (one launch)
  std::size_t scaled_inputs = 0;  // convs that run the multiply that scales their input
  std::size_t bf16_handoffs = 0;  // see hand_off_bf16
  // Per device: the call's values (places are reused only by the device's own later
  // launches). The lowering may give every plan of a callable the same memory.
  std::vector<Arena> arenas;
  std::vector<Arena> kept;  // per device: the invariant launches' outputs, this plan's own
  std::vector<std::optional<DeviceGraph>> graphs;  // per device with launches
  std::unique_ptr<LoweredPlan> lowered;            // the lowering's own state, if any

  /// The storage launch \p i reads, in operand order, and the storage it writes.
  std::span<const std::size_t> in(std::size_t i) const {
    return {io_storage.data() + io[i].first, io[i].ins};
  }
  std::span<const std::size_t> out(std::size_t i) const {
    return {io_storage.data() + io[i].first + io[i].ins, io[i].outs};
  }
  /// The first launch after \p i that is not a view (the launch count if none): where
  /// launch i's absorbed epilogue sits, if it has one (views between them copy nothing).
  std::size_t next_launch(std::size_t i) const {
    std::size_t j = i + 1;
    while (j < is_view.size() && is_view[j]) ++j;
    return j;
  }
  /// The storage whose bytes \p s reads: itself, or the base of a view.
  std::size_t root(std::size_t s) const {
    return storage[s].base >= 0 ? static_cast<std::size_t>(storage[s].base) : s;
  }
  std::byte* address(std::size_t s) const {
    const Storage& st = storage[root(s)];
    if (st.arena_offset < 0) return st.fixed;
    return (st.kept ? kept : arenas)[st.device].memory.get() + st.arena_offset;
  }
  /// Per storage: whether it is one of the entry's results (which rewrites keep as they are).
  std::vector<bool> output_flags() const {
    std::vector<bool> is_output(storage.size(), false);
    for (std::size_t s : outputs) is_output[s] = true;
    return is_output;
  }
};

}  // namespace kiln::compiler
