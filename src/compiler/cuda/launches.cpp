#include "compiler/cuda/launches.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cuda/codegen.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/gemm.hpp"

namespace kiln::compiler {
namespace {

using kernel::broadcast_strides;
using kernel::elements;
using kiln::detail::cat;

std::function<void(const std::string&, const std::string&)>& source_observer() {
  static std::function<void(const std::string&, const std::string&)> observer;
  return observer;
}

/// The launch's op's KernelDef::variant (which of a family of ops it is).
int variant_of(const Launch& l) { return find_kernel_def(l.view().def())->variant; }

bool all_f32(const Launch& l) {
  for (const View& v : l.in)
    if (v.dtype != DType::f32) return false;
  for (const View& v : l.out)
    if (v.dtype != DType::f32) return false;
  return true;
}

[[noreturn]] void refuse(const Launch& l, const std::string& what) {
  throw UserError(cat("CompiledCallable on CUDA: ", l.view().describe(), ": ", what));
}

/// Library entry \p entry, compiled for \p ctx on first use.
const DeviceFunction<CudaKernel>& library_kernel(const DeviceContext& ctx, const std::string& entry,
                                                 CudaRecording& rec) {
  const std::string key = "library:" + entry;
  auto it = rec.kernels.find(key);
  if (it == rec.kernels.end()) {
    if (source_observer()) source_observer()(entry, cuda_library_source());
    it = rec.kernels.emplace(key, ctx.compile_function(CudaSource{cuda_library_source(), entry}))
             .first;
  }
  return it->second;
}

/// A launch of \p fn with \p args (a trivially copyable struct laid out as the kernel's).
template <class Args>
DeviceGraphNode add_struct_launch(DeviceGraphBuilder& b, const DeviceFunction<CudaKernel>& fn,
                                  const LaunchConfig& config, const Args& args,
                                  const DeviceGraphDependencies& after) {
  const detail::ArgBytes bytes{&args, sizeof(Args)};
  return b.add_launch(fn.bind_bytes(config, std::span<const detail::ArgBytes>(&bytes, 1)), after);
}

constexpr std::int64_t kThreads = 256, kMostBlocks = 4096;

/// Blocks of kThreads for a grid-stride loop over \p n items.
std::int64_t blocks_for(std::int64_t n) {
  return std::clamp<std::int64_t>((n + kThreads - 1) / kThreads, 1, kMostBlocks);
}

// The host side of the library's argument structs (same layout: 8-byte fields first).
struct RowsArgs {
  const float* x;
  float* y;
  const float* gamma;
  const float* beta;
  long long outer, len, inner;
  float eps;
  int kind;
};
struct CopyArgs {
  const void* in;
  void* out;
  long long n;
  long long in_offset, out_offset;
  long long shape[8];
  long long in_strides[8];
  long long out_strides[8];
  int rank;
  int bytes;
};
struct ReduceArgs {
  const float* x;
  float* y;
  long long outputs, count;
  long long kept_shape[8], kept_strides[8];
  long long red_shape[8], red_strides[8];
  int kept_rank, red_rank;
  int kind;
};
struct ArgmaxArgs {
  const float* x;
  long long* y;
  long long outer, len, inner;
};
struct GatherArgs {
  const void* x;
  const void* ids;
  void* out;
  long long* error;
  long long outer, axis_len, count, inner;
  int id_bytes;
  int bytes;
};

struct GatherElementsArgs {
  const void* x;
  const void* ids;
  void* out;
  long long* error;
  long long n, axis_len;
  long long shape[8], x_strides[8];
  int rank, axis, id_bytes, bytes;
};

struct GatherNdArgs {
  const void* x;
  const void* ids;
  void* out;
  long long* error;
  long long n, inner, tuples_per_batch, batch_elements;
  long long dims[8];
  int k, id_bytes, bytes;
};

struct CumsumArgs {
  const void* x;
  void* y;
  long long lines, len, inner;
  int kind, exclusive, reverse;
};

struct ScatterNdArgs {
  const void* x;
  const void* ids;
  const void* up;
  void* out;
  long long* error;
  long long total, tuples, inner;
  long long dims[8];
  int k, id_bytes, bytes, combine, kind;
};

struct ScatterElementsArgs {
  const void* x;
  const void* ids;
  const void* up;
  void* out;
  long long* error;
  long long total, lines, len, axis_len;
  long long shape[8], out_strides[8];
  int rank, axis, id_bytes, bytes, combine, kind;
};

struct WindowArgs {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  long long n, c, m, groups, count;
  long long in[3], out[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
  int kind;
  int include_pad;
};

struct ResizeArgs {
  const void* x;
  void* y;
  const long long* tables;
  long long n;
  long long shape[8], taps[8], at[8];
  double extrapolation;
  int rank, nearest, kind, bytes;
};

struct TopKArgs {
  const void* x;
  void* values;
  long long* indices;
  long long lines, n, k, inner;
  int kind, largest, bytes;
};

/// The library kernels' code for a dtype they compute with (cumsum, top_k, scatters'
/// reductions): 0 f32, 1 f64, 2 i32, 3 i64; refuses others, naming \p what.
int numeric_kind(const Launch& l, DType dtype, const char* what) {
  switch (dtype) {
    case DType::f32:
      return 0;
    case DType::f64:
      return 1;
    case DType::i32:
      return 2;
    case DType::i64:
      return 3;
    default:
      refuse(l, cat(what, " runs on CUDA over f32, f64, i32 and i64 so far"));
  }
}

/// A scatter's `reduction` as the library's codes: {combine (0 none, 1 add, 2 mul, 3 max,
/// 4 min), the numeric kind it combines in (0 when it only copies)}.
std::pair<int, int> scatter_combine(const Launch& l, DType dtype) {
  const ir::Attribute* r = l.view().find("reduction");
  const std::string mode = r == nullptr ? "none" : r->as_string();
  const int combine = mode == "add"   ? 1
                      : mode == "mul" ? 2
                      : mode == "max" ? 3
                      : mode == "min" ? 4
                                      : 0;
  return {combine, combine == 0 ? 0 : numeric_kind(l, dtype, "a scatter that combines")};
}

/// The indices' element size, refusing what the kernels do not read.
int index_bytes(const Launch& l, const View& ids) {
  if (ids.dtype != DType::i64 && ids.dtype != DType::i32)
    refuse(l, "indices must be i32 or i64 on CUDA");
  return static_cast<int>(size_of(ids.dtype));
}

/// The lines along \p axis of \p shape (element s of line o * inner + j at
/// o * shape[axis] * inner + s * inner + j): how many, and inner.
std::pair<long long, long long> lines_along(Dims shape, std::size_t axis) {
  const std::int64_t inner =
      elements(Index(shape.begin() + static_cast<long>(axis) + 1, shape.end()));
  return {elements(Index(shape.begin(), shape.begin() + static_cast<long>(axis))) * inner, inner};
}

/// Refuses tensors of more than 8 dims (the kernels' fixed arrays).
void at_most_8_dims(const Launch& l, Dims shape) {
  if (shape.size() > 8) refuse(l, "tensors of more than 8 dimensions run on CPU devices only");
}

/// Softmax or a norm along one axis: one block per line.
DeviceGraphNode add_rows(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                         const DeviceGraphDependencies& after, CudaRecording& rec) {
  if (!all_f32(l)) refuse(l, "softmax and norms run on CUDA over f32 values only so far");
  const View& x = l.in[0];
  const bool softmax = variant_of(l) < 2;  // softmax, log_softmax; else a norm
  const std::size_t axis = softmax
                               ? kernel::axis_of(l.view().find("axis")->as_int(), x.shape.size())
                               : x.shape.size() - 1;
  RowsArgs a{};
  a.x = reinterpret_cast<const float*>(x.data);
  a.y = reinterpret_cast<float*>(l.out[0].data);
  a.outer = elements(Index(x.shape.begin(), x.shape.begin() + static_cast<long>(axis)));
  a.len = x.shape.empty() ? 1 : x.shape[axis];
  a.inner = elements(Index(x.shape.begin() + static_cast<long>(axis) + 1, x.shape.end()));
  a.kind = variant_of(l);
  if (!softmax) {
    a.eps = static_cast<float>(l.view().find("eps")->as_float());
    a.gamma = reinterpret_cast<const float*>(l.in[1].data);
    if (a.kind == 2) a.beta = reinterpret_cast<const float*>(l.in[2].data);
  }
  std::int64_t threads = 32;  // a power of two, up to 256, for the block reduction
  while (threads < 256 && threads < a.len) threads *= 2;
  const std::int64_t lines = std::max<std::int64_t>(1, a.outer * a.inner);
  return add_struct_launch(b, library_kernel(ctx, "kiln_rows", rec),
                           LaunchConfig{std::min<std::int64_t>(lines, 65535), threads}, a, after);
}

/// For each index of \p shape, an element of \p in (at in_offset + index . in_strides) to
/// \p out (likewise): one kernel of the library's strided copy.
struct StridedCopy {
  const std::byte* in;
  std::byte* out;
  Index shape;
  std::int64_t in_offset = 0, out_offset = 0;
  Index in_strides, out_strides;
};

DeviceGraphNode add_copy(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                         const StridedCopy& c, const DeviceGraphDependencies& after,
                         CudaRecording& rec) {
  if (c.shape.size() > 8) refuse(l, "tensors of more than 8 dimensions run on CPU devices only");
  CopyArgs a{};
  a.in = c.in;
  a.out = c.out;
  a.n = elements(c.shape);
  a.in_offset = c.in_offset;
  a.out_offset = c.out_offset;
  a.rank = static_cast<int>(c.shape.size());
  a.bytes = static_cast<int>(size_of(l.out[0].dtype));
  for (std::size_t d = 0; d < c.shape.size(); ++d) {
    a.shape[d] = c.shape[d];
    a.in_strides[d] = c.in_strides[d];
    a.out_strides[d] = c.out_strides[d];
  }
  return add_struct_launch(b, library_kernel(ctx, "kiln_copy", rec),
                           LaunchConfig{blocks_for(a.n), kThreads}, a, after);
}

/// \p l's output from its input read through per-dim strides \p in_strides (starting
/// at element \p in_offset).
DeviceGraphNode add_strided_read(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                 Index in_strides, std::int64_t in_offset,
                                 const DeviceGraphDependencies& after, CudaRecording& rec) {
  const View& out = l.out[0];
  return add_copy(b, ctx, l,
                  {l.in[0].data, out.data, to_index(out.shape), in_offset, 0, std::move(in_strides),
                   kernel::strides_of(out.shape)},
                  after, rec);
}

/// Concat (\p into_whole: the pieces into \p whole) or split (\p whole into the pieces):
/// one copy per piece, each after the one before, between the piece and its slab of the
/// whole along the op's axis.
DeviceGraphNode add_pieces(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                           const View& whole, std::span<const View> pieces, bool into_whole,
                           const DeviceGraphDependencies& after, CudaRecording& rec) {
  const std::size_t axis = kernel::axis_of(l.view().find("axis")->as_int(), whole.shape.size());
  const Index whole_strides = kernel::strides_of(whole.shape);
  std::optional<DeviceGraphNode> last;
  std::int64_t at = 0;
  for (const View& piece : pieces) {
    const std::int64_t offset = at * whole_strides[axis];
    const Index piece_strides = kernel::strides_of(piece.shape);
    const StridedCopy copy =
        into_whole ? StridedCopy{piece.data, whole.data,    to_index(piece.shape), 0,
                                 offset,     piece_strides, whole_strides}
                   : StridedCopy{whole.data, piece.data,    to_index(piece.shape), offset,
                                 0,          whole_strides, piece_strides};
    last = add_copy(b, ctx, l, copy, last ? DeviceGraphDependencies{*last} : after, rec);
    at += piece.shape[axis];
  }
  return *last;
}

DeviceGraphNode add_argmax(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                           const DeviceGraphDependencies& after, CudaRecording& rec) {
  const View& x = l.in[0];
  if (x.dtype != DType::f32 || l.out[0].dtype != DType::i64)
    refuse(l, "argmax runs on CUDA over f32 values only so far");
  const std::size_t axis = kernel::axis_of(l.view().find("axis")->as_int(), x.shape.size());
  ArgmaxArgs a{};
  a.x = reinterpret_cast<const float*>(x.data);
  a.y = reinterpret_cast<long long*>(l.out[0].data);
  a.outer = elements(Index(x.shape.begin(), x.shape.begin() + static_cast<long>(axis)));
  a.len = x.shape[axis];
  a.inner = elements(Index(x.shape.begin() + static_cast<long>(axis) + 1, x.shape.end()));
  std::int64_t threads = 32;
  while (threads < 256 && threads < a.len) threads *= 2;
  return add_struct_launch(
      b, library_kernel(ctx, "kiln_argmax", rec),
      LaunchConfig{std::clamp<std::int64_t>(a.outer * a.inner, 1, 65535), threads}, a, after);
}

DeviceGraphNode add_reduce(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                           const DeviceGraphDependencies& after, CudaRecording& rec) {
  if (!all_f32(l)) refuse(l, "reductions run on CUDA over f32 values only so far");
  const View& x = l.in[0];
  if (x.shape.size() > 8) refuse(l, "tensors of more than 8 dimensions run on CPU devices only");
  std::vector<bool> reduced(x.shape.size(), false);
  for (std::int64_t ax : l.view().find("axes")->as_int_array())
    reduced[kernel::axis_of(ax, x.shape.size())] = true;
  const Index st = kernel::strides_of(x.shape);
  ReduceArgs a{};
  a.x = reinterpret_cast<const float*>(x.data);
  a.y = reinterpret_cast<float*>(l.out[0].data);
  a.outputs = 1;
  a.count = 1;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    if (reduced[d]) {
      a.red_shape[a.red_rank] = x.shape[d];
      a.red_strides[a.red_rank++] = st[d];
      a.count *= x.shape[d];
    } else {
      a.kept_shape[a.kept_rank] = x.shape[d];
      a.kept_strides[a.kept_rank++] = st[d];
      a.outputs *= x.shape[d];
    }
  }
  a.kind = variant_of(l);
  std::int64_t threads = 32;
  while (threads < 256 && threads < a.count) threads *= 2;
  return add_struct_launch(b, library_kernel(ctx, "kiln_reduce", rec),
                           LaunchConfig{std::clamp<std::int64_t>(a.outputs, 1, 65535), threads}, a,
                           after);
}

DeviceGraphNode add_gather(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                           const DeviceGraphDependencies& after, CudaRecording& rec,
                           long long* error) {
  const View &x = l.in[0], &ids = l.in[1];
  if (ids.dtype != DType::i64 && ids.dtype != DType::i32)
    refuse(l, "gather takes i32 or i64 indices on CUDA");
  const std::size_t axis = kernel::axis_of(l.view().find("axis")->as_int(), x.shape.size());
  GatherArgs a{};
  a.x = x.data;
  a.ids = ids.data;
  a.out = l.out[0].data;
  a.error = error;
  a.outer = elements(Index(x.shape.begin(), x.shape.begin() + static_cast<long>(axis)));
  a.axis_len = x.shape[axis];
  a.count = elements(ids.shape);
  a.inner = elements(Index(x.shape.begin() + static_cast<long>(axis) + 1, x.shape.end()));
  a.id_bytes = static_cast<int>(size_of(ids.dtype));
  a.bytes = static_cast<int>(size_of(x.dtype));
  return add_struct_launch(b, library_kernel(ctx, "kiln_gather", rec),
                           LaunchConfig{blocks_for(a.outer * a.count * a.inner), kThreads}, a,
                           after);
}

/// A generated kernel over \p l's elements, and its KilnFusedArgs as 8-byte words.
DeviceGraphNode add_elementwise(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                const DeviceGraphDependencies& after, CudaRecording& rec) {
  if (!l.fused || l.out.size() != 1) refuse(l, "not an elementwise body of one result");
  const CudaKernelShape shape = cuda_kernel_shape(l);
  // f32 bodies as float arithmetic (as the CPU's vector code), others through double (as
  // the CPU's interpreter); both kernels take the same argument layout.
  const bool f32 = l.fused->f32 && all_f32(l);
  std::vector<DType> in_dtypes;
  for (const View& v : l.in) in_dtypes.push_back(v.dtype);
  const auto source_named = [&](const std::string& name) {
    return f32 ? cuda_fused_source(*l.fused, shape, name)
               : cuda_scalar_source(*l.fused, shape, in_dtypes, l.out[0].dtype, name);
  };
  // The name is the source's hash, so that one source is one kernel whatever launch asks.
  const std::string generic = source_named("kiln_elementwise");
  const std::string name =
      cat(f32 ? "kiln_fused_" : "kiln_scalar_", std::hex, std::hash<std::string>{}(generic));
  auto it = rec.kernels.find(generic);
  if (it == rec.kernels.end()) {
    std::string source = source_named(name);
    if (source_observer()) source_observer()(name, source);
    it = rec.kernels.emplace(generic, ctx.compile_function(CudaSource{std::move(source), name}))
             .first;
  }
  const View& out = l.out[0];
  const std::size_t k = std::max<std::size_t>(1, l.in.size());
  const std::size_t rank = std::max<std::size_t>(1, out.shape.size());
  std::vector<std::uint64_t> words;  // in[k], strides[k][rank], shape[rank], out, n
  for (std::size_t i = 0; i < k; ++i)
    words.push_back(i < l.in.size() ? reinterpret_cast<std::uint64_t>(l.in[i].data) : 0);
  for (std::size_t i = 0; i < k; ++i) {
    const Index st = i < l.in.size() ? broadcast_strides(l.in[i].shape, out.shape) : Index{};
    for (std::size_t d = 0; d < rank; ++d)
      words.push_back(static_cast<std::uint64_t>(d < st.size() ? st[d] : 0));
  }
  for (std::size_t d = 0; d < rank; ++d)
    words.push_back(static_cast<std::uint64_t>(d < out.shape.size() ? out.shape[d] : 1));
  const std::int64_t n = elements(out.shape);
  words.push_back(reinterpret_cast<std::uint64_t>(out.data));
  words.push_back(static_cast<std::uint64_t>(n));
  const detail::ArgBytes arg{words.data(), words.size() * sizeof(std::uint64_t)};
  return b.add_launch(it->second.bind_bytes(LaunchConfig{blocks_for(n), kThreads},
                                            std::span<const detail::ArgBytes>(&arg, 1)),
                      after);
}

/// The cuBLAS GEMM of a matmul launch over contiguous operands.
detail::GemmF32 gemm_of(const Launch& l) {
  const View &a = l.in[0], &b = l.in[1], &c = l.out[0];
  if (!all_f32(l)) refuse(l, "matmuls run on CUDA in f32 only so far");
  if (a.shape.size() < 2 || b.shape.size() < 2)
    refuse(l, "matmuls of vectors run on CPU devices only so far");
  const std::size_t ra = a.shape.size(), rb = b.shape.size();
  detail::GemmF32 g;
  g.m = a.shape[ra - 2];
  g.k = a.shape[ra - 1];
  g.n = b.shape[rb - 1];
  g.a = reinterpret_cast<const float*>(a.data);
  g.b = reinterpret_cast<const float*>(b.data);
  g.c = reinterpret_cast<float*>(c.data);
  const Index batch_a(a.shape.begin(), a.shape.end() - 2);
  const Index batch_b(b.shape.begin(), b.shape.end() - 2);
  const std::int64_t count_a = elements(batch_a), count_b = elements(batch_b);
  if (count_b == 1) {  // one B (a weight): A's batch is more rows
    g.m *= count_a;
  } else if (count_a == 1) {  // one A against a batch of B
    g.batch = count_b;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;
  } else if (batch_a == batch_b) {
    g.batch = count_a;
    g.stride_a = g.m * g.k;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;
  } else {
    refuse(l,
           "matmuls that broadcast batch dimensions of both operands run on CPU devices "
           "only so far; broadcast_to one operand first");
  }
  return g;
}

}  // namespace

void set_cuda_source_observer(
    std::function<void(const std::string& name, const std::string& source)> observer) {
  source_observer() = std::move(observer);
}

std::string cuda_unsupported(const ir::OpDef& op) {
  const KernelDef* def = find_kernel_def(op);
  if (def == nullptr || def->cuda != nullptr) return {};  // elementwise, fused: generated
  return cat("no CUDA kernel for ", op.name, " yet: ", def->no_cuda);
}

DeviceGraphNode add_cuda_launch(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                const DeviceGraphDependencies& after, CudaRecording& rec,
                                long long* error) {
  if (l.fused) return add_elementwise(b, ctx, l, after, rec);
  const KernelDef* def = find_kernel_def(l.view().def());
  if (def == nullptr || def->cuda == nullptr)  // the compile refused it (cuda_unsupported)
    throw InternalError(cat("add_cuda_launch: ", l.view().describe(), " has no CUDA launch"));
  return def->cuda(b, ctx, l, after, rec, error);
}

namespace cuda_op {

DeviceGraphNode matmul(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording&, long long*) {
  const detail::GemmF32 g = gemm_of(l);
  return b.add_cuda_work([ctx, g](void* stream) { detail::enqueue_gemm_f32(ctx, stream, g); },
                         after);
}

DeviceGraphNode reshape(DeviceGraphBuilder& b, const DeviceContext&, const Launch& l,
                        const DeviceGraphDependencies& after, CudaRecording&, long long*) {
  // The same bytes under another shape.
  const std::size_t bytes =
      static_cast<std::size_t>(elements(l.out[0].shape)) * size_of(l.out[0].dtype);
  return b.add_copy(
      std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(l.out[0].data), bytes),
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(l.in[0].data), bytes),
      after);
}

