// A compiled call through execute_into allocates nothing in kiln's code once its plan
// exists: the copy in, the replay of every kernel (matmuls with epilogues, views, fused
// chains, softmax, norms, gathers) and the copy out. Counted by the replaced global
// allocator of this program (see runtime/replay_allocation_test.cpp). The matmuls run as
// sgemm (prepack_weights off): the oneDNN matmul primitive of prepacked weights builds a
// small argument map with operator new on every execution (see docs/api.md).

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../allocation_counter.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/stage/nn.hpp"

namespace kiln {
namespace {

TensorLayout f32_layout(std::initializer_list<Dim> dims) { return TensorLayout(DType::f32, dims); }

/// Random weights for every weight \p staged declares.
std::map<std::string, Tensor> weights_for(const StagedGraph& staged) {
  std::map<std::string, Tensor> weights;
  std::uint64_t seed = 1;
  for (const auto& [name, type] : module_weights(staged.graph()))
    weights.emplace(name, Tensor::random(TensorLayout(type.dtype, type.shape), seed++, -0.2, 0.2));
  return weights;
}

/// Expects 20 calls of execute_into, after 20 that warm every thread up, to allocate
/// nothing and to compute what execute_raw does.
void expect_calls_allocate_nothing(CompiledCallable& compiled, const std::vector<Tensor>& inputs) {
  const std::vector<Tensor> want = compiled.execute_raw(inputs);
  std::vector<std::byte> out(compiled.output_bytes(inputs).at(0));
  const std::vector<std::span<std::byte>> buffers{out};
  for (int i = 0; i < 20; ++i) compiled.execute_into(inputs, buffers);

  const std::size_t before = g_allocations.load();
  for (int i = 0; i < 20; ++i) compiled.execute_into(inputs, buffers);
  const std::size_t allocations = g_allocations.load() - before;

  EXPECT_EQ(allocations, 0u) << "20 calls allocated " << allocations << " times";
  ASSERT_EQ(out.size(), want[0].bytes().size());
  EXPECT_EQ(std::memcmp(out.data(), want[0].bytes().data(), out.size()), 0);
}

class CallAllocation : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Threads, CallAllocation, ::testing::Values(1, 2));

TEST_P(CallAllocation, ExecuteIntoAllocatesNothing) {
  const nn::TransformerBlock block{.dim = 64, .heads = 4, .hidden = 256};
  const auto model = [&](Tensor ids) {
    Tensor x = nn::Embedding{100, 64, "embed"}(ids);
    const auto layer = as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 2; ++i) {
      name_scope scope("layers." + std::to_string(i));
      x = layer(x);
    }
    return softmax(nn::Linear{64, 100, false, "head"}(nn::RMSNorm{64, 1e-6, "norm"}(x)), -1);
  };
  const StagedGraph staged = stage(model)(TensorLayout(DType::i64, {"batch", "seq"}));
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{GetParam()});
  CompiledCallable compiled(staged, weights_for(staged),
                            {.context = ctx, .prepack_weights = false});
  expect_calls_allocate_nothing(compiled,
                                {Tensor::random(TensorLayout(DType::i64, {2, 48}), 5, 0, 100)});
}

/// A batch-1 MLP: 256 -> 2 x 256 (relu) -> 10.
StagedGraph batch_one_mlp() {
  const auto model = [](Tensor x) {
    for (int i = 0; i < 2; ++i)
      x = relu(nn::Linear{256, 256, true, "layers." + std::to_string(i)}(x));
    return nn::Linear{256, 10, true, "head"}(x);
  };
  return stage(model)(f32_layout({1, 256}));
}

TEST_P(CallAllocation, ABatchOneMlpWithPackedWeightsAllocatesNothing) {
  // Matmuls of one row run on kiln's column panels, weights packed (the default).
  const StagedGraph staged = batch_one_mlp();
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{GetParam()});
  CompiledCallable compiled(staged, weights_for(staged), {.context = ctx});
  expect_calls_allocate_nothing(compiled, {Tensor::random(f32_layout({1, 256}), 5)});
  EXPECT_EQ(compiled.stats().skinny_matmuls, 3u);
}

TEST_P(CallAllocation, ABatchOneBf16MlpAllocatesNothing) {
  // bf16 Linear layers at batch 1: column panels of bf16 weights. (Larger batches run
  // oneDNN primitives, whose execution allocates inside oneDNN, bf16 or not.)
  const StagedGraph staged = batch_one_mlp();
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{GetParam()});
  CompiledCallable compiled(staged, weights_for(staged),
                            {.context = ctx, .matmul_precision = MatmulPrecision::bf16});
  expect_calls_allocate_nothing(compiled, {Tensor::random(f32_layout({1, 256}), 5)});
  EXPECT_EQ(compiled.stats().bf16_matmuls, 3u);
  EXPECT_EQ(compiled.stats().skinny_matmuls, 3u);
}

}  // namespace
}  // namespace kiln
