#include "kiln/compiler/compiled_callable.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <span>

#include "../error_matchers.hpp"
#include "compiler/cpu/vector_math.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/runtime/profiler.hpp"
#include "kiln/stage/nn.hpp"

namespace kiln {
namespace {

using ::testing::ElementsAre;

/// Says in a failure which bf16 path the test checked on this machine.
std::string bf16_path() {
  return std::string("bf16 path: ") +
         (kiln::has_native_bf16() ? "bf16 units" : "f32 GEMMs over bf16-rounded operands") +
         " (cpu_isa " + std::string(kiln::name(kiln::cpu_isa())) + ")";
}

TensorLayout f32(Shape s) { return TensorLayout(DType::f32, std::move(s)); }

/// Tolerance of a comparison with the reference (which computes in double).
double tolerance(DType d) {
  switch (d) {
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1.6e-2;
    case DType::f32:
      return 2e-5;
    default:
      return 0;
  }
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].layout(), want[i].layout()) << what << " output " << i;
    const std::vector<double> g = got[i].to_doubles(), w = want[i].to_doubles();
    const double tol = tolerance(got[i].dtype());
    for (std::size_t k = 0; k < g.size(); ++k) {
      if (std::isnan(w[k])) {
        EXPECT_TRUE(std::isnan(g[k])) << what << " output " << i << " element " << k;
        continue;
      }
      EXPECT_LE(std::fabs(g[k] - w[k]), tol * (1 + std::fabs(w[k])))
          << what << " output " << i << " element " << k << ": " << g[k] << " vs " << w[k];
    }
  }
}

/// Random concrete inputs for the staged graph's input layouts, with symbolic dims sized.
std::vector<Tensor> inputs_for(const StagedGraph& s, std::uint64_t seed,
                               const std::map<std::string, std::int64_t>& sizes = {}) {
  std::vector<Tensor> out;
  for (const TensorLayout& l : s.in_layouts()) {
    std::vector<Dim> dims;
    for (const Dim& d : l.shape.dims())
      dims.emplace_back(d.is_static() ? d.size() : sizes.at(d.symbol()));
    const TensorLayout concrete(l.dtype, Shape(std::move(dims)), l.device);
    out.push_back(l.dtype == DType::bool_ ? Tensor::random(concrete, seed++, 0, 2)
                  : is_floating(l.dtype)  ? Tensor::random(concrete, seed++, -2, 2)
                                          : Tensor::random(concrete, seed++, -5, 5));
  }
  return out;
}

struct OpCase {
  const char* name;
  std::function<StagedGraph()> stage_it;
};

class CompiledMatchesReference : public ::testing::TestWithParam<OpCase> {};

TEST_P(CompiledMatchesReference, OnRandomInputs) {
  const StagedGraph staged = GetParam().stage_it();
  CompiledCallable compiled(staged, {});
  for (std::uint64_t seed : {1, 2}) {
    const std::vector<Tensor> in = inputs_for(staged, seed * 10);
    expect_close(compiled.run(in), reference_run(staged.graph(), in), GetParam().name);
  }
}

template <class F>
std::function<StagedGraph()> staged(F fn, std::vector<TensorLayout> in) {
  return [fn, in] {
    constexpr std::size_t arity = std::tuple_size_v<typename detail::Signature<F>::Args>;
    if constexpr (arity == 1) {
      return stage(fn)(in.at(0));
    } else if constexpr (arity == 2) {
      return stage(fn)(in.at(0), in.at(1));
    } else {
      return stage(fn)(in.at(0), in.at(1), in.at(2));
    }
  };
}

const auto add = [](Tensor a, Tensor b) { return a + b; };

