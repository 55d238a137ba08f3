#include "kiln/runtime/inline_function.hpp"

#include <gtest/gtest.h>

#include <array>
#include <memory>

namespace kiln::detail {
namespace {

TEST(InlineFunction, CallsSmallAndLargeCallables) {
  int hits = 0;
  InlineFunction<int(int)> small = [&hits](int x) {
    ++hits;
    return x + 1;
  };
  std::array<int, 64> big{};  // 256 bytes: stored on the heap
  big[3] = 40;
  InlineFunction<int(int)> large = [big](int x) { return x + big[3]; };
  EXPECT_EQ(small(1), 2);
  EXPECT_EQ(large(2), 42);
  EXPECT_EQ(hits, 1);
}

TEST(InlineFunction, MoveTransfersAndEmptiesTheSource) {
  auto counter = std::make_shared<int>(0);
  InlineFunction<void()> a = [counter] { ++*counter; };
  InlineFunction<void()> b = std::move(a);
  EXPECT_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): checking the contract
  b();
  EXPECT_EQ(*counter, 1);
  EXPECT_EQ(counter.use_count(), 2);
  b.reset();
  EXPECT_EQ(counter.use_count(), 1);  // destroyed the captured copy
}

TEST(InlineFunction, TargetGivesTheStoredCallableOfThatType) {
  struct Add {
    int k;
    int operator()(int x) const { return x + k; }
  };
  InlineFunction<int(int)> f = Add{5};
  ASSERT_NE(f.target<Add>(), nullptr);
  f.target<Add>()->k = 7;
  EXPECT_EQ(f(1), 8);
  EXPECT_EQ(f.target<int (*)(int)>(), nullptr);
}

}  // namespace
}  // namespace kiln::detail
