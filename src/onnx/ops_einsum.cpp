// ONNX's Einsum, as kiln's matmul, mul, reduce_sum, transpose and reshape: the operands
// are contracted pairwise from the left; each contraction lays its operands out as
// [batch..., rows, contracted] and [batch..., contracted, cols] for one (batched) matmul,
// or multiplies them when nothing is contracted. A label repeated inside one operand
// (a diagonal, "ii->i") is a product with an identity mask summed over one of its axes.

#include <algorithm>
#include <cctype>

#include "core/str.hpp"
#include "onnx/fold.hpp"

namespace kiln::onnx_import {
namespace {
using detail::cat;
using Outputs = std::vector<OnnxValue>;

/// Labels: letters are their characters; the dims under an ellipsis are kEllipsis + i
/// (i counts the ellipsis dims of the widest operand from the left).
using Label = int;
constexpr Label kEllipsis = 256;

struct Operand {
  Tensor tensor;
  std::vector<Label> labels;  // one per axis
};

bool contains(const std::vector<Label>& labels, Label l) {
  return std::find(labels.begin(), labels.end(), l) != labels.end();
}

std::string label_text(Label l) {
  return l >= kEllipsis ? cat("...[", l - kEllipsis, "]") : std::string(1, static_cast<char>(l));
}

/// One term of the equation: its labels, -1 where its ellipsis is.
struct Term {
  std::vector<Label> labels;
  std::size_t letters = 0;
  bool ellipsis = false;
};

Term parse_term(NodeContext& n, std::string_view text) {
  Term term;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i, 3) == "...") {
      if (term.ellipsis) n.fail(cat("the term \"", text, "\" has two ellipses"));
      term.ellipsis = true;
      term.labels.push_back(-1);
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(text[i])) != 0) {
      term.labels.push_back(static_cast<unsigned char>(text[i]));
      ++term.letters;
    } else {
      n.fail(cat("the equation's term \"", text, "\" holds '", text[i],
                 "'; terms are letters and one optional \"...\""));
    }
  }
  return term;
}

/// The dims an input's ellipsis stands for, for an operand of rank \p rank.
std::size_t ellipsis_dims(NodeContext& n, const Term& term, std::string_view text,
                          std::size_t rank) {
  if (term.letters > rank || (!term.ellipsis && term.letters != rank))
    n.fail(
        cat("the term \"", text, "\" has ", term.letters, " labels for an operand of rank ", rank));
  return rank - term.letters;
}

/// \p term's labels, its ellipsis standing for the last \p under of the \p widest
/// ellipsis labels (operands broadcast from the right, as in NumPy).
std::vector<Label> expand(const Term& term, std::size_t under, std::size_t widest) {
  std::vector<Label> out;
  for (Label l : term.labels) {
    if (l != -1) {
      out.push_back(l);
      continue;
    }
    for (std::size_t k = widest - under; k < widest; ++k)
      out.push_back(kEllipsis + static_cast<Label>(k));
  }
  return out;
}

/// \p dims as one dim: their product, where it is known.
Dim merged(NodeContext& n, const std::vector<Dim>& dims) {
  if (dims.empty()) return Dim(1);
  if (dims.size() == 1) return dims[0];
  std::int64_t product = 1;
  for (const Dim& d : dims) {
    if (!d.is_static())
      n.fail(cat("merging the dims ", Shape(dims),
                 " into one matrix axis needs their sizes; "
                 "fix the symbolic dim ",
                 d, " while importing (--dim ", d, "=N)"));
    if (static_cast<double>(product) * static_cast<double>(d.size()) > 4.6e18)
      n.fail(cat("the dims ", Shape(dims), " are too large to merge into one axis"));
    product *= d.size();
  }
  return Dim(product);
}

