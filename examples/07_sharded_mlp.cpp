// A tensor-parallel MLP on a 2 x 2 mesh of virtual CPU devices: the batch split over
// "dp", the hidden units over "tp" (column-parallel W1, row-parallel W2), one allreduce
// per tp pair, compared with the same MLP on one device.

#include <cmath>
#include <cstdio>

#include "kiln/kiln.hpp"

int main() {
  kiln::set_cpu_device_count(4);  // cpu:0 ... cpu:3 (or KILN_CPU_DEVICES=4)
  const kiln::DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
  const std::int64_t batch = 8, dim = 64, hidden = 256;
  using kiln::Replicated, kiln::Sharded;
  const kiln::ShardedLayout x_layout(kiln::DType::f32, {batch, dim}, mesh,
                                     {Sharded{0}, Replicated{}});
  const kiln::ShardedLayout w1_layout(kiln::DType::f32, {dim, hidden}, mesh,
                                      {Replicated{}, Sharded{1}});
  const kiln::ShardedLayout w2_layout(kiln::DType::f32, {hidden, dim}, mesh,
                                      {Replicated{}, Sharded{0}});

  const auto mlp = [&](std::vector<kiln::Tensor> x_shards) {  // one input per device
    const kiln::ShardedTensor x(x_shards, x_layout);
    const kiln::ShardedTensor h = gelu(matmul(x, kiln::sharded_weight("w1", w1_layout)));
    const kiln::ShardedTensor y = matmul(h, kiln::sharded_weight("w2", w2_layout));
    std::printf("h: %s\ny: %s\n", h.layout().str().c_str(), y.layout().str().c_str());
    return redistribute(y, x_layout.placements()).shards();  // Partial -> allreduce over tp
  };
  const kiln::StagedGraph staged = kiln::stage(mlp)(x_layout.shards());

  const kiln::Tensor x =
      kiln::Tensor::random(kiln::TensorLayout(kiln::DType::f32, {batch, dim}), 1);
  const kiln::Tensor w1 =
      kiln::Tensor::random(kiln::TensorLayout(kiln::DType::f32, {dim, hidden}), 2, -0.1, 0.1);
  const kiln::Tensor w2 =
      kiln::Tensor::random(kiln::TensorLayout(kiln::DType::f32, {hidden, dim}), 3, -0.1, 0.1);
  auto weights = kiln::shard_weights("w1", w1, w1_layout);
  weights.merge(kiln::shard_weights("w2", w2, w2_layout));
  kiln::CompiledCallable sharded(staged, weights);  // one device graph per device
  const kiln::Tensor y = kiln::unshard(sharded.run(kiln::shard_tensor(x, x_layout)), x_layout);

  const auto whole = [](kiln::Tensor a, kiln::Tensor b, kiln::Tensor c) {
    return matmul(gelu(matmul(a, b)), c);
  };
  kiln::CompiledCallable one(kiln::stage(whole)(x.layout(), w1.layout(), w2.layout()), {});
  const std::vector<double> got = y.to_doubles(), want = one.run({x, w1, w2})[0].to_doubles();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  std::printf("signal devices: %zu; max |sharded - single device| = %.2g (%s)\n",
              staged.signal_device_ids().size(), worst, worst < 1e-4 ? "ok" : "WRONG");
  return worst < 1e-4 ? 0 : 1;
}
