// What compiled calls run, checked end to end against the reference interpreter: fused
// bodies with bool values run as the f32 tile program (masks), and launches that read only
// weights and constants run once per plan (hoist_invariant).

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernel_support.hpp"
#include "compiler/cpu/kernels.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/runtime/profiler.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

TensorLayout f32(Shape s) { return TensorLayout(DType::f32, std::move(s)); }
TensorLayout boolean(Shape s) { return TensorLayout(DType::bool_, std::move(s)); }

/// Same bits, or both NaN (the reference computes in double and rounds once, as the tile
/// program's single ops do: selects, comparisons and one add or multiply are exact).
void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].layout(), want[i].layout()) << what;
    const std::vector<double> g = got[i].to_doubles(), w = want[i].to_doubles();
    for (std::size_t k = 0; k < g.size(); ++k)
      EXPECT_TRUE(std::bit_cast<std::uint64_t>(g[k]) == std::bit_cast<std::uint64_t>(w[k]) ||
                  (std::isnan(g[k]) && std::isnan(w[k])))
          << what << " output " << i << " element " << k << ": " << g[k] << " vs " << w[k];
  }
}

/// The f32 input \p shape with NaN, infinities and signed zeros among random values.
Tensor awkward_f32(const Shape& shape, std::uint64_t seed) {
  std::vector<double> v = Tensor::random(f32(shape), seed, -3, 3).to_doubles();
  const double specials[] = {
      std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, 0.0, -0.0, 1.0};
  for (std::size_t i = 0; i < v.size(); i += 5) v[i] = specials[(i / 5) % 6];
  return Tensor::constant(v, shape);
}

/// The fused bodies of \p compiled's optimized module, compiled as the CPU kernels do.
std::vector<std::shared_ptr<const compiler::FusedProgram>> fused_programs(
    const CompiledCallable& compiled) {
  std::vector<std::shared_ptr<const compiler::FusedProgram>> out;
  const ir::Module& m = compiled.optimized();
  for (std::size_t g = 0; g < m.num_graphs(); ++g)
    if (m.graph(g).name().rfind("fused", 0) == 0)
      out.push_back(compiler::compile_fused(m.graph(g)));
  return out;
}

TEST(FusedMasks, BodiesWithBoolValuesRunAsTheTileProgramAndMatchTheReference) {
  // NaN guards (where(x != x, 0, x)), masks from comparisons of f32 and of bool values,
  // bool inputs whole, broadcast and scalar, casts both ways: every body is f32 out.
  const StagedGraph staged = stage([](Tensor x, Tensor y, Tensor m, Tensor row, Tensor flag) {
    const Tensor zero = Tensor::scalar(0.0);
    const Tensor clean = where(not_equal(x, x), zero, x);
    const Tensor picked = where(x < y, clean, y * 2.0);
    const Tensor gated = picked * cast(m, DType::f32) + where(row, x, y);
    const Tensor both = where(equal(m, row), gated, cast(cast(y, DType::bool_), DType::f32));
    return where(flag, both, -both);
  })(f32({4, 37}), f32({4, 37}), boolean({4, 37}), boolean({37}), boolean({}));
  CompiledCallable compiled(staged, {});
  const std::vector<std::shared_ptr<const compiler::FusedProgram>> programs =
      fused_programs(compiled);
  ASSERT_FALSE(programs.empty());
  for (const auto& p : programs) {
    EXPECT_TRUE(p->tiles) << "a body with masks ran per element";
    EXPECT_FALSE(p->f32);  // it has bool values: not for the all-f32 users (CUDA, post-ops)
  }
  for (const std::uint64_t seed : {1u, 2u}) {
    const std::vector<Tensor> in = {awkward_f32({4, 37}, seed), awkward_f32({4, 37}, seed + 10),
                                    Tensor::random(boolean({4, 37}), seed, 0, 2),
                                    Tensor::random(boolean({37}), seed + 1, 0, 2),
                                    Tensor::random(boolean({}), seed + 2, 0, 2)};
    expect_same(compiled.run(in), reference_run(staged.graph(), in, {}),
                "seed " + std::to_string(seed));
  }
}