/// \p op's tensor with its axes in the order \p order (labels of \p op).
Tensor arranged(const Operand& op, const std::vector<Label>& order) {
  std::vector<std::int64_t> perm;
  for (Label l : order)
    perm.push_back(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin());
  bool identity = true;
  for (std::size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == std::int64_t(i);
  return identity ? op.tensor : permute(op.tensor, perm);
}

const Dim& dim_of(const Operand& op, Label l) {
  return op.tensor.shape()
      .dims()[std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin()];
}

/// Sums \p op over its labels that are not in \p needed.
void sum_out(Operand& op, const std::vector<Label>& needed) {
  std::vector<std::int64_t> axes;
  std::vector<Label> kept;
  for (std::size_t i = 0; i < op.labels.size(); ++i) {
    if (contains(needed, op.labels[i]))
      kept.push_back(op.labels[i]);
    else
      axes.push_back(static_cast<std::int64_t>(i));
  }
  if (axes.empty()) return;
  op.tensor = sum(op.tensor, axes, false);
  op.labels = kept;
}

/// Replaces each label repeated inside \p op by one axis: its diagonal.
void take_diagonals(NodeContext& n, Operand& op) {
  for (std::size_t p = 0; p < op.labels.size(); ++p) {
    for (std::size_t q = p + 1; q < op.labels.size(); ++q) {
      if (op.labels[q] != op.labels[p]) continue;
      const Dim &dp = op.tensor.shape().dims()[p], &dq = op.tensor.shape().dims()[q];
      if (!dp.is_static() || dp != dq)
        n.fail(cat("label ", label_text(op.labels[p]), " is repeated over the dims ", dp, " and ",
                   dq, "; a diagonal needs one static size"));
      std::vector<Dim> at_p(op.labels.size(), Dim(1)), at_q(op.labels.size(), Dim(1));
      at_p[p] = at_q[q] = dp;
      const Tensor index = arange(0, static_cast<double>(dp.size()));
      const Tensor on_diagonal = equal(reshape(index, Shape(at_p)), reshape(index, Shape(at_q)));
      op.tensor = sum(where(on_diagonal, op.tensor, Tensor::scalar(0, op.tensor.dtype())),
                      {static_cast<std::int64_t>(q)}, false);
      op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(q));
      --q;
    }
  }
}

/// The contraction of \p a and \p b over their shared labels that are not in \p keep.
Operand contract(NodeContext& n, Operand a, Operand b, const std::vector<Label>& keep) {
  std::vector<Label> a_needed = keep, b_needed = keep;
  a_needed.insert(a_needed.end(), b.labels.begin(), b.labels.end());
  b_needed.insert(b_needed.end(), a.labels.begin(), a.labels.end());
  sum_out(a, a_needed);
  sum_out(b, b_needed);
  std::vector<Label> batch, rows, inner, cols;
  for (Label l : a.labels) {
    if (!contains(b.labels, l))
      rows.push_back(l);
    else if (contains(keep, l))
      batch.push_back(l);
    else
      inner.push_back(l);
  }
  for (Label l : b.labels)
    if (!contains(a.labels, l)) cols.push_back(l);
  // The shared labels' dims: equal, or 1 on one side (broadcast).
  std::vector<Dim> batch_dims;
  for (Label l : batch) {
    const Dim &da = dim_of(a, l), &db = dim_of(b, l);
    if (da != db && da != Dim(1) && db != Dim(1))
      n.fail(cat("label ", label_text(l), " has the dims ", da, " and ", db, " in two operands"));
    batch_dims.push_back(da == Dim(1) ? db : da);
  }
  for (Label l : inner)
    if (dim_of(a, l) != dim_of(b, l))
      n.fail(cat("the contracted label ", label_text(l), " has the dims ", dim_of(a, l), " and ",
                 dim_of(b, l), " in two operands"));
  std::vector<Dim> row_dims, col_dims, inner_dims;
  for (Label l : rows) row_dims.push_back(dim_of(a, l));
  for (Label l : cols) col_dims.push_back(dim_of(b, l));
  for (Label l : inner) inner_dims.push_back(dim_of(a, l));

  std::vector<Label> labels = batch;
  labels.insert(labels.end(), rows.begin(), rows.end());
  labels.insert(labels.end(), cols.begin(), cols.end());
  const auto with = [](std::vector<Dim> dims, const std::vector<Dim>& more) {
    dims.insert(dims.end(), more.begin(), more.end());
    return dims;
  };
  const auto batch_of = [&](const Operand& op) {
    std::vector<Dim> dims;
    for (Label l : batch) dims.push_back(dim_of(op, l));
    return dims;
  };
  std::vector<Label> a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), rows.begin(), rows.end());
  if (inner.empty()) {  // an outer product: [batch, rows, 1...] * [batch, 1..., cols]
    const Tensor ta =
        reshape(arranged(a, a_order),
                Shape(with(with(batch_of(a), row_dims), std::vector<Dim>(cols.size(), Dim(1)))));
    b_order.insert(b_order.end(), cols.begin(), cols.end());
    const Tensor tb =
        reshape(arranged(b, b_order),
                Shape(with(with(batch_of(b), std::vector<Dim>(rows.size(), Dim(1))), col_dims)));
    return {ta * tb, labels};
  }
  a_order.insert(a_order.end(), inner.begin(), inner.end());
  b_order.insert(b_order.end(), inner.begin(), inner.end());
  b_order.insert(b_order.end(), cols.begin(), cols.end());
  const Dim m = merged(n, row_dims), k = merged(n, inner_dims), c = merged(n, col_dims);
  const Tensor ta = reshape(arranged(a, a_order), Shape(with(batch_of(a), {m, k})));
  const Tensor tb = reshape(arranged(b, b_order), Shape(with(batch_of(b), {k, c})));
  return {reshape(matmul(ta, tb), Shape(with(with(batch_dims, row_dims), col_dims))), labels};
}

