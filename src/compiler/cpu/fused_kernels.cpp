// CPU kernels of elementwise ops, fused or alone: bodies compiled into scalar programs,
// run a tile at a time as array ops when all-f32, else element by element.

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "compiler/cpu/batched_bf16_matmul.hpp"
#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/kernels.hpp"
#include "compiler/cpu/packed_matmul.hpp"
#include "compiler/cpu/skinny_matmul.hpp"
#include "compiler/cpu/vector_math.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln::compiler {

using namespace kernel;  // the shared helpers
using kiln::detail::cat;

namespace {

/// The tile program's form of \p s (see FusedProgram::tiles), if it has one: ops on f32
/// giving f32, comparisons of f32 or bool values giving masks, selects by a mask, casts
/// between f32 and bool.
std::optional<VectorOp> vector_op(const Scalar& s) {
  const auto value_dtype = [](DType d) { return d == DType::f32 || d == DType::bool_; };
  VectorOp v;
  v.result = s.result;
  v.a = s.a;
  if (s.kind == ElementwiseKind::select) {
    if (s.operand_dtype != DType::bool_ || !value_dtype(s.dtype)) return std::nullopt;
    v.is_select = true;
    v.b = s.b;
    v.c = s.c;
    return v;
  }
  if (s.kind == ElementwiseKind::cast) {
    if (!value_dtype(s.operand_dtype) || !value_dtype(s.dtype)) return std::nullopt;
    v.unary = s.dtype == DType::bool_ && s.operand_dtype == DType::f32 ? vmath::Unary::to_mask
                                                                       : vmath::Unary::copy;
    return v;
  }
  if (!s.form->has_array_op(s.kind)) return std::nullopt;
  v.is_binary = s.kind == ElementwiseKind::binary;
  if (v.is_binary) {
    v.binary = *s.form->vector_binary;
    v.b = s.b;
    // A bool result with an array form is a comparison's mask; comparisons may read masks
    // too (exactly: 0 and 1). Every other array op reads and gives f32.
    if (s.dtype == DType::bool_ ? !value_dtype(s.operand_dtype)
                                : s.operand_dtype != DType::f32 || s.dtype != DType::f32)
      return std::nullopt;
  } else {
    if (s.operand_dtype != DType::f32 || s.dtype != DType::f32) return std::nullopt;
    v.unary = *s.form->vector_unary;
  }
  return v;
}

/// \p p's body as one chain (see ChainProgram), if it is one.
std::optional<ChainProgram> chain_of(const ir::Graph& body, const FusedProgram& p) {
  if (!p.f32 || p.vector_ops.empty() || p.vector_ops.size() > ChainProgram::kMaxSteps)
    return std::nullopt;
  const auto argument = [&](std::uint32_t v) {
    return std::find(p.args.begin(), p.args.end(), v) != p.args.end();
  };
  const auto scalar = [&](std::uint32_t v) {
    const Shape& s = body.type(ir::Value{v}).shape;
    return argument(v) && s.is_static() && s.num_elements() == 1;
  };
  ChainProgram c;
  std::optional<std::uint32_t> value;  // the op before's result
  for (const VectorOp& op : p.vector_ops) {
    using B = vmath::Binary;
    const bool relu = !op.is_binary && !op.is_select && op.unary == vmath::Unary::relu;
    if (!relu &&
        (!op.is_binary || (op.binary != B::add && op.binary != B::sub && op.binary != B::mul &&
                           op.binary != B::div && op.binary != B::max && op.binary != B::min)))
      return std::nullopt;
    if (!value) {  // the first op: of the input (an argument of the output's size), and
                   // for a binary op another
      const bool a_in = relu || (argument(op.a) && !scalar(op.a));
      c.input = a_in ? op.a : op.b;
      if (!argument(c.input) || scalar(c.input)) return std::nullopt;
      value = c.input;
    }
    if (relu) {  // max(0, value)
      if (op.a != *value) return std::nullopt;
      c.steps.push_back({.f = B::max, .flip = true, .input = false, .zero = true, .scalar = 0});
      value = op.result;
      continue;
    }
    ChainProgram::Step step;
    step.f = op.binary;
    if (op.a == *value && op.b != *value) {
      step.scalar = op.b;
    } else if (op.b == *value && op.a != *value) {
      step.scalar = op.a;
      step.flip = true;
    } else if (op.a == c.input && op.b == c.input) {  // the input with itself, first
      step.scalar = op.b;
    } else {
      return std::nullopt;
    }
    step.input = step.scalar == c.input;
    if (!step.input && !scalar(step.scalar)) return std::nullopt;
    c.steps.push_back(step);
    value = op.result;
  }
  if (*value != p.result) return std::nullopt;
  return c;
}

}  // namespace