DeviceGraphNode transpose(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                          const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  const Index perm = l.view().find("perm")->as_int_array();
  const Index in_strides = kernel::strides_of(l.in[0].shape);
  Index strides;
  for (std::int64_t p : perm) strides.push_back(in_strides[kernel::axis_of(p, perm.size())]);
  return add_strided_read(b, ctx, l, strides, 0, after, rec);
}

DeviceGraphNode broadcast_to(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                             const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  return add_strided_read(b, ctx, l, broadcast_strides(l.in[0].shape, l.out[0].shape), 0, after,
                          rec);
}

DeviceGraphNode slice(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                      const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  const View& x = l.in[0];
  const Index starts = l.view().find("starts")->as_int_array();
  const Index steps = l.view().find("steps")->as_int_array();
  const Index st = kernel::strides_of(x.shape);
  Index strides;
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    offset += std::clamp<std::int64_t>(starts[d], 0, x.shape[d]) * st[d];
    // An axis the slice takes one element of needs no stride (and a huge step times
    // the input's stride could overflow).
    strides.push_back(l.out[0].shape[d] > 1 ? steps[d] * st[d] : 0);
  }
  return add_strided_read(b, ctx, l, strides, offset, after, rec);
}

DeviceGraphNode concat(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  return add_pieces(b, ctx, l, l.out[0], l.in, true, after, rec);
}

