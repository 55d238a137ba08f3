// Ops staged through kiln's helpers (kiln::nn layers, sharded ops, as_subgraph, constants)
// are located at the user's call site, in this file: never in kiln's sources or headers,
// so that printed modules do not depend on where kiln was built.

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/runtime/device_context.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/sharding.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

// Every op of every graph with a location is located in this file; returns their lines.
std::vector<std::uint32_t> expect_located_here(const StagedGraph& staged) {
  std::vector<std::uint32_t> lines;
  for (std::size_t g = 0; g < staged.graph().num_graphs(); ++g) {
    const ir::Graph& graph = staged.graph().graph(g);
    for (std::size_t i = 0; i < graph.num_ops(); ++i) {
      const ir::Location& at = graph.op(i).location();
      if (!at.known()) continue;
      EXPECT_EQ(at.file, __FILE__)
          << graph.op(i).name() << " in @" << graph.name() << " at " << at.file << ":" << at.line;
      lines.push_back(at.line);
    }
  }
  EXPECT_FALSE(lines.empty());
  std::ostringstream text;
  text << staged;
  EXPECT_EQ(text.str().find("src/stage"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("include/kiln"), std::string::npos) << text.str();
  return lines;
}

const TensorLayout kTokens(DType::f32, {2, 5, 16});

TEST(Locations, EveryLayerOfKilnNnLocatesItsOpsAtTheCall) {
  const auto model = [](Tensor ids) {
    Tensor x = nn::Embedding{.vocab = 50, .dim = 16, .name = "embed"}(ids);
    x = nn::LayerNorm{.dim = 16, .name = "ln"}(x);
    x = nn::RMSNorm{.dim = 16, .name = "rms"}(x);
    x = nn::MultiHeadAttention{.dim = 16, .heads = 4}(x);
    x = nn::MLP{.dim = 16, .hidden = 32}(x);
    x = nn::TransformerBlock{.dim = 16, .heads = 2, .hidden = 32, .name = "block"}(x);
    return nn::Linear{.in = 16, .out = 3, .name = "head"}(x);
  };
  const StagedGraph staged = stage(model)(TensorLayout(DType::i64, {2, 5}));
  const std::vector<std::uint32_t> lines = expect_located_here(staged);
  // Each op is at one of the seven calls above.
  for (std::uint32_t line : lines) {
    EXPECT_GE(line, static_cast<std::uint32_t>(__LINE__ - 12));
    EXPECT_LE(line, static_cast<std::uint32_t>(__LINE__ - 6));
  }
}

TEST(Locations, ALayerAsASubgraphLocatesItsBodyAndItsCallsAtTheCallers) {
  const nn::TransformerBlock block{.dim = 16, .heads = 2, .hidden = 32};
  const auto model = [&](Tensor x) {
    const auto layer = as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 2; ++i) {
      name_scope scope("layers." + std::to_string(i));
      x = layer(x);  // the call op's line and, for the first call, the body's
    }
    return x;
  };
  const std::uint32_t call_line = __LINE__ - 4;
  const StagedGraph staged = stage(model)(kTokens);
  ASSERT_GE(staged.graph().num_graphs(), 2u);
  for (std::uint32_t line : expect_located_here(staged)) EXPECT_EQ(line, call_line);
}

TEST(Locations, ALayerStagedByItselfLocatesItsOpsAtTheStageCall) {
  const StagedGraph staged = stage(nn::MLP{.dim = 16, .hidden = 32})(kTokens);
  const std::uint32_t stage_line = __LINE__ - 1;
  for (std::uint32_t line : expect_located_here(staged)) EXPECT_EQ(line, stage_line);
}

TEST(Locations, ConstantsAndCompositeOpsAreLocatedAtTheirUse) {
  const auto fn = [](Tensor x) {
    const Tensor c = Tensor::constant({1, 2, 3, 4}, {4});
    Tensor y = x * c + 1.0;
    y = gelu(y, "tanh") + gelu(y) + silu(y) + sigmoid(y) + softmax(y) + log_softmax(y);
    y = y + rms_norm(y, c) + layer_norm(y, c, c) + mean(y, {1}, true) + rsqrt(abs(y) + 1.0);
    y = concat(split(y, {2, 2}, 1), 1) + broadcast_to(c, Shape{3, 4}) + transpose(y, 0, 1 - 1);
    return y + cast(arange(0, 4), DType::f32) + max(y, {1}, true) - min(y, {0}, true);
  };
  expect_located_here(stage(fn)(TensorLayout(DType::f32, {3, 4})));
}

TEST(Locations, ShardedOpsLocateTheirShardOpsAndCollectivesAtTheCall) {
  set_cpu_device_count(2);
  const DeviceMesh mesh({{"tp", 2}});
  const ShardedLayout x_layout(DType::f32, {4, 8}, mesh, {Replicated{}});
  const ShardedLayout w1_layout(DType::f32, {8, 16}, mesh, {Sharded{1}});
  const ShardedLayout w2_layout(DType::f32, {16, 8}, mesh, {Sharded{0}});
  const auto mlp = [&](std::vector<Tensor> xs) {
    const ShardedTensor x(xs, x_layout);
    const ShardedTensor h = gelu(matmul(x, sharded_weight("w1", w1_layout)));
    const ShardedTensor y = matmul(relu(h), sharded_weight("w2", w2_layout));  // Partial
    const ShardedTensor z = y * 0.5 + y - x * x;  // reduces the partial sums
    return redistribute(sum(reshape(z, Shape{4, 8}), 1), {Replicated{}}).shards();
  };
  expect_located_here(stage(mlp)(x_layout.shards()));
}

}  // namespace
}  // namespace kiln
