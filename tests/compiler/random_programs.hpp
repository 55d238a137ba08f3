#pragma once
// Random well-typed programs over tensors, decided by a seed alone (the random-graph
// differential tests: tests/compiler/random_graph_test.cpp against the reference
// interpreter on the CPU, tests/cuda/cuda_backend_test.cpp on the emulated GPU).

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/stage/stage.hpp"
#include "kiln/stage/tensor.hpp"

namespace kiln::testing {

/// One random case: a staged program and inputs for it.
struct RandomCase {
  std::vector<Tensor> inputs;
  StagedGraph staged;
};

/// The case of \p seed: 1 to 3 inputs of rank 0 to 3 with dims from \p smallest_dim to 4
/// (0: some inputs are empty) in \p dtype, and a program of 3 to 12 random ops over them
/// with two outputs.
RandomCase random_case(std::uint64_t seed, std::int64_t smallest_dim, DType dtype);

/// Empty when \p got equals \p want (same layouts; values equal, both NaN, or within
/// \p tolerance relative to 1 + |want|); else what differs.
std::string compare_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                            double tolerance);

}  // namespace kiln::testing
