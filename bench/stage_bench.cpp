// Staging and compile time of a stack of N identical transformer blocks, with shared
// subgraph bodies and with everything inlined, side by side.
//
//   bench_stage [--blocks 1,8,32,128] [--dim 256] [--heads 8] [--seq 64] [--reps 51]
//               [--compile-reps 3] [--threads N] [--json FILE]
//
// With subgraphs the staging time should grow with the number of distinct bodies (one),
// not with the number of call sites: the "vs 1 block" column is the ratio to the 1-block
// time. Compile is the CompiledCallable constructor (passes, one program per body, weight
// checks); the first call (batch 1) adds the memory plan and device-graph recording for
// the input's shapes to a call, shown next to a steady call. One untimed compile and
// call of each stack first warms up oneDNN's JIT-generated kernels.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/stage.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Shape {
  std::int64_t dim = 256, heads = 8, seq = 64;
};

kiln::StagedGraph stage_stack(int blocks, bool subgraphs, const Shape& shape) {
  const kiln::nn::TransformerBlock block{
      .dim = shape.dim, .heads = shape.heads, .hidden = 4 * shape.dim};
  const auto model = [&](kiln::Tensor x) {
    const auto layer = kiln::as_subgraph(block, {.name = "block"});
    for (int i = 0; i < blocks; ++i) {
      kiln::name_scope scope("layers." + std::to_string(i));
      x = layer(x);
    }
    return x;
  };
  return kiln::stage(model, {.subgraphs = subgraphs})(
      kiln::TensorLayout(kiln::DType::f32, {"batch", "seq", shape.dim}));
}

double stage_ms(int blocks, bool subgraphs, const Shape& shape, std::size_t* ops) {
  const auto start = Clock::now();
  const kiln::StagedGraph staged = stage_stack(blocks, subgraphs, shape);
  const double ms = ms_since(start);
  *ops = 0;
  for (std::size_t g = 0; g < staged.graph().num_graphs(); ++g)
    *ops += staged.graph().graph(g).num_ops();
  return ms;
}

struct CompileTimes {
  double compile_ms = 0, first_call_ms = 0, call_ms = 0;
};

/// Compiles the stack (zero weights) and makes its first call on batch 1.
CompileTimes compile_times(int blocks, bool subgraphs, const Shape& shape,
                           const std::shared_ptr<kiln::DeviceContext>& ctx) {
  const kiln::StagedGraph staged = stage_stack(blocks, subgraphs, shape);
  std::map<std::string, kiln::Tensor> weights;
  for (const auto& [name, type] : kiln::module_weights(staged.graph()))
    weights.emplace(name, kiln::Tensor::zeros(kiln::TensorLayout(type.dtype, type.shape)));
  const kiln::Tensor x =
      kiln::Tensor::random(kiln::TensorLayout(kiln::DType::f32, {1, shape.seq, shape.dim}), 1);
  CompileTimes t;
  auto start = Clock::now();
  kiln::CompiledCallable compiled(staged, std::move(weights), {.context = ctx});
  t.compile_ms = ms_since(start);
  start = Clock::now();
  (void)compiled.run({x});
  t.first_call_ms = ms_since(start);
  start = Clock::now();
  (void)compiled.run({x});
  t.call_ms = ms_since(start);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts = {1, 8, 32, 128};
  int reps = 51, compile_reps = 3, threads = 0;
  Shape shape;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--blocks" && i + 1 < argc) {
      counts = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--compile-reps" && i + 1 < argc) {
      compile_reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--dim" && i + 1 < argc) {
      shape.dim = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--heads" && i + 1 < argc) {
      shape.heads = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--seq" && i + 1 < argc) {
      shape.seq = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--blocks 1,8,32,128] [--dim 256] [--heads 8] [--seq 64] "
                   "[--reps 51] [--compile-reps 3] [--threads N] [--json FILE]\n",
                   argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  if (shape.dim % shape.heads != 0) {
    std::fprintf(stderr, "bench_stage: --heads %lld must divide --dim %lld\n",
                 static_cast<long long>(shape.heads), static_cast<long long>(shape.dim));
    return 2;
  }
  const auto ctx = std::make_shared<kiln::DeviceContext>(
      kiln::Device::cpu(), kiln::DeviceContextOptions{threads > 0 ? threads : 0});
  std::printf("transformer blocks: dim %lld, %lld heads, seq %lld; %d thread(s)\n",
              static_cast<long long>(shape.dim), static_cast<long long>(shape.heads),
              static_cast<long long>(shape.seq), ctx->num_threads());
  std::printf("%6s | %-12s %10s %9s %8s %11s %11s %9s\n", "blocks", "subgraphs", "stage ms",
              "vs 1 blk", "ops", "compile ms", "1st call ms", "call ms");
  std::ostringstream records;
  for (bool subgraphs : {true, false}) {
    // Interleaved: every repetition stages each block count once, so that machine noise
    // hits all counts alike; medians per count.
    std::vector<std::vector<double>> ms(counts.size());
    std::vector<std::size_t> ops(counts.size());
    for (std::size_t c = 0; c < counts.size(); ++c)
      stage_ms(counts[c], subgraphs, shape, &ops[c]);  // warm-up
    for (int r = 0; r < reps; ++r)
      for (std::size_t c = 0; c < counts.size(); ++c)
        ms[c].push_back(stage_ms(counts[c], subgraphs, shape, &ops[c]));
    std::vector<std::vector<double>> compile(counts.size()), first(counts.size()),
        call(counts.size());
    for (std::size_t c = 0; c < counts.size(); ++c)
      compile_times(counts[c], subgraphs, shape, ctx);  // warm-up
    for (int r = 0; r < compile_reps; ++r)
      for (std::size_t c = 0; c < counts.size(); ++c) {
        const CompileTimes t = compile_times(counts[c], subgraphs, shape, ctx);
        compile[c].push_back(t.compile_ms);
        first[c].push_back(t.first_call_ms);
        call[c].push_back(t.call_ms);
      }
    double base = 0;
    for (std::size_t c = 0; c < counts.size(); ++c) {
      const double median = kiln::bench::median(ms[c]);
      const double compile_ms = kiln::bench::median(compile[c]);
      const double first_ms = kiln::bench::median(first[c]);
      const double call_ms = kiln::bench::median(call[c]);
      if (base == 0) base = median;
      std::printf("%6d | %-12s %10.3f %9.2f %8zu %11.3f %11.2f %9.2f\n", counts[c],
                  subgraphs ? "on" : "off (inline)", median, median / base, ops[c], compile_ms,
                  first_ms, call_ms);
      records << (records.tellp() > 0 ? ",\n    " : "\n    ") << "{\"blocks\": " << counts[c]
              << ", \"subgraphs\": " << (subgraphs ? "true" : "false")
              << ", \"stage_ms\": " << median << ", \"vs_one_block\": " << median / base
              << ", \"ops\": " << ops[c] << ", \"compile_ms\": " << compile_ms
              << ", \"first_call_ms\": " << first_ms << ", \"call_ms\": " << call_ms << "}";
    }
  }
  if (!json.empty()) {
    std::ofstream(json) << "{\n  \"benchmark\": \"stage\",\n  \"dim\": " << shape.dim
                        << ",\n  \"heads\": " << shape.heads << ",\n  \"seq\": " << shape.seq
                        << ",\n  \"threads\": " << ctx->num_threads() << ",\n  \"results\": ["
                        << records.str() << "\n  ]\n}\n";
    std::printf("wrote %s\n", json.c_str());
  }
  return 0;
}
