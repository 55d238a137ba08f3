#include "kiln/ir/graph.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"
#include "sample_modules.hpp"

namespace kiln::ir {
namespace {

using testing::f32;
using ::testing::HasSubstr;

TEST(IrGraph, ValuesKnowTheirProducersAndTypes) {
  Module m;
  Graph& g = m.add_graph("main");
  Value x = g.add_argument(f32({4}));
  const OpView neg = g.add_op("kiln.neg", {x}, {}, {"f.cpp", 1, 2});
  EXPECT_EQ(g.producer(x), -1);
  EXPECT_EQ(g.producer(neg.result(0)), 0);
  EXPECT_EQ(g.type(neg.result(0)), f32({4}));
  EXPECT_EQ(neg.describe(), "op 0 ('kiln.neg') at f.cpp:1:2");
  EXPECT_EQ(&m.entry(), &g);
  KILN_EXPECT_THROW_MSG(neg.result(1), UserError, "has 1 results; result 1 does not exist");
  KILN_EXPECT_THROW_MSG(g.add_op("kiln.neg", {Value{}}), UserError,
                        "operand <none> is not a value of graph @main");
}

TEST(IrGraph, ModuleSymbolsAreUnique) {
  Module m;
  m.add_graph("a");
  KILN_EXPECT_THROW_MSG(m.add_graph("a"), UserError, "has a graph named @a already");
  KILN_EXPECT_THROW_MSG(m.add_graph(""), UserError, "non-empty name");
  KILN_EXPECT_THROW_MSG(m.set_entry("b"), UserError, "no graph named @b");
  KILN_EXPECT_THROW_MSG(Module().entry(), UserError, "the module has no graph");
}

TEST(IrGraph, AttributesAreSortedAndTyped) {
  Module m;
  Graph& g = m.add_graph("main");
  Value x = g.add_argument(f32({2, 3}));
  const OpView op =
      g.add_op("kiln.reduce_sum", {x}, {{"keepdim", true}, {"axes", Attribute::Array{1}}});
  ASSERT_EQ(op.attributes().size(), 2u);
  EXPECT_EQ(op.attributes()[0].name, "axes");
  EXPECT_EQ(op.find("axes")->as_int_array(), (std::vector<std::int64_t>{1}));
  KILN_EXPECT_THROW_MSG(op.find("keepdim")->as_int(), UserError,
                        "attribute holds a bool where a integer is expected");
}

TEST(IrGraph, ToDotShowsOpsAndValueEdges) {
  const Module m = testing::layered_module();
  const std::string dot = m.find("block")->to_dot();
  EXPECT_THAT(dot, HasSubstr("op1 [label=\"kiln.matmul\\nf32[batch, 16] on cpu:0\"]"));
  EXPECT_THAT(dot, HasSubstr("arg0 -> op1;"));
  EXPECT_THAT(dot, HasSubstr("op0 -> op1;"));
  EXPECT_THAT(dot, HasSubstr("op3 -> results;"));
}

}  // namespace
}  // namespace kiln::ir
