// Each pass alone: IR in, IR out (text compared), and semantics kept (reference before and
// after on random inputs).

#include "kiln/compiler/passes.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "../error_matchers.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TensorLayout f32(Shape s) { return TensorLayout(DType::f32, std::move(s)); }

// The pass must keep the module valid and its results equal.
void expect_same_results(const ir::Module& before, const ir::Module& after) {
  EXPECT_TRUE(ir::verify(after).empty()) << ir::print(after);
  const ir::Graph& g = before.entry();
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < g.arguments().size(); ++i) {
    const ir::TensorType& t = g.type(g.arguments()[i]);
    in.push_back(Tensor::random(TensorLayout(t.dtype, t.shape), 5 + i));
  }
  const auto a = reference_run(before, in), b = reference_run(after, in);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].to_doubles(), b[i].to_doubles());
}

TEST(Passes, DeadCodeEliminationRemovesUnusedOps) {
  const StagedGraph s = stage([](Tensor x) {
    (void)exp(x);  // unused
    (void)(x * 3);
    return x + 1;
  })(f32({4}));
  const ir::Module out = passes::dead_code_elimination(s.graph());
  const std::string text = ir::print(out);
  EXPECT_EQ(count(text, "kiln.exp"), 0u);
  EXPECT_EQ(count(text, "kiln.mul"), 0u);
  EXPECT_EQ(count(text, "kiln.add"), 1u);
  EXPECT_EQ(count(text, "kiln.constant"), 1u) << text;
  expect_same_results(s.graph(), out);
}

TEST(Passes, CommonSubexpressionsAreMerged) {
  const StagedGraph s =
      stage([](Tensor x) { return tanh(x) + tanh(x) * softmax(x, 0) + softmax(x, 0); })(f32({4}));
  const ir::Module out =
      passes::dead_code_elimination(passes::common_subexpression_elimination(s.graph()));
  const std::string text = ir::print(out);
  EXPECT_EQ(count(text, "kiln.tanh"), 1u) << text;
  EXPECT_EQ(count(text, "kiln.softmax"), 1u) << text;
  expect_same_results(s.graph(), out);
  // Different attributes are different expressions.
  const StagedGraph t = stage([](Tensor x) { return softmax(x, 0) + softmax(x, 1); })(f32({3, 3}));
  EXPECT_EQ(count(ir::print(passes::common_subexpression_elimination(t.graph())), "kiln.softmax"),
            2u);
}

TEST(Passes, ConstantsAreFolded) {
  const Tensor c = Tensor::constant({1, 2, 3}, {3});
  const StagedGraph s = stage([&](Tensor x) { return x + exp(c * 2.0); })(f32({3}));
  const ir::Module out = passes::dead_code_elimination(passes::fold_constants(s.graph()));
  const std::string text = ir::print(out);
  EXPECT_EQ(count(text, "kiln.exp"), 0u) << text;
  EXPECT_EQ(count(text, "kiln.mul"), 0u) << text;
  EXPECT_EQ(count(text, "kiln.constant"), 1u) << text;
  expect_same_results(s.graph(), out);
}

TEST(Passes, CanonicalizationRemovesIdentities) {
  const StagedGraph s = stage([](Tensor x) {
    return transpose(transpose(neg(neg(cast(x * 1.0 + 0.0, DType::f32))), 0, 0)) / 1.0 - 0.0;
  })(f32({2, 3}));
  const ir::Module out = passes::dead_code_elimination(passes::canonicalize(s.graph()));
  const std::string text = ir::print(out);
  EXPECT_THAT(text, Not(HasSubstr("kiln.mul")));
  EXPECT_THAT(text, Not(HasSubstr("kiln.neg")));
  EXPECT_THAT(text, Not(HasSubstr("kiln.cast")));
  EXPECT_EQ(count(text, "kiln.transpose"), 1u) << text;  // the real one stays
  expect_same_results(s.graph(), out);
  // x * 1 where the 1 broadcasts x to a bigger shape is not an identity.
  const StagedGraph b = stage([](Tensor x) {
    return x * Tensor::constant({1, 1}, {2, 1});
  })(f32({3}));
  EXPECT_THAT(ir::print(passes::canonicalize(b.graph())), HasSubstr("kiln.mul"));
}