DeviceGraphNode split(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                      const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  return add_pieces(b, ctx, l, l.in[0], l.out, false, after, rec);
}

DeviceGraphNode gather(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording& rec, long long* error) {
  return add_gather(b, ctx, l, after, rec, error);
}

DeviceGraphNode gather_elements(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                const DeviceGraphDependencies& after, CudaRecording& rec,
                                long long* error) {
  const View &x = l.in[0], &ids = l.in[1];
  at_most_8_dims(l, x.shape);
  GatherElementsArgs a{};
  a.x = x.data;
  a.ids = ids.data;
  a.out = l.out[0].data;
  a.error = error;
  a.n = elements(ids.shape);
  a.rank = static_cast<int>(x.shape.size());
  a.axis = static_cast<int>(kernel::axis_of(l.view().find("axis")->as_int(), x.shape.size()));
  a.axis_len = x.shape[static_cast<std::size_t>(a.axis)];
  const Index st = kernel::strides_of(x.shape);
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    // Symbolic dims are checked now that they have sizes, as on the CPU.
    if (d != static_cast<std::size_t>(a.axis) && ids.shape[d] > x.shape[d])
      refuse(l,
             cat("indices of ", ids.shape[d], " at axis ", d, " do not fit in x's ", x.shape[d]));
    a.shape[d] = ids.shape[d];
    a.x_strides[d] = st[d];
  }
  a.id_bytes = index_bytes(l, ids);
  a.bytes = static_cast<int>(size_of(x.dtype));
  return add_struct_launch(b, library_kernel(ctx, "kiln_gather_elements", rec),
                           LaunchConfig{blocks_for(a.n), kThreads}, a, after);
}