INSTANTIATE_TEST_SUITE_P(
    Ops, CompiledMatchesReference,
    ::testing::Values(
        OpCase{"add_broadcast", staged(add, {f32({2, 1, 3}), f32({4, 1})})},
        OpCase{"add_size0", staged(add, {f32({0, 3}), f32({3})})},
        OpCase{"add_size1", staged(add, {f32({1}), f32({1, 1})})},
        OpCase{"arith_f16", staged([](Tensor a, Tensor b) { return (a * b - a) / (b + 3.0); },
                                   {TensorLayout(DType::f16, {5}), TensorLayout(DType::f16, {5})})},
        OpCase{"arith_bf16",
               staged([](Tensor a, Tensor b) { return maximum(a, b) - minimum(a, b); },
                      {TensorLayout(DType::bf16, {2, 3}), TensorLayout(DType::bf16, {3})})},
        OpCase{"int_div", staged([](Tensor a, Tensor b) { return a / b + a * b; },
                                 {TensorLayout(DType::i32, {7}), TensorLayout(DType::i32, {7})})},
        OpCase{"compare_where", staged([](Tensor a, Tensor b) { return where(a < b, a, b * 2.0); },
                                       {f32({3, 4}), f32({4})})},
        OpCase{"unary", staged(
                            [](Tensor x) {
                              return std::make_tuple(exp(x), tanh(x), sigmoid(x), relu(x), gelu(x),
                                                     gelu(x, "tanh"), silu(x), abs(-x),
                                                     sqrt(abs(x)), log(abs(x) + 1.0),
                                                     rsqrt(abs(x) + 1.0), pow(x, 2));
                            },
                            {f32({2, 5})})},
        OpCase{"cast", staged(
                           [](Tensor x) {
                             return std::make_tuple(cast(x, DType::i32), cast(x, DType::f16),
                                                    cast(x, DType::bool_));
                           },
                           {f32({6})})},
        OpCase{"matmul",
               staged([](Tensor a, Tensor b) { return matmul(a, b); }, {f32({3, 4}), f32({4, 5})})},
        OpCase{"matmul_batched", staged([](Tensor a, Tensor b) { return matmul(a, b); },
                                        {f32({2, 1, 3, 4}), f32({3, 4, 2})})},
        OpCase{"matmul_vector",
               staged([](Tensor a, Tensor b) { return matmul(a, b); }, {f32({4}), f32({4, 3})})},
        OpCase{"transpose_view",
               staged([](Tensor x) { return transpose(x, 0, 2) * 2.0; }, {f32({2, 3, 4})})},
        OpCase{
            "slice_steps",
            staged([](Tensor x) { return slice(slice(x, 1, 1, 6, 2), 0, -2, 10); }, {f32({4, 7})})},
        OpCase{"concat_split", staged(
                                   [](Tensor a, Tensor b) {
                                     const auto parts = split(concat({a, b}, 1), {1, 4}, 1);
                                     return std::make_tuple(parts[0], parts[1]);
                                   },
                                   {f32({2, 2}), f32({2, 3})})},
        OpCase{"broadcast_reshape", staged(
                                        [](Tensor x) {
                                          return reshape(broadcast_to(x, {3, 2, 4}), {6, 4});
                                        },
                                        {f32({2, 1})})},
        OpCase{"reductions", staged(
                                 [](Tensor x) {
                                   return std::make_tuple(sum(x, {1}), mean(x, {0, 2}, true),
                                                          max(x, {2}), min(x), argmax(x, 1));
                                 },
                                 {f32({2, 3, 4})})},
        OpCase{"softmax",
               staged([](Tensor x) { return std::make_tuple(softmax(x, 1), log_softmax(x, 0)); },
                      {f32({3, 5})})},
        OpCase{"norms",
               staged([](Tensor x, Tensor g,
                         Tensor b) { return std::make_tuple(layer_norm(x, g, b), rms_norm(x, g)); },
                      {f32({2, 3, 8}), f32({8}), f32({8})})},
        OpCase{"gather",
               staged([](Tensor x) { return embedding(x, cast(arange(0, 3), DType::i64)); },
                      {f32({4, 2})})}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(CompiledCallable, ATransformerMatchesTheReferenceAndReplaysItsGraph) {
  const nn::TransformerBlock block{.dim = 16, .heads = 2, .hidden = 32};
  const auto model = [&](Tensor x) {
    const auto layer = as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 2; ++i) {
      name_scope s(std::string("layers.").append(std::to_string(i)));
      x = layer(x);
    }
    return x;
  };
  const StagedGraph staged = stage(model)(f32({"batch", "seq", 16}));
  // Deterministic weights for every weight op the module declares.
  std::map<std::string, Tensor> weights;
  std::uint64_t seed = 100;
  for (int i = 0; i < 2; ++i)
    for (const auto& [name, shape] :
         std::vector<std::pair<std::string, Shape>>{{"attn.q.weight", {16, 16}},
                                                    {"attn.q.bias", {16}},
                                                    {"attn.k.weight", {16, 16}},
                                                    {"attn.k.bias", {16}},
                                                    {"attn.v.weight", {16, 16}},
                                                    {"attn.v.bias", {16}},
                                                    {"attn.o.weight", {16, 16}},
                                                    {"attn.o.bias", {16}},
                                                    {"norm1.weight", {16}},
                                                    {"norm1.bias", {16}},
                                                    {"norm2.weight", {16}},
                                                    {"norm2.bias", {16}},
                                                    {"mlp.w1.weight", {16, 32}},
                                                    {"mlp.w1.bias", {32}},
                                                    {"mlp.w2.weight", {32, 16}},
                                                    {"mlp.w2.bias", {16}}})
      weights.emplace("layers." + std::to_string(i) + "." + name,
                      Tensor::random(f32(shape), seed++, -0.3, 0.3));
  CompiledCallable compiled(staged, weights);
  // Every graph of the optimized module once (@main, @block, fused bodies), whatever the
  // number of call sites.
  EXPECT_EQ(compiled.stats().bodies_compiled, compiled.optimized().num_graphs());
  EXPECT_GT(ir::print(compiled.optimized()).find("kiln.fused"), 0u);
  for (std::int64_t batch : {1, 3}) {
    const std::vector<Tensor> in = inputs_for(staged, 7, {{"batch", batch}, {"seq", 5}});
    expect_close(compiled(in[0]), reference_run(staged.graph(), in, weights), "transformer");
    expect_close(compiled(in[0]), reference_run(staged.graph(), in, weights), "transformer again");
  }
  const CompiledCallable::Stats stats = compiled.stats();
  EXPECT_EQ(stats.plans, 2u);         // one per concrete shape
  EXPECT_EQ(stats.graph_builds, 2u);  // recorded once per plan
  EXPECT_EQ(stats.replays, 2u);       // the second call of each shape replayed
  EXPECT_GT(stats.peak_arena_bytes, 0u);
}

// An empty batch or sequence (a dim of size 0) runs every kernel on empty operands: the
// outputs are empty, as the reference's, in f32 and bf16, on one thread and two. (A batched
// matmul divided by the empty batch, and a bf16 one launched no blocks.)
TEST(CompiledCallable, EmptyBatchesAndSequencesGiveEmptyOutputs) {
  const nn::TransformerBlock block{.dim = 32, .heads = 2, .hidden = 64};
  const StagedGraph staged = stage([&](Tensor x) {
    return nn::Linear{.in = 32, .out = 8, .name = "head"}(block(x));
  })(f32({"batch", "seq", 32}));
  std::map<std::string, Tensor> weights;
  std::uint64_t seed = 1;
  for (const auto& [name, type] : module_weights(staged.graph()))
    weights.emplace(name, Tensor::random(TensorLayout(type.dtype, type.shape), seed++, -0.3, 0.3));
  for (const auto precision : {MatmulPrecision::f32, MatmulPrecision::bf16})
    for (int threads : {1, 2}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      CompiledCallable compiled(staged, weights, {.context = ctx, .matmul_precision = precision});
      for (const auto& [batch, seq] : {std::pair{0, 5}, {3, 0}, {0, 0}, {2, 4}}) {
        const std::string what = "batch " + std::to_string(batch) + ", seq " + std::to_string(seq) +
                                 ", threads " + std::to_string(threads) +
                                 (precision == MatmulPrecision::bf16 ? ", bf16" : ", f32");
        const std::vector<Tensor> in = inputs_for(staged, 3, {{"batch", batch}, {"seq", seq}});
        const std::vector<Tensor> got = compiled.run(in);
        const std::vector<Tensor> want = reference_run(staged.graph(), in, weights);
        ASSERT_EQ(got.size(), 1u) << what;
        EXPECT_EQ(got[0].layout(), want[0].layout()) << what;
        EXPECT_EQ(got[0].layout().shape.num_elements(), batch * seq * 8) << what;
        if (batch * seq > 0 && precision == MatmulPrecision::f32) {
          expect_close(got, want, what);
        }
      }
    }
}

TEST(CompiledCallable, WeightProblemsAreNamed) {
  const StagedGraph staged =
      stage([](Tensor x) { return x + weight("b", f32({2})) + weight("c", f32({2})); })(f32({2}));
  KILN_EXPECT_THROW_MSG(
      CompiledCallable(staged,
                       {{"b", Tensor::zeros(f32({3}))}, {"extra", Tensor::zeros(f32({1}))}}),
      UserError, "weight 'c' is missing", "weight 'extra' is not used by the module",
      "weight 'b' is f32[3] on cpu:0 but the module needs f32[2] on cpu:0");
}

TEST(CompiledCallable, ManyWeightProblemsAreCountedNotAllListed) {
  // A whole checkpoint given to a smaller module: twelve weights missing, seven unread.
  const StagedGraph staged = stage([](Tensor x) {
    for (int i = 10; i < 22; ++i)
      x = x + weight(std::string(1, 'w').append(std::to_string(i)), f32({2}));
    return x;
  })(f32({2}));
  std::map<std::string, Tensor> weights;
  for (int i = 0; i < 7; ++i)
    weights.emplace(std::string("extra").append(std::to_string(i)), Tensor::zeros(f32({1})));
  KILN_EXPECT_THROW_MSG(CompiledCallable(staged, weights), UserError, "19 weight problems",
                        "weight 'w19' is missing", "and 2 more;",
                        "7 weights are not used by the module: 'extra0', 'extra1', 'extra2', "
                        "'extra3', 'extra4' and 2 more",
                        "module_weights() lists them");
  try {
    CompiledCallable compiled(staged, weights);
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("w20"), std::string::npos) << what;  // the eleventh missing one
    EXPECT_EQ(what.find("extra5"), std::string::npos) << what;
  }
}

TEST(CompiledCallable, APlanTooBigForMemoryNamesItsLargestValue) {
  // x x^T of a million rows: 4 TiB of output from 4 MiB of input. The call fails with what
  // it needed and where, not with a bare out-of-memory, and the callable stays usable.
  const StagedGraph staged =
      stage([](Tensor x) { return matmul(x, transpose(x, 0, 1)) * 2.0; })(f32({"n", 1}));
  CompiledCallable compiled(staged, {});
  const std::int64_t n = std::int64_t{1} << 20;
  KILN_EXPECT_THROW_MSG(
      compiled(Tensor::zeros(f32({n, 1}))), UserError, "these input shapes need 8192",
      "GiB for the values of one call, more than this machine's memory and swap (",
      "the largest is f32[1048576, 1048576] (4096 GiB)", "made by kiln.matmul",
      "call it with smaller inputs");
  const Tensor small = Tensor::full(f32({2, 1}), 3);
  EXPECT_EQ(compiled(small)[0].to_doubles(), (std::vector<double>{18, 18, 18, 18}));
}

// A callable staged with one static value refuses another that prints alike: it would
// compute with the staged one.
TEST(CompiledCallable, StaticValuesAreCheckedExactly) {
  const StagedGraph staged = stage([](Tensor x, double s) { return x * s; })(f32({2}), 1234567.0);
  CompiledCallable compiled(staged, {});
  const Tensor x = Tensor::full(f32({2}), 1);
  EXPECT_EQ(compiled(x, 1234567.0)[0].to_doubles(), (std::vector<double>{1234567, 1234567}));
  KILN_EXPECT_THROW_MSG(compiled(x, 1234568.0), UserError, "at 1: static value 1234567 vs 1234568");
}

