// Shape and dtype inference of the built-in ops, through Graph::add_op (which is what
// staging calls), including the error messages.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::ir {
namespace {

TensorType t(DType d, Shape s, Device dev = Device::cpu()) { return {d, std::move(s), dev}; }

class IrOps : public ::testing::Test {
 protected:
  Module m;
  Graph& g = m.add_graph("main");
  Value arg(DType d, Shape s, Device dev = Device::cpu()) {
    return g.add_argument(t(d, std::move(s), dev));
  }
  TensorType infer(std::string_view op, std::initializer_list<Value> operands,
                   std::vector<NamedAttribute> attrs = {}) {
    return g.type(g.add_op(op, operands, std::move(attrs)).result(0));
  }
};

TEST_F(IrOps, BinaryOpsBroadcastLikeNumPyIncludingSymbolicDims) {
  auto a = arg(DType::f32, {"batch", 1, 4});
  auto b = arg(DType::f32, {3, 1});
  EXPECT_EQ(infer("kiln.add", {a, b}), t(DType::f32, {"batch", 3, 4}));
  auto c = arg(DType::f32, {"batch", 3, 4});
  EXPECT_EQ(infer("kiln.mul", {a, c}), t(DType::f32, {"batch", 3, 4}));
  auto scalar = arg(DType::f32, {});
  EXPECT_EQ(infer("kiln.sub", {scalar, c}), t(DType::f32, {"batch", 3, 4}));
  EXPECT_EQ(infer("kiln.lt", {a, b}).dtype, DType::bool_);
}

TEST_F(IrOps, BinaryOpErrorsNameTheOpShapesAndAxis) {
  auto a = arg(DType::f32, {2, 3});
  auto b = arg(DType::f32, {4});
  auto c = arg(DType::f32, {"n"});
  auto h = arg(DType::f16, {2, 3});
  auto gpu = arg(DType::f32, {2, 3}, Device::cuda(0));
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.add", {a, b}, {}, {"m.cpp", 3, 4}), UserError,
                        "kiln.add at m.cpp:3:4: shapes [2, 3] and [4] do not broadcast: dim 3 vs "
                        "4 at axis -1",
                        "(operands: f32[2, 3] on cpu:0, f32[4] on cpu:0)");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.add", {a, c}), UserError, "dim 3 vs n");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.add", {a, h}), UserError,
                        "operand 1 is f16 but operand 0 is f32; cast one of them first");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.add", {a, gpu}), UserError,
                        "operand 1 is on cuda:0 but operand 0 is on cpu:0");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.add", {a}), UserError, "kiln.add: takes 2 operands, got 1");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.addd", {a, a}), UserError,
                        "unknown op 'kiln.addd'; did you mean 'kiln.add'?");
}

TEST_F(IrOps, MatmulBatchesAndVectors) {
  auto a = arg(DType::f32, {"b", 1, 2, 3});
  auto w = arg(DType::f32, {5, 3, 7});
  EXPECT_EQ(infer("kiln.matmul", {a, w}), t(DType::f32, {"b", 5, 2, 7}));
  auto v = arg(DType::f32, {3});
  auto m2 = arg(DType::f32, {2, 3});
  EXPECT_EQ(infer("kiln.matmul", {m2, v}), t(DType::f32, {2}));
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.matmul", {m2, m2}), UserError,
                        "matmul of [2, 3] by [2, 3]: inner dimensions differ (3 vs 2)");
}

TEST_F(IrOps, ShapeOps) {
  auto x = arg(DType::f32, {"batch", 4, 6});
  EXPECT_EQ(infer("kiln.reshape", {x}, {{"shape", Shape{"batch", 24}}}),
            t(DType::f32, {"batch", 24}));
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.reshape", {x}, {{"shape", Shape{24}}}), UserError,
                        "cannot reshape [batch, 4, 6] to [24]");
  EXPECT_EQ(infer("kiln.transpose", {x}, {{"perm", Attribute::Array{0, 2, 1}}}),
            t(DType::f32, {"batch", 6, 4}));
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.transpose", {x}, {{"perm", Attribute::Array{0, 0, 1}}}),
                        UserError, "repeats axis 0");
  EXPECT_EQ(infer("kiln.broadcast_to", {arg(DType::f32, {1, 6})}, {{"shape", Shape{3, 6}}}),
            t(DType::f32, {3, 6}));
  auto y = arg(DType::f32, {"batch", 2, 6});
  EXPECT_EQ(infer("kiln.concat", {x, y}, {{"axis", 1}}), t(DType::f32, {"batch", 6, 6}));
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.concat", {x, y}, {{"axis", 0}}), UserError,
                        "differs from operand 0 [batch, 4, 6] at axis 1");
  const OpView split =
      g.add_op("kiln.split", {x}, {{"axis", -1}, {"sizes", Attribute::Array{2, 4}}});
  ASSERT_EQ(split.num_results(), 2u);
  EXPECT_EQ(g.type(split.result(1)), t(DType::f32, {"batch", 4, 4}));
  KILN_EXPECT_THROW_MSG(
      g.add_op("kiln.split", {x}, {{"axis", 2}, {"sizes", Attribute::Array{2, 2}}}), UserError,
      "sum to 4 but axis 2 of [batch, 4, 6] is 6");
}

TEST_F(IrOps, ReductionsAndNormalisations) {
  auto x = arg(DType::f32, {"batch", 4, 6});
  EXPECT_EQ(infer("kiln.reduce_mean", {x}, {{"axes", Attribute::Array{-1}}}),
            t(DType::f32, {"batch", 4}));
  EXPECT_EQ(infer("kiln.reduce_max", {x}, {{"axes", Attribute::Array{0, 2}}, {"keepdim", true}}),
            t(DType::f32, {1, 4, 1}));
  EXPECT_EQ(infer("kiln.argmax", {x}, {{"axis", 1}}), t(DType::i64, {"batch", 6}));
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.reduce_sum", {x}, {{"axes", Attribute::Array{3}}}),
                        UserError, "axis 3 is out of range for rank 3 (valid: -3 to 2)");
  EXPECT_EQ(infer("kiln.softmax", {x}, {{"axis", -1}}), t(DType::f32, {"batch", 4, 6}));
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.softmax", {arg(DType::i32, {3})}, {{"axis", 0}}), UserError,
                        "needs a floating-point tensor, got i32");
}

TEST_F(IrOps, AttributeSpecsAreChecked) {
  auto x = arg(DType::f32, {4});
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.cast", {x}), UserError,
                        "kiln.cast: requires attribute 'dtype' (dtype)");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.cast", {x}, {{"dtype", "f16"}}), UserError,
                        "attribute 'dtype' must be a dtype, got a string");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.gelu", {x}, {{"approximate", "fast"}}), UserError,
                        "approximate must be \"none\" or \"tanh\", got \"fast\"");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.weight", {}, {{"name", "w"}}), UserError,
                        "has no inference rule; create it with add_op_typed");
  EXPECT_EQ(infer("kiln.cast", {x}, {{"dtype", DType::bf16}}), t(DType::bf16, {4}));
}

}  // namespace
}  // namespace kiln::ir
