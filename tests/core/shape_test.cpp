#include "kiln/core/shape.hpp"

#include <gtest/gtest.h>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

TEST(Shape, StaticShapeCountsElements) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3u);
  EXPECT_TRUE(s.is_static());
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(Shape{}.num_elements(), 1);
  EXPECT_EQ((Shape{0, 5}).num_elements(), 0);
}

TEST(Shape, SymbolicDimsAreNamed) {
  const Shape s{"batch", 512};
  EXPECT_FALSE(s.is_static());
  EXPECT_FALSE(s[0].is_static());
  EXPECT_EQ(s[0].symbol(), "batch");
  EXPECT_EQ(s[1].size(), 512);
  EXPECT_EQ(s.str(), "[batch, 512]");
  KILN_EXPECT_THROW_MSG(s.num_elements(), UserError, "symbolic dimension 'batch'");
  KILN_EXPECT_THROW_MSG(s[0].size(), UserError, "'batch' is symbolic");
}

TEST(Shape, PrintsAndParsesRoundTrip) {
  for (const Shape& s : {Shape{}, Shape{7}, Shape{2, "seq", 4}, Shape{"b", "h"}})
    EXPECT_EQ(parse_shape(s.str()), s) << s;
  EXPECT_EQ(parse_shape(" 2 , batch "), (Shape{2, "batch"}));
  EXPECT_EQ(parse_shape("[]"), Shape{});
}

TEST(Shape, NegativeDimsAreRejected) {
  KILN_EXPECT_THROW_MSG(Shape({2, -3}), UserError, "-3", "negative");
  KILN_EXPECT_THROW_MSG(parse_shape("[2, -3]"), UserError, "dimension 1 is -3", ">= 0");
}

TEST(Shape, BadTextIsRejectedWithThePiece) {
  KILN_EXPECT_THROW_MSG(parse_shape("[2, 3"), UserError, "does not close");
  KILN_EXPECT_THROW_MSG(parse_shape("[2, , 3]"), UserError, "empty dimension at position 1");
  KILN_EXPECT_THROW_MSG(parse_shape("[2x3]"), UserError, "'2x3'", "not an integer");
  KILN_EXPECT_THROW_MSG(parse_shape("[9b]"), UserError, "'9b'");
  // A minus needs spaces around it, so that a name with a dash is not a difference.
  KILN_EXPECT_THROW_MSG(parse_shape("[ba-tch]"), UserError, "dimension 0",
                        "'ba-tch' is not an integer, a name or an expression");
}

TEST(Dim, ExpressionsAreKeptInOneCanonicalForm) {
  EXPECT_EQ(Dim("seq*batch"), Dim("batch*seq"));
  EXPECT_EQ(Dim("batch*seq").symbol(), "batch*seq");
  EXPECT_EQ(Dim("1 + seq").symbol(), "seq + 1");
  EXPECT_EQ(Dim("2*seq*3 - seq").symbol(), "5*seq");
  EXPECT_EQ(Dim("seq - seq + 4"), Dim(4));  // a constant is a static dim
  EXPECT_TRUE(Dim("seq - seq + 4").is_static());
  EXPECT_TRUE(Dim("batch").is_name());
  EXPECT_FALSE(Dim("2*batch").is_name());
  EXPECT_FALSE(Dim(3).is_name());
  EXPECT_EQ(Dim("-seq + 4").symbol(), "-seq + 4");
  EXPECT_EQ(Dim("b*b*a + a").symbol(), "a*b*b + a");  // by degree, then by names
  for (const Shape& s :
       {Shape{"batch*seq", 4}, Shape{"seq + 1", "4*heads"}, Shape{"a*b - 2*c + 7"}})
    EXPECT_EQ(parse_shape(s.str()), s) << s;
  KILN_EXPECT_THROW_MSG(Dim("seq - seq - 1"), UserError, "is -1", ">= 0");
  KILN_EXPECT_THROW_MSG(Dim("seq+1"), UserError, "'seq+1'", "' + '");
  KILN_EXPECT_THROW_MSG(Dim("seq * "), UserError, "'seq * '");
  KILN_EXPECT_THROW_MSG(Dim("99999999999999999999*seq"), UserError, "99999999999999999999");
}

