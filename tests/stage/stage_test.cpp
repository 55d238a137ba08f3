#include "kiln/stage/stage.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "../error_matchers.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/stage/nn.hpp"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TensorLayout f32(Shape s) { return TensorLayout(DType::f32, std::move(s)); }

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string at_line(int line) { return "stage_test.cpp:" + std::to_string(line); }

Tensor scale(Tensor x) { return x * 2; }

TEST(Stage, TheIssueExampleStagesAndPrintsMlir) {
  auto staged = stage(scale)(TensorLayout(DType::f32, {4}, Device::cpu()));
  const std::string text = staged.str();
  EXPECT_THAT(text, HasSubstr("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32>"));
  EXPECT_THAT(text, HasSubstr("\"kiln.constant\"() {value = dense<\"0x00000040\"> : tensor<f32>}"));
  EXPECT_THAT(text, HasSubstr("\"kiln.mul\"(%arg0, %0)"));
  EXPECT_EQ(staged.in_layouts(), (std::vector<TensorLayout>{f32({4})}));
  EXPECT_EQ(staged.out_layouts(), (std::vector<TensorLayout>{f32({4})}));
  EXPECT_EQ(staged.in_tree().str(), "(Tensor)");
  EXPECT_EQ(staged.out_tree().str(), "Tensor");
  EXPECT_TRUE(ir::verify(staged.graph()).empty());
  EXPECT_EQ(ir::print(ir::parse_module(text)), text);
  EXPECT_TRUE(staged.signal_device_ids().empty());
  EXPECT_FALSE(staged.signal_buffer_index().has_value());  // inputs are the layouts' shards
}

TEST(Stage, SymbolicDimsFlowThroughOps) {
  auto staged = stage([](Tensor x, Tensor w) { return softmax(matmul(x, w), -1); })(
      f32({"batch", 512}), f32({512, 10}));
  EXPECT_EQ(staged.out_layouts()[0], f32({"batch", 10}));
}

TEST(StagePromotion, FollowsTheDocumentedRules) {
  const auto out_dtype = [](auto fn, TensorLayout a, TensorLayout b) {
    return stage(fn)(std::move(a), std::move(b)).out_layouts()[0].dtype;
  };
  const auto add = [](Tensor a, Tensor b) { return a + b; };
  EXPECT_EQ(out_dtype(add, {DType::i8, {2}}, {DType::u8, {2}}), DType::i32);
  EXPECT_EQ(out_dtype(add, {DType::f16, {2}}, {DType::bf16, {2}}), DType::f32);
  EXPECT_EQ(out_dtype(add, {DType::i64, {2}}, {DType::f16, {2}}), DType::f16);
  EXPECT_EQ(out_dtype(add, {DType::i32, {2}}, {DType::i64, {2}}), DType::i64);
  EXPECT_EQ(out_dtype(add, {DType::bool_, {2}}, {DType::i8, {2}}), DType::i8);
  const auto scalar_dtype = [](DType in, auto fn) {
    return stage(fn)(TensorLayout(in, {2})).out_layouts()[0].dtype;
  };
  EXPECT_EQ(scalar_dtype(DType::bf16, [](Tensor x) { return x * 3; }), DType::bf16);
  EXPECT_EQ(scalar_dtype(DType::i32, [](Tensor x) { return x + 1; }), DType::i32);
  EXPECT_EQ(scalar_dtype(DType::i32, [](Tensor x) { return x * 0.5; }), DType::f32);
  EXPECT_EQ(scalar_dtype(DType::bool_, [](Tensor x) { return x + 1; }), DType::i64);
  EXPECT_EQ(scalar_dtype(DType::i32, [](Tensor x) { return exp(x); }), DType::f32);
  EXPECT_EQ(scalar_dtype(DType::f32, [](Tensor x) { return x < 0.5; }), DType::bool_);
  const std::string text =
      stage([](Tensor a, Tensor b) { return a * b; })(TensorLayout(DType::i32, {2}), f32({2}))
          .str();
  EXPECT_THAT(text, HasSubstr("\"kiln.cast\"(%arg0) {dtype = f32}"));
}