TEST(FusedMasks, ScalarBodiesAndBodiesLeftToTheInterpreterStillMatch) {
  // Rank 0 everywhere (a bool scalar input is read once), and bodies the tile program does
  // not take: an integer value inside, a bool result.
  const StagedGraph scalars = stage([](Tensor c, Tensor a, Tensor b) {
    return where(c, a, b) + where(a < b, a, b);
  })(boolean({}), f32({}), f32({}));
  CompiledCallable s(scalars, {});
  for (const bool c : {false, true}) {
    const std::vector<Tensor> in = {Tensor::scalar(c ? 1 : 0, DType::bool_), Tensor::scalar(2.5),
                                    Tensor::scalar(-1.0)};
    expect_same(s.run(in), reference_run(scalars.graph(), in, {}), c ? "true" : "false");
  }
  const StagedGraph mixed = stage([](Tensor x, Tensor i) {
    return where(cast(i, DType::f32) < x, x, x * 3.0) < cast(i + i, DType::f32);
  })(f32({3, 5}), TensorLayout(DType::i64, Shape{3, 5}));
  CompiledCallable m(mixed, {});
  for (const auto& p : fused_programs(m)) EXPECT_FALSE(p->tiles);
  const std::vector<Tensor> in = {awkward_f32({3, 5}, 4),
                                  Tensor::random(TensorLayout(DType::i64, Shape{3, 5}), 5, -4, 4)};
  expect_same(m.run(in), reference_run(mixed.graph(), in, {}), "mixed");
}

/// A causal mask built from positions and weights, as exporters write attention: nothing
/// in it depends on the inputs, so it runs once per plan; the scores depend on them.
StagedGraph masked_scores() {
  return stage([](Tensor x) {
    const Tensor w = weight("w", f32({8, 8}));
    const Tensor fill = weight("fill", f32({}));
    const Tensor pos = arange(0, 8, 1, DType::f32);
    const Tensor causal = reshape(pos, Shape{8, 1}) >= reshape(pos, Shape{1, 8});
    const Tensor mask = where(causal, Tensor::scalar(0.0), fill);  // invariant
    const Tensor wt = transpose(w) * 0.5;                          // invariant
    const Tensor scores = matmul(x, wt) + mask;                    // per call
    return softmax(scores, -1);
  })(f32({"batch", 8, 8}));
}

std::map<std::string, Tensor> mask_weights() {
  return {{"w", Tensor::random(f32({8, 8}), 3, -1, 1)}, {"fill", Tensor::scalar(-1e4)}};
}

TEST(FusedChains, ChainsOfScalarOpsRunInOnePassWithTheReferencesBits) {
  // Bodies that are one chain from their input (ChainProgram): hard-swish and hard-sigmoid
  // as ONNX exports write them, flipped operands, the input read again, scalars passed per
  // call (a NaN among them); after a conv (its epilogue) and alone; and a body of two
  // full-size inputs, which is not a chain. Same bits as the reference, NaNs included.
  const StagedGraph staged = stage([](Tensor x, Tensor w, Tensor a, Tensor b) {
    const Tensor zero = Tensor::scalar(0.0), one = Tensor::scalar(1.0);
    const Tensor y = conv(x, w, {.pads = {1, 1, 1, 1}});
    const Tensor hard_swish = y * minimum(maximum(y * a + b, zero), one);
    const Tensor hard_sigmoid = minimum(maximum(x * a + b, zero), one);
    const Tensor flipped = minimum(a / (b - x), x) * x;
    return std::make_tuple(hard_swish, hard_sigmoid, flipped, x * hard_sigmoid + x * x);
  })(f32({2, 3, 9, 21}), f32({16, 3, 3, 3}), f32({}), f32({}));
  CompiledCallable compiled(staged, {});
  std::size_t chains = 0;
  for (const auto& p : fused_programs(compiled)) chains += p->chain ? 1 : 0;
  EXPECT_GE(chains, 3u) << "hard-swish, hard-sigmoid and the flipped chain";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [a, b] : {std::pair{1.0f / 6, 0.5f}, std::pair{-2.0f, nan}}) {
    const std::vector<Tensor> in = {awkward_f32({2, 3, 9, 21}, 3),
                                    Tensor::random(f32({16, 3, 3, 3}), 4, -1, 1),
                                    Tensor::from_data(std::vector<float>{a}, Shape{}),
                                    Tensor::from_data(std::vector<float>{b}, Shape{})};
    const std::string what = "a " + std::to_string(a) + ", b " + std::to_string(b);
    const std::vector<Tensor> got = compiled.run(in), want = reference_run(staged.graph(), in, {});
    expect_same({got[1], got[2], got[3]}, {want[1], want[2], want[3]}, what);
    // The conv sums in another order than the reference: hard-swish after it within that.
    const std::vector<double> g = got[0].to_doubles(), r = want[0].to_doubles();
    ASSERT_EQ(g.size(), r.size());
    for (std::size_t k = 0; k < g.size(); ++k) {
      if (std::isnan(r[k])) {
        EXPECT_TRUE(std::isnan(g[k])) << what << " element " << k;
      } else if (g[k] != r[k]) {  // infinities only equal
        EXPECT_NEAR(g[k], r[k], 1e-5 * (1 + std::abs(r[k]))) << what << " element " << k;
      }
    }
  }
}