// Integers are exact (i64 above 2^53 included), casts round once, NaN propagates as in
// PyTorch: compiled (fused and not) and reference alike.
// Elementwise ops share compiled programs when they compute the same (op, dtypes,
// attributes): ops that differ only in an attribute or a dtype must not share one.
TEST(CompiledCallable, ElementwiseOpsThatDifferInAnAttributeOrDtypeKeepTheirOwnPrograms) {
  const auto fn = [](Tensor x) {
    const Tensor exact = gelu(x), approximate = gelu(x, "tanh");
    const Tensor to_i32 = cast(cast(x * 100.0, DType::i32), DType::f32);
    const Tensor to_f16 = cast(cast(x * 100.0, DType::f16), DType::f32);
    return std::vector<Tensor>{exact,  approximate, gelu(exact), gelu(approximate, "tanh"),
                               to_i32, to_f16};
  };
  const StagedGraph staged = stage(fn)(TensorLayout(DType::f32, {64}));
  CompiledCallable compiled(staged, {}, {.passes = {}});
  const std::vector<Tensor> in{Tensor::random(TensorLayout(DType::f32, {64}), 7, -3, 3)};
  const std::vector<Tensor> got = compiled.run(in);
  expect_close(got, reference_run(staged.graph(), in), "attributes and dtypes");
  // The pairs differ (else the check above could not tell a shared program).
  EXPECT_NE(got[0].to_vector<float>(), got[1].to_vector<float>());
  EXPECT_NE(got[4].to_vector<float>(), got[5].to_vector<float>());
}

TEST(CompiledCallable, IntegersAreExactAndNanPropagatesAsInPyTorch) {
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  const auto i64 = [](std::vector<std::int64_t> v, Shape s) {
    return Tensor::from_data(v, std::move(s));
  };
  const TensorLayout i64_2x2(DType::i64, {2, 2});
  const StagedGraph ints = stage([](Tensor a, Tensor b) {
    return std::make_tuple(matmul(a, b), equal(a, b), reshape(a, Shape{4}), a + b, maximum(a, b),
                           cast(a, DType::f32), sum(a, {1}));
  })(i64_2x2, i64_2x2);
  const std::int64_t e60 = (std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1;
  const std::vector<Tensor> in = {i64({big, 1, e60, -3}, Shape{2, 2}),
                                  i64({1, 1, big - 1, 0}, Shape{2, 2})};
  for (const bool compiled_side : {true, false}) {
    const std::string what = compiled_side ? "compiled" : "reference";
    const std::vector<Tensor> out = compiled_side ? CompiledCallable(ints, {})(in[0], in[1])
                                                  : reference_run(ints.graph(), in, {});
    const auto v = out[0].to_vector<std::int64_t>();
    EXPECT_EQ(v[0], big + big - 1) << what;          // [2^53+1, 1] . [1, 2^53] exactly
    EXPECT_EQ(out[1].to_doubles()[0], 0.0) << what;  // 2^53+1 != 1
    EXPECT_EQ(out[2].to_vector<std::int64_t>()[0], big) << what;
    EXPECT_EQ(out[3].to_vector<std::int64_t>()[2], e60 + big - 1) << what;
    EXPECT_EQ(out[4].to_vector<std::int64_t>()[0], big) << what;
    // 2^60 + 2^36 + 1 rounds once to 2^60 + 2^37 (through double it became 2^60).
    EXPECT_EQ(out[5].to_vector<float>()[2], 0x1.000002p60f) << what;
    EXPECT_EQ(out[6].to_vector<std::int64_t>()[1], e60 - 3) << what;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const StagedGraph floats = stage([](Tensor a, Tensor b) {
    return std::make_tuple(maximum(a, b), relu(a), argmax(a, 0), max(a, {0}), minimum(b, a),
                           relu(a * 2.0) + 1.0);
  })(f32({4}), f32({4}));
  const std::vector<Tensor> fin = {Tensor::from_data(std::vector<float>{1, nan, 3, -1}, Shape{4}),
                                   Tensor::from_data(std::vector<float>{nan, 1, 2, -2}, Shape{4})};
  for (const bool compiled_side : {true, false}) {
    const std::string what = compiled_side ? "compiled" : "reference";
    const std::vector<Tensor> out = compiled_side ? CompiledCallable(floats, {})(fin[0], fin[1])
                                                  : reference_run(floats.graph(), fin, {});
    const auto mx = out[0].to_vector<float>();
    EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1])) << what;
    EXPECT_EQ(mx[2], 3.0f) << what;
    EXPECT_TRUE(std::isnan(out[1].to_vector<float>()[1])) << what;
    EXPECT_EQ(out[1].to_vector<float>()[3], 0.0f) << what;
    EXPECT_EQ(out[2].to_vector<std::int64_t>()[0], 1) << what;  // the NaN's index
    EXPECT_TRUE(std::isnan(out[3].to_vector<float>()[0])) << what;
    EXPECT_TRUE(std::isnan(out[4].to_vector<float>()[0])) << what;
    EXPECT_TRUE(std::isnan(out[5].to_vector<float>()[1])) << what;  // fused relu
  }
}

