// Thousands of random well-typed graphs, compiled and compared with the reference
// interpreter. Seeded and reproducible: a failure prints the seed and the module's MLIR.
// (The same programs run on the emulated GPU in tests/cuda/cuda_backend_test.cpp.)

#include <gtest/gtest.h>

#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "random_programs.hpp"

namespace kiln {
namespace {

/// \p graphs random graphs compiled and compared with the reference; input dims from
/// \p smallest_dim to 4 (0: some inputs are empty).
void expect_random_graphs_match(std::uint64_t graphs, std::int64_t smallest_dim,
                                DType dtype = DType::f32, double tolerance = 2e-5) {
  std::uint64_t compared = 0;
  for (std::uint64_t seed = 1; seed <= graphs; ++seed) {
    const testing::RandomCase c = testing::random_case(seed, smallest_dim, dtype);
    CompiledCallable compiled(c.staged, {});
    const std::string diff = testing::compare_outputs(
        compiled.run(c.inputs), reference_run(c.staged.graph(), c.inputs), tolerance);
    if (!diff.empty()) {
      ADD_FAILURE() << "random graph seed " << seed << ": " << diff << " (the reference)\n"
                    << c.staged.str();
      return;
    }
    ++compared;
  }
  EXPECT_EQ(compared, graphs);
}

TEST(RandomGraphs, CompiledEqualsReference) { expect_random_graphs_match(2000, 1); }

// Dims of size 0 too: every kernel must handle an empty operand or output (an empty batch
// once divided by zero in the matmul).
TEST(RandomGraphs, CompiledEqualsReferenceWithEmptyDims) { expect_random_graphs_match(1000, 0); }

TEST(RandomGraphs, CompiledEqualsReferenceInF64) {
  expect_random_graphs_match(500, 1, DType::f64, 1e-12);
}
TEST(RandomGraphs, CompiledEqualsReferenceInF16) {
  expect_random_graphs_match(500, 1, DType::f16, 1e-2);
}
TEST(RandomGraphs, CompiledEqualsReferenceInBf16) {
  expect_random_graphs_match(500, 1, DType::bf16, 2e-2);
}

}  // namespace
}  // namespace kiln