TEST(HoistInvariant, LaunchesThatReadOnlyWeightsRunOncePerPlanAndCallsStayRight) {
  const StagedGraph staged = masked_scores();
  const std::map<std::string, Tensor> weights = mask_weights();
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{2});
  CompiledCallable compiled(staged, weights, {.context = ctx});
  const std::vector<Tensor> first = {Tensor::random(f32({2, 8, 8}), 1, -2, 2)};
  const std::vector<Tensor> want = reference_run(staged.graph(), first, weights);
  for (int call = 0; call < 3; ++call) {
    const std::vector<Tensor> got = compiled.run(first);
    const std::vector<double> g = got[0].to_doubles(), w = want[0].to_doubles();
    for (std::size_t k = 0; k < g.size(); ++k)
      ASSERT_NEAR(g[k], w[k], 1e-6) << "call " << call << " element " << k;
  }
  const CompiledCallable::Stats stats = compiled.stats();
  EXPECT_GE(stats.hoisted, 2u);  // the mask and the scaled transpose, at least
  // The hoisted launches are not in the recorded graph: a call runs `launches` kernels.
  auto profiler = std::make_shared<Profiler>();
  ctx->set_profiler(profiler);
  (void)compiled.run(first);
  ctx->set_profiler(nullptr);
  std::size_t slices = 0;
  std::set<std::uint32_t> nodes;
  for (const ProfileEvent& e : profiler->events()) {
    nodes.insert(e.node);
    ++slices;
  }
  EXPECT_EQ(nodes.size(), stats.launches);
  EXPECT_GT(slices, 0u);
  // Other batch sizes: plans of their own, each with its hoisted values, none clobbered by
  // the other plans' calls or by their own temporaries.
  for (const std::int64_t batch : {1, 5, 2, 1, 5}) {
    const std::vector<Tensor> in = {
        Tensor::random(f32({batch, 8, 8}), static_cast<std::uint64_t>(batch) + 7, -2, 2)};
    const std::vector<Tensor> ref = reference_run(staged.graph(), in, weights);
    const std::vector<double> g = compiled.run(in)[0].to_doubles(), w = ref[0].to_doubles();
    for (std::size_t k = 0; k < g.size(); ++k)
      ASSERT_NEAR(g[k], w[k], 1e-6) << "batch " << batch << " element " << k;
  }
  EXPECT_EQ(compiled.stats().plans, 3u);
}

TEST(HoistInvariant, AnInvariantMatmulWithItsEpilogueCountsOnce) {
  // w1 w2 + b reads only weights: the matmul and its bias add (its epilogue) run once per
  // plan, counted once as hoisted and once as an epilogue, never twice; a call runs the
  // `launches` kernels Stats says.
  const StagedGraph staged = stage([](Tensor x) {
    const Tensor w =
        matmul(weight("w1", f32({8, 8})), weight("w2", f32({8, 8}))) + weight("b", f32({8}));
    return matmul(x, w);
  })(f32({4, 8}));
  const std::map<std::string, Tensor> weights = {{"w1", Tensor::random(f32({8, 8}), 1, -1, 1)},
                                                 {"w2", Tensor::random(f32({8, 8}), 2, -1, 1)},
                                                 {"b", Tensor::random(f32({8}), 3, -1, 1)}};
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{1});
  CompiledCallable compiled(staged, weights, {.context = ctx});
  const std::vector<Tensor> in = {Tensor::random(f32({4, 8}), 4, -1, 1)};
  const std::vector<double> got = compiled.run(in)[0].to_doubles(),
                            want = reference_run(staged.graph(), in, weights)[0].to_doubles();
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5) << k;
  auto profiler = std::make_shared<Profiler>();
  ctx->set_profiler(profiler);
  (void)compiled.run(in);
  ctx->set_profiler(nullptr);
  std::set<std::uint32_t> nodes;
  for (const ProfileEvent& e : profiler->events()) nodes.insert(e.node);
  const CompiledCallable::Stats stats = compiled.stats();
  EXPECT_EQ(stats.epilogues, 1u);
  EXPECT_EQ(stats.hoisted, 1u);  // the matmul of weights (its add runs inside it)
  EXPECT_EQ(stats.launches, 1u);
  EXPECT_EQ(nodes.size(), stats.launches);
}

