// The reference interpreter (see kiln/compiler/reference.hpp). Written for obviousness:
// every op is a loop over multi-indices, floats in double precision and integers exactly
// in int64; one table maps op names to their evaluators.

#include "kiln/compiler/reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>

#include "compiler/machine_memory.hpp"
#include "compiler/reference/support.hpp"
#include "compiler/reference_ops.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/verifier.hpp"

namespace kiln {
namespace {

using namespace reference;  // the interpreter's values and helpers

const std::unordered_map<std::string, Evaluator>& table() {
  static const std::unordered_map<std::string, Evaluator> evaluators = [] {
    std::unordered_map<std::string, Evaluator> m;
    using I = std::int64_t;
    m["kiln.add"] = binary([](double a, double b) { return a + b; },
                           [](I a, I b) { return wrapped(bits(a) + bits(b)); });
    m["kiln.sub"] = binary([](double a, double b) { return a - b; },
                           [](I a, I b) { return wrapped(bits(a) - bits(b)); });
    m["kiln.mul"] = binary([](double a, double b) { return a * b; },
                           [](I a, I b) { return wrapped(bits(a) * bits(b)); });
    m["kiln.div"] = binary([](double a, double b) { return a / b; }, divide);
    m["kiln.pow"] = binary([](double a, double b) { return std::pow(a, b); }, power);
    m["kiln.maximum"] = binary(larger, [](I a, I b) { return std::max(a, b); });
    m["kiln.minimum"] = binary(smaller, [](I a, I b) { return std::min(a, b); });
    // Written apart from the compiler's (ops/elementwise.cpp), as every evaluator here.
    m["kiln.fmod"] = binary([](double a, double b) { return std::fmod(a, b); },
                            [](I a, I b) -> I { return b == 0 || b == -1 ? 0 : a % b; });
    m["kiln.bitwise_and"] = binary(nullptr, [](I a, I b) { return a & b; });
    m["kiln.bitwise_or"] = binary(nullptr, [](I a, I b) { return a | b; });
    m["kiln.bitwise_xor"] = binary(nullptr, [](I a, I b) { return a ^ b; });
    m["kiln.bitwise_not"] = unary(nullptr, [](I x) { return ~x; });
    m["kiln.shift_left"] =
        binary(nullptr, [](I a, I b) -> I { return b >= 0 && b < 64 ? wrapped(bits(a) << b) : 0; });
    m["kiln.shift_right"] = binary(nullptr, [](I a, I b) -> I {
      if (b >= 0 && b < 64) return a >> b;
      return a < 0 ? -1 : 0;
    });
    m["kiln.eq"] = binary([](double a, double b) { return a == b ? 1.0 : 0.0; },
                          [](I a, I b) -> I { return a == b; });
    m["kiln.ne"] = binary([](double a, double b) { return a != b ? 1.0 : 0.0; },
                          [](I a, I b) -> I { return a != b; });
    m["kiln.lt"] = binary([](double a, double b) { return a < b ? 1.0 : 0.0; },
                          [](I a, I b) -> I { return a < b; });
    m["kiln.le"] = binary([](double a, double b) { return a <= b ? 1.0 : 0.0; },
                          [](I a, I b) -> I { return a <= b; });
    m["kiln.gt"] = binary([](double a, double b) { return a > b ? 1.0 : 0.0; },
                          [](I a, I b) -> I { return a > b; });
    m["kiln.ge"] = binary([](double a, double b) { return a >= b ? 1.0 : 0.0; },
                          [](I a, I b) -> I { return a >= b; });
    m["kiln.neg"] = unary([](double x) { return -x; }, [](I x) { return wrapped(0 - bits(x)); });
    m["kiln.abs"] = unary([](double x) { return std::fabs(x); },
                          [](I x) { return x < 0 ? wrapped(0 - bits(x)) : x; });
    m["kiln.exp"] = unary([](double x) { return std::exp(x); });
    m["kiln.log"] = unary([](double x) { return std::log(x); });
    m["kiln.sqrt"] = unary([](double x) { return std::sqrt(x); });
    m["kiln.rsqrt"] = unary([](double x) { return 1 / std::sqrt(x); });
    m["kiln.tanh"] = unary([](double x) { return std::tanh(x); });
    m["kiln.erf"] = unary([](double x) { return std::erf(x); });
    m["kiln.sin"] = unary([](double x) { return std::sin(x); });
    m["kiln.cos"] = unary([](double x) { return std::cos(x); });
    m["kiln.tan"] = unary([](double x) { return std::tan(x); });
    // Integers are already whole: floor, ceil and round give them back.
    m["kiln.floor"] = unary([](double x) { return std::floor(x); }, [](I x) { return x; });
    m["kiln.ceil"] = unary([](double x) { return std::ceil(x); }, [](I x) { return x; });
    m["kiln.round"] = unary([](double x) { return std::nearbyint(x); }, [](I x) { return x; });
    m["kiln.sign"] = unary([](double x) { return x > 0   ? 1.0
                                                 : x < 0 ? -1.0
                                                         : x; },
                           [](I x) -> I { return (x > 0) - (x < 0); });
    m["kiln.sigmoid"] = unary(sigmoid);
    m["kiln.relu"] = unary([](double x) { return std::isnan(x) || x > 0 ? x : 0.0; },
                           [](I x) { return std::max<I>(x, 0); });
    m["kiln.silu"] = unary([](double x) { return x * sigmoid(x); });
    m["kiln.cast"] = [](const OpArgs& a) {  // one rounding, as the core's conversion
      const Array& x = *a.in[0];
      Array out{a.out_dtype(), x.shape, {}};
      for (const Num& v : x.data) {
        alignas(8) std::byte from[8], to[8];
        if (floating(x)) {
          store_from_double(x.dtype, v.f, from);
        } else {
          store_from_int(x.dtype, v.i, from);
        }
        convert_element(x.dtype, from, out.dtype, to);
        out.data.push_back(floating(out) ? Num{load_as_double(out.dtype, to), 0}
                                         : Num{0, load_as_int(out.dtype, to)});
      }
      return std::vector<Array>{out};
    };
    m["kiln.gelu"] = [](const OpArgs& a) {
      const ir::Attribute* mode = a.op.find("approximate");
      const bool tanh_form = mode != nullptr && mode->as_string() == "tanh";
      return unary(tanh_form ? gelu_tanh : gelu_exact)(a);
    };
    m["kiln.where"] = [](const OpArgs& a) {
      const Array &c = *a.in[0], &x = *a.in[1], &y = *a.in[2];
      Array out{a.out_dtype(), broadcast_shape(c.shape, broadcast_shape(x.shape, y.shape)), {}};
      out.data.resize(static_cast<std::size_t>(count(out.shape)));
      for_each_index(out.shape, [&](const Index& idx, std::int64_t flat) {
        const bool take_x =
            c.data[static_cast<std::size_t>(broadcast_offset(c, out.shape, idx))].i != 0;
        const Array& src = take_x ? x : y;
        out.data[static_cast<std::size_t>(flat)] =
            src.data[static_cast<std::size_t>(broadcast_offset(src, out.shape, idx))];
      });
      return std::vector<Array>{out};
    };
    m["kiln.matmul"] = [](const OpArgs& a) {
      return std::vector<Array>{matmul(*a.in[0], *a.in[1], a.out_dtype())};
    };
    m["kiln.reshape"] = [](const OpArgs& a) {
      return std::vector<Array>{
          {a.out_dtype(), a.ctx.resolve(a.attr("shape").as_shape()), a.in[0]->data}};
    };
    m["kiln.broadcast_to"] = [](const OpArgs& a) {
      const Array& x = *a.in[0];
      Array out{a.out_dtype(), a.ctx.resolve(a.attr("shape").as_shape()), {}};
      out.data.resize(static_cast<std::size_t>(count(out.shape)));
      for_each_index(out.shape, [&](const Index& idx, std::int64_t flat) {
        out.data[static_cast<std::size_t>(flat)] =
            x.data[static_cast<std::size_t>(broadcast_offset(x, out.shape, idx))];
      });
      return std::vector<Array>{out};
    };
    m["kiln.transpose"] = [](const OpArgs& a) {
      const Array& x = *a.in[0];
      const Index perm = a.attr("perm").as_int_array();
      Index out_shape;
      for (std::int64_t p : perm) out_shape.push_back(x.shape[axis_of(p, x.shape.size())]);
      Array out{a.out_dtype(), out_shape, std::vector<Num>(x.data.size())};
      const Index st = strides(x.shape);
      for_each_index(out_shape, [&](const Index& idx, std::int64_t flat) {
        std::int64_t src = 0;
        for (std::size_t d = 0; d < perm.size(); ++d)
          src += idx[d] * st[axis_of(perm[d], x.shape.size())];
        out.data[static_cast<std::size_t>(flat)] = x.data[static_cast<std::size_t>(src)];
      });
      return std::vector<Array>{out};
    };
    m["kiln.slice"] = [](const OpArgs& a) {
      const Array& x = *a.in[0];
      const Index starts = a.attr("starts").as_int_array(), stops = a.attr("stops").as_int_array(),
                  steps = a.attr("steps").as_int_array();
      Index out_shape, first(x.shape.size());
      for (std::size_t d = 0; d < x.shape.size(); ++d) {
        const std::int64_t n = x.shape[d];
        const std::int64_t start = std::clamp<std::int64_t>(starts[d], 0, n);
        const std::int64_t stop = std::clamp<std::int64_t>(stops[d], start, n);
        first[d] = start;
        out_shape.push_back(slice_length(start, stop, steps[d]));
      }
      Array out{a.out_dtype(), out_shape,
                std::vector<Num>(static_cast<std::size_t>(count(out_shape)))};
      const Index st = strides(x.shape);
      for_each_index(out_shape, [&](const Index& idx, std::int64_t flat) {
        std::int64_t src = 0;
        for (std::size_t d = 0; d < idx.size(); ++d)
          src += (first[d] + (idx[d] == 0 ? 0 : idx[d] * steps[d])) * st[d];
        out.data[static_cast<std::size_t>(flat)] = x.data[static_cast<std::size_t>(src)];
      });
      return std::vector<Array>{out};
    };
    m["kiln.concat"] = [](const OpArgs& a) {
      return std::vector<Array>{concat_arrays(
          a.in, axis_of(a.attr("axis").as_int(), a.in[0]->shape.size()), a.out_dtype())};
    };
    m["kiln.split"] = [](const OpArgs& a) {
      const Array& x = *a.in[0];
      return split_array(x, axis_of(a.attr("axis").as_int(), x.shape.size()),
                         a.attr("sizes").as_int_array());
    };
    // Collectives: operand i and result i belong to device i; the values are what every
    // device ends up with.
    m["kiln.allreduce_sum"] = [](const OpArgs& a) {
      const Array total = sum_arrays(a.in, a.out_dtype());
      return std::vector<Array>(a.in.size(), total);
    };
    m["kiln.allgather"] = [](const OpArgs& a) {
      const Array all = concat_arrays(a.in, axis_of(a.attr("axis").as_int(), a.in[0]->shape.size()),
                                      a.out_dtype());
      return std::vector<Array>(a.in.size(), all);
    };
    m["kiln.reduce_scatter_sum"] = [](const OpArgs& a) {
      const std::size_t axis = axis_of(a.attr("axis").as_int(), a.in[0]->shape.size());
      return split_array(sum_arrays(a.in, a.out_dtype()), axis,
                         shard_sizes(a.in[0]->shape[axis], static_cast<std::int64_t>(a.in.size())));
    };
    m["kiln.all_to_all"] = [](const OpArgs& a) {
      const std::size_t rank = a.in[0]->shape.size();
      const std::size_t split = axis_of(a.attr("split_axis").as_int(), rank);
      const std::size_t join = axis_of(a.attr("concat_axis").as_int(), rank);
      std::vector<std::vector<Array>> pieces;  // [operand][piece]
      for (const Array* x : a.in)
        pieces.push_back(split_array(
            *x, split, shard_sizes(x->shape[split], static_cast<std::int64_t>(a.in.size()))));
      std::vector<Array> out;
      for (std::size_t i = 0; i < a.in.size(); ++i) {
        std::vector<const Array*> parts;
        for (const std::vector<Array>& p : pieces) parts.push_back(&p[i]);
        out.push_back(concat_arrays(parts, join, a.out_dtype()));
      }
      return out;
    };
    m["kiln.transfer"] = [](const OpArgs& a) { return std::vector<Array>{*a.in[0]}; };
    m["kiln.gather"] = [](const OpArgs& a) {
      const Array &x = *a.in[0], &ids = *a.in[1];
      const std::size_t axis = axis_of(a.attr("axis").as_int(), x.shape.size());
      Index out_shape(x.shape.begin(), x.shape.begin() + static_cast<long>(axis));
      out_shape.insert(out_shape.end(), ids.shape.begin(), ids.shape.end());
      out_shape.insert(out_shape.end(), x.shape.begin() + static_cast<long>(axis) + 1,
                       x.shape.end());
      Array out{a.out_dtype(), out_shape,
                std::vector<Num>(static_cast<std::size_t>(count(out_shape)))};
      const Index st = strides(x.shape), ist = strides(ids.shape);
      for_each_index(out_shape, [&](const Index& idx, std::int64_t flat) {
        std::int64_t id_flat = 0;
        for (std::size_t d = 0; d < ids.shape.size(); ++d) id_flat += idx[axis + d] * ist[d];
        const std::int64_t id = ids.data[static_cast<std::size_t>(id_flat)].i;
        if (id < 0 || id >= x.shape[axis])
          throw UserError(cat("gather (", a.op.describe(), "): index ", id, " is outside [0, ",
                              x.shape[axis], ")"));
        std::int64_t src = id * st[axis];
        for (std::size_t d = 0; d < axis; ++d) src += idx[d] * st[d];
        for (std::size_t d = axis + 1; d < x.shape.size(); ++d)
          src += idx[d - 1 + ids.shape.size()] * st[d];
        out.data[static_cast<std::size_t>(flat)] = x.data[static_cast<std::size_t>(src)];
      });
      return std::vector<Array>{out};
    };
    add_indexing_evaluators(m);
    add_nn_evaluators(m);
    m["kiln.reduce_sum"] = [](const OpArgs& a) { return reduce(a, Reduction::sum); };
    m["kiln.reduce_mean"] = [](const OpArgs& a) { return reduce(a, Reduction::mean); };
    m["kiln.reduce_max"] = [](const OpArgs& a) { return reduce(a, Reduction::max); };
    m["kiln.reduce_min"] = [](const OpArgs& a) { return reduce(a, Reduction::min); };
    m["kiln.reduce_prod"] = [](const OpArgs& a) { return reduce(a, Reduction::prod); };
    m["kiln.argmax"] = [](const OpArgs& a) {
      const Array& x = *a.in[0];
      const std::size_t axis = axis_of(a.attr("axis").as_int(), x.shape.size());
      if (x.shape[axis] == 0)
        throw UserError(cat("reference: ", a.op.describe(), ": argmax over an empty axis"));
      const bool on_floats = floating(x);
      // The first largest, or the first NaN (PyTorch's rule).
      Array lines = along_axis(x, axis, DType::i64, [on_floats](std::vector<Num*>& v) {
        std::size_t best = 0;
        for (std::size_t i = 1; i < v.size(); ++i) {
          if (on_floats && std::isnan(v[best]->f)) break;
          if (on_floats ? (std::isnan(v[i]->f) || v[i]->f > v[best]->f) : v[i]->i > v[best]->i)
            best = i;
        }
        *v[0] = Num{0, static_cast<std::int64_t>(best)};
      });
      // Each line's first element now holds its argmax; collect those.
      Index out_shape;
      const ir::Attribute* keep = a.op.find("keepdim");
      for (std::size_t d = 0; d < x.shape.size(); ++d) {
        if (d != axis) {
          out_shape.push_back(x.shape[d]);
        } else if (keep != nullptr && keep->as_bool()) {
          out_shape.push_back(1);
        }
      }
      Array result{DType::i64, out_shape, {}};
      Index outer = x.shape;
      outer[axis] = 1;
      const Index st = strides(x.shape);
      for_each_index(outer, [&](const Index& idx, std::int64_t) {
        std::int64_t base = 0;
        for (std::size_t d = 0; d < idx.size(); ++d) base += idx[d] * st[d];
        result.data.push_back(lines.data[static_cast<std::size_t>(base)]);
      });
      return std::vector<Array>{result};
    };
    const auto softmax = [](bool log) {
      return [log](const OpArgs& a) {
        const Array& x = *a.in[0];
        return std::vector<Array>{rounded(
            along_axis(x, axis_of(a.attr("axis").as_int(), x.shape.size()), a.out_dtype(),
                       [log](std::vector<Num*>& v) {
                         double mx = -std::numeric_limits<double>::infinity(), sum = 0;
                         for (Num* p : v) mx = larger(mx, p->f);
                         for (Num* p : v) sum += std::exp(p->f - mx);
                         for (Num* p : v)
                           p->f = log ? p->f - mx - std::log(sum) : std::exp(p->f - mx) / sum;
                       }))};
      };
    };
    m["kiln.softmax"] = softmax(false);
    m["kiln.log_softmax"] = softmax(true);
    const auto norm = [](bool rms) {
      return [rms](const OpArgs& a) {
        const Array& x = *a.in[0];
        const double eps = a.attr("eps").as_float();
        const Array& gamma = *a.in[1];
        const Array* beta = rms ? nullptr : a.in[2];
        return std::vector<Array>{
            rounded(along_axis(x, x.shape.size() - 1, a.out_dtype(), [&](std::vector<Num*>& v) {
              const auto n = static_cast<double>(v.size());
              double mean = 0, var = 0;
              for (Num* p : v) mean += p->f;
              mean = rms ? 0 : mean / n;
              for (Num* p : v) var += (p->f - mean) * (p->f - mean);
              const double scale = 1 / std::sqrt(var / n + eps);
              for (std::size_t i = 0; i < v.size(); ++i)
                v[i]->f = (v[i]->f - mean) * scale * gamma.data[i].f + (beta ? beta->data[i].f : 0);
            }))};
      };
    };
    m["kiln.layer_norm"] = norm(false);
    m["kiln.rms_norm"] = norm(true);
    m["kiln.constant"] = [](const OpArgs& a) {
      const ir::DenseData& d = a.attr("value").as_dense();
      const Tensor t =
          Tensor::from_bytes(d.dtype, d.shape, Device::cpu(), d.bytes.data(), d.bytes.size());
      Index shape;
      for (const Dim& dim : d.shape.dims()) shape.push_back(dim.size());
      return std::vector<Array>{{d.dtype, shape, elements_of(t)}};
    };
    m["kiln.weight"] = [](const OpArgs& a) {
      const std::string name = a.prefix.empty() ? a.attr("name").as_string()
                                                : a.prefix + "." + a.attr("name").as_string();
      auto it = a.ctx.weights.find(name);
      if (it == a.ctx.weights.end())
        throw UserError(cat("reference: weight '", name, "' is missing"));
      const ir::TensorType& type = a.graph.type(a.op.result(0));
      const Tensor& w = it->second;
      if (w.dtype() != type.dtype || w.shape() != type.shape)
        throw UserError(cat("reference: weight '", name, "' is ", w.layout(),
                            " but the graph needs ", name_of(type)));
      Index shape;
      for (const Dim& dim : w.shape().dims()) shape.push_back(dim.size());
      return std::vector<Array>{{w.dtype(), shape, elements_of(w)}};
    };
    m["kiln.fused"] = [](const OpArgs& a) {  // the body, as an ordinary graph
      const ir::Graph& body = *a.ctx.module.find(a.attr("callee").as_symbol().name);
      std::vector<Array> args;
      for (const Array* x : a.in) args.push_back(*x);
      return run_graph(a.ctx, body, std::move(args), a.prefix);
    };
    m["func.call"] = [](const OpArgs& a) {
      const ir::Graph& callee = *a.ctx.module.find(a.attr("callee").as_symbol().name);
      std::string prefix = a.prefix;
      if (const ir::Attribute* p = a.op.find("kiln.prefix"))
        prefix = prefix.empty() ? p->as_string() : prefix + "." + p->as_string();
      std::vector<Array> args;
      for (const Array* x : a.in) args.push_back(*x);
      return run_graph(a.ctx, callee, std::move(args), prefix);
    };
    return m;
  }();
  return evaluators;
}

/// Refuses, before it runs, an op whose results would pass kiln's size limit for one tensor
/// (at their dtype's size, as compiled calls check it) or need more than this machine's
/// memory at the interpreter's 16 bytes per element (symbols bound by the entry's inputs).
/// Returns the results' concrete shapes (none when a symbol is not bound here).
std::optional<std::vector<Index>> check_result_sizes(const Context& ctx, const ir::Graph& graph,
                                                     const ir::OpView& op) {
  std::vector<Index> shapes;
  for (std::size_t r = 0; r < op.num_results(); ++r) {
    Index shape;
    for (const Dim& d : graph.type(op.result(r)).shape.dims()) {
      const std::optional<std::int64_t> size = ctx.try_size(d);
      if (!size) return std::nullopt;
      shape.push_back(*size);
    }
    const auto refuse = [&](const std::string& why) {
      throw UserError(cat("reference: result ", r, " of ", op.describe(), " in @", graph.name(),
                          ": ", why, "; run it on smaller inputs"));
    };
    // kiln's limit for one tensor at the value's own element size (as the compiler checks
    // it: an empty [0, 2^53, 80] f32 is within it), then the interpreter's 16 bytes an
    // element against the machine.
    std::size_t bytes = 0;
    try {
      (void)checked_tensor_bytes(shape, size_of(graph.type(op.result(r)).dtype));
      const auto elements = static_cast<std::size_t>(checked_volume(shape));
      bytes = elements > SIZE_MAX / sizeof(Num) ? SIZE_MAX : elements * sizeof(Num);
    } catch (const UserError& e) {
      refuse(e.what());
    }
    const std::size_t machine = compiler::memory_and_swap();
    if (machine != 0 && bytes > machine)
      refuse(cat("[", detail::join(shape, ", "), "] needs ",
                 static_cast<double>(bytes) / (1u << 30),
                 " GiB (16 bytes per element), more than this machine's memory and swap (",
                 static_cast<double>(machine) / (1u << 30), " GiB)"));
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

}  // namespace

std::vector<Array> reference::run_graph(const Context& ctx, const ir::Graph& graph,
                                        std::vector<Array> arguments, const std::string& prefix) {
  std::vector<Array> values(graph.num_values());
  for (std::size_t i = 0; i < arguments.size(); ++i)
    values[graph.arguments()[i].id] = std::move(arguments[i]);
  for (std::size_t i = 0; i < graph.num_ops(); ++i) {
    const ir::OpView op = graph.op(i);
    auto it = table().find(op.name());
    if (it == table().end())
      throw UserError(cat("reference: no evaluator for ", op.describe(), " in @", graph.name()));
    OpArgs args{ctx, graph, op, {}, prefix};
    for (ir::Value v : op.operands()) args.in.push_back(&values[v.id]);
    const std::optional<std::vector<Index>> shapes = check_result_sizes(ctx, graph, op);
    std::vector<Array> results;
    // Results that hold nothing are not computed: a matmul over 9 * 10^15 batches of empty
    // matrices would loop for hours to write no element (the compiler skips such launches).
    if (shapes && !shapes->empty() &&
        std::all_of(shapes->begin(), shapes->end(),
                    [](const Index& sh) { return count(sh) == 0; })) {
      for (std::size_t r = 0; r < shapes->size(); ++r)
        values[op.result(r).id] = Array{graph.type(op.result(r)).dtype, (*shapes)[r], {}};
      continue;
    }
    try {
      results = it->second(args);
    } catch (const std::bad_alloc&) {
      throw UserError(cat("reference: out of memory in ", op.describe(), " of @", graph.name(),
                          " (the interpreter holds 16 bytes per element); run it on smaller "
                          "inputs"));
    }
    for (std::size_t r = 0; r < results.size(); ++r)
      values[op.result(r).id] = std::move(results[r]);
  }
  std::vector<Array> out;
  for (ir::Value v : graph.results()) out.push_back(values[v.id]);
  return out;
}

namespace compiler {

bool reference_evaluates(std::string_view op) { return table().count(std::string(op)) != 0; }

}  // namespace compiler

std::vector<Tensor> reference_run(const ir::Module& module, const std::vector<Tensor>& inputs,
                                  const std::map<std::string, Tensor>& weights) {
  ir::verify_or_throw(module);  // its walks assume a valid module (bounded call depth)
  const ir::Graph& entry = module.entry();
  if (const std::uint64_t ops = ir::expanded_op_count(module); ops > kMaxReferenceOps)
    throw UserError(cat("reference_run: @", entry.name(), "'s calls expand to ",
                        ops == UINT64_MAX ? std::string("2^64 or more") : cat(ops),
                        " ops, more than the reference interpreter evaluates one by one (",
                        kMaxReferenceOps, ", kiln::kMaxReferenceOps); compile it instead"));
  if (inputs.size() != entry.arguments().size())
    throw UserError(cat("reference_run: @", entry.name(), " takes ", entry.arguments().size(),
                        " inputs, got ", inputs.size()));
  Context ctx{module, weights, {}};
  std::vector<Array> arguments;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ir::TensorType& type = entry.type(entry.arguments()[i]);
    const Tensor& t = inputs[i];
    if (!t.is_constant() || t.dtype() != type.dtype || t.rank() != type.shape.rank())
      throw UserError(cat("reference_run: input ", i, " is ", t, " but @", entry.name(), " takes ",
                          ir::to_string(type)));
    Index shape;
    for (std::size_t d = 0; d < t.rank(); ++d) {
      const std::int64_t size = t.shape().dims()[d].size();
      const Dim& want = type.shape.dims()[d];
      if (want.is_static() && want.size() != size)
        throw UserError(cat("reference_run: input ", i, " has ", size, " at axis ", d, " where ",
                            want.size(), " is needed"));
      if (!want.is_static() && !want.is_name())
        throw UserError(cat("reference_run: input ", i, " has dim '", want.symbol(), "' at axis ",
                            d,
                            "; an input's symbolic dims must be single names, which its data "
                            "binds, not expressions"));
      if (want.is_name()) {
        auto [it, fresh] = ctx.symbols.emplace(want.symbol(), size);
        if (!fresh && it->second != size)
          throw UserError(cat("reference_run: dim '", want.symbol(), "' is ", it->second,
                              " elsewhere but ", size, " at axis ", d, " of input ", i));
      }
      shape.push_back(size);
    }
    arguments.push_back({t.dtype(), shape, elements_of(t)});
  }
  std::vector<Tensor> out;
  std::vector<Array> results = run_graph(ctx, entry, std::move(arguments), "");
  for (std::size_t r = 0; r < results.size(); ++r) {
    std::vector<Dim> dims;
    for (std::int64_t d : results[r].shape) dims.emplace_back(d);
    const Array& a = results[r];
    std::vector<std::byte> bytes(a.data.size() * size_of(a.dtype));
    for (std::size_t k = 0; k < a.data.size(); ++k) {
      std::byte* at = bytes.data() + k * size_of(a.dtype);
      if (floating(a)) {
        store_from_double(a.dtype, a.data[k].f, at);
      } else {
        store_from_int(a.dtype, a.data[k].i, at);
      }
    }
    out.push_back(Tensor::from_bytes(a.dtype, Shape(std::move(dims)),
                                     entry.type(entry.results()[r]).device, bytes.data(),
                                     bytes.size()));
  }
  return out;
}

}  // namespace kiln
