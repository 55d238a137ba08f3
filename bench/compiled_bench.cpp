// The compiled pipeline on a small transformer, side by side with the reference
// interpreter, and the measurement behind "copy inputs into stable buffers" versus
// "update the recorded graph in place" for calls with new buffers.
//
//   bench_compiled [--reps 21] [--json FILE]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "kiln/kiln.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median_ms(int reps, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    fn();
    ms.push_back(ms_since(start));
  }
  return kiln::bench::median(ms);
}

void noop_kernel(const float*) {}

}  // namespace

int main(int argc, char** argv) {
  int reps = 21;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--reps 21] [--json FILE]\n", argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  constexpr std::int64_t kDim = 64, kHidden = 256, kBatch = 4, kSeq = 16;
  const kiln::nn::TransformerBlock block{.dim = kDim, .heads = 4, .hidden = kHidden};
  const auto model = [&](kiln::Tensor x) {
    const auto layer = kiln::as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 2; ++i) {
      kiln::name_scope scope(std::string("layers.").append(std::to_string(i)));
      x = layer(x);
    }
    return x;
  };
  auto start = Clock::now();
  const kiln::StagedGraph staged =
      kiln::stage(model)(kiln::TensorLayout(kiln::DType::f32, {"batch", "seq", kDim}));
  const double stage_ms = ms_since(start);

  std::map<std::string, kiln::Tensor> weights;
  std::uint64_t seed = 1;
  for (const char* layer : {"layers.0.", "layers.1."}) {
    const auto add = [&](const std::string& name, kiln::Shape s) {
      weights.emplace(layer + name,
                      kiln::Tensor::random({kiln::DType::f32, std::move(s)}, seed++, -0.1, 0.1));
    };
    for (const char* p : {"attn.q.", "attn.k.", "attn.v.", "attn.o."}) {
      add(std::string(p) + "weight", {kDim, kDim});
      add(std::string(p) + "bias", {kDim});
    }
    for (const char* n : {"norm1.", "norm2."}) {
      add(std::string(n) + "weight", {kDim});
      add(std::string(n) + "bias", {kDim});
    }
    add("mlp.w1.weight", {kDim, kHidden});
    add("mlp.w1.bias", {kHidden});
    add("mlp.w2.weight", {kHidden, kDim});
    add("mlp.w2.bias", {kDim});
  }
  start = Clock::now();
  kiln::CompiledCallable compiled(staged, weights);
  const double compile_ms = ms_since(start);
  const kiln::Tensor x = kiln::Tensor::random({kiln::DType::f32, {kBatch, kSeq, kDim}}, 7);
  start = Clock::now();
  (void)compiled(x);
  const double first_ms = ms_since(start);
  const double call_ms = median_ms(reps, [&] { (void)compiled(x); });
  const double reference_ms = median_ms(
      std::max(3, reps / 4), [&] { (void)kiln::reference_run(staged.graph(), {x}, weights); });
  const auto stats = compiled.stats();

  std::printf(
      "transformer: 2 blocks, dim %lld, hidden %lld, input [%lld, %lld, %lld] f32 (median of %d)\n",
      static_cast<long long>(kDim), static_cast<long long>(kHidden), static_cast<long long>(kBatch),
      static_cast<long long>(kSeq), static_cast<long long>(kDim), reps);
  std::printf("  staging %.2f ms, compile %.2f ms, first call %.2f ms, median call %.3f ms\n",
              stage_ms, compile_ms, first_ms, call_ms);
  std::printf("  reference interpreter %.3f ms: compiled is %.1fx faster\n", reference_ms,
              reference_ms / call_ms);
  std::printf("  plan: %zu graphs compiled, arena peak %zu bytes\n", stats.bodies_compiled,
              stats.peak_arena_bytes);

  // New buffers per call: copy them into the plan's stable buffers, or update the graph's
  // kernel arguments in place? Measure both for a graph of the plan's size.
  kiln::DeviceContext ctx(kiln::Device::cpu(), {.num_threads = 1});
  auto fn = ctx.compile_function<&noop_kernel>();
  std::vector<float> a(static_cast<std::size_t>(kBatch * kSeq * kDim)), b(a.size());
  const int nodes = 120;  // about the launches of this model's plan after fusion
  const auto build = [&](const float* input) {
    return [&fn, input](kiln::DeviceGraphBuilder& g) {
      auto prev = g.add_function(fn, kiln::LaunchConfig{1, 1}, {}, input);
      for (int i = 1; i < nodes; ++i)
        prev = g.add_function(fn, kiln::LaunchConfig{1, 1}, prev, input);
    };
  };
  auto graph = kiln::DeviceGraph::create(ctx, build(a.data()));
  bool flip = false;
  const double update_ms = median_ms(reps, [&] {
    graph.update(build((flip = !flip) ? b.data() : a.data()));
    ctx.synchronize();
  });
  const double copy_ms =
      median_ms(reps, [&] { std::memcpy(b.data(), a.data(), a.size() * sizeof(float)); });
  std::printf(
      "  new input buffer per call: update a %d-node graph in place %.4f ms vs copy %zu bytes %.4f "
      "ms "
      "(update / copy %.1f)\n",
      nodes, update_ms, a.size() * sizeof(float), copy_ms, update_ms / copy_ms);
  if (!json.empty()) {
    std::ofstream(json) << "{\"benchmark\": \"compiled\", \"stage_ms\": " << stage_ms
                        << ", \"compile_ms\": " << compile_ms << ", \"first_call_ms\": " << first_ms
                        << ", \"call_ms\": " << call_ms << ", \"reference_ms\": " << reference_ms
                        << ", \"update_ms\": " << update_ms << ", \"copy_ms\": " << copy_ms
                        << "}\n";
  }
  return 0;
}