TEST(HoistInvariant, AnOutputThatDependsOnlyOnWeightsIsReturnedOnEveryCall) {
  // The whole result is invariant: computed once, copied out on each call, and a caller
  // that writes into a returned tensor does not change the next call's.
  const StagedGraph staged = stage([](Tensor x) {
    const Tensor w = weight("w", f32({4}));
    return std::make_tuple(exp(w) * 2.0, x + 1.0);
  })(f32({4}));
  const std::map<std::string, Tensor> weights = {{"w", Tensor::constant({0, 1, -1, 2}, Shape{4})}};
  CompiledCallable compiled(staged, weights);
  const Tensor x = Tensor::constant({1, 2, 3, 4}, Shape{4});
  const std::vector<Tensor> want = reference_run(staged.graph(), {x}, weights);
  std::vector<Tensor> got = compiled.run({x});
  for (std::size_t k = 0; k < 4; ++k)
    EXPECT_NEAR(got[0].to_doubles()[k], want[0].to_doubles()[k], 1e-6);
  std::memset(const_cast<std::byte*>(got[0].bytes().data()), 0, got[0].bytes().size());
  got = compiled.run({x});
  for (std::size_t k = 0; k < 4; ++k)
    EXPECT_NEAR(got[0].to_doubles()[k], want[0].to_doubles()[k], 1e-6);
  EXPECT_GE(compiled.stats().hoisted, 1u);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

/// Random weights for every weight \p staged reads.
std::map<std::string, Tensor> random_weights(const StagedGraph& staged) {
  std::map<std::string, Tensor> weights;
  std::uint64_t seed = 11;
  for (const auto& [name, type] : module_weights(staged.graph()))
    weights.emplace(name, Tensor::random(TensorLayout(type.dtype, type.shape), seed++, -0.3, 0.3));
  return weights;
}

void expect_close_to_reference(const StagedGraph& staged, CompiledCallable& compiled,
                               const std::vector<Tensor>& in,
                               const std::map<std::string, Tensor>& weights,
                               const std::string& what) {
  const std::vector<double> got = compiled.run(in)[0].to_doubles(),
                            want = reference_run(staged.graph(), in, weights)[0].to_doubles();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(got[k], want[k], 2e-4 * (1 + std::fabs(want[k]))) << what << " element " << k;
}

TEST(WeightPacks, EveryPlanReadsTheWeightsPackedOnce) {
  // A transformer block and a Linear head over symbolic batch and sequence: each new shape
  // is a plan of its own, and all of them read one packed copy of each weight.
  // (Big enough for every matmul's packing to pay in every plan: at least 2^20
  // multiply-adds each, so at least 128 rows.)
  const nn::TransformerBlock block{.dim = 128, .heads = 2, .hidden = 256};
  const StagedGraph staged = stage([&](Tensor x) {
    return nn::Linear{.in = 128, .out = 64, .name = "head"}(block(x));
  })(f32({"batch", "seq", 128}));
  const std::map<std::string, Tensor> weights = random_weights(staged);
  std::size_t matmul_weight_bytes = 0;
  for (const auto& [name, w] : weights)
    if (w.rank() == 2) matmul_weight_bytes += w.bytes().size();
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{1});
  CompiledCallable compiled(staged, weights, {.context = ctx});
  std::size_t first = 0;
  for (const auto& [batch, seq] : {std::pair{2, 64}, {3, 64}, {4, 32}, {5, 60}}) {
    const std::vector<Tensor> in = {Tensor::random(f32({batch, seq, 128}), 5, -1, 1)};
    expect_close_to_reference(staged, compiled, in, weights,
                              std::to_string(batch) + "x" + std::to_string(seq));
    const CompiledCallable::Stats stats = compiled.stats();
    EXPECT_GT(stats.packed_matmuls, 0u);
    if (first == 0) first = stats.packed_weight_bytes;
    EXPECT_EQ(stats.packed_weight_bytes, first) << "a new shape packed its weights again";
  }
  EXPECT_GE(first, matmul_weight_bytes);  // every Linear weight, packed once
  EXPECT_LT(first, matmul_weight_bytes + matmul_weight_bytes / 4);  // each once (and padding)
  EXPECT_EQ(compiled.stats().plans, 4u);
}

/// \p staged (inputs [batch, rest...]) compiled with random weights on one worker and run
/// at batches 1, 2 and 5 against the reference, \p also checking each plan: the bytes of
/// packed weights, expected the same at every batch (packed once per callable).
std::size_t packed_bytes_at_every_batch(
    const StagedGraph& staged, const std::vector<std::int64_t>& rest, std::uint64_t seed,
    const std::function<void(const CompiledCallable&, std::int64_t)>& also = {}) {
  const std::map<std::string, Tensor> weights = random_weights(staged);
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{1});
  CompiledCallable compiled(staged, weights, {.context = ctx});
  std::size_t first = 0;
  for (const std::int64_t batch : {1, 2, 5}) {
    std::vector<Dim> dims{batch};
    dims.insert(dims.end(), rest.begin(), rest.end());
    const std::vector<Tensor> in = {Tensor::random(f32(Shape(dims)), seed, -1, 1)};
    expect_close_to_reference(staged, compiled, in, weights, "batch " + std::to_string(batch));
    if (also) also(compiled, batch);
    if (first == 0) first = compiled.stats().packed_weight_bytes;
    EXPECT_EQ(compiled.stats().packed_weight_bytes, first) << "batch " << batch;
  }
  return first;
}

