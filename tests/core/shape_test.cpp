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
  KILN_EXPECT_THROW_MSG(parse_shape("[ba-tch]"), UserError, "'ba-tch' is not an identifier");
}

TEST(Shape, OutOfRangeAxisAndOverflow) {
  KILN_EXPECT_THROW_MSG((Shape{2, 3})[2], UserError, "axis 2", "rank 2");
  const Shape huge{std::int64_t{1} << 40, std::int64_t{1} << 40};
  KILN_EXPECT_THROW_MSG(huge.num_elements(), UserError, "2^63 elements or more", "too big");
}

}  // namespace
}  // namespace kiln