TEST(CompiledCallable, CallTimeChecksNameTheLeaf) {
  const StagedGraph staged = stage([](std::tuple<Tensor, int> in, Tensor y) {
    return std::get<0>(in) * double(std::get<1>(in)) + y;
  })(std::tuple<Tensor, int>{f32({"n", 2}), 3}, f32({"n", 2}));
  CompiledCallable compiled(staged, {});
  const Tensor a = Tensor::zeros(f32({4, 2})), b = Tensor::full(f32({4, 2}), 1);
  EXPECT_THAT(compiled(std::tuple<Tensor, int>{a, 3}, b)[0].to_vector<float>(),
              ElementsAre(1, 1, 1, 1, 1, 1, 1, 1));
  KILN_EXPECT_THROW_MSG(compiled(std::tuple<Tensor, int>{a, 4}, b), UserError,
                        "at 0.1: static value 3 vs 4");
  KILN_EXPECT_THROW_MSG(
      compiled(std::tuple<Tensor, int>{Tensor::zeros(TensorLayout(DType::i32, {4, 2})), 3}, b),
      UserError, "input leaf '0.0' is i32[4, 2] on cpu:0 but the staged graph takes f32[n, 2]");
  KILN_EXPECT_THROW_MSG(compiled(std::tuple<Tensor, int>{Tensor::zeros(f32({4, 3})), 3}, b),
                        UserError, "input leaf '0.0' has 3 at axis 1 where the staged graph has 2");
  KILN_EXPECT_THROW_MSG(compiled(std::tuple<Tensor, int>{a, 3}, Tensor::zeros(f32({5, 2}))),
                        UserError, "dim 'n' is 4 at 0.0 axis 0 but 5 at input leaf '1' axis 0");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CompiledCallable, SubgraphBodiesCompileOnceWhateverTheCallSites) {
  const auto count_bodies = [](int layers) {
    const auto layer = [](Tensor x) { return relu(x * 2.0 + 1.0) - x; };
    const auto model = [&](Tensor x) {
      for (int i = 0; i < layers; ++i) x = as_subgraph(layer, {.name = "layer"})(x);
      return x;
    };
    CompiledCallable compiled(stage(model)(f32({8})), {});
    (void)compiled.run({Tensor::random(f32({8}), 1)});
    return compiled.stats().bodies_compiled;
  };
  EXPECT_EQ(count_bodies(2), count_bodies(16));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

/// A small module with a matmul, a fused chain and a symbolic batch dim.
StagedGraph small_model() {
  const auto model = [](Tensor x) {
    const Tensor w = weight("w", f32({4, 4}));
    return relu(matmul(x, w) * 2.0 + 1.0);
  };
  return stage(model)(f32({"batch", 4}));
}

TEST(CompiledCallable, RunsAModuleParsedFromText) {
  const StagedGraph staged = small_model();
  const StagedGraph parsed = StagedGraph::from_module(ir::parse_module(staged.str(), "m.mlir"));
  EXPECT_EQ(parsed.in_layouts(), staged.in_layouts());
  EXPECT_EQ(parsed.in_tree().leaf_paths(), std::vector<std::string>{"0"});
  const std::map<std::string, Tensor> weights{{"w", Tensor::random(f32({4, 4}), 3)}};
  CompiledCallable compiled(parsed, weights);
  const Tensor x = Tensor::random(f32({3, 4}), 4);
  expect_close(compiled.run({x}), reference_run(staged.graph(), {x}, weights), "parsed");
}

// Symbolic dims merged and split by reshapes: [batch, seq, 4] as [batch*seq, 4] rows
// through a matmul and back, and a concat along a symbolic axis ([batch, seq + 1]),
// compiled once for every batch and seq, printed and parsed back, against the reference.
TEST(CompiledCallable, ExpressionDimsMergeAndSplitSymbolicDims) {
  const auto model = [](Tensor x, Tensor first) {  // x: [batch, seq, 4]; first: [batch, 1]
    const Dim batch("batch"), seq("seq");
    const Tensor rows = reshape(x, Shape{batch * seq, 4});
    const Tensor y = reshape(matmul(rows, weight("w", f32({4, 3}))), Shape{batch, seq, 3});
    const Tensor longer = concat({first, sum(x, {2}), first}, 1);  // [batch, seq + 2]
    return std::make_tuple(y, exp(longer));
  };
  const StagedGraph staged = stage(model)(f32({"batch", "seq", 4}), f32({"batch", 1}));
  EXPECT_EQ(staged.out_layouts()[0].shape, (Shape{"batch", "seq", 3}));
  EXPECT_EQ(staged.out_layouts()[1].shape, (Shape{"batch", "seq + 2"}));
  const StagedGraph parsed = StagedGraph::from_module(ir::parse_module(staged.str(), "m.mlir"));
  EXPECT_EQ(parsed.str(), staged.str());
  const std::map<std::string, Tensor> weights{{"w", Tensor::random(f32({4, 3}), 3)}};
  CompiledCallable compiled(parsed, weights);
  for (const auto& [b, q] : {std::pair{2, 5}, std::pair{3, 1}}) {
    const std::vector<Tensor> in{Tensor::random(f32({b, q, 4}), 4), Tensor::random(f32({b, 1}), 5)};
    const std::vector<Tensor> got = compiled.run(in);
    EXPECT_EQ(got[1].shape(), (Shape{b, q + 2}));
    expect_close(got, reference_run(staged.graph(), in, weights), "expression dims");
  }
  // An input's dims are sizes or names: an expression there cannot be bound.
  const StagedGraph bad = stage([](Tensor t) { return t * 2.0; })(f32({"2*n", 3}));
  KILN_EXPECT_THROW_MSG(CompiledCallable(bad, {}), UserError, "dim '2*n'", "must be single names");
}

TEST(CompiledCallable, OpByOpExecutionComputesTheSame) {
  const StagedGraph staged = small_model();
  const std::map<std::string, Tensor> weights{{"w", Tensor::random(f32({4, 4}), 3)}};
  CompiledCallable graph(staged, weights);
  CompiledCallable op_by_op(staged, weights, {.passes = {}, .replay_graph = false});
  const Tensor x = Tensor::random(f32({5, 4}), 9);
  expect_close(op_by_op.run({x}), graph.run({x}), "op by op");
  EXPECT_EQ(op_by_op.stats().graph_builds, 1u);  // planned (and recorded) once, not replayed
}

TEST(CompiledCallable, PlanDotAndProfilesNameTheOps) {
  const StagedGraph staged = small_model();
  CompiledCallable compiled(staged, {{"w", Tensor::random(f32({4, 4}), 3)}});
  const Tensor x = Tensor::random(f32({2, 4}), 1);
  const std::string dot = compiled.plan_dot({x});
  EXPECT_NE(dot.find("kiln.matmul"), std::string::npos) << dot;
  EXPECT_NE(dot.find("kiln.fused @fused_"), std::string::npos) << dot;
  EXPECT_NE(dot.find("compiled_callable_test.cpp:"), std::string::npos) << dot;
  KILN_EXPECT_THROW_MSG(compiled.plan_dot({Tensor::random(f32({2, 5}), 1)}), UserError,
                        "has 5 at axis 1");

  auto profiler = std::make_shared<Profiler>();
  compiled.context()->set_profiler(profiler);
  (void)compiled.run({x});
  (void)compiled.run({x});
  compiled.context()->set_profiler(nullptr);
  const std::vector<ProfileEvent> events = profiler->events();
  ASSERT_EQ(events.size(), 2u);  // matmul with the fused epilogue inside it, twice
  EXPECT_EQ(std::string(events[0].name.data()).substr(0, 11), "kiln.matmul");
  EXPECT_NE(std::string(events[0].name.data()).find("+ kiln.fused @fused_"), std::string::npos)
      << events[0].name.data();
  EXPECT_EQ(events[1].replay, 1u);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CompiledCallable, KernelsSplitOverWorkersComputeWhatTheReferenceDoes) {
  // Big enough that matmul, the fused chains, softmax and the norms split into blocks.
  const auto model = [](Tensor x, Tensor w, Tensor bias, Tensor gamma, Tensor beta) {
    const Tensor h = gelu(matmul(x, w) + bias, "tanh") * 0.5 + 1.0;  // [3, 40, 384]
    const Tensor p = softmax(h, -1) + log_softmax(h * 0.1, -1);
    const Tensor n = layer_norm(h, gamma, beta) + rms_norm(p, gamma);
    return std::make_tuple(n, silu(permute(n, {0, 2, 1})));
  };
  const StagedGraph staged =
      stage(model)(f32({3, 40, 256}), f32({256, 384}), f32({384}), f32({384}), f32({384}));
  const std::vector<Tensor> in = inputs_for(staged, 5);
  for (int threads : {1, 3}) {
    auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
    CompiledCallable compiled(staged, {}, {.context = ctx});
    const std::string dot = compiled.plan_dot(in);
    if (threads > 1) {
      for (const char* op : {"kiln.matmul", "kiln.fused", "kiln.softmax", "kiln.layer_norm"}) {
        const std::size_t at = dot.find(op);
        ASSERT_NE(at, std::string::npos) << op;
        EXPECT_NE(dot.find("grid (1, 1, 1)", at), dot.find("grid", at)) << op << " did not split";
      }
    }
    expect_close(compiled.run(in), reference_run(staged.graph(), in, {}),
                 "threads " + std::to_string(threads));
  }
}

TEST(CompiledCallable, BroadcastsAlongTrailingDimsFillWholeRuns) {
  // A per-channel scale over [N, C, H, W] (squeeze-and-excitation), a per-row one over
  // [N, C, H, W] broadcast along W only, and one broadcast along H but not W: the tile
  // program reads a broadcast input as runs of one value across every trailing dim it is
  // broadcast along (whole planes for the first), and must land each run exactly where
  // the output's tiles start and end (planes of 7x7 do not divide tiles of 512).
  // Inputs constant over whole runs of 16 or more (planes here, with two such inputs of
  // different batch dims in one body) are read as one value a tile, tiles ending with runs;
  // not when another input in the body varies along those dims (a row of W).
  const auto model = [](Tensor x, Tensor s, Tensor r, Tensor h, Tensor u, Tensor t, Tensor w) {
    return std::make_tuple(x * s + 1.0, x - r, x * h, u - x * s, x * t + w);
  };
  const StagedGraph staged =
      stage(model)(f32({3, 40, 7, 7}), f32({3, 40, 1, 1}), f32({3, 40, 7, 1}), f32({1, 1, 7, 1}),
                   f32({1, 40, 1, 1}), f32({3, 40, 1, 1}), f32({7}));
  const std::vector<Tensor> in = inputs_for(staged, 11);
  for (int threads : {1, 3}) {
    auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
    CompiledCallable compiled(staged, {}, {.context = ctx});
    expect_close(compiled.run(in), reference_run(staged.graph(), in, {}),
                 "threads " + std::to_string(threads));
  }
}

TEST(CompiledCallable, ReductionsAndCopiesSplitOverWorkersComputeWhatTheReferenceDoes) {
  // f32 reductions over one run of axes (rows, columns, a middle run) and over two runs
  // (the general path), an i32 one; concat, transpose, slice, split and gather, big
  // enough to split over three workers.
  const auto model = [](Tensor x, Tensor y, Tensor table, Tensor ids, Tensor xi) {
    return std::make_tuple(sum(x, {2}), mean(x, {0}), max(x, {1}), min(x, {1, 2}), sum(x, {0, 2}),
                           mean(x, {0, 1}, true), max(x, {0}), min(x, {2}), sum(xi, {1}),
                           concat({x, y}, 1), permute(x, {2, 0, 1}), slice(x, 1, 8, 56),
                           split(x, {20, 44}, 1)[1], gather(table, ids, 0));
  };
  const StagedGraph staged =
      stage(model)(f32({16, 64, 192}), f32({16, 32, 192}), f32({1000, 192}),
                   TensorLayout(DType::i64, {32, 64}), TensorLayout(DType::i32, {16, 64, 192}));
  std::vector<Tensor> in = inputs_for(staged, 17);
  in[3] = Tensor::random(TensorLayout(DType::i64, {32, 64}), 3, 0, 1000);  // valid rows
  const std::vector<Tensor> want = reference_run(staged.graph(), in, {});
  for (int threads : {1, 3}) {
    auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
    CompiledCallable compiled(staged, {}, {.context = ctx});
    if (threads > 1) {
      const std::string dot = compiled.plan_dot(in);
      for (const char* op :
           {"kiln.reduce_sum", "kiln.reduce_mean", "kiln.reduce_max", "kiln.reduce_min",
            "kiln.concat", "kiln.transpose", "kiln.gather", "kiln.slice", "kiln.split"}) {
        bool split_up = false;  // some launch of op has more than one block
        for (std::size_t at = dot.find(op); at != std::string::npos; at = dot.find(op, at + 1))
          split_up = split_up || dot.find("grid (1, 1, 1)", at) != dot.find("grid", at);
        EXPECT_TRUE(split_up) << op << " did not split:\n" << dot;
      }
    }
    for (int call = 0; call < 2; ++call)
      expect_close(compiled.run(in), want, "threads " + std::to_string(threads));
  }
}

TEST(CompiledCallable, ElementwiseOpsAfterAMatmulRunAsItsEpilogue) {
  // Bias, activation and residual after a Linear layer; a scale after a batched matmul; a
  // matmul whose input dies at the matmul (k == n: the arena could place the epilogue's
  // output over it, which must not happen while later tiles still read it).
  const auto model = [](Tensor x, Tensor w, Tensor bias, Tensor r, Tensor q, Tensor k) {
    const Tensor linear = gelu(matmul(tanh(x), w) + bias, "tanh") + r;
    const Tensor scores = matmul(q, k) * 0.125;
    return std::make_tuple(linear, scores);
  };
  const StagedGraph staged =
      stage(model)(f32({"b", 24, 320}), f32({320, 320}), f32({320}), f32({"b", 24, 320}),
                   f32({"b", 4, 24, 16}), f32({"b", 4, 16, 24}));
  for (std::int64_t b : {1, 5}) {  // few rows: tiles split columns; many rows: rows
    const std::vector<Tensor> in = inputs_for(staged, 11, {{"b", b}});
    const std::vector<Tensor> want = reference_run(staged.graph(), in, {});
    for (int threads : {1, 3}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      CompiledCallable fused(staged, {}, {.context = ctx});
      const std::string what = "b " + std::to_string(b) + ", threads " + std::to_string(threads);
      expect_close(fused.run(in), want, what);
      EXPECT_EQ(fused.stats().epilogues, 2u) << what;
      EXPECT_EQ(fused.stats().epilogues_in_gemm, 1u) << what;  // the scale: sgemm's alpha
      // tanh, then two matmuls with their epilogues inside them.
      EXPECT_EQ(fused.stats().launches, 3u) << what;
      CompiledCallable separate(staged, {}, {.context = ctx, .fuse_epilogues = false});
      expect_close(separate.run(in), want, what + ", not fused");
      EXPECT_EQ(separate.stats().epilogues, 0u) << what;
      EXPECT_EQ(separate.stats().launches, 5u) << what;
    }
  }
}

TEST(CompiledCallable, MatmulsOfWeightsPackThemOnceAndRunEpiloguesAsPostOps) {
  // Weights packed once per plan for oneDNN; epilogues that are chains of post-ops (a bias
  // row, a residual, scalars, activations) run inside the GEMM, others after each tile:
  // a product with a column too, which oneDNN 2.6 has only in its reference kernels.
  // 50 rows: three uneven row bands on three threads. (The exact GELU: the tanh form is a
  // post-op only where kiln's vector copy is AVX-512's, see packed_matmul.cpp.)
  const auto model = [](Tensor x, Tensor r, Tensor col) {
    const TensorLayout square = f32({320, 320});
    const Tensor w = weight("w", square), bias = weight("bias", f32({320}));
    const Tensor residual = gelu(matmul(x, w) + bias) + r;
    const Tensor gated = silu(matmul(x, transpose(weight("wt", square))) * col);
    const Tensor reversed = relu(bias - matmul(x, weight("w2", square)));  // not post-ops
    const Tensor scaled = matmul(x, weight("w3", square)) * 0.5 - 1.0;
    return std::make_tuple(residual, gated, reversed, scaled);
  };
  const StagedGraph staged =
      stage(model)(f32({"b", 50, 320}), f32({"b", 50, 320}), f32({"b", 50, 1}));
  std::map<std::string, Tensor> weights;
  std::uint64_t seed = 40;
  for (const char* name : {"w", "wt", "w2", "w3"})
    weights[name] = Tensor::random(f32({320, 320}), ++seed, -0.1, 0.1);
  weights["bias"] = Tensor::random(f32({320}), ++seed);
  for (std::int64_t b : {1, 4}) {
    const std::vector<Tensor> in = inputs_for(staged, 13, {{"b", b}});
    const std::vector<Tensor> want = reference_run(staged.graph(), in, weights);
    for (int threads : {1, 3}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      const std::string what = "b " + std::to_string(b) + ", threads " + std::to_string(threads);
      CompiledCallable packed(staged, weights, {.context = ctx});
      for (int call = 0; call < 2; ++call) expect_close(packed.run(in), want, what);
      EXPECT_EQ(packed.stats().packed_matmuls, 4u) << what;
      EXPECT_EQ(packed.stats().epilogues, 4u) << what;
      EXPECT_EQ(packed.stats().epilogues_in_gemm, 2u) << what;
      CompiledCallable plain(staged, weights, {.context = ctx, .prepack_weights = false});
      expect_close(plain.run(in), want, what + ", not packed");
      EXPECT_EQ(plain.stats().packed_matmuls, 0u) << what;
      EXPECT_EQ(plain.stats().epilogues_in_gemm, 0u) << what;
    }
  }
}

TEST(CompiledCallable, PackedMatmulsOfFewRowsPerWorkerSplitTheColumns) {
  // 14 rows on 2 and 3 workers (fewer than 16 per worker): column bands of whole groups of
  // 16 columns (242 columns, 16 groups: 8 + 8 on two workers, 5 + 5 + 6 on three), the last
  // band clipped to the 242nd column, each with its own part of the weight packed. Scalar
  // and bias post-ops run inside each band's GEMM (each band its part of the bias); a
  // residual (a tensor) and a product with a column run after each band, on its columns.
  const auto model = [](Tensor x, Tensor r, Tensor col) {
    const Tensor bias = weight("bias", f32({242}));
    const Tensor residual = gelu(matmul(x, weight("w", f32({320, 242}))) + bias) + r;
    const Tensor gated = silu(matmul(x, transpose(weight("wt", f32({242, 320})))) * col);
    const Tensor scaled = matmul(x, weight("w3", f32({320, 242}))) * 0.5 - 1.0;
    const Tensor biased = relu(matmul(x, weight("w4", f32({320, 242}))) + bias);
    return std::make_tuple(residual, gated, scaled, biased);
  };
  const StagedGraph staged = stage(model)(f32({"b", 320}), f32({"b", 242}), f32({"b", 1}));
  const std::map<std::string, Tensor> weights = {
      {"w", Tensor::random(f32({320, 242}), 1, -0.1, 0.1)},
      {"wt", Tensor::random(f32({242, 320}), 2, -0.1, 0.1)},
      {"w3", Tensor::random(f32({320, 242}), 3, -0.1, 0.1)},
      {"w4", Tensor::random(f32({320, 242}), 5, -0.1, 0.1)},
      {"bias", Tensor::random(f32({242}), 4)}};
  const std::vector<Tensor> in = inputs_for(staged, 21, {{"b", 14}});
  const std::vector<Tensor> want = reference_run(staged.graph(), in, weights);
  for (int threads : {1, 2, 3}) {
    auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
    const std::string what = "threads " + std::to_string(threads);
    CompiledCallable compiled(staged, weights, {.context = ctx});
    for (int call = 0; call < 2; ++call) expect_close(compiled.run(in), want, what);
    EXPECT_EQ(compiled.stats().packed_matmuls, 4u) << what;
    EXPECT_EQ(compiled.stats().epilogues, 4u) << what;
    // One row band takes the residual as a post-op too; column bands the scalars. The
    // bias + relu runs after each band: oneDNN's relu makes a NaN 0.
    EXPECT_EQ(compiled.stats().epilogues_in_gemm, threads == 1 ? 2u : 1u) << what;
  }
}

TEST(CompiledCallable, MatmulsOfFewRowsRunAsColumnPanelsSplitOverWorkers) {
  // A batch-1 MLP: rows 1..4 run as panels of 64 columns (200 columns: three full panels
  // and a tail) split over the workers (three blocks: 600 x 200 floats), with bias + relu run on
  // each block's columns; a weight read through a transpose is packed; 5 rows take the GEMM path.
  const auto model = [](Tensor x) {
    const Tensor h = relu(matmul(x, weight("w1", f32({600, 200}))) + weight("b1", f32({200})));
    const Tensor t = matmul(h, transpose(weight("w2", f32({150, 200}))));
    return std::make_tuple(h, t * 2.0);
  };
  const StagedGraph staged = stage(model)(f32({"b", 600}));
  std::map<std::string, Tensor> weights = {{"w1", Tensor::random(f32({600, 200}), 1, -0.1, 0.1)},
                                           {"b1", Tensor::random(f32({200}), 2)},
                                           {"w2", Tensor::random(f32({150, 200}), 3, -0.1, 0.1)}};
  // The right operand as an input too: read in place when row-major, not when transposed.
  const auto inputs_model = [](Tensor x, Tensor w, Tensor wt) {
    return std::make_tuple(matmul(x, w) + 1.0, matmul(x, transpose(wt)));
  };
  const StagedGraph staged_inputs =
      stage(inputs_model)(f32({"b", 300}), f32({300, 200}), f32({200, 300}));
  for (std::int64_t b : {1, 2, 3, 4, 5}) {
    const std::vector<Tensor> in = inputs_for(staged, 30 + b, {{"b", b}});
    const std::vector<Tensor> want = reference_run(staged.graph(), in, weights);
    const std::vector<Tensor> in2 = inputs_for(staged_inputs, 40 + b, {{"b", b}});
    const std::vector<Tensor> want2 = reference_run(staged_inputs.graph(), in2, {});
    for (int threads : {1, 3}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      const std::string what = "b " + std::to_string(b) + ", threads " + std::to_string(threads);
      for (bool pack : {true, false}) {
        CompiledCallable compiled(staged, weights, {.context = ctx, .prepack_weights = pack});
        for (int call = 0; call < 2; ++call)
          expect_close(compiled.run(in), want, what + (pack ? "" : ", not packed"));
        // Not packed, the transposed weight's columns are strided: the GEMM path.
        EXPECT_EQ(compiled.stats().skinny_matmuls, b > 4 ? 0u : pack ? 2u : 1u) << what;
        EXPECT_EQ(compiled.stats().epilogues, 2u) << what;
      }
      CompiledCallable compiled(staged_inputs, {}, {.context = ctx});
      expect_close(compiled.run(in2), want2, what + ", right operands as inputs");
      EXPECT_EQ(compiled.stats().skinny_matmuls, b > 4 ? 0u : 1u) << what;
    }
  }
}

/// \p t with every element rounded to bfloat16 (an f32 tensor).
Tensor rounded_to_bf16(const Tensor& t) {
  std::vector<float> v;
  for (double x : t.to_doubles())
    v.push_back(compiler::vmath::from_bf16(compiler::vmath::to_bf16(static_cast<float>(x))));
  return Tensor::from_data(std::span<const float>(v), t.shape());
}

/// The largest absolute difference between the elements of \p a and \p b.
double max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  double most = 0;
  for (std::size_t i = 0; i < x.size(); ++i) most = std::max(most, std::fabs(x[i] - y[i]));
  return most;
}