// GELU as ONNX exporters write it out (before opset 20 has a Gelu op), in its tanh and its
// erf form, becomes one kiln.gelu: the same function, rounded once instead of after each op.
TEST(Passes, CanonicalizationFindsGeluWrittenOutOpByOp) {
  const auto inner = [](const Tensor& x, bool cube_by_pow) {
    const Tensor cube = cube_by_pow ? pow(x, scalar_like(x, 3.0)) : x * (x * x);
    return tanh((x + cube * 0.044715) * 0.7978845608028654);
  };
  const std::vector<std::function<Tensor(Tensor)>> forms = {
      [&](Tensor x) { return (x * 0.5) * (inner(x, true) + 1.0); },   // GPT-2's export
      [&](Tensor x) { return (inner(x, false) + 1.0) * (x * 0.5); },  // operands swapped
      [&](Tensor x) { return x * ((inner(x, true) + 1.0) * 0.5); },   // the half on the sum
      // The erf form (approximate "none"), as all-MiniLM-L6-v2's export writes it, and x/√2
      // as a product.
      [&](Tensor x) { return x * ((erf(x / 1.4142135623730951) + 1.0) * 0.5); },
      [&](Tensor x) { return (x * 0.5) * (erf(x * 0.7071067811865476) + 1.0); },
  };
  for (std::size_t k = 0; k < forms.size(); ++k) {
    const StagedGraph s = stage([&](Tensor x) { return forms[k](x) + 1.0; })(f32({4, 33}));
    const ir::Module out = passes::dead_code_elimination(passes::canonicalize(s.graph()));
    const std::string text = ir::print(out);
    EXPECT_EQ(count(text, "\"kiln.gelu\""), 1u) << k << text;
    EXPECT_EQ(text.find("approximate = \"tanh\"") != std::string::npos, k < 3) << k;
    EXPECT_THAT(text, Not(HasSubstr("kiln.tanh"))) << k;
    EXPECT_THAT(text, Not(HasSubstr("kiln.erf"))) << k;
    EXPECT_TRUE(ir::verify(out).empty()) << text;
    const Tensor x = Tensor::random(f32({4, 33}), 3, -6, 6);
    const std::vector<double> want = reference_run(s.graph(), {x})[0].to_doubles(),
                              got = reference_run(out, {x})[0].to_doubles();
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << k << " at " << i;
  }
  // Not GELU: another constant, or x³ of another value. Left as they are.
  const StagedGraph other = stage([](Tensor x) {
    return (x * 0.5) * (tanh((x + x * x * x * 0.04) * 0.7978845608028654) + 1.0);
  })(f32({8}));
  EXPECT_THAT(ir::print(passes::canonicalize(other.graph())), Not(HasSubstr("kiln.gelu")));
  const StagedGraph mixed = stage([](Tensor x, Tensor y) {
    return (x * 0.5) * (tanh((x + y * y * y * 0.044715) * 0.7978845608028654) + 1.0);
  })(f32({8}), f32({8}));
  EXPECT_THAT(ir::print(passes::canonicalize(mixed.graph())), Not(HasSubstr("kiln.gelu")));
  const StagedGraph halved = stage([](Tensor x) {  // erf(x / 2): not GELU
    return x * ((erf(x / 2.0) + 1.0) * 0.5);
  })(f32({8}));
  EXPECT_THAT(ir::print(passes::canonicalize(halved.graph())), Not(HasSubstr("kiln.gelu")));
}

// RMSNorm as Llama's ONNX export writes it out (gamma · (x · 1 / √(mean(x², -1) + eps)))
// becomes one kiln.rms_norm: the same function, its mean in double and rounded once.
TEST(Passes, CanonicalizationFindsRmsNormWrittenOutOpByOp) {
  const auto inverse_rms = [](const Tensor& x, bool square_by_pow) {
    const Tensor square = square_by_pow ? pow(x, scalar_like(x, 2.0)) : x * x;
    return scalar_like(x, 1.0) / sqrt(mean(square, {-1}, true) + 1e-6);
  };
  const std::vector<std::function<Tensor(Tensor, Tensor)>> forms = {
      [&](Tensor x, Tensor g) { return g * (x * inverse_rms(x, true)); },   // Llama's export
      [&](Tensor x, Tensor g) { return (inverse_rms(x, false) * x) * g; },  // operands swapped
  };
  for (std::size_t k = 0; k < forms.size(); ++k) {
    const StagedGraph s =
        stage([&](Tensor x, Tensor g) { return forms[k](x, g) + 1.0; })(f32({3, 5, 16}), f32({16}));
    const ir::Module out = passes::dead_code_elimination(passes::canonicalize(s.graph()));
    const std::string text = ir::print(out);
    EXPECT_EQ(count(text, "\"kiln.rms_norm\""), 1u) << k << text;
    EXPECT_THAT(text, Not(HasSubstr("kiln.sqrt"))) << k;
    EXPECT_THAT(text, Not(HasSubstr("kiln.reduce_mean"))) << k;
    EXPECT_TRUE(ir::verify(out).empty()) << text;
    const std::vector<Tensor> in = {Tensor::random(f32({3, 5, 16}), 4, -3, 3),
                                    Tensor::random(f32({16}), 5, -2, 2)};
    const std::vector<double> want = reference_run(s.graph(), in)[0].to_doubles(),
                              got = reference_run(out, in)[0].to_doubles();
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << k << " at " << i;
  }
  // Not RMSNorm: the mean over another axis, x² of another value, gamma not of the last
  // dim. Left as they are.
  const auto other = [](Tensor x, Tensor y, Tensor g, std::int64_t axis) {
    return g * (x * (scalar_like(x, 1.0) / sqrt(mean(y * y, {axis}, true) + 1e-6)));
  };
  for (const auto& [name, staged] :
       {std::pair{"axis 0", stage([&](Tensor x, Tensor g) { return other(x, x, g, 0); })(
                                f32({4, 16}), f32({16}))},
        std::pair{"another value squared", stage([&](Tensor x, Tensor y, Tensor g) {
                    return other(x, y, g, -1);
                  })(f32({4, 16}), f32({4, 16}), f32({16}))},
        std::pair{"gamma per row", stage([&](Tensor x, Tensor g) { return other(x, x, g, -1); })(
                                       f32({4, 4}), f32({4, 1}))}})
    EXPECT_THAT(ir::print(passes::canonicalize(staged.graph())), Not(HasSubstr("kiln.rms_norm")))
        << name;
}

