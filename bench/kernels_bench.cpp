// CPU kernel performance, side by side in one run at one thread count:
//   1. a 4-op elementwise chain over 64 M floats, fused vs unfused, and the fused kernel's
//      bandwidth against a plain triad loop;
//   2. GELU, SiLU and softmax over large tensors (elements per second);
//   3. f32 matmul N x N x N through a compiled graph vs a direct oneDNN sgemm call;
//   4. the per-call overhead of a tiny compiled graph (16-float add): checked call,
//      execute_raw, and a bare one-node device-graph replay.
// Kernel times come from the profiler (the slices of the kernels themselves), so copying
// inputs into a plan and outputs out of it is not counted where kernels are compared.
//
//   bench_kernels [--threads N] [--elements 67108864] [--sizes 256,512,1024,2048]
//                 [--reps 5] [--json FILE]

#include <dnnl.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.hpp"
#include "kiln/kiln.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::Tensor;
using kiln::TensorLayout;

double seconds_of(const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median_seconds(int reps, const std::function<void()>& fn) {
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) s.push_back(seconds_of(fn));
  return kiln::bench::median(s);
}

/// Median over calls of the summed kernel time of one call of \p compiled (profiler slices).
double kernel_seconds(kiln::CompiledCallable& compiled, const std::vector<Tensor>& in, int reps) {
  (void)compiled.run(in);  // plan and record first
  std::vector<double> per_call;
  for (int r = 0; r < reps; ++r) {
    auto profiler = std::make_shared<kiln::Profiler>(1 << 14);
    compiled.context()->set_profiler(profiler);
    (void)compiled.execute_raw(in);
    compiled.context()->set_profiler(nullptr);
    double ns = 0;
    for (const kiln::ProfileEvent& e : profiler->events())
      ns += static_cast<double>(e.end_ns - e.begin_ns);
    per_call.push_back(ns * 1e-9);
  }
  return kiln::bench::median(per_call);
}

kiln::TensorLayout f32(kiln::Shape s) { return {kiln::DType::f32, std::move(s)}; }