TEST(WeightPacks, ConvolutionWeightsToo) {
  const StagedGraph staged = stage([](Tensor x) {
    const Tensor w = weight("w", f32({8, 3, 3, 3})), b = weight("b", f32({8}));
    return relu(conv(x, w, b, Window{.strides = {}, .pads = {1, 1, 1, 1}, .dilations = {}}));
  })(f32({"batch", 3, 12, 12}));
  EXPECT_GT(packed_bytes_at_every_batch(staged, {3, 12, 12}, 6), 0u);
}

TEST(WeightPacks, ExpansionsPackTheirWeightsOncePerCallable) {
  // A pointwise conv and its depthwise conv on oneDNN's blocked kernels: both weights packed
  // once for every batch size (one slice of channels a tile at batch 1 and 2 on one worker).
  const StagedGraph staged = stage([](Tensor x) {
    const Tensor w = weight("w", f32({32, 16, 1, 1})), dw = weight("dw", f32({32, 1, 3, 3}));
    const Tensor y = relu(conv(x, w, Window{}));
    return conv(y, dw, Window{.pads = {1, 1, 1, 1}, .groups = 32});
  })(f32({"batch", 16, 7, 7}));
  const std::size_t first =
      packed_bytes_at_every_batch(staged, {16, 7, 7}, 7, [](const CompiledCallable& c, auto batch) {
        EXPECT_EQ(c.stats().expansions, 1u) << "batch " << batch;
      });
  // Both weights (32 x 16 and 32 x 9 floats), each once.
  EXPECT_GE(first, (32u * 16 + 32 * 9) * sizeof(float));
  EXPECT_LT(first, 2 * (32u * 16 + 32 * 9) * sizeof(float));
}

TEST(AbsorbEpilogues, AnEpilogueAfterAReshapeOfTheMatmulRunsInsideIt) {
  // An ONNX MatMul over [batch, seq, d]: a matmul over [batch * seq, d], a reshape back,
  // then the bias and activation: the reshape copies nothing, so the elementwise op still
  // runs inside the matmul. Not when the reshape changes the last dim, or when the
  // reshaped value is also an output. Always the reference's results.
  const auto make = [](bool keep_last, bool also_output) {
    return stage([=](Tensor x) -> std::vector<Tensor> {
      const Tensor w = weight("w", f32({64, 48})), b = weight("b", f32({48}));
      const Tensor flat = reshape(x, Shape{Dim("batch") * Dim("seq"), 64});
      const Tensor y = matmul(flat, w);
      const Tensor back = keep_last ? reshape(y, Shape{Dim("batch"), Dim("seq"), 48})
                                    : reshape(y, Shape{Dim("batch"), Dim("seq"), 6, 8});
      const Tensor z =
          keep_last ? gelu(back + b, "tanh") : gelu(back + reshape(b, Shape{6, 8}), "tanh");
      if (also_output) return {z, back};
      return {z};
    })(f32({"batch", "seq", 64}));
  };
  for (const auto& [keep_last, also_output, absorbed] :
       {std::tuple{true, false, 1u}, {false, false, 0u}, {true, true, 0u}}) {
    const StagedGraph staged = make(keep_last, also_output);
    const std::map<std::string, Tensor> weights = random_weights(staged);
    for (const int threads : {1, 2}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      CompiledCallable compiled(staged, weights, {.context = ctx});
      const std::string what = std::string(keep_last ? "last dim kept" : "last dim split") +
                               (also_output ? ", also an output" : "") + ", threads " +
                               std::to_string(threads);
      for (const auto& [batch, seq] : {std::pair{3, 40}, {1, 5}}) {
        const std::vector<Tensor> in = {Tensor::random(f32({batch, seq, 64}), 8, -1, 1)};
        const std::vector<Tensor> got = compiled.run(in),
                                  want = reference_run(staged.graph(), in, weights);
        ASSERT_EQ(got.size(), want.size()) << what;
        for (std::size_t o = 0; o < got.size(); ++o) {
          const std::vector<double> g = got[o].to_doubles(), r = want[o].to_doubles();
          ASSERT_EQ(g.size(), r.size()) << what;
          for (std::size_t k = 0; k < g.size(); ++k)
            ASSERT_NEAR(g[k], r[k], 2e-5 * (1 + std::fabs(r[k]))) << what << " output " << o;
        }
        EXPECT_EQ(compiled.stats().epilogues, absorbed) << what;
      }
    }
  }
}

