#include "kiln/ir/verifier.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../error_matchers.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "sample_modules.hpp"

namespace kiln::ir {
namespace {

using kiln::detail::cat;
using testing::f32;
using ::testing::HasSubstr;

std::string all(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const Diagnostic& d : ds) out += d.where + ": " + d.message + "\n";
  return out;
}

TEST(IrVerifier, AcceptsTheSampleModules) {
  for (auto& [name, module] : testing::sample_modules()) EXPECT_EQ(all(verify(module)), "") << name;
}

TEST(IrVerifier, ReportsEveryProblemWithTheOpAndItsLocation) {
  // Text the parser accepts (syntax and types line up) but that is wrong in meaning.
  const Module m = parse_module(R"(module {
  func.func @main(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
    %0 = "kiln.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32> loc("model.cpp":40:7)
    %1 = "kiln.add"(%a, %a) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x4xf32>
    %2 = "func.call"(%a) {callee = @missing} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %3 = "func.call"(%b) {callee = @sub} : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %4 = "kiln.reduce_sum"(%a) {axes = [2]} : (tensor<2x3xf32>) -> tensor<2xf32>
    return %0 : tensor<2x5xf32>
  }
  func.func private @sub(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    return %x : tensor<2x3xf32>
  }
})",
                                "bad.mlir");
  const std::vector<Diagnostic> ds = verify(m);
  ASSERT_EQ(ds.size(), 6u) << all(ds);
  EXPECT_EQ(ds[0].where, "@main, op 0 ('kiln.matmul') at model.cpp:40:7");
  EXPECT_THAT(ds[0].message,
              HasSubstr("matmul of [2, 3] by [4, 5]: inner dimensions differ (3 vs 4)"));
  EXPECT_THAT(ds[1].message,
              HasSubstr("result 0 is f32[2, 4] on cpu:0 but kiln.add of these operands gives "
                        "f32[2, 3] on cpu:0"));
  EXPECT_THAT(ds[2].message, HasSubstr("calls @missing, which the module does not define"));
  EXPECT_THAT(ds[3].message, HasSubstr("operand 0 is f32[4, 5] on cpu:0 but @sub takes f32[2, 3]"));
  EXPECT_THAT(ds[4].message,
              HasSubstr("result 0 is f32[4, 5] on cpu:0 but @sub returns f32[2, 3]"));
  EXPECT_THAT(ds[5].message, HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(ds[5].where, HasSubstr("op 4 ('kiln.reduce_sum')"));
}

// Max, min and argmax over an empty axis have no value, a mean of integers is not an
// integer, and a transfer to where the value is would wait for itself: all refused here,
// naming the op, rather than computed (or hung) at run time.
TEST(IrVerifier, RefusesReductionsWithoutAValueIntegerMeansAndTransfersInPlace) {
  const Module m = parse_module(R"(module {
  func.func @main(%a: tensor<3x0xf32>, %b: tensor<2xi32>) -> tensor<3xi64> {
    %0 = "kiln.argmax"(%a) {axis = 1} : (tensor<3x0xf32>) -> tensor<3xi64>
    %1 = "kiln.reduce_max"(%a) {axes = [1]} : (tensor<3x0xf32>) -> tensor<3xf32>
    %2 = "kiln.reduce_min"(%a) {axes = [-1]} : (tensor<3x0xf32>) -> tensor<3xf32>
    %3 = "kiln.reduce_mean"(%b) {axes = [0]} : (tensor<2xi32>) -> tensor<i32>
    %4 = "kiln.transfer"(%b) {device = "cpu:0"} : (tensor<2xi32>) -> tensor<2xi32>
    %5 = "kiln.reduce_sum"(%a) {axes = [1]} : (tensor<3x0xf32>) -> tensor<3xf32>
    return %0 : tensor<3xi64>
  }
})",
                                "empty.mlir");
  const std::vector<Diagnostic> ds = verify(m);
  ASSERT_EQ(ds.size(), 5u) << all(ds);  // a sum over an empty axis is 0: fine
  EXPECT_THAT(ds[0].message, HasSubstr("kiln.argmax over axis 1, of size 0, has no value"));
  EXPECT_THAT(ds[1].message, HasSubstr("kiln.reduce_max over axis 1, of size 0, has no value"));
  EXPECT_THAT(ds[2].message, HasSubstr("kiln.reduce_min over axis 1, of size 0"));
  EXPECT_THAT(ds[3].message, HasSubstr("kiln.reduce_mean needs a floating-point tensor, got i32"));
  EXPECT_THAT(ds[4].message, HasSubstr("the operand is on cpu:0 already"));
}