TEST(CompiledCallable, Bf16MatmulsRoundTheWeightsOnceAndSumInF32) {
  // Linear layers (bias + GELU, then a transposed weight, + 0.5). Batch 1-4: column panels of
  // bf16 weights with f32 activations, so the reference on bf16-rounded weights agrees up
  // to summation order. Batch 40: oneDNN's bf16 GEMM, activations rounded too, so within
  // bf16's error of that reference. Both differ from the f32 result: bf16 was used.
  const auto model = [](Tensor x) {
    const Tensor h = gelu(matmul(x, weight("w1", f32({300, 200}))) + weight("b1", f32({200})));
    return matmul(h, transpose(weight("w2", f32({150, 200})))) + 0.5;
  };
  const StagedGraph staged = stage(model)(f32({"b", 300}));
  const auto model_h = [](Tensor x) {
    const Tensor h = gelu(matmul(x, weight("w1", f32({300, 200}))) + weight("b1", f32({200})));
    return std::make_tuple(matmul(h, transpose(weight("w2", f32({150, 200})))) + 0.5, h);
  };
  const StagedGraph staged_h = stage(model_h)(f32({"b", 300}));
  std::map<std::string, Tensor> weights = {{"w1", Tensor::random(f32({300, 200}), 1, -0.1, 0.1)},
                                           {"b1", Tensor::random(f32({200}), 2)},
                                           {"w2", Tensor::random(f32({150, 200}), 3, -0.1, 0.1)}};
  std::map<std::string, Tensor> rounded = weights;
  for (const char* name : {"w1", "w2"}) rounded[name] = rounded_to_bf16(weights[name]);
  for (std::int64_t b : {1, 3, 40}) {
    const std::vector<Tensor> in = inputs_for(staged, 60 + b, {{"b", b}});
    const Tensor want = reference_run(staged.graph(), in, rounded)[0];
    const Tensor f32_result = reference_run(staged.graph(), in, weights)[0];
    for (int threads : {1, 2}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      const std::string what = "b " + std::to_string(b) + ", threads " + std::to_string(threads);
      CompiledCallable compiled(staged, weights,
                                {.context = ctx, .matmul_precision = MatmulPrecision::bf16});
      const Tensor got = compiled.run(in)[0];
      if (b <= 4) {
        expect_close({got}, {want}, what);
      } else {
        EXPECT_LT(max_difference(got, want), 0.02) << what;
      }
      EXPECT_GT(max_difference(got, f32_result), 1e-4) << what;
      EXPECT_EQ(compiled.stats().bf16_matmuls, 2u) << what;
      EXPECT_EQ(compiled.stats().skinny_matmuls, b <= 4 ? 2u : 0u) << what;
      // At batch 40 the first layer hands h to the second in bf16; returning h too keeps
      // it f32 (rounded by the second layer instead): the same bits either way.
      EXPECT_EQ(compiled.stats().bf16_handoffs, (b <= 4 ? 0u : 1u)) << what << "; " << bf16_path();
      CompiledCallable with_h(staged_h, weights,
                              {.context = ctx, .matmul_precision = MatmulPrecision::bf16});
      const std::vector<Tensor> both = with_h.run(in);
      EXPECT_EQ(with_h.stats().bf16_handoffs, 0u) << what;
      EXPECT_EQ(max_difference(both[0], got), 0.0) << what;
    }
  }
  KILN_EXPECT_THROW_MSG(
      CompiledCallable(staged, weights,
                       {.prepack_weights = false, .matmul_precision = MatmulPrecision::bf16}),
      UserError, "needs prepack_weights = true");
}