TEST(StageOps, ShapesOfTheTensorApi) {
  const auto shape_of = [](auto fn, TensorLayout in) {
    return stage(fn)(std::move(in)).out_layouts()[0].shape;
  };
  const TensorLayout x = f32({"b", 6, 8});
  EXPECT_EQ(shape_of([](Tensor t) { return slice(t, 2, 1, 7, 2); }, x), (Shape{"b", 6, 3}));
  EXPECT_EQ(shape_of([](Tensor t) { return slice(t, 1, -2, 100); }, x), (Shape{"b", 2, 8}));
  EXPECT_EQ(shape_of([](Tensor t) { return split(t, {3, 5}, -1)[1]; }, x), (Shape{"b", 6, 5}));
  EXPECT_EQ(shape_of([](Tensor t) { return concat({t, t}, 1); }, x), (Shape{"b", 12, 8}));
  EXPECT_EQ(shape_of([](Tensor t) { return transpose(t, 0, 2); }, x), (Shape{8, 6, "b"}));
  EXPECT_EQ(shape_of([](Tensor t) { return permute(t, {1, 2, 0}); }, x), (Shape{6, 8, "b"}));
  EXPECT_EQ(shape_of([](Tensor t) { return reshape(t, {"b", 48}); }, x), (Shape{"b", 48}));
  EXPECT_EQ(shape_of([](Tensor t) { return sum(t, {1}, true); }, x), (Shape{"b", 1, 8}));
  EXPECT_EQ(shape_of([](Tensor t) { return mean(t); }, x), (Shape{}));
  EXPECT_EQ(shape_of([](Tensor t) { return argmax(t, -1); }, x), (Shape{"b", 6}));
  EXPECT_EQ(shape_of(
                [](Tensor t) {
                  return broadcast_to(slice(t, 1, 0, 1), {"b", 6, 8});
                },
                x),
            (Shape{"b", 6, 8}));
  EXPECT_EQ(shape_of(
                [](Tensor ids) {
                  return embedding(weight("emb", f32({100, 16})), ids);
                },
                TensorLayout(DType::i64, {"b", "seq"})),
            (Shape{"b", "seq", 16}));
  EXPECT_EQ(shape_of([](Tensor t) { return where(t > 0.0, t, t * 0.1); }, x), (Shape{"b", 6, 8}));
  EXPECT_EQ(shape_of([](Tensor t) { return t + cast(arange(0, 8), DType::f32); }, x),
            (Shape{"b", 6, 8}));
  EXPECT_EQ(
      shape_of([](Tensor t) { return layer_norm(t, weight("g", f32({8})), weight("b", f32({8}))); },
               x),
      (Shape{"b", 6, 8}));
  EXPECT_EQ(
      shape_of([](Tensor t) { return log_softmax(gelu(silu(sigmoid(tanh(relu(abs(-t)))))), 1); },
               x),
      (Shape{"b", 6, 8}));
}

TEST(StageErrors, NameTheOpTheShapesAndTheUsersLine) {
  const std::string matmul_at = at_line(__LINE__ + 1);
  const auto bad_matmul = [](Tensor a, Tensor b) { return matmul(a, b); };
  KILN_EXPECT_THROW_MSG(stage(bad_matmul)(f32({2, 3}), f32({4, 5})), UserError, "kiln.matmul at ",
                        matmul_at.c_str(),
                        "matmul of [2, 3] by [4, 5]: inner dimensions differ (3 vs 4)",
                        "(operands: f32[2, 3] on cpu:0, f32[4, 5] on cpu:0)");
  const std::string add_at = at_line(__LINE__ + 1);
  const auto bad_add = [](Tensor a, Tensor b) { return a + b; };
  KILN_EXPECT_THROW_MSG(stage(bad_add)(f32({2, 3}), f32({4})), UserError, "kiln.add at ",
                        add_at.c_str(), "shapes [2, 3] and [4] do not broadcast");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) { return sum(a, {3}); })(f32({2, 3})), UserError,
                        "kiln.reduce_sum", "axis 3 is out of range for rank 2");
}

