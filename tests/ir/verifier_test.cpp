#include "kiln/ir/verifier.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "sample_modules.hpp"

namespace kiln::ir {
namespace {

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

}  // namespace
}  // namespace kiln::ir
