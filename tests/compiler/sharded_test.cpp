// Programs over several devices (virtual CPU devices): collective ops compiled into one
// device graph per device that meet in signal-buffer collectives, checked against the
// reference interpreter (which computes what a single device would).

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../cpu_devices.hpp"
#include "../error_matchers.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"

namespace kiln {
namespace {

TensorLayout on(int device, DType dtype, Shape shape) {
  return TensorLayout(dtype, std::move(shape), Device::cpu(device));
}

std::vector<Tensor> random_inputs(const StagedGraph& s, std::uint64_t seed) {
  std::vector<Tensor> out;
  for (const TensorLayout& l : s.in_layouts())
    out.push_back(is_floating(l.dtype) ? Tensor::random(l, seed++, -2, 2)
                                       : Tensor::random(l, seed++, -50, 50));
  return out;
}

void expect_equal_to_reference(const StagedGraph& staged, const std::vector<Tensor>& in,
                               const std::map<std::string, Tensor>& weights,
                               const std::string& what, double tolerance = 1e-5) {
  CompiledCallable compiled(staged, weights);
  const std::vector<Tensor> got = compiled.run(in);
  const std::vector<Tensor> want = reference_run(staged.graph(), in, weights);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].layout(), want[i].layout()) << what << " output " << i;
    const std::vector<double> g = got[i].to_doubles(), w = want[i].to_doubles();
    for (std::size_t k = 0; k < g.size(); ++k)
      ASSERT_LE(std::fabs(g[k] - w[k]), tolerance * (1 + std::fabs(w[k])))
          << what << " output " << i << " element " << k;
  }
}

TEST(Sharded, EachCollectiveOpEqualsTheSingleDeviceResultOnOneToEightDevices) {
  const testing::CpuDevices devices(8);
  for (DType dtype : {DType::f32, DType::i32, DType::f64}) {
    for (int n = 1; n <= 8; ++n) {
      const std::string what = std::string(name(dtype)) + " on " + std::to_string(n) + " devices";
      // Uneven shards: device r holds 3 + r % 3 columns of a [4, ...] value.
      std::vector<Tensor> uneven, same, splittable;  // placeholders of these layouts
      for (int r = 0; r < n; ++r) {
        uneven.push_back(on(r, dtype, {4, 3 + r % 3}));
        same.push_back(on(r, dtype, {5, 2 * n + 1}));
        splittable.push_back(on(r, dtype, {2, 3 * n}));
      }
      const auto model = [n](std::vector<Tensor> u, std::vector<Tensor> s, std::vector<Tensor> p) {
        std::vector<Tensor> out;
        for (const Tensor& t : allgather(u, 1)) out.push_back(t);  // axis 1: unpacked
        for (const Tensor& t : allgather(u, -1)) out.push_back(t * 2);
        for (const Tensor& t : allreduce_sum(s)) out.push_back(t);
        for (const Tensor& t : reduce_scatter_sum(s, 1)) out.push_back(t);  // 2n+1: uneven
        for (const Tensor& t : reduce_scatter_sum(s, 0)) out.push_back(t);  // 5 rows
        for (const Tensor& t : all_to_all(p, 1, 0)) out.push_back(t);
        for (const Tensor& t : all_to_all(p, 1, 1)) out.push_back(t);
        out.push_back(transfer_to(s[0], Device::cpu(n - 1)));
        return out;
      };
      const StagedGraph staged = stage(model)(uneven, same, splittable);
      expect_equal_to_reference(staged, random_inputs(staged, 7), {}, what);
    }
  }
}

