// Device-graph replay against its peers, side by side in one run (see BENCHMARKING.md).
//
//   bench_graph_peers [--threads 1,2] [--nodes 1000,10000] [--samples 7] [--json FILE]
//
// DAGs of N tiny nodes (every node calls the same empty, non-inlined function): a chain, a
// fan-out/fan-in 1 -> N-2 -> 1, and a random DAG (each node depends on 1-3 of the 64
// nodes before it, fixed seed). One "run" executes the whole DAG once and waits for it.
// Systems, all at the same thread count:
//   sequential     a plain loop calling the function N times in order (1 thread; the floor)
//   kiln replay    DeviceGraph::replay + DeviceContext::synchronize
//   kiln enqueue   the same kernels enqueued one by one on the context + synchronize
//   oneTBB         a prebuilt tbb::flow::graph of continue_nodes: try_put + wait_for_all
//   OpenMP tasks   tasks with depend clauses, created each run (how OpenMP is used)
// Every sample runs every system once, interleaved, after a warm-up; the table reports the
// median ns per node (min-max), and the ratios kiln replay / best peer and kiln enqueue /
// kiln replay. "single" is one 1-node run: the fixed cost of a replay vs an enqueue.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.hpp"
#include "kiln/kiln.hpp"

#ifdef KILN_BENCH_HAVE_TBB
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/task_arena.h>
#endif
#ifdef KILN_BENCH_HAVE_OPENMP
#include <omp.h>
#endif

namespace {

[[gnu::noinline]] void tiny() { asm volatile("" ::: "memory"); }

struct Dag {
  std::string shape;
  int n = 0;
  std::vector<std::vector<int>> deps;  // deps[i] < i: creation order is topological
};

Dag make_dag(const std::string& shape, int n) {
  Dag d{shape, n, std::vector<std::vector<int>>(static_cast<std::size_t>(n))};
  std::mt19937 rng(2026);
  for (int i = 1; i < n; ++i) {
    auto& deps = d.deps[static_cast<std::size_t>(i)];
    if (shape == "chain") {
      deps = {i - 1};
    } else if (shape == "fan") {
      if (i < n - 1) {
        deps = {0};
      } else {
        for (int j = 1; j < n - 1; ++j) deps.push_back(j);
      }
    } else {  // random
      const int window = std::min(i, 64);
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) deps.push_back(i - 1 - static_cast<int>(rng() % window));
      std::sort(deps.begin(), deps.end());
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    }
  }
  return d;
}

using Run = std::function<void()>;

#ifdef KILN_BENCH_HAVE_OPENMP
// One run of \p dag as OpenMP tasks with dependencies, created by one thread.
void run_openmp(const Dag& dag, int threads) {
  std::vector<char> token(static_cast<std::size_t>(dag.n));
  [[maybe_unused]] char* t = token.data();  // GCC does not see uses in depend iterators
#pragma omp parallel num_threads(threads)
#pragma omp single
  for (int i = 0; i < dag.n; ++i) {
    const int* d = dag.deps[static_cast<std::size_t>(i)].data();
    const int k = static_cast<int>(dag.deps[static_cast<std::size_t>(i)].size());
#pragma omp task depend(iterator(j = 0 : k), in : t[d[j]]) depend(out : t[i])
    tiny();
  }
}
#endif

struct System {
  std::string name;
  Run run;  // empty: not available in this build
};

std::vector<System> make_systems(const Dag& dag, int threads) {
  std::vector<System> systems;
  systems.push_back({"sequential", [&dag] {
                       for (int i = 0; i < dag.n; ++i) tiny();
                     }});

  auto ctx = std::make_shared<kiln::DeviceContext>(kiln::Device::cpu(),
                                                   kiln::DeviceContextOptions{threads});
  auto fn = ctx->compile_function<&tiny>({.name = "tiny"});
  auto graph = kiln::DeviceGraph::create(*ctx, [&](kiln::DeviceGraphBuilder& b) {
    std::vector<kiln::DeviceGraphNode> nodes;
    for (const auto& deps : dag.deps) {
      std::vector<kiln::DeviceGraphNode> on;
      for (int d : deps) on.push_back(nodes[static_cast<std::size_t>(d)]);
      nodes.push_back(b.add_function(fn, kiln::LaunchConfig{1, 1}, on));
    }
  });
  systems.push_back({"kiln replay", [ctx, graph] {
                       graph.replay();
                       ctx->synchronize();
                     }});
  systems.push_back({"kiln enqueue", [ctx, fn, n = dag.n] {
                       for (int i = 0; i < n; ++i) ctx->enqueue_function(fn, {1, 1});
                       ctx->synchronize();
                     }});

#ifdef KILN_BENCH_HAVE_TBB
  namespace flow = oneapi::tbb::flow;
  struct Tbb {
    oneapi::tbb::task_arena arena;
    flow::graph g;
    std::vector<flow::continue_node<flow::continue_msg>> nodes;
    std::vector<int> roots;
    explicit Tbb(int t) : arena(t) {}
  };
  auto tbb = std::make_shared<Tbb>(threads);
  tbb->arena.execute([&] {
    tbb->nodes.reserve(static_cast<std::size_t>(dag.n));
    for (int i = 0; i < dag.n; ++i) {
      tbb->nodes.emplace_back(tbb->g, [](const flow::continue_msg&) { tiny(); });
      for (int d : dag.deps[static_cast<std::size_t>(i)])
        flow::make_edge(tbb->nodes[static_cast<std::size_t>(d)],
                        tbb->nodes[static_cast<std::size_t>(i)]);
      if (dag.deps[static_cast<std::size_t>(i)].empty()) tbb->roots.push_back(i);
    }
  });
  systems.push_back({"oneTBB", [tbb] {
                       tbb->arena.execute([&] {
                         for (int r : tbb->roots)
                           tbb->nodes[static_cast<std::size_t>(r)].try_put(flow::continue_msg());
                         tbb->g.wait_for_all();
                       });
                     }});
#else
  systems.push_back({"oneTBB", {}});
#endif

#ifdef KILN_BENCH_HAVE_OPENMP
  systems.push_back({"OpenMP tasks", [&dag, threads] { run_openmp(dag, threads); }});
#else
  systems.push_back({"OpenMP tasks", {}});
#endif
  return systems;
}