/// Attention as exports write it, over head views of q, k, v [b, s, 64] (4 heads of 16):
/// scores Q Kᵀ, scaled, plus an additive mask [b, 1, 1, s] (a padding mask: -inf where a key
/// is padding); softmax; NaN (a row with every key masked) to 0; the context P V. Variants
/// leave out the epilogues, also return the probabilities, or add to the context.
/// \p exported: the epilogues as torch's exporter writes them (scores + mask, a mask row
/// per query row; where(p != p, 0, p)), which the kernel applies row by row itself.
StagedGraph attention(bool epilogues, bool probabilities_out, bool context_epilogue,
                      bool exported = false) {
  const Dim rows = exported ? Dim("s") : Dim(1);
  return stage([=](Tensor q, Tensor k, Tensor v, Tensor mask) -> std::vector<Tensor> {
    const Dim b = q.shape().dims()[0], s = q.shape().dims()[1];
    const auto heads = [&](const Tensor& t) {
      return permute(reshape(t, Shape{b, s, 4, 16}), {0, 2, 1, 3});  // [b, 4, s, 16]
    };
    Tensor scores = matmul(heads(q), transpose(heads(k), -1, -2));
    if (exported) scores = scores + mask;
    if (epilogues) scores = scores * 0.25 + mask;
    Tensor p = softmax(scores, -1);
    if (exported) p = where(not_equal(p, p), Tensor::scalar(0.0), p);
    if (epilogues) p = where(equal(p, p), p, Tensor::scalar(0.0));
    Tensor context = matmul(p, heads(v));
    if (context_epilogue) context = context + 1.0;
    if (probabilities_out) return {context, p};
    return {context};
  })(f32({"b", "s", 64}), f32({"b", "s", 64}), f32({"b", "s", 64}), f32({"b", 1, rows, "s"}));
}

TEST(AbsorbAttention, SoftmaxOfScoresTimesVRunsAsOneKernelAndMatchesTheReference) {
  // The scores, their epilogue, the softmax, the probabilities' epilogue and the context
  // run as one kernel, a block of query rows at a time (300 keys: blocks of 54 rows, the
  // last one short), on 1 to 3 workers; masked keys, and a batch entry whose keys are all
  // masked (its rows NaN, then 0). Not when the probabilities are also an output, or when
  // the context has an epilogue of its own; with the exporter's epilogues (a causal mask
  // row per query row, applied with the softmax row by row). Always the reference's
  // results. The scores
  // take no bytes of the arena: at 2x300 they are 2.9 MB, unfused two such arrays at once.
  std::map<std::pair<bool, int>, std::size_t> arena;  // (fused, threads): peak bytes at 2x300
  for (const auto& [epilogues, probabilities_out, context_epilogue, fused, exported] :
       {std::tuple{true, false, false, 1u, false},
        {false, false, false, 1u, false},
        {true, true, false, 0u, false},
        {true, false, true, 0u, false},
        {false, false, false, 1u, true}}) {
    const StagedGraph staged = attention(epilogues, probabilities_out, context_epilogue, exported);
    for (const int threads : {1, 2, 3}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      CompiledCallable compiled(staged, {}, {.context = ctx});
      const std::string what = std::string(exported    ? "exported epilogues"
                                           : epilogues ? "epilogues"
                                                       : "no epilogues") +
                               (probabilities_out ? ", probabilities out" : "") +
                               (context_epilogue ? ", context + 1" : "") + ", threads " +
                               std::to_string(threads);
      for (const auto& [batch, seq] : {std::pair{2, 300}, {3, 5}}) {
        std::vector<Tensor> in;
        for (std::uint64_t i = 0; i < 3; ++i)
          in.push_back(Tensor::random(f32({batch, seq, 64}), 20 + i, -1, 1));
        const std::int64_t rows = exported ? seq : 1;
        std::vector<double> mask(static_cast<std::size_t>(batch * rows * seq), 0.0);
        for (std::size_t i = 0; i < mask.size(); ++i) {
          const auto row = static_cast<std::int64_t>(i) / seq % rows,
                     key = static_cast<std::int64_t>(i) % seq;
          const bool causal = exported && key > row;
          if (causal || i % 7 == 3 || i < static_cast<std::size_t>(rows * seq))
            mask[i] = -INFINITY;  // entry 0: all
        }
        in.push_back(Tensor::constant(mask, Shape{batch, 1, rows, seq}));
        const std::vector<Tensor> got = compiled.run(in),
                                  want = reference_run(staged.graph(), in, {});
        const std::string at = what + ", " + std::to_string(batch) + "x" + std::to_string(seq);
        ASSERT_EQ(got.size(), want.size()) << at;
        for (std::size_t o = 0; o < got.size(); ++o) {
          const std::vector<double> g = got[o].to_doubles(), r = want[o].to_doubles();
          ASSERT_EQ(g.size(), r.size()) << at;
          for (std::size_t k = 0; k < g.size(); ++k) {
            if (std::isnan(r[k])) {
              ASSERT_TRUE(std::isnan(g[k])) << at << " output " << o << " element " << k;
              continue;
            }
            ASSERT_NEAR(g[k], r[k], 2e-5 * (1 + std::fabs(r[k])))
                << at << " output " << o << " element " << k;
          }
        }
        EXPECT_EQ(compiled.stats().attentions, fused) << at;
        if (batch == 2 && epilogues)
          arena[std::pair{fused != 0, threads}] = compiled.stats().peak_arena_bytes;
      }
    }
  }
  const std::size_t scores = 2 * 4 * 300 * 300 * sizeof(float);
  const auto peak = [&](bool fused, int threads) { return arena[std::pair{fused, threads}]; };
  for (const int threads : {1, 2, 3})
    EXPECT_LT(peak(true, threads) + scores, peak(false, threads)) << threads;
  EXPECT_LT(peak(true, 1), scores) << "the fused plan's arena holds the scores";
}

