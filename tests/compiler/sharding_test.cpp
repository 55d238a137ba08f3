// Sharded tensors on device meshes: layouts, propagation and redistribution, checked by
// compiling sharded programs and comparing with the unsharded ones.

#include "kiln/stage/sharding.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "../cpu_devices.hpp"
#include "../error_matchers.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/core/error.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

void expect_near(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  for (std::size_t k = 0; k < g.size(); ++k)
    ASSERT_NEAR(g[k], w[k], 1e-4 * (1 + std::fabs(w[k]))) << what << " element " << k;
}

TEST(DeviceMesh, NamesAxesAndGroupsDevicesAlongThem) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 3}});
  EXPECT_EQ(mesh.size(), 6);
  EXPECT_EQ(mesh.devices()[5], Device::cpu(5));
  EXPECT_EQ(mesh.axis("tp"), 1u);
  EXPECT_EQ(mesh.coords(4), (std::vector<int>{1, 1}));
  EXPECT_EQ(mesh.group(4, 1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(mesh.group(4, 0), (std::vector<int>{1, 4}));
  EXPECT_EQ(mesh.str(), "mesh[dp=2, tp=3]");
  KILN_EXPECT_THROW_MSG(mesh.axis("pp"), UserError, "no axis 'pp' in mesh[dp=2, tp=3]");
  KILN_EXPECT_THROW_MSG(DeviceMesh({{"a", 2}, {"a", 2}}), UserError, "axis 'a' appears twice");
  KILN_EXPECT_THROW_MSG(DeviceMesh({{"a", 2}}, {Device::cpu(0)}), UserError,
                        "has 2 positions but 1 devices were given");
}

TEST(ShardedLayout, SplitsUnevenlyByAtMostOne) {
  const ShardedLayout l(DType::f32, {10, 6}, DeviceMesh({{"dp", 3}, {"tp", 2}}),
                        {Sharded{0}, Sharded{-1}});
  EXPECT_EQ(l.shard(0).shape, (Shape{4, 3}));  // 10 over 3: 4, 3, 3
  EXPECT_EQ(l.shard(5).shape, (Shape{3, 3}));
  EXPECT_EQ(l.shard(5).device, Device::cpu(5));
  EXPECT_EQ(l.offsets(5), (std::vector<std::int64_t>{7, 3}));
  EXPECT_EQ(l.str(), "f32[10, 6] on mesh[dp=3, tp=2] as (Sharded(0), Sharded(1))");
  KILN_EXPECT_THROW_MSG(
      ShardedLayout(DType::f32, {4}, DeviceMesh({{"a", 2}, {"b", 1}}), {Sharded{0}, Sharded{0}}),
      UserError, "tensor axis 0 is sharded along two mesh axes");
  KILN_EXPECT_THROW_MSG(
      ShardedLayout(DType::f32, {4}, DeviceMesh({{"a", 2}}), {Replicated{}, Replicated{}}),
      UserError, "2 placements for 1 mesh axes");
}

TEST(ShardedLayout, ShardAndUnshardAreInverse) {
  const DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  const Tensor global = Tensor::random(TensorLayout(DType::f32, {5, 7}), 3);
  for (const std::vector<Placement>& ps : {std::vector<Placement>{Sharded{0}, Sharded{1}},
                                           {Replicated{}, Sharded{0}},
                                           {Partial{}, Replicated{}},
                                           {Sharded{1}, Partial{}}}) {
    const ShardedLayout layout(DType::f32, {5, 7}, mesh, ps);
    expect_near(unshard(shard_tensor(global, layout), layout), global, layout.str());
  }
}

// Integers are sharded, summed and gathered exactly: an i64 above 2^53 (a double would
// round it), and i8 sums that wrap as two's complement, through the collectives too.
TEST(ShardedLayout, IntegersShardAndSumExactly) {
  const testing::CpuDevices devices(4);
  const DeviceMesh mesh({{"x", 4}});
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  const Tensor global =
      Tensor::from_data(std::vector<std::int64_t>{big, -big, big + 2, 7}, Shape{4});
  for (const Placement& p : std::vector<Placement>{Sharded{0}, Replicated{}, Partial{}}) {
    const ShardedLayout layout(DType::i64, {4}, mesh, {p});
    EXPECT_EQ(unshard(shard_tensor(global, layout), layout).to_vector<std::int64_t>(),
              global.to_vector<std::int64_t>())
        << layout.str();
  }
  // Partial -> Replicated is an allreduce: four i64 pieces, then four i8 pieces of 100.
  for (const DType dtype : {DType::i64, DType::i8}) {
    const ShardedLayout in(dtype, {4}, mesh, {Partial{}});
    const auto f = [&](std::vector<Tensor> xs) {
      return redistribute(ShardedTensor(xs, in), {Replicated{}}).shards();
    };
    const StagedGraph staged = stage(f)(in.shards());
    // Collectives on four devices, whose signal buffers the callable owns: no graph inputs.
    EXPECT_EQ(staged.signal_device_ids(), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_FALSE(staged.signal_buffer_index().has_value());
    CompiledCallable c(staged, {});
    std::vector<Tensor> pieces;
    for (int i = 0; i < 4; ++i)
      pieces.push_back(dtype == DType::i64
                           ? Tensor::from_data(std::vector<std::int64_t>{big, 1, -1, 0}, Shape{4},
                                               Device::cpu(i))
                           : Tensor::from_data(std::vector<std::int8_t>{100, 1, -1, 0}, Shape{4},
                                               Device::cpu(i)));
    const std::vector<Tensor> got = c.run(pieces);
    if (dtype == DType::i64) {
      EXPECT_EQ(got[3].to_vector<std::int64_t>()[0], 4 * big);
    } else {
      EXPECT_EQ(got[3].to_vector<std::int8_t>()[0], static_cast<std::int8_t>(400 - 512));
    }
  }
}

/// Compiles \p sharded (over the mesh) and \p whole (on cpu:0) and compares the global
/// results.
struct Mesh2x2 {
  testing::CpuDevices devices{4};
  DeviceMesh mesh{{{"dp", 2}, {"tp", 2}}};
};

TEST(Sharding, ATensorParallelMlpOnA2x2MeshEqualsTheUnshardedOne) {
  const Mesh2x2 m;
  const std::int64_t batch = 6, dim = 32, hidden = 80;
  const ShardedLayout x_layout(DType::f32, {batch, dim}, m.mesh, {Sharded{0}, Replicated{}});
  const ShardedLayout w1_layout(DType::f32, {dim, hidden}, m.mesh, {Replicated{}, Sharded{1}});
  const ShardedLayout w2_layout(DType::f32, {hidden, dim}, m.mesh, {Replicated{}, Sharded{0}});
  const ShardedLayout out_layout(DType::f32, {batch, dim}, m.mesh, {Sharded{0}, Replicated{}});
  int allreduces = 0;
  const auto sharded = [&](std::vector<Tensor> xs) {
    const ShardedTensor x(xs, x_layout);
    const ShardedTensor h = gelu(matmul(x, sharded_weight("w1", w1_layout)));  // column-parallel
    const ShardedTensor y = matmul(h, sharded_weight("w2", w2_layout));        // Partial on tp
    EXPECT_TRUE(std::holds_alternative<Partial>(y.layout().placements()[1]));
    return redistribute(y, out_layout.placements()).shards();  // allreduce over tp pairs
  };
  const StagedGraph s = stage(sharded)(x_layout.shards());
  for (std::size_t g = 0; g < s.graph().num_graphs(); ++g)
    for (std::size_t i = 0; i < s.graph().graph(g).num_ops(); ++i)
      allreduces += s.graph().graph(g).op(i).name() == "kiln.allreduce_sum";
  EXPECT_EQ(allreduces, 2);  // one per tp group: {cpu:0, cpu:1} and {cpu:2, cpu:3}
  EXPECT_EQ(s.signal_device_ids(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(s.in_layouts().size(), 4u);  // one input per shard, in mesh order
  EXPECT_EQ(s.in_layouts()[3], x_layout.shard(3));

  const Tensor x = Tensor::random(TensorLayout(DType::f32, {batch, dim}), 1);
  const Tensor w1 = Tensor::random(TensorLayout(DType::f32, {dim, hidden}), 2, -0.3, 0.3);
  const Tensor w2 = Tensor::random(TensorLayout(DType::f32, {hidden, dim}), 3, -0.3, 0.3);
  std::map<std::string, Tensor> weights = shard_weights("w1", w1, w1_layout);
  weights.merge(shard_weights("w2", w2, w2_layout));
  CompiledCallable tp(s, weights);
  const Tensor got = unshard(tp.run(shard_tensor(x, x_layout)), out_layout);

  const auto whole = [](Tensor xx, Tensor a, Tensor b) { return matmul(gelu(matmul(xx, a)), b); };
  const StagedGraph u = stage(whole)(x.layout(), w1.layout(), w2.layout());
  CompiledCallable one(u, {});
  expect_near(got, one.run({x, w1, w2})[0], "tp mlp");
}

TEST(Sharding, ADataParallelStepEqualsTheUnshardedOne) {
  // Each data-parallel replica computes a loss-like sum over its batch rows; the sum over
  // the sharded batch axis is Partial, and the allreduce makes every replica hold it.
  const Mesh2x2 m;
  const ShardedLayout x_layout(DType::f32, {10, 12}, m.mesh, {Sharded{0}, Replicated{}});
  const ShardedLayout w_layout(DType::f32, {12, 4}, m.mesh, {Replicated{}, Replicated{}});
  const auto step = [&](std::vector<Tensor> xs) {
    const ShardedTensor x(xs, x_layout);
    const ShardedTensor y = relu(matmul(x, sharded_weight("w", w_layout))) * 0.5;
    const ShardedTensor g = sum(y, 0);  // Partial on dp
    EXPECT_TRUE(std::holds_alternative<Partial>(g.layout().placements()[0]));
    return redistribute(g, {Replicated{}, Replicated{}}).shards();
  };
  const StagedGraph s = stage(step)(x_layout.shards());
  const Tensor x = Tensor::random(TensorLayout(DType::f32, {10, 12}), 4);
  const Tensor w = Tensor::random(TensorLayout(DType::f32, {12, 4}), 5);
  CompiledCallable dp(s, shard_weights("w", w, w_layout));
  const std::vector<Tensor> got = dp.run(shard_tensor(x, x_layout));
  const auto whole = [](Tensor xx, Tensor ww) { return sum(relu(matmul(xx, ww)) * 0.5, {0}); };
  const Tensor want = CompiledCallable(stage(whole)(x.layout(), w.layout()), {}).run({x, w})[0];
  ASSERT_EQ(got.size(), 4u);
  for (const Tensor& replica : got)  // every device holds the whole result
    expect_near(Tensor::from_bytes(replica.dtype(), replica.shape(), Device::cpu(),
                                   replica.bytes().data(), replica.bytes().size()),
                want, "dp step");
}

TEST(Sharding, EveryPlacementChangeRoundTrips) {
  // Redistribute a [6, 8] value through each pair of placements on a 4-device axis (with
  // the other axis of size 1), then back to Replicated: the value must not change.
  const testing::CpuDevices devices(4);
  const DeviceMesh mesh({{"x", 4}, {"y", 1}});
  const std::vector<Placement> all = {Replicated{}, Sharded{0}, Sharded{1}, Partial{}};
  const Tensor global = Tensor::random(TensorLayout(DType::f32, {6, 8}), 9);
  for (const Placement& from : all)
    for (const Placement& to : all) {
      const ShardedLayout in(DType::f32, {6, 8}, mesh, {from, Replicated{}});
      const ShardedLayout out(DType::f32, {6, 8}, mesh, {to, Replicated{}});
      const auto f = [&](std::vector<Tensor> xs) {
        return redistribute(ShardedTensor(xs, in), out.placements()).shards();
      };
      CompiledCallable c(stage(f)(in.shards()), {});
      const std::string what = to_string(from) + " -> " + to_string(to);
      const std::vector<Tensor> got = c.run(shard_tensor(global, in));
      expect_near(unshard(got, out), global, what);
      if (!std::holds_alternative<Partial>(to)) {  // every device holds exactly its piece
        const std::vector<Tensor> want = shard_tensor(global, out);
        for (std::size_t i = 0; i < got.size(); ++i)
          expect_near(got[i], want[i], what + ", device " + std::to_string(i));
      }
    }
}

TEST(Sharding, ReshapeKeepsAShardedAxisThatSurvivesAndGathersOneThatDoesNot) {
  const Mesh2x2 m;
  const ShardedLayout in(DType::f32, {6, 4, 5}, m.mesh, {Sharded{0}, Sharded{2}});
  const Tensor global = Tensor::random(TensorLayout(DType::f32, {6, 4, 5}), 8);
  const auto f = [&](std::vector<Tensor> xs) {
    // [6, 4, 5] -> [6, 20]: axis 0 survives (still sharded), axis 2 merges (gathered).
    const ShardedTensor y = reshape(ShardedTensor(xs, in), Shape{6, 20});
    EXPECT_EQ(y.layout().placements()[0], Placement{Sharded{0}});
    EXPECT_EQ(y.layout().placements()[1], Placement{Replicated{}});
    return y.shards();
  };
  CompiledCallable c(stage(f)(in.shards()), {});
  const ShardedLayout out(DType::f32, {6, 20}, m.mesh, {Sharded{0}, Replicated{}});
  const Tensor want = Tensor::from_bytes(DType::f32, {6, 20}, Device::cpu(), global.bytes().data(),
                                         global.bytes().size());
  expect_near(unshard(c.run(shard_tensor(global, in)), out), want, "reshape");
}

TEST(Sharding, MismatchedShardsAreNamed) {
  const testing::CpuDevices devices(2);
  const ShardedLayout l(DType::f32, {4, 4}, DeviceMesh({{"tp", 2}}), {Sharded{0}});
  KILN_EXPECT_THROW_MSG(
      ShardedTensor(std::vector<Tensor>{Tensor(l.shard(0)), Tensor(l.shard(0))}, l), UserError,
      "shard 1 is f32[2, 4] on cpu:0 but", "puts f32[2, 4] on cpu:1 there");
}

}  // namespace
}  // namespace kiln