double seconds(const Run& run, int reps) {
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Result {
  std::string shape, system;
  int nodes = 0, threads = 0;
  double median = 0, min = 0, max = 0;  // ns per node
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  std::vector<int> sizes = {1000, 10000};
  int samples = 7;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--threads" && has_value) {
      thread_counts = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--nodes" && has_value) {
      sizes = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--samples" && has_value) {
      samples = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && has_value) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads 1,2] [--nodes 1000,10000] [--samples 7] [--json FILE]\n",
                   argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }

  std::vector<Result> results;
  std::printf("%-7s %6s %3s | %-13s %26s\n", "shape", "nodes", "thr", "system",
              "ns/node median (min-max)");
  for (int threads : thread_counts) {
    std::vector<std::pair<std::string, int>> cases = {{"single", 1}};
    for (int n : sizes)
      for (const char* shape : {"chain", "fan", "random"}) cases.emplace_back(shape, n);
    for (const auto& [shape, n] : cases) {
      const Dag dag = make_dag(shape, n);
      std::vector<System> systems = make_systems(dag, threads);
      // Calibrate: enough runs for ~10 ms per sample.
      std::vector<int> reps(systems.size(), 0);
      for (std::size_t s = 0; s < systems.size(); ++s) {
        if (!systems[s].run) continue;
        for (int w = 0; w < 3; ++w) systems[s].run();
        const double one = std::max(1e-7, seconds(systems[s].run, 3) / 3);
        reps[s] = std::max(1, static_cast<int>(0.01 / one));
      }
      std::vector<std::vector<double>> ns(systems.size());
      for (int k = 0; k < samples; ++k)
        for (std::size_t s = 0; s < systems.size(); ++s) {
          if (!systems[s].run) continue;
          // Let the previous system's idle threads stop spinning before measuring.
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          ns[s].push_back(seconds(systems[s].run, reps[s]) * 1e9 / reps[s] / n);
        }
      for (std::size_t s = 0; s < systems.size(); ++s) {
        if (!systems[s].run) {
          std::printf("%-7s %6d %3d | %-13s %26s\n", shape.c_str(), n, threads,
                      systems[s].name.c_str(), "not available in this build");
          continue;
        }
        auto v = ns[s];
        std::sort(v.begin(), v.end());
        results.push_back(
            {shape, systems[s].name, n, threads, v[v.size() / 2], v.front(), v.back()});
        std::printf("%-7s %6d %3d | %-13s %10.1f (%6.1f-%7.1f)\n", shape.c_str(), n, threads,
                    systems[s].name.c_str(), v[v.size() / 2], v.front(), v.back());
      }
      const auto median = [&](const char* name) {
        for (const Result& r : results)
          if (r.shape == shape && r.nodes == n && r.threads == threads && r.system == name)
            return r.median;
        return 0.0;
      };
      double best_peer = 0;
      for (const char* peer : {"oneTBB", "OpenMP tasks"})
        if (const double m = median(peer); m > 0 && (best_peer == 0 || m < best_peer))
          best_peer = m;
      const double replay = median("kiln replay");
      std::printf(
          "%-7s %6d %3d | ratios: replay/best peer %.2f, enqueue/replay %.2f, "
          "replay/sequential %.1f\n",
          shape.c_str(), n, threads, best_peer > 0 ? replay / best_peer : 0.0,
          median("kiln enqueue") / replay, replay / median("sequential"));
    }
  }

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\n  \"benchmark\": \"graph_peers\",\n  \"unit\": \"ns_per_node\",\n  \"results\": [";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out << (i ? ",\n    " : "\n    ") << "{\"shape\": \"" << r.shape
          << "\", \"nodes\": " << r.nodes << ", \"threads\": " << r.threads << ", \"system\": \""
          << r.system << "\", \"median\": " << r.median << ", \"min\": " << r.min
          << ", \"max\": " << r.max << "}";
    }
    out << "\n  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