DeviceGraphNode gather_nd(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                          const DeviceGraphDependencies& after, CudaRecording& rec,
                          long long* error) {
  const View &x = l.in[0], &ids = l.in[1];
  at_most_8_dims(l, x.shape);
  const auto bd = static_cast<std::size_t>(l.view().find("batch_dims")->as_int());
  const std::size_t q = ids.shape.size(), r = x.shape.size();
  const auto k = static_cast<std::size_t>(ids.shape[q - 1]);
  GatherNdArgs a{};
  a.x = x.data;
  a.ids = ids.data;
  a.out = l.out[0].data;
  a.error = error;
  a.n = elements(l.out[0].shape);
  a.inner = 1;
  a.tuples_per_batch = 1;
  a.batch_elements = 1;
  for (std::size_t d = bd + k; d < r; ++d) a.inner *= x.shape[d];
  for (std::size_t d = bd; d < r; ++d) a.batch_elements *= x.shape[d];
  for (std::size_t d = bd; d + 1 < q; ++d) a.tuples_per_batch *= ids.shape[d];
  for (std::size_t m = 0; m < k; ++m) a.dims[m] = x.shape[bd + m];
  a.k = static_cast<int>(k);
  a.id_bytes = index_bytes(l, ids);
  a.bytes = static_cast<int>(size_of(x.dtype));
  if (a.inner == 0) a.n = 0;  // empty slices: nothing to read (and no division by 0)
  return add_struct_launch(b, library_kernel(ctx, "kiln_gather_nd", rec),
                           LaunchConfig{blocks_for(a.n), kThreads}, a, after);
}