TEST(AbsorbAttention, LiveKeysEndAfterTheLastKeyAnyRowSees) {
  using compiler::kernel::live_keys;
  constexpr float lowest = std::numeric_limits<float>::lowest(), inf = INFINITY;
  constexpr std::int64_t t = 8;
  // Rows 2..4 of a causal mask: the keys [0, 5); with -inf; with masked keys among the
  // seen ones; with a NaN (seen).
  std::vector<float> causal(5 * t);
  for (std::int64_t r = 0; r < 5; ++r)
    for (std::int64_t k = 0; k < t; ++k) causal[r * t + k] = k > r ? lowest : 0.0f;
  const float* rows2to4 = causal.data() + 2 * t;
  EXPECT_EQ(live_keys(rows2to4, 3, t, t), 5);
  EXPECT_EQ(live_keys(causal.data(), 1, t, t), 1);
  std::vector<float> m = causal;
  for (float& x : m) x = x == lowest ? -inf : x;
  EXPECT_EQ(live_keys(m.data() + 2 * t, 3, t, t), 5);
  m = causal;
  m[3 * t + 1] = lowest;
  m[4 * t + 0] = -inf;
  m[2 * t + 2] = NAN;
  EXPECT_EQ(live_keys(m.data() + 2 * t, 3, t, t), 5);
  // One row for all (row 0): a padding mask.
  const std::vector<float> padding = {0, 0, 0, 0, 0, 0, lowest, -inf};
  EXPECT_EQ(live_keys(padding.data(), 4, 0, t), 6);
  // Every key: a row that sees the last key, one that sees none, a value neither masked
  // nor visible (-1e31) where rows see keys, no keys.
  m = causal;
  m[4 * t + t - 1] = 0.0f;
  EXPECT_EQ(live_keys(m.data(), 5, t, t), t);
  m = causal;
  for (std::int64_t k = 0; k < t; ++k) m[3 * t + k] = lowest;
  EXPECT_EQ(live_keys(m.data() + 2 * t, 3, t, t), t);
  m = causal;
  m[3 * t + 1] = -1e31f;
  EXPECT_EQ(live_keys(m.data() + 2 * t, 3, t, t), t);
  EXPECT_EQ(live_keys(causal.data(), 5, t, 0), 0);
}

