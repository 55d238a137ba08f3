// How parsing, verifying, compiling and planning grow with a module's size: chains of
// 10^4, 10^5 and 10^6 `tanh` ops (no passes, so that every op is a launch) and modules of
// 10^4 and 10^5 graphs, each size in its own process so that its peak RSS is its own.
// Reports time and peak RSS per op (or per graph) and the growth exponent between sizes
// (1 is linear). Usage: bench_scale [--max-ops N] [--max-graphs N]
//                       bench_scale --chain-in-process N   (one chain, for heap profilers)
// KILN_SCALE_TRACE=1 prints the peak RSS after each phase.
//
// Not a test: timings on a shared machine vary; the exponent is what to read.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace {

using Clock = std::chrono::steady_clock;

/// Appends every piece to \p s (one append each: GCC 12 warns falsely on `"%" + str`).
template <class... Pieces>
void append(std::string& s, const Pieces&... pieces) {
  (s.append(pieces), ...);
}

/// A chain of \p n tanh ops over a tensor<4xf32>, as text.
std::string chain_text(std::size_t n) {
  std::string s = "module {\n  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n";
  std::string prev = "arg0";  // the previous value, without its %
  for (std::size_t i = 0; i < n; ++i) {
    const std::string id = std::to_string(i);
    append(s, "    %", id, " = \"kiln.tanh\"(%", prev, ") : (tensor<4xf32>) -> tensor<4xf32>\n");
    prev = id;
  }
  append(s, "    return %", prev, " : tensor<4xf32>\n  }\n}\n");
  return s;
}

/// @main calling each of \p n trivial graphs once, as text.
std::string graphs_text(std::size_t n) {
  std::string s = "module {\n  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n";
  std::string prev = "arg0";  // the previous value, without its %
  for (std::size_t i = 0; i < n; ++i) {
    const std::string id = std::to_string(i);
    append(s, "    %", id, " = \"func.call\"(%", prev, ") {callee = @g", id,
           "} : (tensor<4xf32>) -> tensor<4xf32>\n");
    prev = id;
  }
  append(s, "    return %", prev, " : tensor<4xf32>\n  }\n");
  for (std::size_t i = 0; i < n; ++i)
    append(s, "  func.func private @g", std::to_string(i),
           "(%x: tensor<4xf32>) -> tensor<4xf32> {\n    %0 = \"kiln.tanh\"(%x) : (tensor<4xf32>) "
           "-> tensor<4xf32>\n    return %0 : tensor<4xf32>\n  }\n");
  s.append("}\n");
  return s;
}

struct Phases {
  double parse_s = 0, verify_s = 0, compile_s = 0, plan_s = 0;
  long peak_kib = 0;
};

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Parses, verifies, compiles (no passes) and plans one call, in this process.
Phases measure(const std::string& text) {
  Phases p;
  auto t = Clock::now();
  kiln::ir::Module module = kiln::ir::parse_module(text, "scale.mlir");
  p.parse_s = since(t);
  const auto rss = [](const char* at) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    if (std::getenv("KILN_SCALE_TRACE"))
      std::fprintf(stderr, "%s: peak %ld MiB\n", at, u.ru_maxrss / 1024);
  };
  rss("parsed");
  t = Clock::now();
  kiln::StagedGraph staged = kiln::StagedGraph::from_module(std::move(module));  // verifies
  p.verify_s = since(t);
  rss("verified");
  t = Clock::now();
  kiln::CompileOptions options;
  options.passes = {};
  options.context =
      std::make_shared<kiln::DeviceContext>(kiln::Device::cpu(), kiln::DeviceContextOptions{1});
  kiln::CompiledCallable callable(staged, std::map<std::string, kiln::Tensor>{}, options);
  p.compile_s = since(t);
  rss("compiled");
  t = Clock::now();
  const kiln::Tensor x = kiln::Tensor::zeros(kiln::TensorLayout(kiln::DType::f32, {4}));
  (void)callable.output_bytes({x});  // plans and records the device graph
  p.plan_s = since(t);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  p.peak_kib = usage.ru_maxrss;
  return p;
}

/// measure() in a child process, so that each size's peak RSS is its own.
bool measure_in_child(const std::string& text, Phases& out) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Phases p{};
    try {
      p = measure(text);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_scale: %s\n", e.what());
      _exit(1);
    }
    const ssize_t n = write(fds[1], &p, sizeof p);
    _exit(n == sizeof p ? 0 : 1);
  }
  close(fds[1]);
  const ssize_t n = read(fds[0], &out, sizeof out);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return n == sizeof out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void table(const char* what, const std::vector<std::size_t>& sizes,
           std::string (*make)(std::size_t)) {
  std::printf("\n%-10s %10s %9s %9s %9s %9s %11s %12s %9s\n", what, "count", "parse s", "verify s",
              "compile s", "plan s", "peak MiB", "us per item", "B per item");
  double prev_total = 0, prev_bytes = 0;
  std::size_t prev_n = 0;
  for (std::size_t n : sizes) {
    const std::string text = make(n);
    Phases p;
    if (!measure_in_child(text, p)) {
      std::printf("%-10s %10zu  failed (see above)\n", what, n);
      continue;
    }
    const double total = p.parse_s + p.verify_s + p.compile_s + p.plan_s;
    const double bytes = static_cast<double>(p.peak_kib) * 1024;
    std::printf("%-10s %10zu %9.3f %9.3f %9.3f %9.3f %11.1f %12.2f %9.0f\n", what, n, p.parse_s,
                p.verify_s, p.compile_s, p.plan_s, bytes / (1 << 20), total * 1e6 / n, bytes / n);
    if (prev_n != 0)
      std::printf("%-10s growth exponent from %zu: time %.2f, peak memory %.2f\n", "", prev_n,
                  std::log(total / prev_total) / std::log(double(n) / prev_n),
                  std::log(bytes / prev_bytes) / std::log(double(n) / prev_n));
    prev_total = total;
    prev_bytes = bytes;
    prev_n = n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max_ops = 1000000, max_graphs = 100000;
  if (argc == 3 && std::strcmp(argv[1], "--chain-in-process") == 0) {  // for heap profilers
    const Phases p = measure(chain_text(std::strtoull(argv[2], nullptr, 10)));
    std::printf("peak %ld MiB\n", p.peak_kib / 1024);
    return 0;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--max-ops") == 0) max_ops = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--max-graphs") == 0)
      max_graphs = std::strtoull(argv[i + 1], nullptr, 10);
  }
  std::vector<std::size_t> ops, graphs;
  for (std::size_t n = 10000; n <= max_ops; n *= 10) ops.push_back(n);
  for (std::size_t n = 10000; n <= max_graphs; n *= 10) graphs.push_back(n);
  std::printf("kiln scale: one process per size; time = parse + verify + compile + plan\n");
  table("tanh chain", ops, chain_text);
  table("graphs", graphs, graphs_text);
  return 0;
}
