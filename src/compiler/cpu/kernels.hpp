#pragma once
// Internal: the CPU kernels a compiled plan launches, one per IR op, over contiguous
// row-major buffers of concrete shape. Each reads its attributes from the op and its
// operands from `in`, and writes every element of `out`.
//
// Every kernel is correct for every dtype through a general path (elements converted to
// double). The hot ones have f32 fast paths: fused elementwise bodies as vectorised array
// ops, matmul through oneDNN, softmax and norms over rows, byte copies for data movement;
// those split their work over the launch's blocks (see prepare).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/runtime/collectives.hpp"

namespace kiln::compiler {

using Index = std::vector<std::int64_t>;
/// A shape or strides as a launch reads them: elements the plan owns (its values' records),
/// so that a plan of 10^6 launches holds no copy of them.
using Dims = std::span<const std::int64_t>;
inline bool same_dims(Dims a, Dims b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
inline Index to_index(Dims d) { return Index(d.begin(), d.end()); }

/// One buffer of a launch.
struct View {
  std::byte* data = nullptr;
  DType dtype = DType::f32;
  Dims shape;
  Dims strides;  // in elements; empty: contiguous row-major (only matmul reads others)
};

struct FusedProgram;

/// What `prepare` (or the planner, for collectives) works out once for a launch, so that
/// running it computes no layout and allocates nothing: one kind per family of kernels,
/// each defined beside its kernels (`ReadStrides`, `MatmulLayout`, `PreparedAttention`,
/// `PreparedConv`, `CollectiveLaunch`, `PreparedResize`).
struct PreparedLaunch {
  enum class Kind : std::uint8_t { read_strides, matmul, attention, conv, collective, resize };
  explicit PreparedLaunch(Kind k) : kind(k) {}
  PreparedLaunch(const PreparedLaunch&) = delete;
  PreparedLaunch& operator=(const PreparedLaunch&) = delete;
  virtual ~PreparedLaunch() = default;
  const Kind kind;
};

class WeightPacks;

/// Everything a kernel needs for one launch.
struct Launch {
  const ir::Graph* graph = nullptr;
  std::uint32_t op = 0;
  std::uint32_t blocks = 1;  // grid size: kernels that split work read block_idx()/grid_dim()
  std::span<const View> in;  // into the plan's list of views
  std::span<const View> out;
  std::shared_ptr<const FusedProgram> fused;  // kiln.fused launches: the body's scalar ops
  // The launch's prepared state, of the kind its kernel reads (see `prepared_as`); null
  // for kernels that need none.
  std::unique_ptr<PreparedLaunch> prepared;
  // matmul and conv launches: an elementwise launch over this one's output whose work runs here, on
  // each tile of the output as soon as it is computed (while it is in cache); the plan does
  // not launch it separately.
  const Launch* epilogue = nullptr;
  // batched matmul launches of attention's scores, Q·Kᵀ (set by the planner, see
  // absorb_attention): the softmax over the scores (or over the epilogue's output), an
  // elementwise launch over the probabilities (or null) and the context matmul of the
  // probabilities and V run here too, a block of rows at a time, so that the scores never
  // leave the cache; the plan launches none of them.
  const Launch* softmax = nullptr;
  const Launch* probs_epilogue = nullptr;
  const Launch* context = nullptr;
  // conv launches (set by the planner, see absorb_depthwise): the depthwise conv that alone
  // reads this conv's output (or its epilogue's), run here with its own epilogue, a batch
  // entry or a band of channels at a time; the plan does not launch it.
  const Launch* depthwise = nullptr;
  // conv launches (set by the planner, see absorb_input_scales): the elementwise multiply
  // of an [N, C, H, W] by an [N or 1, C, 1, 1] whose output is this conv's input, run here:
  // each batch entry's input scaled into scratch just before its GEMM. The conv's in[0]
  // then has no bytes (read this launch's operands instead); the plan does not launch it.
  const Launch* input_scale = nullptr;
  // Set by the planner: in[1] stays the same for the plan's life (a weight or a constant),
  // so prepare may pack it once for oneDNN (matmuls: PackedMatmul; convs: reordered).
  bool pack_rhs = false;
  // With pack_rhs: the callable's packed weights, which prepare reads a packing from (or
  // adds it to) rather than packing in[1] for this plan alone. Null: packs its own.
  WeightPacks* packs = nullptr;
  // matmul launches, set by the planner: the product may be computed in bfloat16
  // (`MatmulPrecision::bf16`): weight matmuls, and batched matmuls of activations.
  bool bf16 = false;
  // conv launches, set by the planner: an f32 3x3 stride-1 conv with fixed weights may run
  // Winograd's algorithm, oneDNN's kernels where it has one for it, else kiln's
  // (`CompileOptions::winograd_convs`).
  bool winograd = false;
  // layer_norm / rms_norm / softmax launches, set by hand_off_bf16: out[0] is written
  // rounded to bf16 for the bf16 matmuls that are its only readers: as bf16 values (the
  // first half of its storage) for bf16 units, else as f32 values rounded in place.
  bool out_bf16 = false;
  /// The prepared state if it is a \p T (one of the kinds, complete where this is used),
  /// else null. Kernels may update their own state while they run (collectives do).
  template <class T>
  T* prepared_as() const {
    return prepared != nullptr && prepared->kind == T::kKind ? static_cast<T*>(prepared.get())
                                                             : nullptr;
  }
  ir::OpView view() const { return graph->op(op); }
};

using Kernel = void (*)(const Launch&);

/// This launch's part (rank `rank` of \p comm) of the op's collective; for a transfer,
/// rank 0 sends (`in` only) and rank 1 receives (`out` only).
std::unique_ptr<PreparedLaunch> make_collective(std::shared_ptr<Communicator> comm, int rank);
/// The kernel of every collective launch (reads its `CollectiveLaunch`).
void run_collective(const Launch& launch);
/// Binds a collective launch's runtime collective to its buffers (part of `prepare`).
void prepare_collective(Launch& launch);

/// Readies a launch whose views are bound, once per plan, so that running it computes no
/// layout: its grid (how many blocks it splits its work into on \p threads workers; 1 for
/// kernels that do not split or work too small to be worth waking a worker for), for
/// fused launches the broadcast strides of its inputs, for matmuls their layout and, with
/// `pack_rhs`, the right operand packed for oneDNN.
void prepare(Launch& launch, int threads);
/// True when prepare packed the matmul launch \p launch's right operand.
bool packed(const Launch& launch);
/// True when the matmul launch \p launch has few rows and runs as column panels.
bool skinny(const Launch& launch);
/// bf16 plans: when the prepared matmul launches \p producer and \p consumer both run
/// oneDNN's bf16 GEMM with packed weights (or its emulation by f32 GEMMs), and \p
/// consumer's left operand is \p producer's output (or its fused epilogue's) read densely,
/// has the producer write it rounded to bf16 (bf16 values, half the bytes; emulated, f32
/// values rounded in place) and the consumer read it as it is (no rounding pass). The
/// caller guarantees that nothing else reads that output. \returns whether it did.
bool hand_off_bf16(Launch& producer, Launch& consumer);
/// bf16 plans: when the prepared \p norm (a layer or RMS norm over f32 rows) is read only
/// by \p consumers, all matmuls running oneDNN's bf16 GEMM (or its emulation) on packed
/// weights with the norm's output as their dense left operand (attention's Q, K and V),
/// has the norm write its rows rounded to bf16 and the matmuls read them as they are (one
/// rounding instead of one per matmul). Without bf16 units, likewise a softmax over f32
/// rows read only by emulated batched bf16 matmuls as their dense left operand. The caller
/// guarantees that nothing else reads that output. \returns whether it did.
bool hand_off_bf16(Launch& norm, const std::vector<Launch*>& consumers);
/// True when prepare set the matmul or conv launch \p launch to compute in bfloat16.
bool in_bf16(const Launch& launch);
/// True when prepare set the conv launch \p launch to run Winograd's algorithm.
bool in_winograd(const Launch& launch);
/// True when oneDNN runs the epilogue of \p launch inside its GEMM (as post-ops).
bool epilogue_in_gemm(const Launch& launch);

/// Compiles the body of a `kiln.fused` op into scalar ops evaluated once per output
/// element. \throws UserError if the body holds an op that is not elementwise.
std::shared_ptr<const FusedProgram> compile_fused(const ir::Graph& body);
/// One elementwise op as a fused program of one op: elementwise ops all run through
/// `run_fused`, whether or not the fusion pass grouped them.
std::shared_ptr<const FusedProgram> compile_elementwise(const ir::Graph& graph,
                                                        const ir::OpView& op);
/// The fused programs of one compile, shared between the ops that compute the same: a
/// program depends on the ops, their dtypes and attributes, not on shapes, so a module of
/// 10^6 `tanh` ops holds one program, not 10^6.
class FusedPrograms {
 public:
  /// `compile_elementwise(graph, op)`, or the program of an earlier op like it.
  std::shared_ptr<const FusedProgram> elementwise(const ir::Graph& graph, const ir::OpView& op);
  /// `compile_fused(body)`, once per body.
  std::shared_ptr<const FusedProgram> fused(const ir::Graph& body);

 private:
  struct Entry {
    std::vector<ir::NamedAttribute> attributes;
    std::shared_ptr<const FusedProgram> program;
  };
  std::unordered_map<std::string, std::vector<Entry>> elementwise_;  // by op and dtypes
  std::unordered_map<const ir::Graph*, std::shared_ptr<const FusedProgram>> fused_;
};
/// True when the elementwise launch of \p consumer (a fused program writing an output of
/// the same shape as \p producer's, reading that output in place) can run as the epilogue
/// of \p producer's launch (see `Launch::epilogue`): f32 matmuls take f32 tile programs.
bool takes_epilogue(const ir::Graph& graph, const ir::OpView& producer,
                    const FusedProgram& consumer);
/// When \p op (a reshape or transpose) reads a buffer laid out with \p in_strides
/// (empty: contiguous) as \p in_shape, the strides its result has over the same bytes,
/// so that readers can use it without a copy; nullopt when it has none (a reshape of a
/// non-contiguous view). Empty strides: the result is contiguous too.
std::optional<Index> view_strides(const ir::OpView& op, Dims in_shape, const Index& in_strides);
/// True when operand \p operand of \p reader can be read in place with \p strides over
/// \p shape (f32 matmul operands whose matrix has a unit stride in one of its dims).
bool reads_strided(const ir::Graph& graph, const ir::OpView& reader, std::size_t operand,
                   const Index& shape, Dims strides);
/// The kernel of every `kiln.fused` launch (reads `Launch::fused`).
void run_fused(const Launch& launch);

}  // namespace kiln::compiler