TEST(AbsorbAttention, KeysMaskedForAWholeBlockOfRowsAreNotComputed) {
  // A mask row per query row (as exporters write a causal mask: 0 where a key is seen,
  // lowest() or -inf where not): a block of query rows (300 keys: 54 rows) computes only
  // the keys up to the last one any of its rows sees. The reference's results for causal
  // masks of either kind, with masked keys among the seen ones, with a row that sees no
  // key (NaN, replaced by 0), and with a value between "masked" and "visible" (-1e31: every
  // key computed; see LiveKeysEndAfterTheLastKeyAnyRowSees). A NaN in a key only later rows see
  // stays out of the first block's rows, as in PyTorch's causal attention (the reference adds it to
  // lowest(): NaN rows, then 0).
  const StagedGraph staged = attention(false, false, false, /*exported=*/true);
  constexpr std::int64_t batch = 2, seq = 300, nan_key = 200;
  const double lowest = std::numeric_limits<float>::lowest();
  struct Case {
    const char* what;
    double masked;
    bool holes = false, empty_row = false, between = false, nan_in_k = false;
  };
  for (const Case& c : {Case{"causal, lowest()", lowest}, Case{"causal, -inf", -INFINITY},
                        Case{"causal with holes", lowest, true},
                        Case{"a row that sees nothing", lowest, false, true},
                        Case{"-1e31 past a row's keys", lowest, false, false, true},
                        Case{"NaN in a later key", lowest, false, false, false, true}}) {
    std::vector<Tensor> in;
    for (std::uint64_t i = 0; i < 3; ++i) {
      std::vector<double> x = Tensor::random(f32({batch, seq, 64}), 40 + i, -1, 1).to_doubles();
      if (c.nan_in_k && i == 1)
        for (std::int64_t k = 0; k < 64; ++k) x[static_cast<std::size_t>(nan_key * 64 + k)] = NAN;
      in.push_back(Tensor::constant(x, Shape{batch, seq, 64}));
    }
    std::vector<double> mask(static_cast<std::size_t>(batch * seq * seq), 0.0);
    for (std::size_t i = 0; i < mask.size(); ++i) {
      const auto row = static_cast<std::int64_t>(i) / seq % seq,
                 key = static_cast<std::int64_t>(i) % seq;
      if (key > row || (c.holes && key < row && key % 5 == 1)) mask[i] = c.masked;
      if (c.empty_row && i / seq == 7) mask[i] = c.masked;  // batch 0, row 7
      if (c.between && i / seq == 10 && key == 250) mask[i] = -1e31;
    }
    in.push_back(Tensor::constant(mask, Shape{batch, 1, seq, seq}));
    std::vector<Tensor> seen = in;  // the reference: the NaN key replaced by zeros
    if (c.nan_in_k) {
      std::vector<double> k = in[1].to_doubles();
      for (std::int64_t j = 0; j < 64; ++j) k[static_cast<std::size_t>(nan_key * 64 + j)] = 0;
      seen[1] = Tensor::constant(k, Shape{batch, seq, 64});
    }
    const std::vector<double> want = reference_run(staged.graph(), seen, {})[0].to_doubles();
    for (const int threads : {1, 2}) {
      auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
      CompiledCallable compiled(staged, {}, {.context = ctx});
      const std::vector<double> got = compiled.run(in)[0].to_doubles();
      ASSERT_EQ(compiled.stats().attentions, 1u) << c.what;
      ASSERT_EQ(got.size(), want.size()) << c.what;
      // The context [b, 4 heads, seq, 16]; with the NaN key, the first block's rows of
      // batch entry 0 (every later row of entry 0 sees it, or shares a block with one).
      for (std::size_t e = 0; e < got.size(); ++e) {
        const std::int64_t entry = static_cast<std::int64_t>(e) / (4 * seq * 16),
                           row = static_cast<std::int64_t>(e) / 16 % seq;
        if (c.nan_in_k && entry == 0 && row >= 54) continue;
        ASSERT_NEAR(got[e], want[e], 2e-5 * (1 + std::fabs(want[e])))
            << c.what << ", threads " << threads << ", element " << e;
      }
    }
  }
}

TEST(SharedArena, ShapesNoBiggerThanTheLargestSoFarAddNoMemory) {
  // Every plan's calls use one arena (calls never overlap): a new shape that fits in it
  // adds no memory and touches no new page; a bigger one grows it. The plans made before
  // a growth keep their arena, and every plan stays right whatever ran in between.
  const StagedGraph staged = stage([](Tensor x) {
    const Tensor h = gelu(nn::Linear{.in = 64, .out = 256, .name = "up"}(x));
    return nn::Linear{.in = 256, .out = 64, .name = "down"}(h);
  })(f32({"batch", 64}));
  const std::map<std::string, Tensor> weights = random_weights(staged);
  auto ctx = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{1});
  CompiledCallable compiled(staged, weights, {.context = ctx});
  const auto call = [&](std::int64_t batch) {
    const std::vector<Tensor> in = {
        Tensor::random(f32({batch, 64}), static_cast<std::uint64_t>(batch), -1, 1)};
    expect_close_to_reference(staged, compiled, in, weights, "batch " + std::to_string(batch));
  };
  call(64);
  const std::size_t first = compiled.stats().arena_bytes;
  EXPECT_GE(first, compiled.stats().peak_arena_bytes);
  for (const std::int64_t batch : {8, 32, 63, 1}) {
    call(batch);
    EXPECT_EQ(compiled.stats().arena_bytes, first) << "batch " << batch << " added an arena";
  }
  call(300);  // more than twice as many rows: grows to what it needs
  const std::size_t grown = compiled.stats().arena_bytes;
  EXPECT_GT(grown, first);
  EXPECT_LE(grown, first + compiled.stats().peak_arena_bytes);  // the old arena, and the new
  for (const std::int64_t batch : {64, 8, 200, 299, 63}) {      // old plans and new, interleaved
    call(batch);
    EXPECT_EQ(compiled.stats().arena_bytes, grown) << "batch " << batch;
  }
  EXPECT_EQ(compiled.stats().plans, 8u);
}

}  // namespace
}  // namespace kiln
