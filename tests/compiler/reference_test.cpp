// The reference interpreter against values worked out by hand: it is the oracle for the
// compiler, so its own expectations must not come from any other kiln code.

#include "kiln/compiler/reference.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::Pointwise;

TensorLayout f32(Shape s) { return TensorLayout(DType::f32, std::move(s)); }

Tensor data(std::vector<float> v, Shape s) { return Tensor::from_data(v, std::move(s)); }

// Stages \p fn for \p layouts and runs the reference interpreter on \p inputs.
template <class F>
std::vector<Tensor> run(F fn, std::vector<Tensor> inputs, std::vector<TensorLayout> layouts,
                        const std::map<std::string, Tensor>& weights = {}) {
  constexpr std::size_t arity = std::tuple_size_v<typename detail::Signature<F>::Args>;
  StagedGraph staged = [&] {
    if constexpr (arity == 1) {
      return stage(fn)(layouts.at(0));
    } else if constexpr (arity == 2) {
      return stage(fn)(layouts.at(0), layouts.at(1));
    } else {
      return stage(fn)(layouts.at(0), layouts.at(1), layouts.at(2));
    }
  }();
  return reference_run(staged.graph(), inputs, weights);
}

TEST(Reference, BroadcastingArithmetic) {
  const auto out = run([](Tensor a, Tensor b) { return a * b + a; },
                       {data({1, 2}, {2, 1}), data({10, 20, 30}, {3})}, {f32({2, 1}), f32({3})});
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(11, 21, 31, 22, 42, 62));
}

TEST(Reference, MatmulBatchedAndVector) {
  const auto out = run([](Tensor a, Tensor b) { return matmul(a, b); },
                       {data({1, 2, 3, 4, 5, 6}, {2, 3}), data({1, 0, 0, 1, 1, 1}, {3, 2})},
                       {f32({2, 3}), f32({3, 2})});
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(4, 5, 10, 11));  // [1+3, 2+3], [4+6, 5+6]
  const auto vec =
      run([](Tensor a, Tensor v) { return matmul(a, v); },
          {data({1, 2, 3, 4, 5, 6}, {2, 3}), data({1, 1, 1}, {3})}, {f32({2, 3}), f32({3})});
  EXPECT_EQ(vec[0].shape(), (Shape{2}));
  EXPECT_THAT(vec[0].to_vector<float>(), ElementsAre(6, 15));
}

TEST(Reference, SoftmaxNormsAndReductions) {
  const auto sm =
      run([](Tensor x) { return softmax(x, -1); }, {data({0, 0, std::log(2.0f)}, {3})}, {f32({3})});
  EXPECT_THAT(sm[0].to_vector<float>(),
              Pointwise(::testing::FloatNear(1e-6), std::vector<float>{0.25f, 0.25f, 0.5f}));
  const auto ln = run([](Tensor x, Tensor g, Tensor b) { return layer_norm(x, g, b, 0.0001); },
                      {data({1, 3}, {2}), data({2, 2}, {2}), data({1, 1}, {2})},
                      {f32({2}), f32({2}), f32({2})});
  // mean 2, variance 1: (x - 2) / sqrt(1 + 1e-4) * 2 + 1
  const double s = 2 / std::sqrt(1.0001);
  EXPECT_THAT(ln[0].to_vector<float>(), ElementsAre(::testing::FloatNear(float(1 - s), 1e-6),
                                                    ::testing::FloatNear(float(1 + s), 1e-6)));
  const auto red = run(
      [](Tensor x) {
        return std::make_tuple(sum(x, {1}), mean(x, {0}, true), max(x), argmax(x, 1));
      },
      {data({1, 5, 3, 4, 2, 6}, {2, 3})}, {f32({2, 3})});
  EXPECT_THAT(red[0].to_vector<float>(), ElementsAre(9, 12));
  EXPECT_EQ(red[1].shape(), (Shape{1, 3}));
  EXPECT_THAT(red[1].to_vector<float>(), ElementsAre(2.5, 3.5, 4.5));
  EXPECT_THAT(red[2].to_vector<float>(), ElementsAre(6));
  EXPECT_THAT(red[3].to_vector<std::int64_t>(), ElementsAre(1, 2));
}

TEST(Reference, DataMovement) {
  const Tensor x = data({0, 1, 2, 3, 4, 5}, {2, 3});
  const auto out = run(
      [](Tensor t) {
        return std::make_tuple(transpose(t), slice(t, 1, 0, 3, 2), concat({t, t}, 0),
                               split(t, {1, 2}, 1)[1], broadcast_to(slice(t, 0, 0, 1), {2, 3}));
      },
      {x}, {f32({2, 3})});
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(out[1].to_vector<float>(), ElementsAre(0, 2, 3, 5));
  EXPECT_THAT(out[2].to_vector<float>(), ElementsAre(0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5));
  EXPECT_THAT(out[3].to_vector<float>(), ElementsAre(1, 2, 4, 5));
  EXPECT_THAT(out[4].to_vector<float>(), ElementsAre(0, 1, 2, 0, 1, 2));
  const auto g = run([](Tensor table, Tensor ids) { return embedding(table, ids); },
                     {x, Tensor::from_data(std::vector<std::int64_t>{1, 0, 1}, {3})},
                     {f32({2, 3}), TensorLayout(DType::i64, {3})});
  EXPECT_THAT(g[0].to_vector<float>(), ElementsAre(3, 4, 5, 0, 1, 2, 3, 4, 5));
  KILN_EXPECT_THROW_MSG(run([](Tensor table, Tensor ids) { return embedding(table, ids); },
                            {x, Tensor::from_data(std::vector<std::int64_t>{2}, {1})},
                            {f32({2, 3}), TensorLayout(DType::i64, {1})}),
                        UserError, "index 2 is outside [0, 2)");
}