TEST(StageErrors, EveryOpFamilyRejectsBadOperandsWithItsName) {
  const auto fails = [](auto fn, std::vector<TensorLayout> in, const char* fragment) {
    try {
      if (in.size() == 1) {
        stage([&](Tensor a) { return fn(a, a); })(in[0]);
      } else {
        stage(fn)(in[0], in[1]);
      }
      ADD_FAILURE() << "staged without error; expected: " << fragment;
    } catch (const UserError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  fails([](Tensor a, Tensor) { return slice(a, 0, 0, 4, 0); }, {f32({4})},
        "step 0 at axis 0 must be >= 1");
  fails([](Tensor a, Tensor) { return slice(a, 2, 0, 1); }, {f32({4})}, "axis 2 is out of range");
  fails(
      [](Tensor a, Tensor b) {
        return concat({a, b}, 0);
      },
      {f32({2, 3}), f32({2, 4})}, "operand 1 [2, 4] differs from operand 0 [2, 3] at axis 1");
  fails([](Tensor a, Tensor b) { return gather(a, b, 0); }, {f32({5, 3}), f32({2})},
        "indices (operand 1) must be i32 or i64, got f32");
  fails([](Tensor a, Tensor b) { return layer_norm(a, b, b); }, {f32({2, 8}), f32({4})},
        "operand 1 has shape [4]; it must be [8]");
  fails([](Tensor a, Tensor b) { return where(a, b, b); }, {f32({2}), f32({2})},
        "the condition (operand 0) must be bool, got f32");
  fails([](Tensor a, Tensor) { return reshape(a, {5}); }, {f32({2, 3})},
        "cannot reshape [2, 3] to [5]");
  fails([](Tensor a, Tensor) { return permute(a, {0}); }, {f32({2, 3})},
        "has 1 entries for a tensor of rank 2");
  fails([](Tensor a, Tensor) { return split(a, {1, 1}, 0)[0]; }, {f32({3})}, "sum to 2 but axis 0");
  fails([](Tensor a, Tensor) { return broadcast_to(a, {2, 4}); }, {f32({3})}, "do not broadcast");
  fails([](Tensor a, Tensor) { return argmax(a, 1); }, {f32({3})},
        "axis 1 is out of range for rank 1");
  fails([](Tensor a, Tensor b) { return matmul(a, b); }, {f32({3}), f32({})}, "rank >= 1");
  fails([](Tensor a, Tensor b) { return a + b; },
        {TensorLayout(DType::f32, {2}, Device::cuda(0)), f32({2})},
        "operand 1 is on cpu:0 but operand 0 is on cuda:0");
}

TEST(StageTrees, ArraysAndPairsOfTensors) {
  const auto fn = [](std::array<Tensor, 3> xs, std::pair<Tensor, bool> p) {
    return std::array<Tensor, 2>{xs[0] + xs[1], p.second ? xs[2] * p.first : xs[2]};
  };
  const StagedGraph staged = stage(fn)(std::array<Tensor, 3>{f32({2}), f32({2}), f32({2})},
                                       std::pair<Tensor, bool>{f32({2}), true});
  EXPECT_EQ(staged.in_tree().str(), "([Tensor, Tensor, Tensor], (Tensor, true))");
  EXPECT_EQ(staged.out_tree().leaf_paths(), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(staged.in_layouts().size(), 4u);
}

TEST(StageErrors, NonTensorsWhereTensorsBelong) {
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) { return std::make_tuple(a, Tensor()); })(f32({2})),
                        UserError, "output leaf '1' is an empty Tensor");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) { return a + Tensor(f32({2})); })(f32({2})), UserError,
                        "operand 1 is a placeholder (f32[2] on cpu:0)");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) { return a; })(Tensor()), UserError,
                        "input leaf '0' is an empty Tensor");
  Tensor escaped;
  stage([&](Tensor a) {
    escaped = a * 3;
    return a;
  })(f32({2}));
  KILN_EXPECT_THROW_MSG(stage([&](Tensor a) { return a + escaped; })(f32({2})), UserError,
                        "comes from a staging run that has finished");
  KILN_EXPECT_THROW_MSG(relu(escaped), UserError, "no function is being staged");
}

TEST(StageConstants, CapturedTensorsAreEmbeddedOnce) {
  const Tensor bias = Tensor::constant({1, 2, 3}, {3});
  const std::string text = stage([&](Tensor x) { return x + bias + bias; })(f32({3})).str();
  EXPECT_EQ(count(text, "\"kiln.constant\""), 1u) << text;
  EXPECT_THAT(text, HasSubstr("dense<\"0x0000803F0000004000004040\"> : tensor<3xf32>"));
  KILN_EXPECT_THROW_MSG(Tensor::constant({1, 2}, {3}), UserError, "2 values for shape [3]");
}

// ---- trees -----------------------------------------------------------------------------

struct Params {
  Tensor w;
  int heads;
  std::vector<Tensor> extra;
};

}  // namespace
}  // namespace kiln

KILN_TREE(kiln::Params, w, heads, extra)