std::shared_ptr<const FusedProgram> compile_fused(const ir::Graph& body) {
  auto p = std::make_shared<FusedProgram>();
  p->num_values = static_cast<std::uint32_t>(body.num_values());
  for (ir::Value a : body.arguments()) p->args.push_back(a.id);
  for (std::size_t i = 0; i < body.num_ops(); ++i) {
    const ir::OpView op = body.op(i);
    const ElementwiseDef* def = find_elementwise(op.def());
    if (def == nullptr)
      throw UserError(cat("kiln.fused body @", body.name(), " holds ", op.describe(),
                          ", which is not elementwise"));
    Scalar s;
    s.form = &def->form_of(op);
    s.kind = def->kind;
    s.result = op.result(0).id;
    s.dtype = body.type(op.result(0)).dtype;
    s.a = op.operand(0).id;
    s.operand_dtype = body.type(op.operand(0)).dtype;
    s.is_float = is_floating(s.operand_dtype);
    if (s.kind == ElementwiseKind::binary || s.kind == ElementwiseKind::select)
      s.b = op.operand(1).id;
    if (s.kind == ElementwiseKind::select) s.c = op.operand(2).id;
    if (s.kind <= ElementwiseKind::binary && !s.is_float && !s.form->has_integer_function(s.kind))
      throw UserError(cat("kiln.fused body @", body.name(), " holds ", op.describe(), " on ",
                          name(s.operand_dtype),
                          ", which it computes on floating-point dtypes only"));
    p->ops.push_back(s);
  }
  if (body.results().size() != 1)
    throw UserError(cat("kiln.fused body @", body.name(), " must return one value"));
  p->result = body.results()[0].id;
  bool all_f32 = true;
  p->tiles = body.type(body.results()[0]).dtype == DType::f32;
  for (std::size_t v = 0; v < body.num_values(); ++v) {
    const DType d = body.type(ir::Value{static_cast<std::uint32_t>(v)}).dtype;
    all_f32 = all_f32 && d == DType::f32;
    p->tiles = p->tiles && (d == DType::f32 || d == DType::bool_);
  }
  for (std::size_t i = 0; i < p->ops.size() && p->tiles; ++i) {
    const std::optional<VectorOp> v = vector_op(p->ops[i]);
    if (v) {
      p->vector_ops.push_back(*v);
    } else {
      p->tiles = false;
    }
  }
  if (!p->tiles) p->vector_ops.clear();
  p->f32 = p->tiles && all_f32;
  p->chain = chain_of(body, *p);
  return p;
}