TEST(Reference, DtypesRoundAsTheirStorage) {
  const auto ints =
      run([](Tensor a, Tensor b) { return std::make_tuple(a / b, cast(a, DType::f32) * 0.5); },
          {Tensor::from_data(std::vector<std::int32_t>{7, -7, 5}, {3}),
           Tensor::from_data(std::vector<std::int32_t>{2, 2, 0}, {3})},
          {TensorLayout(DType::i32, {3}), TensorLayout(DType::i32, {3})});
  EXPECT_THAT(ints[0].to_vector<std::int32_t>(), ElementsAre(3, -3, 0));  // truncation, x / 0 = 0
  EXPECT_THAT(ints[1].to_vector<float>(), ElementsAre(3.5, -3.5, 2.5));
  const auto cast_down = run(
      [](Tensor a) { return std::make_tuple(cast(a, DType::i32), cast(a, DType::f16), a > 0.0); },
      {data({2.7f, -2.7f, 1.0f / 3}, {3})}, {f32({3})});
  EXPECT_THAT(cast_down[0].to_vector<std::int32_t>(), ElementsAre(2, -2, 0));
  EXPECT_EQ(static_cast<float>(cast_down[1].to_vector<Half>()[2]), 0.333251953125f);  // nearest f16
  EXPECT_EQ(cast_down[2].dtype(), DType::bool_);
  EXPECT_THAT(cast_down[2].to_doubles(), ElementsAre(1, 0, 1));
}

TEST(Reference, ActivationsMatchTheirFormulas) {
  const auto out = run(
      [](Tensor x) {
        return std::make_tuple(relu(x), gelu(x), gelu(x, "tanh"), silu(x),
                               where(x > 0.0, x, x * 2));
      },
      {data({-1, 0.5}, {2})}, {f32({2})});
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(0, 0.5));
  EXPECT_FLOAT_EQ(out[1].to_vector<float>()[0], float(-0.5 * (1 + std::erf(-1 / std::sqrt(2.0)))));
  EXPECT_FLOAT_EQ(out[2].to_vector<float>()[1],
                  float(0.25 * (1 + std::tanh(std::sqrt(2 / M_PI) * (0.5 + 0.044715 * 0.125)))));
  EXPECT_FLOAT_EQ(out[3].to_vector<float>()[0], float(-1 / (1 + std::exp(1.0))));
  EXPECT_THAT(out[4].to_vector<float>(), ElementsAre(-2, 0.5));
}

TEST(Reference, WeightsFollowCallPrefixesAndSymbolicDimsMustAgree) {
  const auto layer = [](Tensor x) { return x + weight("b", f32({2})); };
  const auto fn = [&](Tensor x) {
    for (int i = 0; i < 2; ++i)
      x = as_subgraph(layer,
                      {.name = "layer", .prefix = std::string("l").append(std::to_string(i))})(x);
    return x;
  };
  const StagedGraph staged = stage(fn)(f32({"n", 2}));
  const std::map<std::string, Tensor> weights{{"l0.b", data({1, 2}, {2})},
                                              {"l1.b", data({10, 20}, {2})}};
  const auto out = reference_run(staged.graph(), {data({0, 0, 1, 1, 2, 2}, {3, 2})}, weights);
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(11, 22, 12, 23, 13, 24));
  KILN_EXPECT_THROW_MSG(
      reference_run(staged.graph(), {data({0, 0}, {1, 2})}, {{"l0.b", data({1, 2}, {2})}}),
      UserError, "weight 'l1.b' is missing");
  KILN_EXPECT_THROW_MSG(
      reference_run(staged.graph(), {data({0, 0}, {1, 2})},
                    {{"l0.b", data({1, 2, 3}, {3})}, {"l1.b", data({1, 2}, {2})}}),
      UserError, "weight 'l0.b' is f32[3] on cpu:0 but the graph needs f32[2]");
  const StagedGraph two = stage([](Tensor a, Tensor b) { return a + b; })(f32({"n"}), f32({"n"}));
  KILN_EXPECT_THROW_MSG(reference_run(two.graph(), {data({1, 2}, {2}), data({1, 2, 3}, {3})}),
                        UserError, "dim 'n' is 2 elsewhere but 3 at axis 0 of input 1");
}

}  // namespace
}  // namespace kiln