// x + 0.0 is +0.0 for x = -0.0: only folds exact for every input are made.
TEST(Passes, CanonicalizationKeepsFoldsThatChangeTheSignOfZero) {
  const auto folded = [](double c, bool add) {
    const StagedGraph s = stage(
        [&](Tensor x) { return add ? x + Tensor::scalar(c) : x - Tensor::scalar(c); })(f32({2}));
    return ir::print(passes::dead_code_elimination(passes::canonicalize(s.graph())));
  };
  EXPECT_THAT(folded(0.0, true), HasSubstr("kiln.add"));        // -0.0 + 0.0 = +0.0
  EXPECT_THAT(folded(-0.0, true), Not(HasSubstr("kiln.add")));  // x + -0.0 = x, always
  EXPECT_THAT(folded(0.0, false), Not(HasSubstr("kiln.sub")));  // x - 0.0 = x, always
  EXPECT_THAT(folded(-0.0, false), HasSubstr("kiln.sub"));      // -0.0 - -0.0 = +0.0
  const StagedGraph s = stage([](Tensor x) { return x + 0.0; })(f32({2}));
  CompiledCallable compiled(s, {});
  const Tensor out = compiled(Tensor::from_data(std::vector<float>{-0.0f, 1.0f}, Shape{2}))[0];
  EXPECT_FALSE(std::signbit(out.to_vector<float>()[0]));
}

TEST(Passes, PipelineByNameAndUnknownNames) {
  const StagedGraph s = stage([](Tensor x) { return x * 1.0 + tanh(x) - tanh(x); })(f32({4}));
  const ir::Module out = passes::run_passes(s.graph(), passes::default_pipeline());
  EXPECT_EQ(count(ir::print(out), "kiln.tanh"), 1u);
  expect_same_results(s.graph(), out);
  KILN_EXPECT_THROW_MSG(
      passes::run_passes(s.graph(), {"fuse-everything"}), UserError,
      "unknown pass 'fuse-everything'; known passes: canonicalize, cse, dce, fold");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Passes, ElementwiseTreesAreFusedIntoOneOp) {
  const StagedGraph s = stage([](Tensor x, Tensor b) {
    const Tensor y = tanh(x * 2.0 + b);  // b broadcasts into the tree
    const Tensor shared = exp(y);        // used twice: a root of its own
    return sum(shared, {1}, true) + sigmoid(shared - 1.0);
  })(f32({3, 4}), f32({4}));
  const ir::Module out = passes::fuse_elementwise(s.graph());
  const std::string text = ir::print(out);
  EXPECT_TRUE(ir::verify(out).empty()) << text;
  // exp(tanh(x * 2 + b)) is one kernel; sum(...) + sigmoid(shared - 1) another.
  EXPECT_EQ(count(text, "\"kiln.fused\""), 2u) << text;
  EXPECT_THAT(text, HasSubstr("func.func private @fused_"));
  EXPECT_EQ(count(text, "\"kiln.reduce_sum\""), 1u) << text;  // reductions stay
  expect_same_results(s.graph(), out);
  EXPECT_EQ(ir::print(ir::parse_module(text)), text);
}

// A module printed after fusion (`kiln print --passes fuse`) goes through the default
// pipeline again when it is compiled: its bodies stay as they are, not fused into bodies
// of their own (which nested kiln.fused ops and failed to compile).
TEST(Passes, FusingAFusedModuleAgainChangesNothing) {
  const StagedGraph s = stage([](Tensor x, Tensor b) {
    return sigmoid(exp(tanh(x * 2.0 + b)) - 1.0) * x;
  })(f32({3, 4}), f32({4}));
  const ir::Module once = passes::fuse_elementwise(s.graph());
  const ir::Module twice = passes::fuse_elementwise(ir::parse_module(ir::print(once)));
  EXPECT_EQ(ir::print(twice), ir::print(once));
  EXPECT_TRUE(ir::verify(twice).empty()) << ir::print(twice);
  expect_same_results(s.graph(), twice);
}

}  // namespace
}  // namespace kiln