DeviceGraphNode cumsum(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  const View& x = l.in[0];
  const std::size_t axis = kernel::axis_of(l.view().find("axis")->as_int(), x.shape.size());
  CumsumArgs a{};
  a.kind = numeric_kind(l, x.dtype, "cumsum");
  const auto flag = [&](const char* name) {
    const ir::Attribute* f = l.view().find(name);
    return f != nullptr && f->as_bool() ? 1 : 0;
  };
  a.x = x.data;
  a.y = l.out[0].data;
  a.len = x.shape[axis];
  std::tie(a.lines, a.inner) = lines_along(x.shape, axis);
  a.exclusive = flag("exclusive");
  a.reverse = flag("reverse");
  return add_struct_launch(b, library_kernel(ctx, "kiln_cumsum", rec),
                           LaunchConfig{blocks_for(a.lines), kThreads}, a, after);
}

/// One block: the tuples in order, each tuple's slice over the block's threads.
DeviceGraphNode scatter_nd(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                           const DeviceGraphDependencies& after, CudaRecording& rec,
                           long long* error) {
  const View &x = l.in[0], &ids = l.in[1], &up = l.in[2];
  at_most_8_dims(l, x.shape);
  const auto k = static_cast<std::size_t>(ids.shape.back());
  ScatterNdArgs a{};
  a.x = x.data;
  a.ids = ids.data;
  a.up = up.data;
  a.out = l.out[0].data;
  a.error = error;
  a.total = elements(x.shape);
  a.tuples = elements(ids.shape) / static_cast<std::int64_t>(k);
  a.inner = elements(Index(x.shape.begin() + static_cast<long>(k), x.shape.end()));
  for (std::size_t m = 0; m < k; ++m) a.dims[m] = x.shape[m];
  a.k = static_cast<int>(k);
  a.id_bytes = index_bytes(l, ids);
  a.bytes = static_cast<int>(size_of(x.dtype));
  std::tie(a.combine, a.kind) = scatter_combine(l, x.dtype);
  return add_struct_launch(b, library_kernel(ctx, "kiln_scatter_nd", rec),
                           LaunchConfig{1, kThreads}, a, after);
}