TEST(Dim, ArithmeticDivisionDifferencesAndValues) {
  const Dim batch("batch"), seq("seq");
  EXPECT_EQ(batch * seq * 8, Dim("8*batch*seq"));
  EXPECT_EQ((seq + 1) * 2, Dim("2*seq + 2"));
  EXPECT_EQ(seq + 1 - seq, Dim(1));
  EXPECT_EQ(Dim(6) * 7, Dim(42));
  EXPECT_EQ(divide_exactly(Dim("8*batch*seq"), Dim("2*seq")), Dim("4*batch"));
  EXPECT_EQ(divide_exactly(Dim("2*seq + 2"), Dim(2)), seq + 1);
  EXPECT_EQ(divide_exactly(Dim(12), Dim(4)), Dim(3));
  EXPECT_FALSE(divide_exactly(Dim("2*seq + 1"), Dim(2)));  // not for every seq
  EXPECT_FALSE(divide_exactly(Dim("batch*seq"), Dim("heads")));
  EXPECT_FALSE(divide_exactly(seq, Dim(0)));
  EXPECT_FALSE(divide_exactly(seq, seq + 1));  // by a sum: refused
  EXPECT_EQ(constant_difference(seq + 1, seq), 1);
  EXPECT_EQ(constant_difference(seq, seq + 3), -3);
  EXPECT_EQ(constant_difference(Dim(5), Dim(2)), 3);
  EXPECT_FALSE(constant_difference(seq * 2, seq));
  EXPECT_EQ(dim_names(Dim("b*a*b + c")), (std::vector<std::string>{"a", "b", "c"}));
  const auto sizes = [](const std::string& name) -> std::optional<std::int64_t> {
    if (name == "batch") return 3;
    if (name == "seq") return 5;
    return std::nullopt;
  };
  EXPECT_EQ(evaluate_dim(Dim("batch*seq + 1"), sizes), 16);
  EXPECT_EQ(evaluate_dim(Dim(7), sizes), 7);
  KILN_EXPECT_THROW_MSG(evaluate_dim(Dim("heads*seq"), sizes), UserError,
                        "'heads' is bound by no input");
  KILN_EXPECT_THROW_MSG(evaluate_dim(Dim("seq - 2*batch"), sizes), UserError, "is -1");
  KILN_EXPECT_THROW_MSG(Dim(2) - Dim(3), UserError, "is -1");
  KILN_EXPECT_THROW_MSG(Dim(std::int64_t{1} << 62) * 4, UserError, "overflows");
  // A hostile chain of products cannot grow an expression without bound: (a + b)^7 has 8
  // terms, (a + b + ... + h)^3 has 120.
  Dim power = Dim("a + b");
  for (int i = 0; i < 6; ++i) power = power * Dim("a + b");
  EXPECT_EQ(dim_names(power), (std::vector<std::string>{"a", "b"}));
  const Dim eight("a + b + c + d + e + f + g + h");
  KILN_EXPECT_THROW_MSG(eight * eight * eight, UserError, "more than 64 terms");
  const auto power_of_a = [](int n) {
    Dim d("a");
    for (int i = 1; i < n; ++i) d = d * Dim("a");
    return d;
  };
  EXPECT_EQ(dim_names(power_of_a(16)), std::vector<std::string>{"a"});
  KILN_EXPECT_THROW_MSG(power_of_a(17), UserError, "degree above 16");
}

TEST(Shape, OutOfRangeAxisAndOverflow) {
  KILN_EXPECT_THROW_MSG((Shape{2, 3})[2], UserError, "axis 2", "rank 2");
  const Shape huge{std::int64_t{1} << 40, std::int64_t{1} << 40};
  KILN_EXPECT_THROW_MSG(huge.num_elements(), UserError, "2^63 elements or more", "too big");
}

}  // namespace
}  // namespace kiln
