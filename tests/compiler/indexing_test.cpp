// gather_elements, gather_nd, the scatters, cumsum and top_k, compiled and in the reference
// interpreter: small
// cases worked out by hand (numpy_diff compares them with NumPy on random ones), symbolic
// dims, and indices out of range refused in both, naming the op.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "../error_matchers.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

using ::testing::ElementsAre;

Tensor i64(std::vector<std::int64_t> v, Shape s) { return Tensor::from_data(v, s); }
Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_data(v, s); }
std::string cat_index(std::int64_t i) {
  return "index " + std::to_string(i) + " is outside [-3, 3)";
}

/// The outputs of \p f on \p inputs, compiled; checked to equal the reference's.
std::vector<Tensor> both(const StagedGraph& staged, const std::vector<Tensor>& inputs) {
  const std::vector<Tensor> ref = reference_run(staged.graph(), inputs, {});
  CompiledCallable call(staged, {});
  std::vector<Tensor> out = call.run(inputs);
  EXPECT_EQ(out.size(), ref.size());
  for (std::size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    EXPECT_EQ(out[i].shape(), ref[i].shape());
    EXPECT_EQ(std::vector<std::byte>(out[i].bytes().begin(), out[i].bytes().end()),
              std::vector<std::byte>(ref[i].bytes().begin(), ref[i].bytes().end()))
        << "output " << i << " differs from the reference";
  }
  return out;
}

TEST(Indexing, GatherElementsTakesAlongAnAxisWithNegativeIndices) {
  // x = [[1, 2], [3, 4], [5, 6]] (3 x 2, rows "batch"); take along axis 1.
  const auto out =
      both(stage([](Tensor x, Tensor i) { return gather_elements(x, i, 1); })(
               TensorLayout(DType::f32, {"batch", 2}), TensorLayout(DType::i64, {"batch", 2})),
           {f32({1, 2, 3, 4, 5, 6}, {3, 2}), i64({1, 0, -1, 0, 0, 1}, {3, 2})});
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(2, 1, 4, 3, 5, 6));
}