TEST(CompiledCallable, Bf16LayersOfManyRowsRunAsChunksOfRows) {
  // bf16 GEMMs run as chunks of at most 256 KiB of A's rows (64 rows of 2048 here): 150
  // rows make chunks of 64, 64 and 22 on one thread, more and smaller on 2 and 3. A bias
  // + GELU epilogue, hand-overs in bf16 (each chunk reads its own rows), a layer whose
  // epilogue adds a residual (a tensor each chunk reads its own rows of): within bf16's
  // error of the reference, and the same bits on every thread count.
  const auto model = [](Tensor x) {
    const Tensor n = layer_norm(x, weight("g", f32({2048})), weight("be", f32({2048})));
    const Tensor h = gelu(matmul(n, weight("w1", f32({2048, 96}))) + weight("b1", f32({96})));
    const Tensor y = matmul(h, weight("w2", f32({96, 2048})));
    return matmul(y, weight("w3", f32({2048, 40}))) + slice(x, 1, 0, 40);
  };
  const StagedGraph staged = stage(model)(f32({"b", 2048}));
  const std::map<std::string, Tensor> weights = {
      {"w1", Tensor::random(f32({2048, 96}), 1, -0.05, 0.05)},
      {"b1", Tensor::random(f32({96}), 2)},
      {"g", Tensor::random(f32({2048}), 5)},
      {"be", Tensor::random(f32({2048}), 6)},
      {"w2", Tensor::random(f32({96, 2048}), 3, -0.1, 0.1)},
      {"w3", Tensor::random(f32({2048, 40}), 4, -0.05, 0.05)}};
  const std::vector<Tensor> in = inputs_for(staged, 7, {{"b", 150}});
  const Tensor want = reference_run(staged.graph(), in, weights)[0];
  std::optional<Tensor> first;
  for (int threads : {1, 2, 3}) {
    auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
    const std::string what = "threads " + std::to_string(threads);
    CompiledCallable compiled(staged, weights,
                              {.context = ctx, .matmul_precision = MatmulPrecision::bf16});
    const Tensor got = compiled.run(in)[0];
    EXPECT_LT(max_difference(got, want), 0.05) << what;
    EXPECT_GT(max_difference(got, want), 1e-5) << what;
    EXPECT_EQ(compiled.stats().bf16_matmuls, 3u) << what;
    // n (in pieces of 1024), h, y
    EXPECT_EQ(compiled.stats().bf16_handoffs, 3u) << what;
    if (first && kiln::has_native_bf16()) {
      EXPECT_EQ(max_difference(got, *first), 0.0) << what << "; " << bf16_path();
    } else if (first) {  // f32 GEMMs may sum in another order for other row bands
      EXPECT_LT(max_difference(got, *first), 1e-5) << what << "; " << bf16_path();
    } else {
      first = got;
    }
  }
}