Outputs einsum(NodeContext& n) {
  n.only_attributes({"equation"});
  std::string equation;
  for (char ch : n.attr_string("equation", ""))
    if (std::isspace(static_cast<unsigned char>(ch)) == 0) equation += ch;
  if (equation.empty()) n.fail("the equation attribute is missing");
  const std::size_t arrow = equation.find("->");
  const std::string inputs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t begin = 0;;) {
    const std::size_t comma = inputs.find(',', begin);
    terms.push_back(inputs.substr(begin, comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (terms.size() != n.num_inputs())
    n.fail(cat("the equation \"", equation, "\" has ", terms.size(), " terms for ", n.num_inputs(),
               " inputs"));

  std::vector<Operand> ops;
  std::vector<Term> parsed;
  std::vector<std::size_t> under;
  std::size_t widest = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    ops.push_back({n.input(i), {}});
    parsed.push_back(parse_term(n, terms[i]));
    under.push_back(ellipsis_dims(n, parsed[i], terms[i], ops[i].tensor.rank()));
    widest = std::max(widest, under[i]);
  }
  for (std::size_t i = 0; i < terms.size(); ++i)
    ops[i].labels = expand(parsed[i], under[i], widest);

  std::vector<Label> output;
  if (arrow != std::string::npos) {
    const Term term = parse_term(n, std::string_view(equation).substr(arrow + 2));
    output = expand(term, term.ellipsis ? widest : 0, widest);
    for (std::size_t i = 0; i < output.size(); ++i) {
      if (std::find(output.begin() + static_cast<std::ptrdiff_t>(i) + 1, output.end(), output[i]) !=
          output.end())
        n.fail(cat("the output repeats the label ", label_text(output[i])));
      if (std::none_of(ops.begin(), ops.end(),
                       [&](const Operand& op) { return contains(op.labels, output[i]); }))
        n.fail(cat("the output's label ", label_text(output[i]), " is in no input"));
    }
  } else {  // implicit: the ellipsis, then the letters that occur once, in alphabetical order
    for (std::size_t k = 0; k < widest; ++k) output.push_back(kEllipsis + static_cast<Label>(k));
    for (Label l = 0; l < kEllipsis; ++l) {
      std::size_t count = 0;
      for (const Operand& op : ops) count += std::count(op.labels.begin(), op.labels.end(), l);
      if (count == 1) output.push_back(l);
    }
  }

  for (Operand& op : ops) take_diagonals(n, op);
  Operand result = ops[0];
  for (std::size_t i = 1; i < ops.size(); ++i) {
    std::vector<Label> keep = output;
    for (std::size_t j = i + 1; j < ops.size(); ++j)
      keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    result = contract(n, std::move(result), ops[i], keep);
  }
  sum_out(result, output);
  return {traced(arranged(result, output))};
}

const OpConverter kConverters[] = {
    {"Einsum", einsum, nullptr, 12},
};

}  // namespace

std::span<const OpConverter> einsum_converters() { return kConverters; }

}  // namespace kiln::onnx_import
