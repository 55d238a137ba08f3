// Staging time of a stack of N identical transformer blocks, with shared subgraph bodies
// and with everything inlined, side by side.
//
//   bench_stage [--blocks 1,8,32,128] [--reps 51] [--json FILE]
//
// With subgraphs the time should grow with the number of distinct bodies (one), not with
// the number of call sites: the "vs 1 block" column is the ratio to the 1-block time.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/stage.hpp"

namespace {

double stage_ms(int blocks, bool subgraphs, std::size_t* ops) {
  const kiln::nn::TransformerBlock block{.dim = 256, .heads = 8, .hidden = 1024};
  const auto model = [&](kiln::Tensor x) {
    const auto layer = kiln::as_subgraph(block, {.name = "block"});
    for (int i = 0; i < blocks; ++i) {
      kiln::name_scope scope("layers." + std::to_string(i));
      x = layer(x);
    }
    return x;
  };
  const auto start = std::chrono::steady_clock::now();
  const kiln::StagedGraph staged = kiln::stage(
      model, {.subgraphs = subgraphs})(kiln::TensorLayout(kiln::DType::f32, {"batch", "seq", 256}));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  *ops = 0;
  for (std::size_t g = 0; g < staged.graph().num_graphs(); ++g)
    *ops += staged.graph().graph(g).num_ops();
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> counts = {1, 8, 32, 128};
  int reps = 51;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--blocks" && i + 1 < argc) {
      counts = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--blocks 1,8,32,128] [--reps 51] [--json FILE]\n", argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  std::printf("%6s | %-12s %10s %9s %8s\n", "blocks", "subgraphs", "ms median", "vs 1 blk", "ops");
  std::ostringstream records;
  for (bool subgraphs : {true, false}) {
    // Interleaved: every repetition stages each block count once, so that machine noise
    // hits all counts alike; medians per count.
    std::vector<std::vector<double>> ms(counts.size());
    std::vector<std::size_t> ops(counts.size());
    for (std::size_t c = 0; c < counts.size(); ++c)
      stage_ms(counts[c], subgraphs, &ops[c]);  // warm-up
    for (int r = 0; r < reps; ++r)
      for (std::size_t c = 0; c < counts.size(); ++c)
        ms[c].push_back(stage_ms(counts[c], subgraphs, &ops[c]));
    double base = 0;
    for (std::size_t c = 0; c < counts.size(); ++c) {
      std::sort(ms[c].begin(), ms[c].end());
      const double median = ms[c][ms[c].size() / 2];
      if (base == 0) base = median;
      std::printf("%6d | %-12s %10.3f %9.2f %8zu\n", counts[c], subgraphs ? "on" : "off (inline)",
                  median, median / base, ops[c]);
      records << (records.tellp() > 0 ? ",\n    " : "\n    ") << "{\"blocks\": " << counts[c]
              << ", \"subgraphs\": " << (subgraphs ? "true" : "false") << ", \"ms\": " << median
              << ", \"vs_one_block\": " << median / base << ", \"ops\": " << ops[c] << "}";
    }
  }
  if (!json.empty()) {
    std::ofstream(json) << "{\n  \"benchmark\": \"stage\",\n  \"results\": [" << records.str()
                        << "\n  ]\n}\n";
    std::printf("wrote %s\n", json.c_str());
  }
  return 0;
}