TEST(CompiledCallable, Bf16AttentionMatmulsReadTheirViewsAndApplyTheScale) {
  // Attention over head views (a transposed K): the scores' 1/sqrt(d) applied as the
  // operand is rounded (read on each call), the context's epilogue (+ 1) after the GEMM,
  // tiles along the batch (along the heads at batch 1, in uneven tiles on 3 threads), each
  // in chunks of at most 1 MiB of operands (two batch entries here: at batch 3, chunks of
  // 2 and 1 on one thread); within bf16's error of the f32 reference, and not equal to it.
  const auto model = [](Tensor q, Tensor k, Tensor v) {
    const Dim b = q.shape().dims()[0];
    const auto heads = [&](const Tensor& t) {
      return permute(reshape(t, Shape{b, 128, 4, 32}), {0, 2, 1, 3});  // [b, 4, 128, 32]
    };
    const Tensor scores = matmul(heads(q), transpose(heads(k), -1, -2)) * 0.25;
    return matmul(softmax(scores, -1), heads(v)) + 1.0;
  };
  const StagedGraph staged =
      stage(model)(f32({"b", 128, 128}), f32({"b", 128, 128}), f32({"b", 128, 128}));
  // Returning the probabilities too keeps them f32: without bf16 units the context's GEMM
  // then rounds them itself, instead of reading the rows the softmax wrote rounded.
  const StagedGraph with_probabilities = stage([](Tensor q, Tensor k, Tensor v) {
    const Dim b = q.shape().dims()[0];
    const auto heads = [&](const Tensor& t) {
      return permute(reshape(t, Shape{b, 128, 4, 32}), {0, 2, 1, 3});
    };
    const Tensor p = softmax(matmul(heads(q), transpose(heads(k), -1, -2)) * 0.25, -1);
    return std::make_tuple(matmul(p, heads(v)) + 1.0, p);
  })(f32({"b", 128, 128}), f32({"b", 128, 128}), f32({"b", 128, 128}));
  for (std::int64_t b : {1, 3}) {
    const std::vector<Tensor> in = inputs_for(staged, 80 + b, {{"b", b}});
    const Tensor want = reference_run(staged.graph(), in, {})[0];
    for (int threads : {1, 2, 3}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      const std::string what =
          "b " + std::to_string(b) + ", threads " + std::to_string(threads) + "; " + bf16_path();
      CompiledCallable compiled(staged, {},
                                {.context = ctx, .matmul_precision = MatmulPrecision::bf16});
      const Tensor got = compiled.run(in)[0];
      EXPECT_LT(max_difference(got, want), 0.02) << what;
      EXPECT_GT(max_difference(got, want), 1e-6) << what;
      EXPECT_EQ(compiled.stats().bf16_matmuls, 2u) << what;
      EXPECT_EQ(compiled.stats().epilogues_in_gemm, 1u) << what;  // the scale
      EXPECT_EQ(compiled.stats().bf16_handoffs, kiln::has_native_bf16() ? 0u : 1u) << what;
      CompiledCallable kept(with_probabilities, {},
                            {.context = ctx, .matmul_precision = MatmulPrecision::bf16});
      const std::vector<Tensor> both = kept.run(in);
      EXPECT_EQ(kept.stats().bf16_handoffs, 0u) << what;
      EXPECT_EQ(max_difference(both[0], got), 0.0) << what;  // the same bits either way
    }
  }
}