DeviceGraphNode scatter_elements(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                 const DeviceGraphDependencies& after, CudaRecording& rec,
                                 long long* error) {
  const View &x = l.in[0], &ids = l.in[1], &up = l.in[2];
  at_most_8_dims(l, x.shape);
  ScatterElementsArgs a{};
  a.x = x.data;
  a.ids = ids.data;
  a.up = up.data;
  a.out = l.out[0].data;
  a.error = error;
  a.total = elements(x.shape);
  a.rank = static_cast<int>(x.shape.size());
  const auto axis = kernel::axis_of(l.view().find("axis")->as_int(), x.shape.size());
  a.axis = static_cast<int>(axis);
  a.axis_len = x.shape[axis];
  a.len = ids.shape[axis];
  a.lines = a.len == 0 ? 0 : elements(ids.shape) / a.len;
  const Index st = kernel::strides_of(x.shape);
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    // Symbolic dims are checked now that they have sizes, as on the CPU.
    if (d != axis && ids.shape[d] > x.shape[d])
      refuse(l,
             cat("indices of ", ids.shape[d], " at axis ", d, " do not fit in x's ", x.shape[d]));
    a.shape[d] = ids.shape[d];
    a.out_strides[d] = st[d];
  }
  a.id_bytes = index_bytes(l, ids);
  a.bytes = static_cast<int>(size_of(x.dtype));
  std::tie(a.combine, a.kind) = scatter_combine(l, x.dtype);
  return add_struct_launch(b, library_kernel(ctx, "kiln_scatter_elements", rec),
                           LaunchConfig{1, kThreads}, a, after);
}