TEST(Indexing, GatherNdPicksSlicesByIndexTuples) {
  // x: 2 x 2 x 2 holding 0..7. Tuples of 2 pick rows x[a, b]; with one batch dim, tuples
  // of 1 pick x[batch, b].
  const Tensor x = f32({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  const auto out = both(stage([](Tensor t, Tensor pairs, Tensor singles) {
                          return std::make_tuple(gather_nd(t, pairs), gather_nd(t, singles, 1));
                        })(TensorLayout(DType::f32, {2, 2, 2}), TensorLayout(DType::i64, {2, 2}),
                           TensorLayout(DType::i64, {2, 1})),
                        {x, i64({1, 0, 0, -1}, {2, 2}), i64({1, 0}, {2, 1})});
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(4, 5, 2, 3));  // x[1, 0], x[0, 1]
  EXPECT_THAT(out[1].to_vector<float>(), ElementsAre(2, 3, 4, 5));  // x[0, 1], x[1, 0]
}

TEST(Indexing, CumsumRunsForwardBackwardAndExclusive) {
  const auto out =
      both(stage([](Tensor x) {
             return std::make_tuple(cumsum(x, 1), cumsum(x, 1, true), cumsum(x, -1, false, true),
                                    cumsum(x, 0, true, true));
           })(TensorLayout(DType::i64, {2, "n"})),
           {i64({1, 2, 3, 10, 20, 30}, {2, 3})});
  EXPECT_THAT(out[0].to_vector<std::int64_t>(), ElementsAre(1, 3, 6, 10, 30, 60));
  EXPECT_THAT(out[1].to_vector<std::int64_t>(), ElementsAre(0, 1, 3, 0, 10, 30));
  EXPECT_THAT(out[2].to_vector<std::int64_t>(), ElementsAre(6, 5, 3, 60, 50, 30));
  EXPECT_THAT(out[3].to_vector<std::int64_t>(), ElementsAre(10, 20, 30, 0, 0, 0));
  // i8 wraps as two's complement, as NumPy's int8 cumsum does.
  const auto wrapped =
      both(stage([](Tensor x) { return cumsum(x, 0); })(TensorLayout(DType::i8, {3})),
           {Tensor::from_data(std::vector<std::int8_t>{100, 100, -56}, {3})});
  EXPECT_THAT(wrapped[0].to_vector<std::int8_t>(), ElementsAre(100, -56, -112));
}

TEST(Indexing, IndicesOutOfRangeAreRefusedCompiledAndInTheReference) {
  const StagedGraph ge = stage([](Tensor x, Tensor i) { return gather_elements(x, i, 0); })(
      TensorLayout(DType::f32, {3}), TensorLayout(DType::i64, {1}));
  const StagedGraph nd = stage([](Tensor x, Tensor i) { return gather_nd(x, i); })(
      TensorLayout(DType::f32, {3}), TensorLayout(DType::i64, {1, 1}));
  const Tensor x = f32({1, 2, 3}, {3});
  for (const std::int64_t bad : {3, -4}) {
    const std::string message = cat_index(bad);
    // Compiled, the kernel's error reaches the caller as the stream's DeviceError.
    KILN_EXPECT_THROW_MSG(CompiledCallable(ge, {}).run({x, i64({bad}, {1})}), DeviceError,
                          "kiln.gather_elements", message.c_str());
    KILN_EXPECT_THROW_MSG(reference_run(ge.graph(), {x, i64({bad}, {1})}, {}), UserError,
                          "kiln.gather_elements", message.c_str());
    KILN_EXPECT_THROW_MSG(CompiledCallable(nd, {}).run({x, i64({bad}, {1, 1})}), DeviceError,
                          "kiln.gather_nd", message.c_str());
    KILN_EXPECT_THROW_MSG(reference_run(nd.graph(), {x, i64({bad}, {1, 1})}, {}), UserError,
                          "kiln.gather_nd", message.c_str());
  }
}

TEST(Indexing, ScattersWriteInOrderAndCombineByTheirReduction) {
  // scatter_elements along axis 1 of x [batch, 3]: duplicate indices, the last write wins
  // (none) or all combine (add, max: NaN wins).
  const auto scatter = [](const std::string& reduction) {
    return stage([reduction](Tensor x, Tensor i, Tensor u) {
      return scatter_elements(x, i, u, 1, reduction);
    })(TensorLayout(DType::f32, {"batch", 3}), TensorLayout(DType::i64, {"batch", 2}),
       TensorLayout(DType::f32, {"batch", 2}));
  };
  const Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor i = i64({0, 0, -1, 1}, {2, 2});
  const Tensor u = f32({10, 20, NAN, 30}, {2, 2});
  EXPECT_THAT(both(scatter("none"), {x, i, u})[0].to_vector<float>().front(), 20);
  const std::vector<float> added = both(scatter("add"), {x, i, u})[0].to_vector<float>();
  EXPECT_EQ(added[0], 31);
  EXPECT_TRUE(std::isnan(added[5]));
  EXPECT_EQ(added[4], 35);
  const std::vector<float> largest = both(scatter("max"), {x, i, u})[0].to_vector<float>();
  EXPECT_EQ(largest[0], 20);
  EXPECT_TRUE(std::isnan(largest[5]));

  // scatter_nd: rows of a [3, 2] i64 tensor by 1-tuples, multiplied; integers wrap.
  const StagedGraph nd = stage([](Tensor t, Tensor idx, Tensor up) {
    return scatter_nd(t, idx, up, "mul");
  })(TensorLayout(DType::i64, {3, 2}), TensorLayout(DType::i64, {2, 1}),
     TensorLayout(DType::i64, {2, 2}));
  const std::int64_t big = std::int64_t{1} << 62;
  const auto out = both(
      nd, {i64({1, 2, 3, 4, 5, 6}, {3, 2}), i64({2, -3}, {2, 1}), i64({4, big, 7, 1}, {2, 2})});
  // 6 * 2^62 = 3 * 2^63 wraps to 2^63, which is INT64_MIN
  EXPECT_THAT(out[0].to_vector<std::int64_t>(),
              ElementsAre(7, 2, 3, 4, 20, std::numeric_limits<std::int64_t>::min()));

  KILN_EXPECT_THROW_MSG(
      CompiledCallable(scatter("none"), {}).run({x, i64({0, 3, 0, 0}, {2, 2}), u}), DeviceError,
      "kiln.scatter_elements", "index 3 is outside [-3, 3)");
  KILN_EXPECT_THROW_MSG(
      reference_run(scatter("none").graph(), {x, i64({0, 3, 0, 0}, {2, 2}), u}, {}), UserError,
      "kiln.scatter_elements", "index 3 is outside [-3, 3)");
  KILN_EXPECT_THROW_MSG(scatter("sum"), UserError, "reduction must be");
}

TEST(Indexing, GatherElementsRefusesIndicesThatMayNotFitOffTheAxis) {
  // Off the axis the indices must fit in x: a dim of another symbol may not, so staging
  // refuses it, naming both shapes.
  KILN_EXPECT_THROW_MSG(stage([](Tensor x, Tensor i) { return gather_elements(x, i, 1); })(
                            TensorLayout(DType::f32, {"a", 2}), TensorLayout(DType::i64, {"b", 1})),
                        UserError, "indices [b, 1] are longer than x [a, 2] at axis 0");
}

TEST(Indexing, TopKOrdersBestFirstTiesByIndexAndNanAboveEverything) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = f32({3, nan, 5, 3, -1, 5, 0, 2}, {2, 4});
  const auto run = [&](std::int64_t k, std::int64_t axis, bool largest) {
    return both(stage([=](Tensor a) {
                  auto [v, i] = top_k(a, k, axis, largest);
                  return std::make_tuple(v, i);
                })(x.layout()),
                {x});
  };
  const std::vector<Tensor> last = run(3, -1, true);
  const std::vector<float> v = last[0].to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_THAT(std::vector<float>(v.begin() + 1, v.end()), ElementsAre(5, 3, 5, 2, 0));
  EXPECT_THAT(last[1].to_vector<std::int64_t>(), ElementsAre(1, 2, 0, 1, 3, 2));
  const std::vector<Tensor> smallest = run(2, 0, false);  // down the columns
  EXPECT_THAT(smallest[1].to_vector<std::int64_t>(), ElementsAre(1, 1, 1, 1, 0, 0, 0, 0));
  // A column holding a NaN: the NaN comes last among the smallest.
  EXPECT_TRUE(std::isnan(smallest[0].to_vector<float>()[5]));
  // Integers exactly, all of them (k = n) and none (k = 0).
  const std::int64_t top = std::numeric_limits<std::int64_t>::max();
  const Tensor ints = i64({top - 1, top, -top, top}, {4});
  const auto all = both(stage([](Tensor a) {
                          auto [vals, ids] = top_k(a, 4);
                          auto [none, none_ids] = top_k(a, 0);
                          return std::make_tuple(vals, ids, none, none_ids);
                        })(ints.layout()),
                        {ints});
  EXPECT_THAT(all[0].to_vector<std::int64_t>(), ElementsAre(top, top, top - 1, -top));
  EXPECT_THAT(all[1].to_vector<std::int64_t>(), ElementsAre(1, 3, 0, 2));
  EXPECT_EQ(all[2].shape(), (Shape{0}));
}