TEST(CompiledCallable, Bf16NormsHandTheirRowsToTheLayersThatReadThem) {
  // A layer norm read only by three bf16 layers (attention's Q, K, V) and an RMS norm read
  // by one: each writes its rows as bf16 for them (one rounding, not one per layer), the
  // same bits as when the layers round an f32 output themselves (the model that also
  // returns the norms, whose outputs must stay f32). A norm that an add reads too keeps f32.
  const auto qkv = [](const Tensor& x) {
    const Tensor n = layer_norm(x, weight("g", f32({96})), weight("be", f32({96})));
    const Tensor q = matmul(n, weight("wq", f32({96, 64}))),
                 k = matmul(n, weight("wk", f32({96, 64})));
    const Tensor v = matmul(n, weight("wv", f32({96, 64})));
    const Tensor r = rms_norm(q * k + v, weight("gr", f32({64})));
    return std::make_tuple(n, r, matmul(r, weight("wo", f32({64, 32}))));
  };
  const StagedGraph staged = stage([&](Tensor x) { return std::get<2>(qkv(x)); })(f32({"b", 96}));
  const StagedGraph with_norms = stage(qkv)(f32({"b", 96}));
  const StagedGraph norm_added = stage([&](Tensor x) {
    const auto [n, r, out] = qkv(x);
    return std::make_tuple(out, sum(n, {1}));  // n read by more than the layers
  })(f32({"b", 96}));
  const StagedGraph in_epilogue = stage([](Tensor x) {  // n read by the layer's epilogue too
    const Tensor n = layer_norm(x, weight("g", f32({96})), weight("be", f32({96})));
    return matmul(n, weight("ws", f32({96, 96}))) + n;
  })(f32({"b", 96}));
  std::map<std::string, Tensor> weights;
  std::uint64_t seed = 90;
  for (const auto& [name, shape] :
       std::vector<std::pair<std::string, Shape>>{{"g", Shape{96}},
                                                  {"be", Shape{96}},
                                                  {"gr", Shape{64}},
                                                  {"wq", Shape{96, 64}},
                                                  {"wk", Shape{96, 64}},
                                                  {"wv", Shape{96, 64}},
                                                  {"wo", Shape{64, 32}}})
    weights[name] = Tensor::random(f32(shape), ++seed, -0.3, 0.3);
  const std::vector<Tensor> in = inputs_for(staged, 99, {{"b", 40}});
  const Tensor f32_result = reference_run(staged.graph(), in, weights)[0];
  for (int threads : {1, 2}) {
    auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
    const CompileOptions bf16{.context = ctx, .matmul_precision = MatmulPrecision::bf16};
    const std::string what = "threads " + std::to_string(threads);
    CompiledCallable compiled(staged, weights, bf16), kept(with_norms, weights, bf16),
        added(norm_added, weights, bf16);
    const Tensor got = compiled.run(in)[0];
    const std::vector<Tensor> both = kept.run(in);
    EXPECT_EQ(compiled.stats().bf16_handoffs, 2u) << what;
    EXPECT_EQ(kept.stats().bf16_handoffs, 0u) << what;
    EXPECT_EQ(max_difference(both[2], got), 0.0) << what;
    const std::vector<Tensor> with_sum = added.run(in);
    EXPECT_EQ(max_difference(with_sum[0], got), 0.0) << what;
    expect_close({with_sum[1]}, {reference_run(norm_added.graph(), in, weights)[1]}, what);
    EXPECT_EQ(added.stats().bf16_handoffs, 1u)
        << what << "; " << bf16_path();  // the RMS norm's only
    const std::map<std::string, Tensor> some = {
        {"g", weights.at("g")},
        {"be", weights.at("be")},
        {"ws", Tensor::random(f32({96, 96}), 98, -0.3, 0.3)}};
    CompiledCallable residual(in_epilogue, some, bf16);
    EXPECT_LT(max_difference(residual.run(in)[0], reference_run(in_epilogue.graph(), in, some)[0]),
              0.05)
        << what;
    EXPECT_EQ(residual.stats().bf16_handoffs, 0u) << what;
    expect_close({both[0]}, {reference_run(with_norms.graph(), in, weights)[0]}, what);
    EXPECT_LT(max_difference(got, f32_result), 0.05) << what;
    EXPECT_GT(max_difference(got, f32_result), 1e-5) << what;
  }
}

TEST(CompiledCallable, MatmulsOfFewRowsOverEmptyOperands) {
  // k = 0: sums of nothing are zeros; n = 0 or m = 0: nothing to compute. Weights packed
  // or not.
  const auto model = [](Tensor x) {
    return std::make_tuple(matmul(x, weight("empty_k", f32({0, 70}))) + 1.0,
                           matmul(slice(x, 0, 0, 0), weight("w", f32({0, 70}))),
                           matmul(relu(weight("v", f32({2, 3}))), weight("empty_n", f32({3, 0}))));
  };
  const StagedGraph staged = stage(model)(f32({3, 0}));
  const std::map<std::string, Tensor> weights = {{"empty_k", Tensor::random(f32({0, 70}), 1)},
                                                 {"w", Tensor::random(f32({0, 70}), 2)},
                                                 {"v", Tensor::random(f32({2, 3}), 3)},
                                                 {"empty_n", Tensor::random(f32({3, 0}), 4)}};
  const std::vector<Tensor> in = inputs_for(staged, 5);
  const std::vector<Tensor> want = reference_run(staged.graph(), in, weights);
  for (bool pack : {true, false}) {
    auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{2});
    CompiledCallable compiled(staged, weights, {.context = ctx, .prepack_weights = pack});
    expect_close(compiled.run(in), want, pack ? "packed" : "not packed");
    EXPECT_EQ(compiled.stats().skinny_matmuls, 2u);  // not the one of no rows
  }
}

TEST(CompiledCallable, ReshapesAndTransposesIntoMatmulsCopyNothing) {
  // Attention's head split: reshape, then transposes read by matmuls (plain, transposed,
  // and through a second transpose); the merge reshapes a transposed tensor, which needs
  // a real copy; a transpose read by an elementwise op and a returned one are copies too.
  const auto model = [](Tensor q, Tensor k, Tensor v, Tensor w) {
    const Dim b = q.shape().dims()[0];
    const auto heads = [&](const Tensor& t) {
      return permute(reshape(t, Shape{b, 6, 2, 8}), {0, 2, 1, 3});  // [b, 2, 6, 8]
    };
    const Tensor scores = matmul(heads(q), transpose(heads(k), -1, -2));  // [b, 2, 6, 6]
    const Tensor context = matmul(scores, heads(v));                      // [b, 2, 6, 8]
    const Tensor merged = reshape(permute(context, {0, 2, 1, 3}), Shape{b, 6, 16});
    const Tensor projected = matmul(merged, transpose(w));  // w^T: [16, 16]
    return std::make_tuple(projected, relu(transpose(w)), transpose(w, 0, 1));
  };
  const StagedGraph staged =
      stage(model)(f32({"b", 6, 16}), f32({"b", 6, 16}), f32({"b", 6, 16}), f32({16, 16}));
  for (std::int64_t b : {1, 3}) {
    const std::vector<Tensor> in = inputs_for(staged, 21, {{"b", b}});
    const std::vector<Tensor> want = reference_run(staged.graph(), in, {});
    for (int threads : {1, 3}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      CompiledCallable compiled(staged, {}, {.context = ctx, .passes = {}});
      const std::string what = "b " + std::to_string(b) + ", threads " + std::to_string(threads);
      expect_close(compiled.run(in), want, what);
      // Views: 3 head reshapes, 3 head transposes, k's second transpose, the merge reshape
      // (of the context transpose's copy) and w^T into the projection.
      EXPECT_EQ(compiled.stats().views, 9u) << what;
    }
  }
}

TEST(CompiledCallable, AMatmulResultReadTwiceOrReturnedIsNotAnEpilogueInput) {
  const auto model = [](Tensor x, Tensor w) {
    const Tensor y = matmul(x, w);
    return std::make_tuple(y, relu(y));  // y is an output: the relu cannot run inside
  };
  const StagedGraph staged = stage(model)(f32({8, 16}), f32({16, 16}));
  const std::vector<Tensor> in = inputs_for(staged, 3);
  CompiledCallable compiled(staged, {});
  expect_close(compiled.run(in), reference_run(staged.graph(), in, {}), "returned");
  EXPECT_EQ(compiled.stats().epilogues, 0u);
  EXPECT_EQ(compiled.stats().launches, 2u);
}

}  // namespace
}  // namespace kiln