TEST(IrVerifier, RejectsBadSpecsAndTheApiRejectsForwardReferences) {
  Module m;
  Graph& g = m.add_graph("main");
  Value a = g.add_argument(f32({4}));
  // Values exist only once their op does, so a use before definition cannot be built.
  KILN_EXPECT_THROW_MSG(
      g.add_op_typed(lookup_op("kiln.neg"), std::vector<Value>{Value{2}}, {}, {f32({4})}),
      UserError, "operand %2 is not a value of graph @main");
  g.add_op_typed(lookup_op("kiln.cast"), std::vector<Value>{a}, {{"dtype", 3}}, {f32({4})});
  g.add_op_typed(lookup_op("kiln.neg"), std::vector<Value>{a, a}, {}, {f32({4})});
  const std::vector<Diagnostic> ds = verify(m);
  ASSERT_EQ(ds.size(), 2u) << all(ds);
  EXPECT_THAT(ds[0].message, HasSubstr("attribute 'dtype' must be a dtype, got a integer"));
  EXPECT_THAT(ds[1].message, HasSubstr("kiln.neg takes 1 operand, got 2"));
}

TEST(IrVerifier, RejectsCallCyclesAndBadConstants) {
  Module m;
  Graph& a = m.add_graph("a");
  Graph& b = m.add_graph("b");
  a.add_op_typed(lookup_op("func.call"), {}, {{"callee", SymbolRef{"b"}}}, {});
  b.add_op_typed(lookup_op("func.call"), {}, {{"callee", SymbolRef{"a"}}}, {});
  a.add_op_typed(lookup_op("kiln.constant"), {},
                 {{"value", DenseData{DType::f32, {2}, std::string(8, '\0')}}}, {f32({3})});
  const std::vector<Diagnostic> ds = verify(m);
  ASSERT_EQ(ds.size(), 2u) << all(ds);
  EXPECT_THAT(ds[0].message, HasSubstr("the value is f32[2] but the result is f32[3]"));
  EXPECT_THAT(ds[1].message, HasSubstr("calls itself through @a -> @b -> @a"));
  KILN_EXPECT_THROW_MSG(verify_or_throw(m), UserError, "the module has 2 problems",
                        "@a -> @b -> @a");
}