/// conv, conv_transpose, max_pool and avg_pool (by the op's `KernelDef::variant`): one
/// thread per output element.
DeviceGraphNode window(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  const int kind = variant_of(l);
  if (!all_f32(l))
    refuse(l, cat(l.view().def().name,
                  " runs on CUDA over f32 so far; cast to f32 or compile "
                  "for a CPU device"));
  const kernel::WindowGeometry g = kernel::window_geometry(l, kind <= 1);
  WindowArgs a{};
  a.x = reinterpret_cast<const float*>(l.in[0].data);
  if (kind <= 1) {
    a.w = reinterpret_cast<const float*>(l.in[1].data);
    if (l.in.size() > 2) a.bias = reinterpret_cast<const float*>(l.in[2].data);
  }
  a.y = reinterpret_cast<float*>(l.out[0].data);
  a.n = g.n;
  a.c = g.c;
  a.m = g.m;
  a.groups = g.groups;
  a.count = elements(l.out[0].shape);
  for (std::size_t d = 0; d < kernel::WindowGeometry::kMaxSpatial; ++d) {
    a.in[d] = g.in[d];
    a.out[d] = g.out[d];
    a.kernel[d] = g.kernel[d];
    a.stride[d] = g.stride[d];
    a.dilation[d] = g.dilation[d];
    a.pad_begin[d] = g.pad_begin[d];
    a.pad_end[d] = g.pad_end[d];
  }
  a.kind = kind;
  const ir::Attribute* include = l.view().find("count_include_pad");
  a.include_pad = include != nullptr && include->as_bool() ? 1 : 0;
  return add_struct_launch(b, library_kernel(ctx, "kiln_window", rec),
                           LaunchConfig{blocks_for(a.count), kThreads}, a, after);
}