TEST(Indexing, TopKRefusesAKLargerThanTheAxis) {
  KILN_EXPECT_THROW_MSG(
      stage([](Tensor a) { return top_k(a, 5).first; })(TensorLayout(DType::f32, {2, 4})),
      UserError, "k = 5 must be in [0, 4]");
  KILN_EXPECT_THROW_MSG(
      stage([](Tensor a) { return top_k(a, 1).first; })(TensorLayout(DType::bool_, {2, 4})),
      UserError, "top_k is not defined for bool tensors");
  // A symbolic axis: checked when the call has sizes, compiled and in the reference.
  const StagedGraph staged =
      stage([](Tensor a) { return top_k(a, 3).second; })(TensorLayout(DType::f32, {"n"}));
  const Tensor two = f32({1, 2}, {2});
  KILN_EXPECT_THROW_MSG(CompiledCallable(staged, {}).run({two}), DeviceError, "kiln.top_k",
                        "k = 3 is more than the 2 elements along axis 0");
  KILN_EXPECT_THROW_MSG(reference_run(staged.graph(), {two}, {}), UserError, "kiln.top_k",
                        "k = 3 is more than axis 0's 2");
  EXPECT_THAT(
      CompiledCallable(staged, {}).run({f32({4, 1, 3, 9}, {4})})[0].to_vector<std::int64_t>(),
      ElementsAre(3, 0, 2));
}

}  // namespace
}  // namespace kiln