// Sizes that wrap: every shape rule adds and multiplies with overflow checks, and every
// static value is at most kMaxTensorBytes, so that no byte count downstream wraps.
TEST(IrVerifier, RefusesSizesThatWouldWrapWithTheValueAndTheLimit) {
  const auto problems = [](const std::string& body, const std::string& args) {
    return all(verify(parse_module(
        "module {\n  func.func @main(" + args + ") -> tensor<1xf32> {\n" + body +
            "\n    %r = \"kiln.constant\"() {value = dense<\"0x0000803F\"> : tensor<1xf32>} : "
            "() -> tensor<1xf32>\n    return %r : tensor<1xf32>\n  }\n}",
        "big.mlir")));
  };
  // 2^62 f32 elements are 2^64 bytes (wrapped to 0 before); 2^61 are 2^63.
  for (const char* n : {"4611686018427387904", "2305843009213693952"})
    EXPECT_THAT(problems(cat("    %0 = \"kiln.broadcast_to\"(%x) {shape = #kiln.shape<[", n,
                             "]>} : (tensor<1xf32>) -> tensor<", n, "xf32>"),
                         "%x: tensor<1xf32>"),
                HasSubstr("more than 2^62 bytes, kiln's limit for one tensor: too big"))
        << n;
  // Split sizes summing to 3 modulo 2^64.
  EXPECT_THAT(problems("    %0:3 = \"kiln.split\"(%x) {axis = 1, sizes = [9223372036854775807, "
                       "9223372036854775807, 5]} : (tensor<2x3xf32>) -> "
                       "(tensor<2x9223372036854775807xf32>, tensor<2x9223372036854775807xf32>, "
                       "tensor<2x5xf32>)",
                       "%x: tensor<2x3xf32>"),
              HasSubstr("the sum of sizes [9223372036854775807, 9223372036854775807, 5]: "
                        "9223372036854775807 + 9223372036854775807 overflows"));
  // A reshape whose volume wraps.
  EXPECT_THAT(problems("    %0 = \"kiln.reshape\"(%x) {shape = #kiln.shape<[3037000500, "
                       "3037000500]>} : (tensor<2x3xf32>) -> tensor<3037000500x3037000500xf32>",
                       "%x: tensor<2x3xf32>"),
              HasSubstr("3037000500 * 3037000500 overflows 64-bit integers"));
  // Four 2^62 pieces concatenated into "0" elements.
  const std::string piece = "tensor<4611686018427387904xi8>";
  EXPECT_THAT(problems("    %0 = \"kiln.concat\"(%a, %a, %a, %a) {axis = 0} : (" + piece + ", " +
                           piece + ", " + piece + ", " + piece + ") -> tensor<0xi8>",
                       "%a: " + piece),
              HasSubstr("the concat axis's total size: 4611686018427387904 + "
                        "4611686018427387904 overflows"));
  // Zero elements, but strides of 2^80.
  EXPECT_THAT(problems("", "%x: tensor<0x1099511627776x1099511627776xf32>"),
              HasSubstr("argument 0 (f32[0, 1099511627776, 1099511627776] on cpu:0)"));
}

TEST(IrVerifier, AcceptsTheWholeSliceWithTheLargestStep) {
  // [0:MAX:MAX] takes element 0: stop - start + step - 1 overflowed before.
  const Module m = parse_module(R"(module {
  func.func @main(%x: tensor<2x3xf32>) -> tensor<1x3xf32> {
    %0 = "kiln.slice"(%x) {starts = [0, 0], stops = [9223372036854775807, 9223372036854775807], steps = [9223372036854775807, 1]} : (tensor<2x3xf32>) -> tensor<1x3xf32>
    return %0 : tensor<1x3xf32>
  }
})",
                                "slice.mlir");
  EXPECT_EQ(all(verify(m)), "");
}

// A chain of calls: verified with an explicit stack (20 000 levels crashed it before),
// and refused past kMaxCallDepth, so that the planner's and the interpreter's walks over
// calls cannot exhaust any thread's stack.
TEST(IrVerifier, BoundsHowDeepCallsNestWithoutRecursing) {
  const auto chain = [](std::size_t depth) {
    Module m;
    std::vector<Graph*> graphs;
    for (std::size_t i = 0; i <= depth; ++i)
      graphs.push_back(&m.add_graph(i == 0 ? "main" : cat("g", i)));
    for (std::size_t i = 0; i <= depth; ++i) {
      const Value x = graphs[i]->add_argument(f32({2}));
      Value y = x;
      if (i < depth) {
        const std::vector<Value> operands{x};
        y = graphs[i]
                ->add_op_typed(lookup_op("func.call"), operands,
                               {{"callee", SymbolRef{graphs[i + 1]->name()}}}, {f32({2})})
                .result(0);
      }
      graphs[i]->set_results({y});
    }
    return m;
  };
  EXPECT_EQ(all(verify(chain(kMaxCallDepth))), "");
  EXPECT_THAT(all(verify(chain(kMaxCallDepth + 1))),
              HasSubstr("@main: its calls nest 257 deep, more than kiln's limit of 256"));
  EXPECT_THAT(all(verify(chain(20000))), HasSubstr("its calls nest 20000 deep"));
}

}  // namespace
}  // namespace kiln::ir
