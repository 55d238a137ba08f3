#pragma once
// Internal: what the reference interpreter's evaluators share (reference.cpp holds them and
// the walk over graphs): values as arrays of exact elements (floats in double, integers in
// int64), multi-index loops, broadcasting, the per-element functions of the arithmetic
// ops, and the bigger pieces several evaluators use (reductions, matmul, concat, split).
// Written for obviousness, not speed, and independent of the kernels it checks.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/stage/tensor.hpp"

namespace kiln::reference {

using detail::cat;

using Index = std::vector<std::int64_t>;

/// One element: a floating-point dtype's value in `f`, an integer or bool one's in `i`.
struct Num {
  double f = 0;
  std::int64_t i = 0;
};

struct Array {
  DType dtype = DType::f32;
  Index shape;
  std::vector<Num> data;
};

bool floating(const Array& a);

std::int64_t count(const Index& shape);

Index strides(const Index& shape);

/// Calls f(index, flat) for every index of \p shape in row-major order.
template <class F>
void for_each_index(const Index& shape, F&& f) {
  const std::int64_t n = count(shape);
  Index idx(shape.size(), 0);
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(idx, flat);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

/// \p v (a float in `f` when \p from_float, else an integer in `i`) as a value of \p dtype:
/// floats rounded once, integers wrapped to the width, as storing it in memory does.
Num fit(DType dtype, Num v, bool from_float);

Array rounded(Array a);

/// The elements of \p t, exactly.
std::vector<Num> elements_of(const Tensor& t);

/// Position in \p in (broadcast to \p out_shape) of the output index \p idx.
std::int64_t broadcast_offset(const Array& in, const Index& out_shape, const Index& idx);

Index broadcast_shape(const Index& a, const Index& b);

std::size_t axis_of(std::int64_t axis, std::size_t rank);

// ---- the evaluation context ---------------------------------------------------------------
struct Context {
  const ir::Module& module;
  const std::map<std::string, Tensor>& weights;
  std::map<std::string, std::int64_t> symbols;  // bound by the entry graph's inputs

  /// \p d's size (a name's, or an expression's over names), if every name it uses is bound.
  std::optional<std::int64_t> try_size(const Dim& d) const {
    for (const std::string& name : dim_names(d))
      if (symbols.count(name) == 0) return std::nullopt;
    return size(d);
  }

  /// \p d's size. \throws UserError naming a name no input binds.
  std::int64_t size(const Dim& d) const {
    try {
      return evaluate_dim(d, [&](const std::string& name) -> std::optional<std::int64_t> {
        const auto it = symbols.find(name);
        if (it == symbols.end()) return std::nullopt;
        return it->second;
      });
    } catch (const UserError& e) {
      throw UserError(cat("reference: ", e.what()));
    }
  }

  Index resolve(const Shape& shape) const {
    Index out;
    for (const Dim& d : shape.dims()) out.push_back(size(d));
    return out;
  }
};

struct OpArgs {
  const Context& ctx;
  const ir::Graph& graph;
  const ir::OpView& op;
  std::vector<const Array*> in;
  const std::string& prefix;
  DType out_dtype(std::size_t r = 0) const { return graph.type(op.result(r)).dtype; }
  const ir::Attribute& attr(const char* name) const { return *op.find(name); }
};

std::string name_of(const ir::TensorType& t);

using Evaluator = std::function<std::vector<Array>(const OpArgs&)>;

/// Adds the evaluators of gather_elements, gather_nd and cumsum (reference/indexing.cpp).
void add_indexing_evaluators(std::unordered_map<std::string, Evaluator>& m);
/// Adds the evaluators of conv, conv_transpose, max_pool and avg_pool (reference/nn.cpp).
void add_nn_evaluators(std::unordered_map<std::string, Evaluator>& m);

std::vector<Array> run_graph(const Context& ctx, const ir::Graph& graph,
                             std::vector<Array> arguments, const std::string& prefix);

// ---- element-wise ---------------------------------------------------------------------------
/// A binary op: \p f on floats (null: integers only, as verified), \p g on integers and
/// bool (exact; arithmetic wraps at 64 bits), then the result fitted to the output's dtype.
Evaluator binary(double (*f)(double, double), std::int64_t (*g)(std::int64_t, std::int64_t));

/// A unary op: \p f on floats, \p g on integers (null: floats only, as verified).
Evaluator unary(double (*f)(double), std::int64_t (*g)(std::int64_t) = nullptr);

double gelu_exact(double x);

double gelu_tanh(double x);

double sigmoid(double x);

// Integer arithmetic in two's complement, as NumPy and PyTorch compute it.
std::int64_t wrapped(std::uint64_t x);

std::uint64_t bits(std::int64_t x);

/// Integers: truncate toward zero; x / 0 = 0 (documented in docs/ops.md).
std::int64_t divide(std::int64_t a, std::int64_t b);

/// Integers as PyTorch raises them: a negative exponent gives 0, except for bases 1 and -1.
std::int64_t power(std::int64_t a, std::int64_t b);

/// Floats: NaN from either side propagates (PyTorch's maximum and minimum).
double larger(double a, double b);

double smaller(double a, double b);

// ---- the table ------------------------------------------------------------------------------
enum class Reduction { sum, mean, max, min, prod };

std::vector<Array> reduce(const OpArgs& a, Reduction kind);

/// Applies \p line to every 1-D line of \p x along \p axis (softmax and friends).
template <class F>
Array along_axis(const Array& x, std::size_t axis, DType dtype, F&& line) {
  Array out{dtype, x.shape, x.data};
  const Index st = strides(x.shape);
  Index outer = x.shape;
  outer[axis] = 1;
  for_each_index(outer, [&](const Index& idx, std::int64_t) {
    std::int64_t base = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) base += idx[d] * st[d];
    std::vector<Num*> values;
    for (std::int64_t i = 0; i < x.shape[axis]; ++i)
      values.push_back(&out.data[static_cast<std::size_t>(base + i * st[axis])]);
    line(values);
  });
  return out;
}

Array matmul(const Array& a0, const Array& b0, DType dtype);

/// \p parts joined along \p axis.
Array concat_arrays(const std::vector<const Array*>& parts, std::size_t axis, DType dtype);

/// \p x cut along \p axis into pieces of \p sizes.
std::vector<Array> split_array(const Array& x, std::size_t axis, const Index& sizes);

/// The elementwise sum of same-shaped \p parts, rounded once to \p dtype.
Array sum_arrays(const std::vector<const Array*>& parts, DType dtype);

}  // namespace kiln::reference