/// The CPU's tap tables (`kernel::resize_tables`), copied to the device once, kept with
/// the plan; one thread per output element.
DeviceGraphNode resize(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  const View &x = l.in[0], &y = l.out[0];
  at_most_8_dims(l, x.shape);
  kernel::ResizeTables t = kernel::resize_tables(l);
  const bool scalar = x.shape.empty();  // resizes to itself: a copy
  const bool real = x.dtype == DType::f32 || x.dtype == DType::f64;
  if (!real && (!(t.nearest || scalar) || t.outside))
    refuse(l,
           "linear and cubic resize, and tf_crop_and_resize's extrapolation value, run on "
           "CUDA over f32 and f64 so far; cast first or compile for a CPU device");
  auto host = std::make_shared<std::vector<std::uint64_t>>(std::move(t.words));
  const std::size_t bytes = std::max<std::size_t>(host->size() * sizeof(std::uint64_t), 8);
  auto device =
      std::make_shared<DeviceBuffer<std::uint8_t>>(ctx.enqueue_create_buffer<std::uint8_t>(bytes));
  // Not captured (graph building captures only CUDA work): the copy runs now, and the
  // lowering synchronizes before the host copy could go.
  ctx.enqueue_copy(std::span<std::uint8_t>(device->data(), host->size() * 8),
                   std::span<const std::uint8_t>(
                       reinterpret_cast<const std::uint8_t*>(host->data()), host->size() * 8));
  ResizeArgs a{};
  a.x = x.data;
  a.y = y.data;
  a.tables = reinterpret_cast<const long long*>(device->data());
  a.n = elements(y.shape);
  a.rank = static_cast<int>(x.shape.size());
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    a.shape[d] = y.shape[d];
    a.taps[d] = t.taps[d];
    a.at[d] = t.at[d];
  }
  a.extrapolation = t.extrapolation;
  a.nearest = t.nearest || scalar ? 1 : 0;
  a.kind = x.dtype == DType::f64 ? 1 : 0;
  a.bytes = static_cast<int>(size_of(x.dtype));
  rec.keep.push_back(std::move(host));
  rec.keep.push_back(std::move(device));
  return add_struct_launch(b, library_kernel(ctx, "kiln_resize", rec),
                           LaunchConfig{blocks_for(a.n), kThreads}, a, after);
}

DeviceGraphNode top_k(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                      const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  const View& x = l.in[0];
  const std::size_t axis = kernel::axis_of(l.view().find("axis")->as_int(), x.shape.size());
  TopKArgs a{};
  a.kind = numeric_kind(l, x.dtype, "top_k");
  a.k = l.view().find("k")->as_int();
  a.n = x.shape[axis];
  if (a.k > a.n)  // a symbolic axis: checked now that it has a size, as on the CPU
    refuse(l, cat("k = ", a.k, " is more than the ", a.n, " elements along axis ", axis));
  a.x = x.data;
  a.values = l.out[0].data;
  a.indices = reinterpret_cast<long long*>(l.out[1].data);
  std::tie(a.lines, a.inner) = lines_along(x.shape, axis);
  a.largest = l.view().find("largest")->as_bool() ? 1 : 0;
  a.bytes = static_cast<int>(size_of(x.dtype));
  return add_struct_launch(b, library_kernel(ctx, "kiln_top_k", rec),
                           LaunchConfig{blocks_for(a.lines), kThreads}, a, after);
}

DeviceGraphNode reduce(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  return add_reduce(b, ctx, l, after, rec);
}

DeviceGraphNode argmax(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                       const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  return add_argmax(b, ctx, l, after, rec);
}

DeviceGraphNode rows(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                     const DeviceGraphDependencies& after, CudaRecording& rec, long long*) {
  return add_rows(b, ctx, l, after, rec);
}

}  // namespace cuda_op

}  // namespace kiln::compiler