TEST(Sharded, ATensorParallelMlpEqualsTheUnshardedOne) {
  // Column-parallel W1 (each device a slice of the hidden units), GELU, row-parallel W2
  // (the matching rows), one allreduce: the Megatron MLP on 2 devices.
  const testing::CpuDevices devices(2);
  const std::int64_t dim = 48, hidden = 96;
  const auto sharded = [&](Tensor x0, Tensor x1) {
    std::vector<Tensor> partial;
    const Tensor xs[2] = {x0, x1};
    for (int r = 0; r < 2; ++r) {
      const std::string shard = "shard" + std::to_string(r);
      const Tensor w1 = weight("w1." + shard, on(r, DType::f32, {dim, hidden / 2}));
      const Tensor w2 = weight("w2." + shard, on(r, DType::f32, {hidden / 2, dim}));
      partial.push_back(matmul(gelu(matmul(xs[r], w1)), w2));
    }
    return allreduce_sum(partial);
  };
  const auto whole = [&](Tensor x) {
    return matmul(gelu(matmul(x, weight("w1", on(0, DType::f32, {dim, hidden})))),
                  weight("w2", on(0, DType::f32, {hidden, dim})));
  };
  const Tensor w1 = Tensor::random(on(0, DType::f32, {dim, hidden}), 1, -0.3, 0.3);
  const Tensor w2 = Tensor::random(on(0, DType::f32, {hidden, dim}), 2, -0.3, 0.3);
  const auto slice_of = [](const Tensor& t, int r, bool columns) {  // one device's half
    const std::vector<double> v = t.to_doubles();
    const std::int64_t rows = t.shape().dims()[0].size(), cols = t.shape().dims()[1].size();
    std::vector<double> out;
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        if (columns ? (j / (cols / 2) == r) : (i / (rows / 2) == r))
          out.push_back(v[static_cast<std::size_t>(i * cols + j)]);
    const Shape shape = columns ? Shape{rows, cols / 2} : Shape{rows / 2, cols};
    return Tensor::constant(out, shape, DType::f32, Device::cpu(r));
  };
  std::map<std::string, Tensor> sharded_weights;
  for (int r = 0; r < 2; ++r) {
    sharded_weights.emplace("w1.shard" + std::to_string(r), slice_of(w1, r, true));
    sharded_weights.emplace("w2.shard" + std::to_string(r), slice_of(w2, r, false));
  }
  const StagedGraph s = stage(sharded)(on(0, DType::f32, {6, dim}), on(1, DType::f32, {6, dim}));
  const StagedGraph u = stage(whole)(on(0, DType::f32, {6, dim}));
  const Tensor x = Tensor::random(on(0, DType::f32, {6, dim}), 3);
  const Tensor x1 =
      Tensor::from_bytes(DType::f32, {6, dim}, Device::cpu(1), x.bytes().data(), x.bytes().size());
  CompiledCallable tp(s, sharded_weights);
  CompiledCallable one(u, {{"w1", w1}, {"w2", w2}});
  const std::vector<Tensor> got = tp.run({x, x1});
  const std::vector<double> want = one.run({x})[0].to_doubles();
  ASSERT_EQ(got.size(), 2u);
  for (const Tensor& t : got) {
    const std::vector<double> g = t.to_doubles();
    for (std::size_t k = 0; k < g.size(); ++k)
      ASSERT_NEAR(g[k], want[k], 1e-4 * (1 + std::fabs(want[k]))) << "element " << k;
  }
  EXPECT_EQ(got[1].device(), Device::cpu(1));
  for (int call = 0; call < 200; ++call) (void)tp.run({x, x1});  // replays stay in step
  EXPECT_EQ(tp.run({x, x1})[0].to_doubles(), got[0].to_doubles());
}

TEST(Sharded, CollectiveOpsPrintParseAndVerify) {
  const testing::CpuDevices devices(2);
  const auto model = [](Tensor a, Tensor b) {
    const std::vector<Tensor> g = allgather({a, b}, 0);
    return std::make_tuple(g[0], reduce_scatter_sum({a, b}, 1)[1], transfer_to(a, Device::cpu(1)));
  };
  const StagedGraph staged = stage(model)(on(0, DType::f32, {2, 5}), on(1, DType::f32, {2, 5}));
  const std::string text = staged.str();
  EXPECT_NE(text.find("\"kiln.allgather\""), std::string::npos) << text;
  EXPECT_EQ(ir::print(ir::parse_module(text, "m.mlir")), text);
  KILN_EXPECT_THROW_MSG(stage([](Tensor a, Tensor b) {
                          return allreduce_sum({a, b});
                        })(on(0, DType::f32, {2}), on(0, DType::f32, {2})),
                        UserError,
                        "like an earlier operand; a collective takes one value per device");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a, Tensor b) {
                          return all_to_all({a, b}, 0, 0);
                        })(on(0, DType::f32, {3}), on(1, DType::f32, {3})),
                        UserError, "3 is not a multiple of 2");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a, Tensor b) {
                          return allreduce_sum({a, b});
                        })(on(0, DType::f32, {2}), on(1, DType::f32, {3})),
                        UserError, "every shard must have the same shape");
}

}  // namespace
}  // namespace kiln
