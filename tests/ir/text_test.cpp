#include "kiln/ir/text.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/ir/verifier.hpp"
#include "sample_modules.hpp"

namespace kiln::ir {
namespace {

using ::testing::HasSubstr;
using testing::sample_modules;

TEST(IrText, PrintParsePrintGivesIdenticalBytes) {
  for (auto& [name, module] : sample_modules()) {
    const std::string first = print(module);
    const Module parsed = parse_module(first, name);
    EXPECT_EQ(print(parsed), first) << name;
    EXPECT_TRUE(verify(parsed).empty()) << name;
  }
}

TEST(IrText, ArgumentAndResultNamesRoundTripAsMlirAttributes) {
  const std::string text =
      "module {\n  func.func @main(%arg0: tensor<4xf32> {kiln.name = \"input_ids\"}, %arg1: "
      "tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32> {kiln.name = \"lo\\22gits\"}) {\n"
      "    return %arg0, %arg1 : tensor<4xf32>, tensor<4xf32>\n  }\n}\n";
  const Module m = parse_module(text);
  EXPECT_EQ(m.entry().argument_name(0), "input_ids");
  EXPECT_EQ(m.entry().argument_name(1), "");
  EXPECT_EQ(m.entry().result_name(0), "");
  EXPECT_EQ(m.entry().result_name(1), "lo\"gits");
  const std::string printed = m.str();
  EXPECT_THAT(printed, HasSubstr("%arg0: tensor<4xf32> {kiln.name = \"input_ids\"}, %arg1: "
                                 "tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32> {kiln.name = "
                                 "\"lo\\22gits\"})"));
  EXPECT_EQ(parse_module(printed).str(), printed);
  // Two arguments of one name would make `--input NAME=` ambiguous; other attributes are
  // not read, so they are refused rather than dropped.
  const auto fails = [](const std::string& t, const char* fragment) {
    try {
      (void)parse_module(t);
      ADD_FAILURE() << "parsed: " << t;
    } catch (const UserError& e) {
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  fails(
      "module {\n func.func @main(%a: tensor<4xf32> {kiln.name = \"x\"}, %b: tensor<4xf32> "
      "{kiln.name = \"x\"}) {\n return\n }\n}\n",
      "are both named 'x'");
  fails("module {\n func.func @main(%a: tensor<4xf32> {foo.bar = 1}) {\n return\n }\n}\n",
        "expected kiln.name");
}

TEST(IrText, PrintingIsDeterministicAndSortsAttributes) {
  EXPECT_EQ(print(testing::layered_module()), print(testing::layered_module()));
  const std::string text = print(testing::layered_module());
  EXPECT_THAT(text, HasSubstr("{axes = [1], keepdim = true}"));
  EXPECT_THAT(text, HasSubstr("module attributes {kiln.device = \"cpu:0\", kiln.entry = @main}"));
  EXPECT_THAT(text, HasSubstr("func.func private @block(%arg0: tensor<?x16xf32, "
                              "#kiln.tensor<[batch, 16]>>) -> tensor<?x16xf32, "
                              "#kiln.tensor<[batch, 16]>>"));
  EXPECT_THAT(text, HasSubstr("\"func.call\"(%0) {callee = @block, kiln.prefix = \"layers.1.\"}"));
  EXPECT_THAT(text, HasSubstr("loc(\"model.cpp\":12:7)"));
  EXPECT_THAT(text, HasSubstr("return %2, %3 : "));
}

TEST(IrText, CornerCasesPrintAsValidMlirSpellings) {
  const std::string text = print(testing::corner_module());
  EXPECT_THAT(text, HasSubstr("func.func private @\"corner cases \\22quoted\\22\""));
  EXPECT_THAT(text, HasSubstr("tensor<2x3xbf16, #kiln.tensor<cuda:1>>"));
  EXPECT_THAT(text, HasSubstr("dense<[[true, false], [false, true]]> : tensor<2x2xi1>"));
  EXPECT_THAT(text, HasSubstr("dense<\"0x0000C03F000000C0"));
  EXPECT_THAT(text, HasSubstr("%2:2 = \"kiln.split\""));
  EXPECT_THAT(text, HasSubstr("\"kiln.cast\"(%2#1) {dtype = f32}"));
  EXPECT_THAT(text, HasSubstr("{shape = #kiln.shape<[4]>}"));
  EXPECT_THAT(text, HasSubstr("name = \"emb\\0A\\09tab\\5Cle\\7F\""));
  EXPECT_THAT(text, HasSubstr("tensor<?x8xui8, #kiln.tensor<[vocab, 8]>>"));
  EXPECT_THAT(text, HasSubstr("kiln.entry = @weights.v2"));
}

// An op that only holds a float attribute, to round-trip floats through the text.
const OpDef& float_holder() {
  static const OpDef& def = []() -> const OpDef& {
    OpDef d;
    d.name = "test.float_holder";
    d.attributes = {{"v", Attribute::Kind::floating}};
    OpRegistry::global().add(std::move(d));
    return lookup_op("test.float_holder");
  }();
  return def;
}

TEST(IrText, FloatAttributesRoundTripExactly) {
  for (double v :
       {0.0, -0.0, 1.0, 0.1, 1e-05, 1e300, -2.5e-310, 3.0e20,
        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    Module m;
    m.add_graph("main").add_op_typed(float_holder(), {}, {{"v", v}}, {});
    const std::string text = print(m);
    const Module back = parse_module(text);
    const double got = back.entry().op(0).find("v")->as_float();
    EXPECT_EQ(got, v) << text;
    EXPECT_EQ(std::signbit(got), std::signbit(v)) << text;
    EXPECT_EQ(print(back), text);
  }
}

TEST(IrText, ParsesWhatMlirOptWritesBack) {
  // mlir-opt adds type suffixes and reorders nothing else we print.
  const Module m = parse_module(R"(
    module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
      // a comment
      func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
        %0 = "kiln.reduce_sum"(%arg0) {axes = [0 : i64], keepdim = true} : (tensor<4xf32>) -> tensor<1xf32>
        %1 = "kiln.sub"(%arg0, %0) : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
        return %1 : tensor<4xf32>
      }
    })");
  EXPECT_EQ(m.entry().num_ops(), 2u);
  EXPECT_TRUE(verify(m).empty());
}

struct BadInput {
  const char* name;
  const char* text;
  const char* message;  // expected fragment, after "file:line:col: error: "
  const char* position;
};

class IrParseErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(IrParseErrors, ReportFileLineColumnAndWhatWasExpected) {
  const BadInput& bad = GetParam();
  try {
    parse_module(bad.text, "bad.mlir");
    ADD_FAILURE() << "parsed: " << bad.name;
  } catch (const ParseError& e) {
    EXPECT_THAT(e.what(), HasSubstr(bad.message)) << bad.name;
    EXPECT_THAT(e.what(), HasSubstr(std::string("bad.mlir:") + bad.position)) << bad.name;
    EXPECT_THAT(e.what(), HasSubstr(": error: ")) << bad.name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, IrParseErrors,
    ::testing::Values(
        BadInput{"empty", "", "expected 'module' but found end of input", "1:1"},
        BadInput{"truncated", "module attributes {kiln.device = \"cpu:0\"} {\n  func.func @main(",
                 "expected a value (%name) but found end of input", "2:19"},
        BadInput{"unknown op",
                 "module {\n func.func @f(%a: tensor<4xf32>) {\n  %0 = \"kiln.ad\"(%a, %a) : "
                 "(tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n  return\n }\n}",
                 "unknown op 'kiln.ad'; did you mean 'kiln.add'?", "3:8"},
        BadInput{"type mismatch",
                 "module {\n func.func @f(%a: tensor<4xf32>) {\n  %0 = \"kiln.neg\"(%a) : "
                 "(tensor<4xf16>) -> tensor<4xf32>\n  return\n }\n}",
                 "type mismatch: operand 0 of kiln.neg is f32[4] on cpu:0 but the op's type says "
                 "f16[4] on cpu:0",
                 "3:25"},
        BadInput{"undefined value",
                 "module {\n func.func @f(%a: tensor<4xf32>) {\n  %0 = \"kiln.neg\"(%b) : "
                 "(tensor<4xf32>) -> tensor<4xf32>\n  return\n }\n}",
                 "use of undefined value %b in @f", "3:19"},
        BadInput{"use before definition",
                 "module {\n func.func @f(%a: tensor<4xf32>) {\n  %0 = \"kiln.neg\"(%1) : "
                 "(tensor<4xf32>) -> tensor<4xf32>\n  %1 = \"kiln.neg\"(%a) : (tensor<4xf32>) -> "
                 "tensor<4xf32>\n  return\n }\n}",
                 "use of undefined value %1", "3:19"},
        BadInput{"duplicate symbol",
                 "module {\n func.func @f() {\n  return\n }\n func.func @f() {\n  return\n }\n}",
                 "@f is defined twice", "5:12"},
        BadInput{"wrong arity",
                 "module {\n func.func @f(%a: tensor<4xf32>) {\n  %0 = \"kiln.add\"(%a) : "
                 "(tensor<4xf32>) -> tensor<4xf32>\n  return\n }\n}",
                 "kiln.add takes 2 operands, got 1", "3:8"},
        BadInput{"redefined value",
                 "module {\n func.func @f(%a: tensor<4xf32>) {\n  %a = \"kiln.neg\"(%a) : "
                 "(tensor<4xf32>) -> tensor<4xf32>\n  return\n }\n}",
                 "%a is defined twice", "3:3"},
        BadInput{"unknown attribute",
                 "module {\n func.func @f(%a: tensor<4xf32>) {\n  %0 = \"kiln.neg\"(%a) {axis = 1} "
                 ": (tensor<4xf32>) -> tensor<4xf32>\n  return\n }\n}",
                 "kiln.neg has no attribute 'axis' (it takes none)", "3:23"},
        BadInput{"bad element type", "module {\n func.func @f(%a: tensor<4xf33>) {\n return\n }\n}",
                 "expected an element type (f32, f16, bf16, f64, i8, ui8, i32, i64, i1) but found "
                 "'f33>)'",
                 "2:28"},
        BadInput{"unnamed symbolic dim",
                 "module {\n func.func @f(%a: tensor<?xf32>) {\n return\n }\n}",
                 "a '?' dim needs its name", "2:26"},
        BadInput{"return type mismatch",
                 "module {\n func.func @f(%a: tensor<4xf32>) -> tensor<5xf32> {\n  return %a : "
                 "tensor<4xf32>\n }\n}",
                 "result 0 of @f is declared f32[5] on cpu:0 but the returned value is f32[4]",
                 "3:10"},
        BadInput{"missing entry", "module attributes {kiln.entry = @nope} {\n}",
                 "kiln.entry names @nope, which the module does not define", "1:20"},
        BadInput{"unterminated string", "module attributes {kiln.device = \"cpu:0}",
                 "unterminated string literal", "1:41"},
        BadInput{"bad device", "module attributes {kiln.device = \"tpu:0\"} {\n}", "tpu:0", "1:20"},
        BadInput{
            "deep nesting",
            "module {\n func.func @f() {\n  %0 = \"kiln.weight\"() {name = "
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
            "1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
            "} : () -> tensor<f32>\n  return\n }\n}",
            "attributes nest deeper than 64 levels", "3:"},
        BadInput{"trailing garbage", "module {\n}\nmodule {\n}", "expected end of input", "3:1"}),
    [](const auto& param_info) {
      std::string name = param_info.param.name;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

}  // namespace
}  // namespace kiln::ir
