// Building, printing, parsing and verifying a large IR graph, and the same text through
// the real MLIR parser (mlir-opt-15) side by side.
//
//   bench_ir [--ops 100000] [--reps 5] [--json FILE]
//
// The graph: N ops on [batch, 64] f32 values, a mix of broadcasting binary ops, unary ops,
// weights, matmuls, reshapes and multi-result splits, each op with a source location.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kiln/ir/graph.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/kiln.hpp"

namespace {

using namespace kiln;
using namespace kiln::ir;

Module build(int n) {
  Module m;
  Graph& g = m.add_graph("main");
  const TensorType row{DType::f32, {"batch", 64}, Device::cpu()};
  Value v = g.add_argument(row);
  const Value bias = g.add_argument({DType::f32, {64}, Device::cpu()});
  const OpDef& weight = lookup_op("kiln.weight");
  for (int i = 0; i < n;) {
    const Location loc{"model.cpp", static_cast<std::uint32_t>(100 + i % 1000), 7};
    switch (i % 10) {
      case 0: {
        Value w = g.add_op_typed(weight, {}, {{"name", "w" + std::to_string(i)}},
                                 {{DType::f32, {64, 64}, Device::cpu()}}, loc)
                      .result(0);
        v = g.add_op("kiln.matmul", {v, w}, {}, loc).result(0);
        i += 2;
        break;
      }
      case 3: {
        const OpView split =
            g.add_op("kiln.split", {v}, {{"axis", 1}, {"sizes", Attribute::Array{32, 32}}}, loc);
        v = g.add_op("kiln.concat", {split.result(1), split.result(0)}, {{"axis", 1}}, loc)
                .result(0);
        i += 2;
        break;
      }
      case 6:
        v = g.add_op("kiln.gelu", {v}, {{"approximate", "tanh"}}, loc).result(0);
        ++i;
        break;
      default:
        v = g.add_op(i % 2 ? "kiln.add" : "kiln.mul", {v, bias}, {}, loc).result(0);
        ++i;
    }
  }
  g.set_results({v});
  return m;
}

double median_ms(int reps, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int ops = 100000;
  int reps = 5;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ops" && i + 1 < argc) {
      ops = std::atoi(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--ops 100000] [--reps 5] [--json FILE]\n", argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  Module module = build(ops);
  std::string text = print(module);
  const double build_ms = median_ms(reps, [&] { module = build(ops); });
  const double print_ms = median_ms(reps, [&] { text = print(module); });
  const double parse_ms = median_ms(reps, [&] { (void)parse_module(text); });
  const double verify_ms = median_ms(reps, [&] {
    if (!verify(module).empty()) std::abort();
  });
  std::printf("IR of %zu ops, %zu bytes of text (median of %d)\n", module.entry().num_ops(),
              text.size(), reps);
  std::printf("  build  %8.1f ms\n  print  %8.1f ms\n  parse  %8.1f ms\n  verify %8.1f ms\n",
              build_ms, print_ms, parse_ms, verify_ms);

  // The real MLIR parser on the same text (parse + verify + print), when installed.
  double mlir_ms = 0;
  const char* tmp = "/tmp/kiln_bench_ir.mlir";
  std::ofstream(tmp) << text;
  const std::string cmd =
      std::string("mlir-opt-15 --allow-unregistered-dialect ") + tmp + " -o /dev/null 2>/dev/null";
  if (std::system(cmd.c_str()) == 0) {
    mlir_ms = median_ms(reps, [&] {
      if (std::system(cmd.c_str()) != 0) std::abort();
    });
    std::printf(
        "  mlir-opt-15 parse+verify+print %8.1f ms (process included); kiln parse+verify+"
        "print %.1f ms: ratio kiln/mlir-opt %.2f\n",
        mlir_ms, parse_ms + verify_ms + print_ms, (parse_ms + verify_ms + print_ms) / mlir_ms);
  } else {
    std::printf("  mlir-opt-15: not available (scripts/setup.sh installs mlir-15-tools)\n");
  }
  if (!json.empty()) {
    std::ofstream(json) << "{\"benchmark\": \"ir\", \"ops\": " << ops
                        << ", \"bytes\": " << text.size() << ", \"build_ms\": " << build_ms
                        << ", \"print_ms\": " << print_ms << ", \"parse_ms\": " << parse_ms
                        << ", \"verify_ms\": " << verify_ms << ", \"mlir_opt_ms\": " << mlir_ms
                        << "}\n";
  }
  return 0;
}
