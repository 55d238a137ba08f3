// ONNX's GatherElements, GatherND, ScatterElements, ScatterND, CumSum and TopK: kiln ops of
// their own (kiln.gather_elements, kiln.gather_nd, kiln.scatter_elements, kiln.scatter_nd,
// kiln.cumsum, kiln.top_k), which take negative indices as ONNX does.

#include "core/str.hpp"
#include "onnx/fold.hpp"

namespace kiln::onnx_import {
namespace {
using Outputs = std::vector<OnnxValue>;

Outputs gather_elements_(NodeContext& n) {
  n.only_attributes({"axis"});
  const Tensor x = n.input(0);
  return {traced(gather_elements(x, n.input(1), n.axis(n.attr_int("axis", 0), x.rank())))};
}

Outputs gather_nd_(NodeContext& n) {
  n.only_attributes({"batch_dims"});
  return {traced(gather_nd(n.input(0), n.input(1), n.attr_int("batch_dims", 0)))};
}

Outputs cumsum_(NodeContext& n) {
  n.only_attributes({"exclusive", "reverse"});
  const Tensor x = n.input(0);
  const std::vector<std::int64_t> axis = n.ints(1, "the axis");
  if (axis.size() != 1) n.fail("the axis (input 1) must hold one value");
  return {traced(cumsum(x, n.axis(axis[0], x.rank()), n.attr_int("exclusive", 0) != 0,
                        n.attr_int("reverse", 0) != 0))};
}

Outputs scatter_elements_(NodeContext& n) {
  n.only_attributes({"axis", "reduction"});
  const Tensor x = n.input(0);
  return {
      traced(scatter_elements(x, n.input(1), n.input(2), n.axis(n.attr_int("axis", 0), x.rank()),
                              n.attr_string("reduction", "none")))};
}

Outputs scatter_nd_(NodeContext& n) {
  n.only_attributes({"reduction"});
  return {
      traced(scatter_nd(n.input(0), n.input(1), n.input(2), n.attr_string("reduction", "none")))};
}

/// TopK: K known while importing; the results are always sorted (what `sorted = 0`
/// allows too), ties by the lower index.
Outputs top_k_(NodeContext& n) {
  n.only_attributes({"axis", "largest", "sorted"});
  const Tensor x = n.input(0);
  const std::vector<std::int64_t> k = n.ints(1, "K");
  if (k.size() != 1) n.fail(detail::cat("K must hold one value, got ", k.size()));
  auto [values, indices] =
      top_k(x, k[0], n.axis(n.attr_int("axis", -1), x.rank()), n.attr_int("largest", 1) != 0);
  return {traced(std::move(values)), traced(std::move(indices))};
}

const OpConverter kConverters[] = {
    {"CumSum", cumsum_},        {"GatherElements", gather_elements_},
    {"GatherND", gather_nd_},   {"ScatterElements", scatter_elements_},
    {"ScatterND", scatter_nd_}, {"TopK", top_k_, nullptr, 11},
};

}  // namespace

std::span<const OpConverter> indexing_converters() { return kConverters; }

}  // namespace kiln::onnx_import
