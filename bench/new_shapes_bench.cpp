// What a serving process pays per new input shape: the GPT-style transformer `kiln demo`
// stages (4 layers, d_model 512, 8 heads, MLP 2048, vocab 1000, symbolic batch and seq)
// compiled once, then called with 32 distinct (batch, seq) shapes in turn. For each shape:
// the time to make and record its plan alone, its first call (that plus the call, which
// also first touches the plan's memory), the fastest of three replays, the first call less
// that replay (what the new shape cost), and the process's resident memory after it; at the
// end the weights' own size and their packed copies', so that copies per plan show.
//
//   bench_new_shapes [--threads N] [--shapes 32] [--json FILE]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_args.hpp"
#include "kiln/kiln.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// The process's resident memory in MiB (VmRSS), or -1 where /proc is not there.
double resident_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return -1;
}

/// The shapes in the order they are called: the first five, then others up to
/// \p count, all distinct.
std::vector<std::pair<std::int64_t, std::int64_t>> shapes(int count) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out = {
      {1, 128}, {1, 17}, {1, 33}, {4, 128}, {16, 128}};
  for (std::int64_t seq : {5, 9, 24, 40, 48, 57, 64, 71, 80, 96, 100, 112, 120, 127, 129, 150})
    for (std::int64_t batch : {1, 2, 3, 8}) {
      if (static_cast<int>(out.size()) >= count) return out;
      if (std::find(out.begin(), out.end(), std::pair{batch, seq}) == out.end())
        out.emplace_back(batch, seq);
    }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, count = 32;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--shapes" && i + 1 < argc) {
      count = std::clamp(std::atoi(argv[++i]), 1, 64);
    } else if (arg == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--shapes 32] [--json FILE]\n", argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  constexpr std::int64_t kDim = 512, kHeads = 8, kHidden = 2048, kVocab = 1000;
  constexpr int kLayers = 4;
  const kiln::nn::TransformerBlock block{.dim = kDim, .heads = kHeads, .hidden = kHidden};
  const auto model = [&](kiln::Tensor ids) {
    kiln::Tensor x = kiln::nn::Embedding{.vocab = kVocab, .dim = kDim, .name = "embed"}(ids);
    const auto layer = kiln::as_subgraph(block, {.name = "block"});
    for (int i = 0; i < kLayers; ++i) {
      kiln::name_scope scope(std::string("layers.").append(std::to_string(i)));
      x = layer(x);
    }
    x = kiln::nn::RMSNorm{.dim = kDim, .name = "final_norm"}(x);
    return kiln::nn::Linear{.in = kDim, .out = kVocab, .bias = false, .name = "lm_head"}(x);
  };
  const kiln::StagedGraph staged =
      kiln::stage(model)(kiln::TensorLayout(kiln::DType::i64, {"batch", "seq"}));
  std::map<std::string, kiln::Tensor> weights;
  std::uint64_t seed = 1;
  double weight_mib = 0;
  for (const auto& [name, type] : kiln::module_weights(staged.graph())) {
    const kiln::Tensor w =
        kiln::Tensor::random(kiln::TensorLayout(type.dtype, type.shape), seed++, -0.05, 0.05);
    weight_mib += static_cast<double>(w.bytes().size()) / (1 << 20);
    weights.emplace(name, w);
  }
  const auto ctx = std::make_shared<kiln::DeviceContext>(
      kiln::Device::cpu(), kiln::DeviceContextOptions{.num_threads = threads});
  const double before_compile = resident_mib();
  kiln::CompiledCallable compiled(staged, weights, {.context = ctx});
  std::printf(
      "new shapes: transformer %d layers, d_model %lld, %.1f MiB of f32 weights; %d "
      "thread%s; resident %.0f MiB before compiling, %.0f after\n",
      kLayers, static_cast<long long>(kDim), weight_mib, ctx->num_threads(),
      ctx->num_threads() == 1 ? "" : "s", before_compile, resident_mib());
  std::printf(
      "| # | batch x seq | plan and record ms | first call ms | replay ms | new plan ms | "
      "resident MiB |\n");
  std::printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
  std::vector<double> new_shape_ms;
  std::string rows;
  int n = 0;
  for (const auto& [batch, seq] : shapes(count)) {
    const kiln::Tensor ids = kiln::Tensor::random(
        kiln::TensorLayout(kiln::DType::i64, kiln::Shape{batch, seq}), seed++, 0, kVocab - 1);
    // Planning and recording alone (output_bytes plans the shape without running it), then
    // the first call (which also first touches the plan's memory), then three replays.
    auto start = Clock::now();
    (void)compiled.output_bytes({ids});
    const double plan = ms_since(start);
    start = Clock::now();
    (void)compiled(ids);
    const double first = plan + ms_since(start);
    double replay = 1e300;
    for (int r = 0; r < 3; ++r) {
      start = Clock::now();
      (void)compiled(ids);
      replay = std::min(replay, ms_since(start));
    }
    const double rss = resident_mib();
    // The plan's own cost: the first call less the fastest replay.
    if (n > 0) new_shape_ms.push_back(first - replay);
    std::printf("| %d | %lldx%lld | %.1f | %.1f | %.2f | %.1f | %.0f |\n", ++n,
                static_cast<long long>(batch), static_cast<long long>(seq), plan, first, replay,
                first - replay, rss);
    std::fflush(stdout);
    rows += std::string(rows.empty() ? "" : ",") + "{\"batch\":" + std::to_string(batch) +
            ",\"seq\":" + std::to_string(seq) + ",\"first_ms\":" + std::to_string(first) +
            ",\"plan_ms\":" + std::to_string(plan) + ",\"replay_ms\":" + std::to_string(replay) +
            ",\"resident_mib\":" + std::to_string(rss) + "}";
  }
  const double median_new = new_shape_ms.empty() ? 0 : kiln::bench::median(new_shape_ms);
  const kiln::CompiledCallable::Stats stats = compiled.stats();
  std::printf(
      "\nafter %d shapes: resident %.0f MiB (weights %.1f MiB, packed for oneDNN %.1f MiB); "
      "median new plan (first call less the fastest replay) %.1f ms; plans %zu\n",
      n, resident_mib(), weight_mib, static_cast<double>(stats.packed_weight_bytes) / (1 << 20),
      median_new, stats.plans);
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"threads\":" << ctx->num_threads() << ",\"weights_mib\":" << weight_mib
        << ",\"median_new_plan_ms\":" << median_new << ",\"resident_mib\":" << resident_mib()
        << ",\"shapes\":[" << rows << "]}\n";
  }
  return 0;
}