struct Row {
  std::string section, name;
  double kiln = 0, peer = 0;
  std::string unit, peer_name;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, reps = 5;
  std::int64_t elements = std::int64_t{1} << 26;
  std::vector<int> sizes = {256, 512, 1024, 2048};
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--elements" && i + 1 < argc) {
      elements = std::atoll(argv[++i]);
    } else if (arg == "--sizes" && i + 1 < argc) {
      sizes = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--elements 67108864] [--sizes 256,512,1024,2048] "
                   "[--reps 5] [--json FILE]\n",
                   argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  auto ctx = std::make_shared<kiln::DeviceContext>(kiln::Device::cpu(),
                                                   kiln::DeviceContextOptions{threads});
  threads = ctx->num_threads();
  std::printf("bench_kernels: %d thread%s, %lld-element tensors, %d reps (medians)\n\n", threads,
              threads == 1 ? "" : "s", static_cast<long long>(elements), reps);
  std::vector<Row> rows;

  // ---- 1. elementwise chain: relu(x * y + x) * 0.5 -----------------------------------------
  {
    const auto chain = [](Tensor x, Tensor y) { return relu(x * y + x) * 0.5; };
    const kiln::StagedGraph staged = kiln::stage(chain)(f32({elements}), f32({elements}));
    const std::vector<Tensor> in = {Tensor::random(f32({elements}), 1),
                                    Tensor::random(f32({elements}), 2)};
    kiln::CompiledCallable fused(staged, {}, {.context = ctx});
    kiln::CompiledCallable unfused(staged, {}, {.context = ctx, .passes = {}});
    const double t_fused = kernel_seconds(fused, in, reps);
    const double t_unfused = kernel_seconds(unfused, in, reps);
    // Bytes each moves: fused reads x, y and writes out; unfused: mul 3, add 3, relu 2, mul 2.
    const double bytes = static_cast<double>(elements) * 4;
    const double ideal = 10.0 / 3.0;
    // Triad a = b + s c, split over the same number of threads.
    std::vector<float> a(static_cast<std::size_t>(elements)), b(a.size(), 1.0f), c(a.size(), 2.0f);
    const double t_triad = median_seconds(reps, [&] {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          const std::size_t lo = a.size() * t / threads, hi = a.size() * (t + 1) / threads;
          for (std::size_t i = lo; i < hi; ++i) a[i] = b[i] + 3.0f * c[i];
        });
      for (std::thread& th : pool) th.join();
    });
    const double bw_fused = 3 * bytes / t_fused, bw_triad = 3 * bytes / t_triad;
    std::printf("1. elementwise chain relu(x*y + x)*0.5 over %lld floats\n",
                static_cast<long long>(elements));
    std::printf("   fused %.2f ms, unfused %.2f ms: %.2fx (ideal %.2fx by bytes moved)\n",
                t_fused * 1e3, t_unfused * 1e3, t_unfused / t_fused, ideal);
    std::printf("   fused %.1f GB/s, triad loop %.1f GB/s: %.0f%% of the triad\n\n", bw_fused / 1e9,
                bw_triad / 1e9, 100 * bw_fused / bw_triad);
    rows.push_back({"chain", "fused_vs_unfused", t_unfused / t_fused, ideal, "x", "ideal"});
    rows.push_back(
        {"chain", "fused_vs_triad_bandwidth", bw_fused / 1e9, bw_triad / 1e9, "GB/s", "triad"});
  }

  // ---- 2. activations -----------------------------------------------------------------------
  std::printf("2. activations over %lld floats (kernel time)\n", static_cast<long long>(elements));
  const std::int64_t cols = 1024, rows_n = elements / cols;
  for (const char* name : {"gelu", "silu", "softmax"}) {
    const std::string op = name;
    const auto fn = [op](Tensor x) {
      return op == "gelu" ? gelu(x) : op == "silu" ? silu(x) : softmax(x, -1);
    };
    const kiln::StagedGraph staged = kiln::stage(fn)(f32({rows_n, cols}));
    const std::vector<Tensor> in = {Tensor::random(f32({rows_n, cols}), 3, -4, 4)};
    kiln::CompiledCallable compiled(staged, {}, {.context = ctx});
    const double t = kernel_seconds(compiled, in, reps);
    const double rate = static_cast<double>(rows_n * cols) / t;
    std::printf("   %-8s %.2f ms  %.2f G elements/s\n", name, t * 1e3, rate / 1e9);
    rows.push_back({"activation", name, rate / 1e9, 0, "G elements/s", ""});
  }
  std::printf("\n");

  // ---- 3. matmul vs oneDNN sgemm ------------------------------------------------------------
  std::printf(
      "3. matmul f32 N x N x N: compiled graph kernel vs direct oneDNN sgemm (%d thread%s)\n",
      threads, threads == 1 ? "" : "s");
  for (int n : sizes) {
    const auto mm = [](Tensor a, Tensor b) { return matmul(a, b); };
    const kiln::StagedGraph staged = kiln::stage(mm)(f32({n, n}), f32({n, n}));
    const std::vector<Tensor> in = {Tensor::random(f32({n, n}), 4), Tensor::random(f32({n, n}), 5)};
    kiln::CompiledCallable compiled(staged, {}, {.context = ctx});
    const int r = n >= 2048 ? std::max(1, reps / 2) : reps;
    const double t_kiln = kernel_seconds(compiled, in, r);
    std::vector<float> c(static_cast<std::size_t>(n) * n);
    const auto* ap = reinterpret_cast<const float*>(in[0].bytes().data());
    const auto* bp = reinterpret_cast<const float*>(in[1].bytes().data());
    omp_set_num_threads(threads);
    (void)dnnl_sgemm('N', 'N', n, n, n, 1.0f, ap, n, bp, n, 0.0f, c.data(), n);  // warm up
    const double t_dnnl = median_seconds(
        r, [&] { (void)dnnl_sgemm('N', 'N', n, n, n, 1.0f, ap, n, bp, n, 0.0f, c.data(), n); });
    const double flops = 2.0 * n * n * static_cast<double>(n);
    std::printf("   N=%-5d kiln %8.2f ms %6.1f GFLOP/s   oneDNN %8.2f ms %6.1f GFLOP/s   %3.0f%%\n",
                n, t_kiln * 1e3, flops / t_kiln / 1e9, t_dnnl * 1e3, flops / t_dnnl / 1e9,
                100 * t_dnnl / t_kiln);
    rows.push_back({"matmul", "N=" + std::to_string(n), flops / t_kiln / 1e9, flops / t_dnnl / 1e9,
                    "GFLOP/s", "oneDNN sgemm"});
  }
  std::printf("\n");

  // ---- 4. per-call overhead ---------------------------------------------------------------
  {
    const auto add = [](Tensor x) { return x + x; };
    const kiln::StagedGraph staged = kiln::stage(add)(f32({16}));
    kiln::CompiledCallable compiled(staged, {}, {.context = ctx});
    const Tensor x = Tensor::random(f32({16}), 6);
    const std::vector<Tensor> in = {x};
    (void)compiled(x);
    constexpr int kCalls = 2000;
    const double t_checked = median_seconds(reps,
                                            [&] {
                                              for (int i = 0; i < kCalls; ++i) (void)compiled(x);
                                            }) /
                             kCalls;
    const double t_raw = median_seconds(reps,
                                        [&] {
                                          for (int i = 0; i < kCalls; ++i)
                                            (void)compiled.execute_raw(in);
                                        }) /
                         kCalls;
    auto buffer = ctx->enqueue_create_buffer<float>(16);
    auto kernel = ctx->compile_function([](float* v) { v[0] += v[1]; }, {.name = "add16"});
    const kiln::DeviceGraph graph =
        kiln::DeviceGraph::create(*ctx, [&](kiln::DeviceGraphBuilder& g) {
          g.add_function(kernel, kiln::LaunchConfig{1, 1}, {}, buffer.data());
        });
    const double t_replay = median_seconds(reps,
                                           [&] {
                                             for (int i = 0; i < kCalls; ++i) {
                                               graph.replay();
                                               ctx->synchronize();
                                             }
                                           }) /
                            kCalls;
    std::printf(
        "4. per call, one add of 16 floats: compiled(x) %.2f us, execute_raw %.2f us, "
        "one-node graph replay + synchronize %.2f us\n",
        t_checked * 1e6, t_raw * 1e6, t_replay * 1e6);
    rows.push_back(
        {"overhead", "compiled_call_us", t_checked * 1e6, t_replay * 1e6, "us", "one-node replay"});
    rows.push_back(
        {"overhead", "execute_raw_us", t_raw * 1e6, t_replay * 1e6, "us", "one-node replay"});
  }

  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"threads\": " << threads << ", \"elements\": " << elements << ", \"results\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i)
      out << "  {\"section\": \"" << rows[i].section << "\", \"name\": \"" << rows[i].name
          << "\", \"kiln\": " << rows[i].kiln << ", \"peer\": " << rows[i].peer
          << ", \"peer_name\": \"" << rows[i].peer_name << "\", \"unit\": \"" << rows[i].unit
          << "\"}" << (i + 1 < rows.size() ? ",\n" : "\n");
    out << "]}\n";
    std::printf("\nwrote %s\n", json.c_str());
  }
  return 0;
}
