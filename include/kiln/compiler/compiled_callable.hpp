#pragma once
/// \file
/// `CompiledCallable`: a `StagedGraph` compiled for a device, with its weights bound,
/// called like the staged function.
///
/// \code
///   auto staged = kiln::stage(model)(kiln::TensorLayout(kiln::DType::i64, {"batch", "seq"}));
///   kiln::CompiledCallable compiled(staged, kiln::SafetensorsFile::open("model.safetensors"));
///   std::vector<kiln::Tensor> out = compiled(ids);   // ids: a concrete i64 tensor
/// \endcode
///
/// Compiling turns every graph of the module (entry and subgraph bodies, each once) into a
/// program of kernels. A call with new concrete shapes plans memory (one arena, buffers
/// reused by liveness) and records the program as a `DeviceGraph`; later calls with the
/// same shapes copy their inputs into the plan's buffers and replay that graph. Calls are
/// serialised per callable.

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/cpu_isa.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/runtime/collectives.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {

/// The arithmetic of f32 matmuls.
enum class MatmulPrecision : unsigned char {
  /// f32 products and sums: results as the reference computes them, up to summation order.
  f32,
  /// Products of operands rounded to bfloat16, summed in f32, for matmuls that read a
  /// weight (the weight rounded once per plan, the activations on each call; layers of at
  /// most 4 rows keep f32 activations) and batched matmuls of activations (attention:
  /// both operands each call), and convolutions that read a weight (input and weights
  /// rounded, outputs and sums f32); every other matmul stays f32. Results move by bfloat16's
  /// rounding (relative 2^-9 per operand), as with PyTorch's
  /// `torch.autocast("cpu", torch.bfloat16)`. The same products on every CPU: on one
  /// without bf16 units (`kiln::has_native_bf16()` false) f32 GEMMs over the rounded
  /// operands compute them, within a few percent of f32's speed; `Stats::isa`,
  /// `Stats::bf16_matmuls` and `Stats::bf16_handoffs` say what ran. Needs
  /// `prepack_weights`. How the CPU kernels do it: docs/design.md (Kernels).
  bf16,
};

struct CompileOptions {
  /// The context to run on; a CPU context with every available core when empty. A CUDA
  /// context runs the plans on its GPU as CUDA graphs (modules on one device; see
  /// docs/api.md).
  std::shared_ptr<DeviceContext> context{};
  /// IR passes run before lowering (see `kiln/compiler/passes.hpp`); empty: none.
  std::vector<std::string> passes = {"canonicalize", "fold", "cse", "dce", "fuse"};
  /// Replay one recorded device graph per call (true), or enqueue the kernels one by one
  /// in program order (false: op-by-op execution, for comparisons).
  bool replay_graph = true;
  /// Run an elementwise op (fused or single) that is the only reader of a matmul's f32
  /// result, and comes right after it, inside the matmul, on each output tile as soon as it
  /// is computed: bias, scale, activation and residual add cost no extra pass over memory.
  /// In f32 it also runs attention, softmax(Q Kᵀ [+ mask]) V, as one kernel a block of query
  /// rows at a time, the scores in cache and in no arena (`Stats::attentions`), and a conv
  /// with the depthwise conv that alone reads its output as one kernel, a batch entry or a
  /// band of channels at a time (`Stats::expansions`), and a per-channel scale of each
  /// batch entry (squeeze-and-excitation's multiply) inside the 1x1 conv that alone reads
  /// the scaled activation, a batch entry just before its GEMM (`Stats::scaled_inputs`).
  bool fuse_epilogues = true;
  /// Prepare once per plan, for each f32 matmul that reads a weight or constant (a Linear
  /// layer), the weight in the layout the GEMM reads (oneDNN's packed form, or column
  /// panels for matmuls of at most 4 rows), with its epilogue applied inside the GEMM
  /// where it can (`Stats::packed_matmuls`, `skinny_matmuls`, `epilogues_in_gemm`); convs
  /// with fixed weights likewise. Costs one packed copy of those weights per callable,
  /// shared by every plan that reads them in the same layout (`Stats::packed_weight_bytes`;
  /// the column panels of matmuls of at most 4 rows are still per plan), and the GEMMs'
  /// creation on a plan's first call; false: the weights are read as they are on every
  /// call. Which matmuls qualify, and why: docs/design.md (Kernels).
  bool prepack_weights = true;
  /// f32 (the default) or bf16 (see MatmulPrecision; `Stats::bf16_matmuls`).
  MatmulPrecision matmul_precision = MatmulPrecision::f32;
  /// Run f32 3x3 convolutions with stride 1 and fixed weights over multiples of 16 channels
  /// by Winograd's minimal filtering: oneDNN's F(2x2, 3x3) and F(4x4, 3x3) kernels where the
  /// CPU has AVX-512 and oneDNN a kernel for the shape (1.3-2.2x faster on ResNet-18's 3x3
  /// layers), else kiln's own F(4x4, 3x3) or F(2x2, 3x3) where the batch has enough output
  /// tiles to reuse the transformed weights (1.5-2.7x faster on ResNet-18's 3x3 layers on an
  /// AVX2 CPU; docs/design.md). The sums are rounded differently from a direct
  /// convolution's, about as closely: relative to the output's largest value, 2.5e-7 to
  /// 1e-6 from the reference in kiln's tests (direct: 7e-7; kiln's F(4x4, 3x3) up to 4e-6,
  /// its larger transform entries rounding a little more). `Stats::winograd_convs` says how
  /// many ran so; false: direct convolutions only.
  bool winograd_convs = true;
  /// Where the devices of a multi-device module run (see `kiln::Cluster`): empty, every
  /// device in this process. With `mpi_cluster()`, each process runs the work of the
  /// devices it owns; outputs on other processes' devices come back without data, and
  /// `execute_into` leaves their buffers alone.
  std::shared_ptr<Cluster> cluster{};
};

/// Every weight \p module reads, by full name (call prefixes applied), with its type: what
/// a `CompiledCallable` of it must be given. Calls that reach no weight are not walked.
/// \throws UserError when the calls expand to more than 2^24 weight ops (graphs that each
/// call the next twice, 64 deep, with a weight at the bottom: 2^64 names to make).
std::map<std::string, ir::TensorType> module_weights(const ir::Module& module);

class CompiledCallable {
 public:
  /// Compiles \p staged with \p weights bound by full name (prefixes applied).
  /// \throws UserError naming the missing, empty and mis-shaped weights (the first ten)
  /// and the weights given that the module does not read (a count and the first five).
  CompiledCallable(const StagedGraph& staged, std::map<std::string, Tensor> weights,
                   CompileOptions options = {});
  /// Same, with the weights read from a safetensors file.
  CompiledCallable(const StagedGraph& staged, const SafetensorsFile& weights,
                   CompileOptions options = {});
  CompiledCallable(CompiledCallable&&) noexcept;
  /// Assigning over a callable, like destroying it, first waits for the calls other
  /// threads are inside to return.
  CompiledCallable& operator=(CompiledCallable&&) noexcept;
  /// Waits for the calls other threads are inside to return, then frees the plans. (A call
  /// that starts after the destructor did is a use after free, as for any object.)
  ~CompiledCallable();

  /// Calls with the staged function's arguments (same tree; concrete tensors at the
  /// leaves, the staged static values elsewhere); returns the output leaves in order.
  /// \throws UserError naming the leaf path of a tensor whose dtype, rank, device or
  /// static dims differ, of symbolic dims that disagree, or of a static value that differs.
  template <class... A>
  std::vector<Tensor> operator()(const A&... args) {
    std::vector<Tensor> leaves;
    const TreeDef tree = tree_flatten(std::forward_as_tuple(args...), leaves);
    check_tree(tree);
    return run(leaves);
  }
  /// Calls with the input leaves, checked (see operator()).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  /// Calls without checks, for hot loops whose inputs are known to fit.
  std::vector<Tensor> execute_raw(const std::vector<Tensor>& inputs);
  /// Calls without checks and without allocating in kiln's code (once a call with these
  /// shapes has planned; oneDNN's matmuls allocate scratch inside, see docs/api.md):
  /// output leaf i is written to \p outputs[i], which must be exactly its size in bytes
  /// (row-major, the output's dtype; `output_bytes` says how many).
  /// \throws UserError if the number or sizes of the buffers differ.
  void execute_into(const std::vector<Tensor>& inputs,
                    std::span<const std::span<std::byte>> outputs);
  /// Bytes of each output leaf of a call with these inputs' shapes (planning it if needed).
  std::vector<std::size_t> output_bytes(const std::vector<Tensor>& inputs);

  /// Graphviz DOT of the device graph a call with these inputs' shapes replays (planning
  /// it now if no call has). Nodes are labelled with the IR op they compute.
  /// \throws UserError as `run` for inputs that do not fit.
  std::string plan_dot(const std::vector<Tensor>& inputs);
  /// The context the kernels run on (attach a `Profiler` to it to trace calls).
  const std::shared_ptr<DeviceContext>& context() const;

  const StagedGraph& staged() const;
  /// The module after the passes: what was lowered.
  const ir::Module& optimized() const;

  /// What compiling and calling did so far.
  struct Stats {
    std::size_t bodies_compiled = 0;   ///< graphs turned into programs (once each)
    std::size_t plans = 0;             ///< distinct concrete input shapes planned
    std::size_t graph_builds = 0;      ///< device graphs recorded
    std::size_t replays = 0;           ///< calls that replayed a recorded graph
    std::size_t peak_arena_bytes = 0;  ///< most memory one plan's values need
    std::size_t arena_bytes = 0;       ///< memory held for the values of all plans: on the
                                       ///< CPU every plan's calls share one arena per device,
                                       ///< grown (at least doubled) when a shape needs more,
                                       ///< so a shape no bigger than the largest so far adds
                                       ///< only its hoisted values' memory
    std::size_t launches = 0;          ///< kernel launches per call, newest plan
    std::size_t epilogues = 0;         ///< of its elementwise ops, those run inside a matmul
    std::size_t attentions = 0;        ///< softmax(Q Kᵀ) V run as one kernel (two batched
                                       ///< matmuls and the softmax between them, a block of
                                       ///< query rows at a time), newest plan
    std::size_t expansions = 0;        ///< convs that run the depthwise conv after them (one
                                       ///< kernel: the expanded activation is kept in a
                                       ///< worker's scratch, not in the arena), newest plan
    std::size_t scaled_inputs = 0;     ///< 1x1 convs that scale their input per channel
                                       ///< themselves (squeeze-and-excitation's multiply,
                                       ///< not launched), newest plan
    std::size_t views = 0;           ///< reshapes and transposes that copy nothing (read in place)
    std::size_t hoisted = 0;         ///< launches that read only weights and constants (a causal
                                     ///< mask, a weight transposed): run once when the plan is
                                     ///< made, not on each call, newest plan
    std::size_t packed_matmuls = 0;  ///< matmuls with prepacked weights, newest plan
    std::size_t packed_weight_bytes = 0;  ///< weights packed for oneDNN (matmuls, convs), all
                                          ///< plans together: each weight is packed once per
                                          ///< layout and shared by every plan that reads it
    std::size_t skinny_matmuls = 0;       ///< f32 matmuls of at most 4 rows (a batch-1 Linear
                                          ///< layer), run as column panels, newest plan
    std::size_t epilogues_in_gemm = 0;    ///< of the epilogues, those run inside the GEMM
                                          ///< (oneDNN post-ops, or a scale as sgemm's alpha)
    std::size_t winograd_convs = 0;       ///< convs run by Winograd's algorithm, newest plan
                                          ///< (`CompileOptions::winograd_convs`)
    std::size_t bf16_matmuls = 0;         ///< matmuls and convs computed in bfloat16
                                          ///< (`MatmulPrecision::bf16`)
    std::size_t bf16_handoffs = 0;        ///< outputs written as bf16 for the bf16 matmuls that
                                          ///< are their only readers (an MLP's two layers; a
                                          ///< norm and the Q, K, V layers after it); needs
                                          ///< bf16 units (none when emulated)
    /// The instruction-set level the CPU kernels were chosen for (`kiln::cpu_isa()`). Below
    /// `avx512_bf16` the bf16 matmuls are f32 GEMMs over operands rounded to bfloat16
    /// (the same products, at f32 speed), not bf16 units.
    CpuIsa isa = CpuIsa::base;
  };
  Stats stats() const;

 private:
  void check_tree(const TreeDef& tree) const;
  void check_inputs(const std::vector<Tensor>& inputs) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