namespace {

/// Reads the elements [at, at + len) of \p in (T: f32, or bool read as a 1 / 0 mask)
/// broadcast to \p out into \p dst, one run of the innermost dimension at a time.
template <class T>
void gather_f32(const View& in, Dims strides, Dims out, std::int64_t at, std::int64_t len,
                float* dst) {
  const auto* src = reinterpret_cast<const T*>(in.data);
  const auto value = [](T x) -> float {
    if constexpr (std::is_same_v<T, float>) {
      return x;
    } else {
      return x != 0 ? 1.0f : 0.0f;
    }
  };
  // Trailing dims the input is broadcast along (stride 0) are one run of one value: a
  // per-channel scale over [N, C, H, W] fills whole planes, not rows of W.
  std::size_t rank = out.size();
  IndexScratch dims(rank), steps(rank);
  std::copy(out.begin(), out.end(), dims.data());
  std::copy(strides.begin(), strides.end(), steps.data());
  while (rank > 1 && steps[rank - 1] == 0 && steps[rank - 2] == 0) {
    dims[rank - 2] *= dims[rank - 1];
    --rank;
  }
  IndexScratch idx(rank);
  for (std::size_t d = rank, rest = static_cast<std::size_t>(at); d-- > 0;) {
    idx[d] = static_cast<std::int64_t>(rest % static_cast<std::size_t>(dims[d]));
    rest /= static_cast<std::size_t>(dims[d]);
  }
  const std::int64_t inner = dims[rank - 1], inner_stride = steps[rank - 1];
  while (len > 0) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset += idx[d] * steps[d];
    const std::int64_t run = std::min(len, inner - idx[rank - 1]);
    if (inner_stride == 0) {
      std::fill(dst, dst + run, value(src[offset]));
    } else {
      for (std::int64_t i = 0; i < run; ++i) dst[i] = value(src[offset + i * inner_stride]);
    }
    dst += run;
    len -= run;
    idx[rank - 1] += run;
    for (std::size_t d = rank - 1; d > 0 && idx[d] == dims[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

}  // namespace

/// A fused f32 body over \p rows runs of its output, run r being the elements
/// [first + r * row_stride, first + r * row_stride + row_len), a tile at a time: each
/// input is read once (in place when it has the output's shape), each op is one vectorised
/// array loop, and the last op writes straight into the output.
namespace {

/// Inputs read as one value per run (see constant_run): the shortest run worth it.
constexpr std::int64_t kMinConstantRun = 16;

/// The elements of \p l's output over which every broadcast input (neither of the output's
/// shape nor one element, nor read in place: see direct_run) stays one value: the product of the
/// trailing dims all of them are broadcast along (a per-channel scale over [N, C, H, W]: a plane).
/// 0 when there is no such input, one is bool, or the run is shorter than kMinConstantRun.
std::int64_t constant_run(const Launch& l, const ReadStrides* read, const std::int64_t* direct) {
  const View& o = l.out[0];
  std::size_t trailing = 0;  // the dims from here on: broadcast by all
  bool any = false;
  for (std::size_t k = 0; k < l.in.size(); ++k) {
    const View& in = l.in[k];
    if (elements(in.shape) == 1 || (in.dtype != DType::bool_ && same_dims(in.shape, o.shape)) ||
        direct[k] > 0)
      continue;
    if (in.dtype == DType::bool_ || read == nullptr) return 0;
    any = true;
    const Index& strides = read->strides[k];
    std::size_t d = strides.size();
    while (d > 0 && strides[d - 1] == 0) --d;
    trailing = std::max(trailing, d);
  }
  if (!any) return 0;
  std::int64_t run = 1;
  for (std::size_t d = trailing; d < o.shape.size(); ++d) run *= o.shape[d];
  return run >= kMinConstantRun ? run : 0;
}

/// Broadcast inputs read in place where a tile lies in one run of them (see direct_run):
/// the shortest run worth it.
constexpr std::int64_t kMinDirectRun = 64;

/// The elements of \p l's output over which its broadcast input \p k is read in order, one
/// after the other (the output's trailing dims, not broadcast: a mask [b, 1, s, t] added to
/// scores [b, h, s, t] in runs of s t): read in place, not gathered. 0 when the run is
/// shorter than kMinDirectRun, or the input is not f32 or not broadcast.
std::int64_t direct_run(const Launch& l, const ReadStrides* read, std::size_t k) {
  const View& in = l.in[k];
  const View& o = l.out[0];
  if (read == nullptr || in.dtype != DType::f32 || elements(in.shape) == 1 ||
      same_dims(in.shape, o.shape))
    return 0;
  const Index& strides = read->strides[k];
  std::int64_t run = 1;
  for (std::size_t d = o.shape.size(); d-- > 0;) {
    if (o.shape[d] == 1) continue;
    if (strides[d] != run) break;
    run *= o.shape[d];
  }
  return run >= kMinDirectRun ? run : 0;
}

/// Whether an input read with \p strides over \p out, one value a run of \p run elements
/// (its trailing dims broadcast), is read at the run's number: its strides over the leading
/// dims are theirs in a row-major array of those dims (a dim of 1 may have any).
bool runs_in_order(Dims out, const Index& strides, std::int64_t run) {
  std::int64_t inner = 1, step = 1;
  std::size_t d = out.size();
  for (; d > 0 && inner < run; --d) {  // the run's dims: broadcast
    if (strides[d - 1] != 0 && out[d - 1] != 1) return false;
    inner *= out[d - 1];
  }
  if (inner != run) return false;
  for (; d > 0; --d) {
    if (out[d - 1] != 1 && strides[d - 1] != step) return false;
    step *= out[d - 1];
  }
  return true;
}

/// Where element \p at of the output reads input \p strides (broadcast: stride 0).
std::int64_t broadcast_offset(Dims out, const Index& strides, std::int64_t at) {
  std::int64_t offset = 0;
  for (std::size_t d = out.size(); d-- > 0;) {
    offset += at % out[d] * strides[d];
    at /= out[d];
  }
  return offset;
}

/// run_fused_f32_rows by the body's chain, when it has one and the launch's operands fit
/// it (the input of the output's shape, the others one f32 element); else false.
bool run_chain(const Launch& l, std::int64_t first, std::int64_t rows, std::int64_t row_len,
               std::int64_t row_stride, const RowsAt& rows_at) {
  const FusedProgram& p = *l.fused;
  if (!p.chain) return false;
  const View& o = l.out[0];
  const auto view_of = [&](std::uint32_t v) -> const View* {
    for (std::size_t k = 0; k < l.in.size(); ++k)
      if (p.args[k] == v) return &l.in[k];
    return nullptr;
  };
  const View* in = view_of(p.chain->input);
  if (in == nullptr || in->dtype != DType::f32 || !same_dims(in->shape, o.shape)) return false;
  vmath::ChainStep steps[ChainProgram::kMaxSteps];
  const std::size_t count = p.chain->steps.size();
  for (std::size_t s = 0; s < count; ++s) {
    const ChainProgram::Step& step = p.chain->steps[s];
    steps[s].f = step.f;
    steps[s].flip = step.flip;
    steps[s].input = step.input;
    steps[s].scalar = 0.0f;
    if (step.input || step.zero) continue;
    const View* scalar = view_of(step.scalar);
    if (scalar == nullptr || scalar->dtype != DType::f32 || elements(scalar->shape) != 1)
      return false;
    steps[s].scalar = *reinterpret_cast<const float*>(scalar->data);
  }
  const bool redirected = rows_at.rows != nullptr;
  const auto* x = reinterpret_cast<const float*>(in->data);
  auto* y = reinterpret_cast<float*>(o.data);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t begin = first + r * row_stride;
    const float* from = redirected && in->data == rows_at.matmul_out
                            ? rows_at.rows + (begin - rows_at.origin)
                            : x + begin;
    float* to = redirected ? rows_at.rows + (begin - rows_at.origin) : y + begin;
    vmath::binary_chain(from, steps, count, to, static_cast<std::size_t>(row_len));
  }
  return true;
}

}  // namespace

void kernel::run_fused_f32_rows(const Launch& l, std::int64_t first, std::int64_t rows,
                                std::int64_t row_len, std::int64_t row_stride,
                                const RowsAt& rows_at) {
  if (run_chain(l, first, rows, row_len, row_stride, rows_at)) return;
  const bool redirected = rows_at.rows != nullptr;
  const FusedProgram& p = *l.fused;
  const View& o = l.out[0];
  // Set by prepare when an input is broadcast or bool (read by the gathers below, for no
  // other).
  const ReadStrides* read = l.prepared_as<ReadStrides>();
  // Bodies of up to kStackValues values run on stack buffers: no allocation, on any thread.
  constexpr std::size_t kStackValues = 32;
  Scratch<float, kStackValues * kTile> scratch(p.num_values * static_cast<std::size_t>(kTile));
  Scratch<const float*, kStackValues> value(p.num_values);
  Scratch<std::size_t, kStackValues> stride(p.num_values);
  Scratch<float, kStackValues> masks(l.in.size());  // bool scalar inputs as 1 / 0
  std::fill(value.data(), value.data() + p.num_values, nullptr);
  std::fill(stride.data(), stride.data() + p.num_values, std::size_t{1});
  const auto slot = [&](std::uint32_t v) { return scratch.data() + v * kTile; };
  for (std::size_t k = 0; k < l.in.size(); ++k) {
    const View& in = l.in[k];
    // One element, a scalar (stride 0), unless it is an f32 of the output's shape; a bool
    // scalar read as a mask once.
    if (elements(in.shape) != 1 || (in.dtype != DType::bool_ && same_dims(in.shape, o.shape)))
      continue;
    if (in.dtype == DType::bool_) {
      masks[k] = *reinterpret_cast<const std::uint8_t*>(in.data) != 0 ? 1.0f : 0.0f;
      value[p.args[k]] = &masks[k];
    } else {
      value[p.args[k]] = reinterpret_cast<const float*>(in.data);
    }
    stride[p.args[k]] = 0;
  }
  auto* out = reinterpret_cast<float*>(o.data);
  // Tiles end where runs of constant broadcast inputs end; such inputs are then one value
  // a tile (stride 0), not gathered.
  Scratch<std::int64_t, kStackValues> direct(l.in.size());
  for (std::size_t k = 0; k < l.in.size(); ++k) direct[k] = direct_run(l, read, k);
  const std::int64_t run = constant_run(l, read, direct.data());
  // Per input, once a call rather than once a tile (tiles are a run long: 49 elements for
  // a per-channel scale over 7x7 planes): of the output's shape; one value; one value a run
  // whose place is the run's number (its dims the output's leading ones, in order: [N, C,
  // 1, 1] over [N, C, H, W]), so that a tile finds it with no division, not two a dim.
  Scratch<std::uint8_t, kStackValues> full(l.in.size()), single(l.in.size()), by_run(l.in.size());
  for (std::size_t k = 0; k < l.in.size(); ++k) {
    const View& in = l.in[k];
    full[k] = in.dtype != DType::bool_ && same_dims(in.shape, o.shape);
    single[k] = elements(in.shape) == 1;
    by_run[k] = run > 0 && read != nullptr && !full[k] && !single[k] && direct[k] == 0 &&
                runs_in_order(o.shape, read->strides[k], run);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t begin = first + r * row_stride, end = begin + row_len;
    // The run the tile is in and where in it (kept as the tiles advance: no division).
    std::int64_t run_number = run > 0 ? begin / run : 0, in_run = run > 0 ? begin % run : 0;
    for (std::int64_t at = begin, len = 0; at < end; at += len) {
      len = std::min(kTile, end - at);
      if (run > 0) len = std::min(len, run - in_run);
      for (std::size_t k = 0; k < l.in.size(); ++k)  // tiles end where in-place runs end
        if (direct[k] > 0) len = std::min(len, direct[k] - at % direct[k]);
      float* target = redirected ? rows_at.rows + (at - rows_at.origin) : out + at;
      for (std::size_t k = 0; k < l.in.size(); ++k) {
        const std::uint32_t v = p.args[k];
        const bool mask = l.in[k].dtype == DType::bool_;
        if (full[k]) {
          value[v] = redirected && l.in[k].data == rows_at.matmul_out
                         ? rows_at.rows + (at - rows_at.origin)
                         : reinterpret_cast<const float*>(l.in[k].data) + at;
        } else if (direct[k] > 0) {  // in place: this tile is within one run of it
          value[v] = reinterpret_cast<const float*>(l.in[k].data) +
                     broadcast_offset(o.shape, read->strides[k], at);
        } else if (run > 0 && !single[k]) {  // one value this tile
          value[v] = reinterpret_cast<const float*>(l.in[k].data) +
                     (by_run[k] ? run_number : broadcast_offset(o.shape, read->strides[k], at));
          stride[v] = 0;
        } else if (stride[v] != 0) {
          if (mask) {
            gather_f32<std::uint8_t>(l.in[k], read->strides[k], o.shape, at, len, slot(v));
          } else {
            gather_f32<float>(l.in[k], read->strides[k], o.shape, at, len, slot(v));
          }
          value[v] = slot(v);
        }
      }
      for (const VectorOp& op : p.vector_ops) {
        float* dst = op.result == p.result ? target : slot(op.result);
        const auto count = static_cast<std::size_t>(len);
        if (op.is_select) {
          vmath::select(value[op.a], stride[op.a], value[op.b], stride[op.b], value[op.c],
                        stride[op.c], dst, count);
        } else if (op.is_binary) {
          vmath::binary(op.binary, value[op.a], stride[op.a], value[op.b], stride[op.b], dst,
                        count);
        } else if (stride[op.a] == 0) {  // a scalar operand: compute once, broadcast
          vmath::unary(op.unary, value[op.a], dst, 1);
          std::fill(dst + 1, dst + len, dst[0]);
        } else {
          vmath::unary(op.unary, value[op.a], dst, count);
        }
        value[op.result] = dst;
        stride[op.result] = 1;
      }
      if (value[p.result] != target)  // the body returns an argument unchanged
        for (std::int64_t i = 0; i < len; ++i) target[i] = value[p.result][stride[p.result] * i];
      if (run > 0 && (in_run += len) == run) in_run = 0, ++run_number;
    }
  }
}

namespace {

/// A fused f32 body over this block's share of the output.
void run_fused_f32(const Launch& l) {
  const auto [begin, end] = block_range(elements(l.out[0].shape), kTile);
  if (begin < end) run_fused_f32_rows(l, begin, 1, end - begin, 0);
}

}  // namespace

bool takes_epilogue(const ir::Graph& graph, const ir::OpView& producer,
                    const FusedProgram& consumer) {
  const KernelDef* def = find_kernel_def(producer.def());
  if (def == nullptr || !def->takes_epilogue || !consumer.tiles) return false;
  for (ir::Value v : producer.operands())
    if (graph.type(v).dtype != DType::f32) return false;
  return graph.type(producer.result(0)).dtype == DType::f32;
}

void run_fused(const Launch& l) {
  const FusedProgram& p = *l.fused;
  if (p.tiles && l.out[0].dtype == DType::f32) {
    run_fused_f32(l);
    return;
  }
  const View& o = l.out[0];
  std::vector<Index> strides;
  for (const View& v : l.in) strides.push_back(broadcast_strides(v.shape, o.shape));
  std::vector<Number> values(p.num_values);
  for_each_element(o.shape, strides, [&](std::int64_t i, const std::vector<std::int64_t>& off) {
    for (std::size_t k = 0; k < p.args.size(); ++k)
      values[p.args[k]] = load_number(l.in[k], off[k]);
    for (const Scalar& s : p.ops) {
      const Number& a = values[s.a];
      Number& x = values[s.result];
      const bool two = s.kind == ElementwiseKind::binary;
      if (s.kind == ElementwiseKind::select) {
        x = a.i != 0 ? values[s.b] : values[s.c];
      } else if (s.kind == ElementwiseKind::cast) {
        x = cast_number(s.operand_dtype, a, s.dtype);
      } else if (s.is_float) {  // computed in double, rounded as if stored between ops
        x = fit_number(s.dtype, {two ? s.form->binary(a.f, values[s.b].f) : s.form->unary(a.f), 0},
                       true);
      } else {
        x = fit_number(s.dtype,
                       {0, two ? s.form->int_binary(a.i, values[s.b].i) : s.form->int_unary(a.i)},
                       false);
      }
    }
    store_number(o, i, values[p.result]);
  });
}

std::shared_ptr<const FusedProgram> compile_elementwise(const ir::Graph& g, const ir::OpView& op) {
  ir::Module module;
  ir::Graph& body = module.add_graph("op");
  std::vector<ir::Value> args;
  for (ir::Value v : op.operands()) args.push_back(body.add_argument(g.type(v)));
  std::vector<ir::TensorType> results;
  for (std::size_t r = 0; r < op.num_results(); ++r) results.push_back(g.type(op.result(r)));
  const ir::OpView copy =
      body.add_op_typed(op.def(), args, {op.attributes().begin(), op.attributes().end()}, results);
  body.set_results({copy.result(0)});
  return compile_fused(body);
}

std::shared_ptr<const FusedProgram> FusedPrograms::elementwise(const ir::Graph& graph,
                                                               const ir::OpView& op) {
  std::string signature(op.name());
  for (ir::Value v : op.operands()) signature.append(" ").append(name(graph.type(v).dtype));
  signature += " ->";
  for (std::size_t r = 0; r < op.num_results(); ++r)
    signature.append(" ").append(name(graph.type(op.result(r)).dtype));
  const std::span<const ir::NamedAttribute> attributes = op.attributes();
  std::vector<Entry>& entries = elementwise_[signature];
  for (const Entry& e : entries)
    if (std::equal(e.attributes.begin(), e.attributes.end(), attributes.begin(), attributes.end()))
      return e.program;
  entries.push_back({{attributes.begin(), attributes.end()}, compile_elementwise(graph, op)});
  return entries.back().program;
}

std::shared_ptr<const FusedProgram> FusedPrograms::fused(const ir::Graph& body) {
  std::shared_ptr<const FusedProgram>& program = fused_[&body];
  if (program == nullptr) program = compile_fused(body);
  return program;
}

}  // namespace kiln::compiler