namespace kiln {
namespace {

TEST(StageTrees, NestedInputsAndOutputsWithStaticValuesAndLeafPaths) {
  using In = std::tuple<Tensor, std::map<std::string, Tensor>, std::optional<Tensor>, Params, int>;
  auto fn = [](In in) {
    auto& [x, dict, maybe, params, n] = in;
    Tensor y = x * dict.at("scale") + params.w;
    if (maybe) y = y + *maybe;
    for (const Tensor& e : params.extra) y = y + e;
    return std::make_pair(y, std::map<std::string, Tensor>{{"doubled", y * double(n)}});
  };
  const In in{
      f32({4}), {{"scale", f32({4})}}, Tensor(f32({4})), Params{f32({4}), 8, {f32({4})}}, 2};
  const StagedGraph staged = stage(fn)(in);
  EXPECT_EQ(
      staged.in_tree().str(),
      "((Tensor, {scale: Tensor}, some(Tensor), kiln::(anonymous namespace)::Params{w: Tensor, "
      "heads: 8, extra: [Tensor]}, 2))");
  EXPECT_EQ(staged.in_tree().leaf_paths(),
            (std::vector<std::string>{"0.0", "0.1.scale", "0.2", "0.3.w", "0.3.extra.0"}));
  EXPECT_EQ(staged.in_layouts().size(), 5u);
  EXPECT_EQ(staged.out_tree().str(), "(Tensor, {doubled: Tensor})");
  EXPECT_EQ(staged.out_tree().leaf_paths(), (std::vector<std::string>{"0", "1.doubled"}));

  // Static values are part of the tree: another value is another tree.
  In other = in;
  std::get<4>(other) = 3;
  const StagedGraph again = stage(fn)(other);
  EXPECT_NE(again.in_tree(), staged.in_tree());
  EXPECT_EQ(staged.in_tree().difference(again.in_tree()), "at 0.4: static value 2 vs 3");
  std::get<2>(other) = std::nullopt;
  EXPECT_EQ(staged.in_tree().difference(stage(fn)(other).in_tree()),
            "at 0.2: some(Tensor) vs none");
}

// ---- weights ---------------------------------------------------------------------------

// Static values are exact: 1234567.0 and 1234568.0 (which print alike at 6 digits) differ,
// as do -0.0 and 0.0, and a float never equals a double.
TEST(StageTrees, StaticValuesCompareExactly) {
  const auto fn = [](Tensor x, double s) { return x * s; };
  const StagedGraph a = stage(fn)(f32({2}), 1234567.0);
  const StagedGraph b = stage(fn)(f32({2}), 1234568.0);
  EXPECT_NE(a.in_tree(), b.in_tree());
  EXPECT_EQ(a.in_tree().difference(b.in_tree()), "at 1: static value 1234567 vs 1234568");
  EXPECT_NE(stage(fn)(f32({2}), 0.1).in_tree(), stage(fn)(f32({2}), 0.1000001).in_tree());
  EXPECT_NE(stage(fn)(f32({2}), -0.0).in_tree(), stage(fn)(f32({2}), 0.0).in_tree());
  EXPECT_EQ(stage(fn)(f32({2}), 0.1).in_tree(), stage(fn)(f32({2}), 0.1).in_tree());
  const auto ffn = [](Tensor x, float s) { return x * double(s); };
  const std::string d = a.in_tree().difference(stage(ffn)(f32({2}), 1234567.0f).in_tree());
  EXPECT_EQ(d, "at 1: static double 1234567 vs float 1234567");
  const auto ifn = [](Tensor x, std::int64_t n) { return x * double(n); };
  EXPECT_NE(stage(ifn)(f32({2}), std::int64_t{1} << 60).in_tree(),
            stage(ifn)(f32({2}), (std::int64_t{1} << 60) + 1).in_tree());
}

// A C++ scalar beside an integer tensor must be that integer exactly: one the dtype cannot
// hold, or above 2^53 (where the double it arrived as may have rounded), is refused rather
// than saturated or rounded.
TEST(StageErrors, IntegerScalarsThatDoNotFitAreRefused) {
  const TensorLayout i32({DType::i32, {2}}), i64({DType::i64, {2}});
  KILN_EXPECT_THROW_MSG(stage([](Tensor x) { return x + 3000000000.0; })(i32), UserError,
                        "add at ");
  KILN_EXPECT_THROW_MSG(stage([](Tensor x) { return x + 3000000000.0; })(i32), UserError,
                        "the scalar 3000000000 does not fit the i32 tensor beside it");
  KILN_EXPECT_THROW_MSG(stage([](Tensor x) { return x * 9007199254740993.0; })(i64), UserError,
                        "is 2^53 or more, where a C++ double");
  EXPECT_NO_THROW(stage([](Tensor x) { return x + 3000000000.0; })(i64));
  EXPECT_NO_THROW(stage([](Tensor x) { return x * 0.5; })(i32));  // f32, as documented
}

TEST(StageWeights, NamesFollowScopesAndRepeatDeclarationsShareOneValue) {
  const std::string text = stage([](Tensor x) {
                             name_scope layers("layers");
                             name_scope three("3");
                             const Tensor w = weight("w", f32({4, 4}));
                             return matmul(matmul(x, w), weight("w", f32({4, 4})));
                           })(f32({2, 4}))
                               .str();
  EXPECT_EQ(count(text, "\"kiln.weight\""), 1u) << text;
  EXPECT_THAT(text, HasSubstr("{name = \"layers.3.w\"}"));
  const auto conflicting = [](Tensor x) {
    const Tensor first = weight("w", f32({4}));
    return x + first + weight("w", f32({5}));
  };
  KILN_EXPECT_THROW_MSG(stage(conflicting)(f32({4})), UserError,
                        "weight 'w' was declared as f32[4] on cpu:0 and now as f32[5]");
  KILN_EXPECT_THROW_MSG(weight("w", f32({4})), UserError, "no function is being staged");
}

// ---- subgraphs -------------------------------------------------------------------------

// The seed's stage-level prefix: given once, it names every weight the function declares,
// in scopes and in subgraph calls, and the printed module carries the full names.
TEST(StageWeights, AStageLevelPrefixNamesEveryWeight) {
  const auto layer = as_subgraph(
      [](Tensor x) {
        return matmul(x, weight("w", f32({4, 4})));
      },
      {.name = "layer"});
  const auto fn = [&](Tensor x) {
    const Tensor y = x * weight("scale", f32({4}));
    name_scope scope("layers.0");
    return layer(y) + weight("b", f32({4}));
  };
  const std::string text = stage(fn, {.prefix = "encoder"})(f32({2, 4})).str();
  EXPECT_THAT(text, HasSubstr("name = \"encoder.scale\""));
  EXPECT_THAT(text, HasSubstr("name = \"encoder.layers.0.b\""));
  EXPECT_THAT(text, HasSubstr("kiln.prefix = \"encoder.layers.0\""));  // + "w" in @layer
  EXPECT_THAT(text, HasSubstr("name = \"w\""));
  EXPECT_THAT(stage(fn)(f32({2, 4})).str(), HasSubstr("name = \"scale\""));
  // The weights by their full names: what a checkpoint of the encoder holds.
  const StagedGraph staged = stage(fn, {.prefix = "encoder"})(f32({2, 4}));
  std::vector<float> eye(16, 0.0f);
  for (int i = 0; i < 4; ++i) eye[static_cast<std::size_t>(i * 5)] = 1.0f;
  CompiledCallable compiled(staged, {{"encoder.scale", Tensor::full(f32({4}), 2)},
                                     {"encoder.layers.0.w", Tensor::from_data(eye, Shape{4, 4})},
                                     {"encoder.layers.0.b", Tensor::full(f32({4}), 1)}});
  EXPECT_EQ(compiled(Tensor::full(f32({2, 4}), 3))[0].to_doubles(), std::vector<double>(8, 7.0));
}

// The seed's subgraph_cache: two staged graphs (an encoder and a decoder) sharing one
// cache trace their shared block once; each module still holds every body it calls, so
// each prints, parses and compiles alone.
TEST(StageSubgraphs, StagedGraphsSharingACacheTraceASharedBodyOnce) {
  int traced = 0;
  const auto block = as_subgraph(
      [&](Tensor x) {
        ++traced;
        return relu(matmul(x, weight("w", f32({4, 4}))));
      },
      {.name = "block"});
  const auto inner = as_subgraph([](Tensor x) { return x * 2.0; }, {.name = "inner"});
  const auto encoder = [&](Tensor x) {
    name_scope scope("layers.0");
    return block(x);
  };
  const auto decoder = [&](Tensor x) {
    const Tensor h = inner(x);  // the decoder's own @inner first, then the shared @block
    name_scope scope("layers.0");
    return block(h) + 1.0;
  };
  SubgraphCache cache;
  const StagedGraph enc =
      stage(encoder, {.prefix = "encoder", .subgraph_cache = &cache})(f32({2, 4}));
  const StagedGraph dec =
      stage(decoder, {.prefix = "decoder", .subgraph_cache = &cache})(f32({2, 4}));
  EXPECT_EQ(traced, 1);
  EXPECT_EQ(cache.size(), 2u);  // @block and @inner
  for (const StagedGraph* s : {&enc, &dec}) {
    const std::string text = s->str();
    EXPECT_EQ(count(text, "func.func private @block("), 1u) << text;
    EXPECT_TRUE(ir::verify(ir::parse_module(text)).empty()) << text;
  }
  EXPECT_THAT(dec.str(), HasSubstr("kiln.prefix = \"decoder.layers.0\""));
  const Tensor x = Tensor::full(f32({2, 4}), 1);
  std::vector<float> eye(16, 0.0f);
  for (int i = 0; i < 4; ++i) eye[static_cast<std::size_t>(i * 5)] = 1.0f;
  CompiledCallable e(enc, {{"encoder.layers.0.w", Tensor::from_data(eye, Shape{4, 4})}});
  CompiledCallable d(dec, {{"decoder.layers.0.w", Tensor::from_data(eye, Shape{4, 4})}});
  EXPECT_EQ(e(x)[0].to_doubles(), std::vector<double>(8, 1.0));
  EXPECT_EQ(d(x)[0].to_doubles(), std::vector<double>(8, 3.0));
  // Without the cache (the default), each stage call traces its own bodies.
  stage(encoder)(f32({2, 4}));
  EXPECT_EQ(traced, 2);
  // A cached body whose symbol this module already uses (another body of that name, for
  // other operand types) is copied in under another symbol.
  const auto clash = [&](Tensor a, Tensor b) {
    const auto other = as_subgraph([](Tensor y) { return y - 1.0; }, {.name = "block"});
    return std::make_tuple(other(a), block(b));
  };
  const StagedGraph both = stage(clash, {.subgraph_cache = &cache})(f32({3, 4}), f32({2, 4}));
  EXPECT_EQ(traced, 2);
  EXPECT_TRUE(ir::verify(ir::parse_module(both.str())).empty()) << both.str();
  EXPECT_THAT(both.str(), HasSubstr("func.func private @block_1("));
  CompiledCallable c(both, {{"w", Tensor::from_data(eye, Shape{4, 4})}});
  const std::vector<Tensor> out = c(Tensor::full(f32({3, 4}), 1), x);
  EXPECT_EQ(out[0].to_doubles(), std::vector<double>(12, 0.0));  // 1 - 1
  EXPECT_EQ(out[1].to_doubles(), std::vector<double>(8, 1.0));   // relu(x w)
}

TEST(StageSubgraphs, OneBodyForThreeCalls) {
  const auto block = as_subgraph([](Tensor x) { return relu(x) * 2; }, {.name = "block"});
  const std::string text =
      stage([&](Tensor x) { return block(block(block(x))); })(f32({"n", 8})).str();
  EXPECT_EQ(count(text, "func.func private"), 1u) << text;
  EXPECT_EQ(count(text, "\"func.call\""), 3u) << text;
  EXPECT_THAT(text, HasSubstr("func.func private @block("));
  EXPECT_TRUE(ir::verify(ir::parse_module(text)).empty());
}

Tensor relu_fn(Tensor x) { return relu(x); }
Tensor tanh_fn(Tensor x) { return tanh(x); }

struct Scale {
  double by;
  Tensor operator()(Tensor x) const { return x * by; }
};

// Different code never shares a body: function pointers of one type by address, functors
// with state by the wrapper object (temporaries at one stack address included).
TEST(StageSubgraphs, DifferentFunctionsAndStatesNeverShareABody) {
  const std::string text = stage([](Tensor x) {
                             const Tensor r = as_subgraph(&relu_fn)(x);
                             return as_subgraph(&tanh_fn)(r);
                           })(f32({4}))
                               .str();
  EXPECT_EQ(count(text, "func.func private"), 2u) << text;
  EXPECT_EQ(count(text, "\"kiln.relu\""), 1u) << text;
  EXPECT_EQ(count(text, "\"kiln.tanh\""), 1u) << text;
  const std::string same =
      stage([](Tensor x) { return as_subgraph(&relu_fn)(as_subgraph(&relu_fn)(x)); })(f32({4}))
          .str();
  EXPECT_EQ(count(same, "func.func private"), 1u) << same;  // one function, one body

  const std::string scaled = stage([](Tensor x) {
                               for (double by : {2.0, 3.0}) x = as_subgraph(Scale{by})(x);
                               return x;
                             })(f32({4}))
                                 .str();
  EXPECT_EQ(count(scaled, "func.func private"), 2u) << scaled;
  const auto twice = as_subgraph(Scale{2.0});  // one wrapper: one body
  const std::string shared = stage([&](Tensor x) { return twice(twice(x)); })(f32({4})).str();
  EXPECT_EQ(count(shared, "func.func private"), 1u) << shared;
  EXPECT_THAT(shared, HasSubstr("func.func private @subgraph("));
}

TEST(StageSubgraphs, LayersDifferingOnlyByPrefixShareABody) {
  const auto layer = [](Tensor x) { return matmul(x, weight("w", f32({8, 8}))); };
  const std::string text =
      stage([&](Tensor x) {
        for (int i = 0; i < 4; ++i)
          x = as_subgraph(layer, {.name = "layer", .prefix = "layers." + std::to_string(i)})(x);
        return x;
      })(f32({2, 8}))
          .str();
  EXPECT_EQ(count(text, "func.func private"), 1u) << text;
  EXPECT_THAT(text, HasSubstr("{name = \"w\"}"));
  EXPECT_THAT(text, HasSubstr("{callee = @layer, kiln.prefix = \"layers.3\"}"));
}

TEST(StageSubgraphs, NewShapesNewBodiesNestedBodiesAndSubgraphsOff) {
  const auto inner = as_subgraph([](Tensor x) { return x + 1; }, {.name = "inner"});
  const auto outer = as_subgraph([&](Tensor x) { return inner(x) * 3; }, {.name = "outer"});
  const auto fn = [&](Tensor a, Tensor b) { return std::make_tuple(outer(a), outer(b), outer(a)); };
  const std::string text = stage(fn)(f32({4}), f32({5})).str();
  EXPECT_EQ(count(text, "func.func private"), 4u) << text;  // inner, outer for [4] and [5]
  EXPECT_THAT(text, HasSubstr("@outer_1("));
  EXPECT_EQ(count(text, "\"func.call\""), 5u) << text;  // 3 outer calls, 2 inner calls in bodies

  const std::string inlined = stage(fn, {.subgraphs = false})(f32({4}), f32({5})).str();
  EXPECT_EQ(count(inlined, "func.call"), 0u) << inlined;
  EXPECT_EQ(count(inlined, "func.func"), 1u);
}

TEST(StageSubgraphs, BodiesMustNotCaptureTheCallersTensors) {
  KILN_EXPECT_THROW_MSG(stage([](Tensor x) {
                          const auto bad = as_subgraph([&](Tensor y) { return y + x; });
                          return bad(x);
                        })(f32({4})),
                        UserError,
                        "belongs to another graph: a subgraph body used a tensor of its caller");
}

// nn::MLP says and does one thing: exact GELU by default (as documented and as PyTorch's
// nn.GELU()), the tanh form when asked; the GPT-style block asks for it.
TEST(StageNn, MlpGeluIsExactUnlessAskedForTheTanhForm) {
  const auto text = [](nn::MLP mlp) {
    return stage([&](Tensor x) { return mlp(x); })(f32({2, 8})).str();
  };
  EXPECT_THAT(text({.dim = 8, .hidden = 16}), Not(HasSubstr("\"tanh\"")));
  EXPECT_THAT(text({.dim = 8, .hidden = 16}), HasSubstr("kiln.gelu"));
  EXPECT_THAT(text({.dim = 8, .hidden = 16, .approximate = "tanh"}),
              HasSubstr("approximate = \"tanh\""));
  const nn::TransformerBlock block{.dim = 8, .heads = 2, .hidden = 16};
  EXPECT_THAT(stage([&](Tensor x) { return block(x); })(f32({1, 3, 8})).str(),
              HasSubstr("approximate = \"tanh\""));
}

TEST(StageNn, ATransformerStackStagesWithOneSharedBody) {
  const nn::TransformerBlock block{.dim = 64, .heads = 4, .hidden = 128};
  const auto fn = [&](Tensor ids) {
    Tensor x = nn::Embedding{.vocab = 1000, .dim = 64, .name = "embed"}(ids);
    const auto layer = as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 3; ++i) {
      name_scope s("layers." + std::to_string(i));
      x = layer(x);
    }
    return nn::Linear{.in = 64, .out = 1000, .bias = false, .name = "lm_head"}(
        nn::RMSNorm{.dim = 64, .name = "final_norm"}(x));
  };
  const StagedGraph staged = stage(fn)(TensorLayout(DType::i64, {"batch", "seq"}));
  const std::string text = staged.str();
  EXPECT_EQ(staged.out_layouts()[0], f32({"batch", "seq", 1000}));
  EXPECT_EQ(count(text, "func.func private @block("), 1u);
  EXPECT_EQ(count(text, "\"func.call\""), 3u);
  EXPECT_THAT(text, HasSubstr("{name = \"attn.q.weight\"}"));
  EXPECT_THAT(text, HasSubstr("kiln.prefix = \"layers.2\""));
  EXPECT_THAT(text, HasSubstr("{name = \"embed.weight\"}"));
  EXPECT_THAT(text, Not(HasSubstr("lm_head.bias")));
  EXPECT_TRUE(ir::verify(ir::parse_module(text)).empty());
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Regression: constants were deduplicated by the address of their data, so a scalar whose
// data was freed could be mistaken for a later one allocated at the same address.
TEST(StageConstants, DistinctShortLivedScalarsStayDistinct) {
  const std::string text = stage([](Tensor x) {
                             Tensor y = x;
                             for (int i = 1; i <= 50; ++i) y = y * double(i);  // 50 temporaries
                             return y;
                           })(f32({2}))
                               .str();
  EXPECT_EQ(count(text, "\"kiln.constant\""), 50u);
  for (int i : {1, 2, 25, 50}) {
    const float v = static_cast<float>(i);
    unsigned char b[4];
    std::memcpy(b, &v, 4);
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%02X%02X%02X%02X", b[0], b[1], b[2], b[3]);
    EXPECT_THAT(text, HasSubstr(hex)) << i;
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// ---- what language bindings build on (the Python package) -------------------------------

TEST(StageBindings, BorrowedTensorsViewTheOwnersMemoryAndKeepItAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  const float* data = owner->data();
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor t = Tensor::borrow(DType::f32, {2, 3}, Device::cpu(), data, 6 * sizeof(float), owner);
  owner.reset();
  EXPECT_FALSE(watch.expired());  // the tensor holds its owner
  EXPECT_EQ(static_cast<const void*>(t.bytes().data()), static_cast<const void*>(data));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  {  // as a constant of a staged graph (copied into the module) and as a compiled input
    const StagedGraph staged = stage([&](Tensor x) { return x + t; })(f32({2, 3}));
    CompiledCallable compiled(staged, std::map<std::string, Tensor>{});
    EXPECT_EQ(compiled(t)[0].to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  }
  t = Tensor();
  EXPECT_TRUE(watch.expired());  // the last holder released it
}

TEST(StageBindings, BorrowRefusesWhatItCannotView) {
  auto owner = std::make_shared<std::array<std::int64_t, 4>>();
  const auto* bytes = reinterpret_cast<const std::byte*>(owner->data());
  KILN_EXPECT_THROW_MSG(Tensor::borrow(DType::i64, {3}, Device::cpu(), bytes, 32, owner), UserError,
                        "32 bytes for i64[3], which holds 24");
  KILN_EXPECT_THROW_MSG(Tensor::borrow(DType::i64, {"n"}, Device::cpu(), bytes, 32, owner),
                        UserError, "symbolic dims");
  KILN_EXPECT_THROW_MSG(Tensor::borrow(DType::i64, {4}, Device::cpu(), bytes, 32, nullptr),
                        UserError, "no owner");
  KILN_EXPECT_THROW_MSG(Tensor::borrow(DType::i32, {2}, Device::cpu(), bytes + 2, 8, owner),
                        UserError, "not aligned to their size (4 bytes)");
}

TEST(StageBindings, ScalarLikeFollowsTheScalarOperatorsRules) {
  stage([](Tensor f, Tensor i, Tensor b) {
    EXPECT_EQ(scalar_like(f, 2.5).dtype(), DType::f16);
    EXPECT_EQ(scalar_like(i, 3).dtype(), DType::i8);
    EXPECT_EQ(scalar_like(i, 0.5).dtype(), DType::f32);
    EXPECT_EQ(scalar_like(b, 1).dtype(), DType::i64);
    EXPECT_EQ(scalar_like(b, 0.5).dtype(), DType::f32);
    EXPECT_EQ(scalar_like(i, -7).to_doubles(), std::vector<double>{-7});
    KILN_EXPECT_THROW_MSG(scalar_like(i, 300, "maximum"), UserError, "maximum at",
                          "300 does not fit the i8 tensor");
    return f;
  })(TensorLayout(DType::f16, {2}), TensorLayout(DType::i8, {2}), TensorLayout(DType::bool_, {2}));
  KILN_EXPECT_THROW_MSG(scalar_like(Tensor(), 1), UserError, "is empty");
}

TEST(StageBindings, LocationsGivenByHandAreThoseOfTheOps) {
  const std::string text =
      stage([](Tensor x) { return relu(x, SourceLocation::at("model.py", 12, 5)); })(f32({2}))
          .str();
  EXPECT_THAT(text, HasSubstr("loc(\"model.py\":12:5)"));
}

TEST(StageBindings, LinearReadsPyTorchsWeightLayout) {
  const nn::Linear torch_fc{.in = 3, .out = 2, .bias = false, .name = "fc", .torch_layout = true};
  const StagedGraph staged = stage(torch_fc)(f32({1, 3}));
  EXPECT_THAT(staged.str(), HasSubstr("tensor<2x3xf32>"));  // weight [out, in]
  const Tensor w = Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  CompiledCallable compiled(staged, {{"fc.weight", w}});
  const Tensor x = Tensor::from_data(std::vector<float>{1, 1, 1}, {1, 3});
  EXPECT_EQ(compiled(x)[0].to_vector<float>(), (std::vector<float>{6, 15}));  // x @ w^T
}

}  // namespace
}  // namespace kiln
