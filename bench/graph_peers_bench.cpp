// Device graphs against their peers, side by side in one run (see BENCHMARKING.md).
//
//   bench_graph_peers [--threads 1,2] [--cases chain1k,chain10k,fan,random,layered,k4]
//                     [--samples 7] [--busy-core C] [--json FILE]
//
// DAGs of tiny nodes (every node calls the same empty, non-inlined function):
//   chain1k, chain10k   a chain of 1 000 / 10 000 nodes
//   fan                 fan-out/fan-in 1 -> 1 000 -> 1
//   random              10 000 nodes, each on 1-3 of the 64 nodes before it (fixed seed)
//   layered             10 layers of 100, each node on every node of the layer before
//   k4                  10 000 nodes, each on 4 distinct of the 64 nodes before it
// Three things are timed for every case, each sample running every system once,
// interleaved, after a warm-up (medians, min-max):
//   build   ms to turn the DAG into something runnable: kiln DeviceGraph::create, a
//           tf::Taskflow with its edges, a tbb::flow::graph of continue_nodes with its edges
//   replay  ns per node of one run of the whole DAG, waited for: sequential (a plain loop,
//           the floor), kiln replay (DeviceGraph::replay + synchronize), kiln enqueue
//           (the kernels one by one + synchronize), Taskflow (tf::Executor::run + wait),
//           oneTBB (try_put + wait_for_all), OpenMP tasks (depend clauses, made each run)
//   cache hit  ns per DeviceGraph::create that finds its graph in a DeviceGraphCache under
//           a key of the build callable and two integers (kiln only: no peer caches graphs)
// All systems run at the same thread count. --busy-core C starts a process spinning on
// core C for the whole run (what a machine shared with other work looks like).
// Taskflow is header-only and not packaged by Debian: configure with
// -DTASKFLOW_DIR=/path/to/taskflow (its source, fetched outside this repository) to add
// its rows; without it they read "not available in this build".

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
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
#ifdef KILN_BENCH_HAVE_TASKFLOW
#include <taskflow/taskflow.hpp>
#endif

namespace {

[[gnu::noinline]] void tiny() { asm volatile("" ::: "memory"); }

struct Dag {
  std::string name;
  int n = 0;
  std::vector<std::vector<int>> deps;  // deps[i] < i: creation order is topological
};

// `count` distinct predecessors of node i among the 64 before it (all when fewer exist).
std::vector<int> random_predecessors(std::mt19937& rng, int i, int count) {
  const int window = std::min(i, 64);
  std::vector<int> deps;
  while (static_cast<int>(deps.size()) < std::min(count, window)) {
    const int d = i - 1 - static_cast<int>(rng() % static_cast<unsigned>(window));
    if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
  }
  std::sort(deps.begin(), deps.end());
  return deps;
}

Dag make_dag(const std::string& name) {
  const int n = name == "single"    ? 1
                : name == "chain1k" ? 1000
                : name == "fan"     ? 1002
                : name == "layered" ? 1000
                                    : 10000;
  if (name != "single" && name != "chain1k" && name != "chain10k" && name != "fan" &&
      name != "random" && name != "layered" && name != "k4")
    throw std::invalid_argument("unknown case '" + name +
                                "' (single, chain1k, chain10k, fan, random, layered, k4)");
  Dag d{name, n, std::vector<std::vector<int>>(static_cast<std::size_t>(n))};
  std::mt19937 rng(2026);
  for (int i = 1; i < n; ++i) {
    auto& deps = d.deps[static_cast<std::size_t>(i)];
    if (name == "chain1k" || name == "chain10k") {
      deps = {i - 1};
    } else if (name == "fan") {
      if (i < n - 1) {
        deps = {0};
      } else {
        for (int j = 1; j < n - 1; ++j) deps.push_back(j);
      }
    } else if (name == "layered") {
      const int layer = i / 100;
      if (layer > 0)
        for (int j = (layer - 1) * 100; j < layer * 100; ++j) deps.push_back(j);
    } else if (name == "k4") {
      deps = random_predecessors(rng, i, 4);
    } else {  // random
      deps = random_predecessors(rng, i, 1 + static_cast<int>(rng() % 3));
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

/// One system: how it builds the DAG (build) and runs what the last build made (run).
/// An empty `run` means not available in this build; an empty `build` means the system
/// has no separate build step worth timing.
struct System {
  std::string name;
  Run build;
  Run run;
};

std::vector<System> make_systems(const Dag& dag, int threads) {
  std::vector<System> systems;
  systems.push_back({"sequential", {}, [&dag] {
                       for (int i = 0; i < dag.n; ++i) tiny();
                     }});

  auto ctx = std::make_shared<kiln::DeviceContext>(kiln::Device::cpu(),
                                                   kiln::DeviceContextOptions{threads});
  auto fn = ctx->compile_function<&tiny>({.name = "tiny"});
  auto graph = std::make_shared<std::optional<kiln::DeviceGraph>>();
  auto build_kiln = [ctx, fn, graph, &dag] {
    *graph = kiln::DeviceGraph::create(*ctx, [&](kiln::DeviceGraphBuilder& b) {
      b.reserve(static_cast<std::size_t>(dag.n));
      std::vector<kiln::DeviceGraphNode> nodes;
      nodes.reserve(static_cast<std::size_t>(dag.n));
      std::vector<kiln::DeviceGraphNode> on;
      for (const auto& deps : dag.deps) {
        on.clear();
        for (int d : deps) on.push_back(nodes[static_cast<std::size_t>(d)]);
        nodes.push_back(b.add_function(fn, kiln::LaunchConfig{1, 1}, on));
      }
    });
  };
  build_kiln();
  systems.push_back({"kiln replay", build_kiln, [ctx, graph] {
                       (*graph)->replay();
                       ctx->synchronize();
                     }});
  systems.push_back({"kiln enqueue", {}, [ctx, fn, n = dag.n] {
                       for (int i = 0; i < n; ++i) ctx->enqueue_function(fn, {1, 1});
                       ctx->synchronize();
                     }});

#ifdef KILN_BENCH_HAVE_TASKFLOW
  struct Tf {
    tf::Executor executor;
    std::unique_ptr<tf::Taskflow> flow;
    explicit Tf(int t) : executor(static_cast<std::size_t>(t)) {}
  };
  auto taskflow = std::make_shared<Tf>(threads);
  auto build_taskflow = [taskflow, &dag] {
    auto flow = std::make_unique<tf::Taskflow>();
    std::vector<tf::Task> tasks;
    tasks.reserve(static_cast<std::size_t>(dag.n));
    for (int i = 0; i < dag.n; ++i) {
      tasks.push_back(flow->emplace([] { tiny(); }));
      for (int d : dag.deps[static_cast<std::size_t>(i)])
        tasks[static_cast<std::size_t>(d)].precede(tasks.back());
    }
    taskflow->flow = std::move(flow);
  };
  build_taskflow();
  systems.push_back(
      {"Taskflow", build_taskflow, [taskflow] { taskflow->executor.run(*taskflow->flow).wait(); }});
#else
  systems.push_back({"Taskflow", {}, {}});
#endif

#ifdef KILN_BENCH_HAVE_TBB
  namespace flow = oneapi::tbb::flow;
  struct Tbb {
    oneapi::tbb::task_arena arena;
    std::unique_ptr<flow::graph> g;
    std::vector<flow::continue_node<flow::continue_msg>> nodes;
    std::vector<int> roots;
    explicit Tbb(int t) : arena(t) {}
  };
  auto tbb = std::make_shared<Tbb>(threads);
  auto build_tbb = [tbb, &dag] {
    tbb->arena.execute([&] {
      tbb->nodes.clear();
      tbb->roots.clear();
      tbb->g = std::make_unique<flow::graph>();
      tbb->nodes.reserve(static_cast<std::size_t>(dag.n));
      for (int i = 0; i < dag.n; ++i) {
        tbb->nodes.emplace_back(*tbb->g, [](const flow::continue_msg&) { tiny(); });
        for (int d : dag.deps[static_cast<std::size_t>(i)])
          flow::make_edge(tbb->nodes[static_cast<std::size_t>(d)],
                          tbb->nodes[static_cast<std::size_t>(i)]);
        if (dag.deps[static_cast<std::size_t>(i)].empty()) tbb->roots.push_back(i);
      }
    });
  };
  build_tbb();
  systems.push_back({"oneTBB", build_tbb, [tbb] {
                       tbb->arena.execute([&] {
                         for (int r : tbb->roots)
                           tbb->nodes[static_cast<std::size_t>(r)].try_put(flow::continue_msg());
                         tbb->g->wait_for_all();
                       });
                     }});
#else
  systems.push_back({"oneTBB", {}, {}});
#endif

#ifdef KILN_BENCH_HAVE_OPENMP
  systems.push_back({"OpenMP tasks", {}, [&dag, threads] { run_openmp(dag, threads); }});
#else
  systems.push_back({"OpenMP tasks", {}, {}});
#endif
  return systems;
}

double seconds(const Run& run, int reps) {
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Result {
  std::string phase, shape, system, unit;
  int nodes = 0, threads = 0;
  double median = 0, min = 0, max = 0;
};

/// Times each system's \p which step \p samples times, interleaved; \p scale turns
/// seconds per run into the unit reported.
void measure(std::vector<System>& systems, Run System::*which, const char* phase, const char* unit,
             double scale, const Dag& dag, int threads, int samples, std::vector<Result>& results) {
  std::vector<int> reps(systems.size(), 0);
  for (std::size_t s = 0; s < systems.size(); ++s) {
    const Run& run = systems[s].*which;
    if (!run || !systems[s].run) continue;
    for (int w = 0; w < 2; ++w) run();
    const double one = std::max(1e-7, seconds(run, 2) / 2);
    reps[s] = std::max(1, static_cast<int>(0.01 / one));  // ~10 ms per sample
  }
  std::vector<std::vector<double>> values(systems.size());
  for (int k = 0; k < samples; ++k)
    for (std::size_t s = 0; s < systems.size(); ++s) {
      if (reps[s] == 0) continue;
      // Let the previous system's idle threads stop spinning before measuring.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      values[s].push_back(seconds(systems[s].*which, reps[s]) * scale / reps[s]);
    }
  for (std::size_t s = 0; s < systems.size(); ++s) {
    if (!(systems[s].*which) && systems[s].run) continue;  // no such step
    if (reps[s] == 0) {
      std::printf("%-8s %-8s %3d | %-13s %28s\n", phase, dag.name.c_str(), threads,
                  systems[s].name.c_str(), "not available in this build");
      continue;
    }
    auto v = values[s];
    std::sort(v.begin(), v.end());
    results.push_back({phase, dag.name, systems[s].name, unit, dag.n, threads, v[v.size() / 2],
                       v.front(), v.back()});
    std::printf("%-8s %-8s %3d | %-13s %10.3f %-7s (%.3f-%.3f)\n", phase, dag.name.c_str(), threads,
                systems[s].name.c_str(), v[v.size() / 2], unit, v.front(), v.back());
  }
}

double median_of(const std::vector<Result>& results, const std::string& phase,
                 const std::string& shape, int threads, const std::string& system) {
  for (const Result& r : results)
    if (r.phase == phase && r.shape == shape && r.threads == threads && r.system == system)
      return r.median;
  return 0.0;
}

/// ns per cache hit of a key made of the build callable and two integers.
double cache_hit_ns(int threads, int samples) {
  kiln::DeviceContext ctx(kiln::Device::cpu(), kiln::DeviceContextOptions{threads});
  auto fn = ctx.compile_function<&tiny>({.name = "tiny"});
  kiln::DeviceGraphCache cache;
  const auto build = [&fn](kiln::DeviceGraphBuilder& b) {
    b.add_function(fn, kiln::LaunchConfig{1, 1}, {});
  };
  for (int i = 0; i < 8; ++i) (void)kiln::DeviceGraph::create(ctx, build, cache, i, 64);
  constexpr int kReps = 200000;
  std::vector<double> ns;
  for (int k = 0; k < samples; ++k) {
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < kReps; ++r) {
      auto g = kiln::DeviceGraph::create(ctx, build, cache, r & 7, 64);
      asm volatile("" : : "r"(&g) : "memory");
    }
    ns.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() *
                 1e9 / kReps);
  }
  return kiln::bench::median(ns);
}

/// A child process spinning on \p core until this process ends.
pid_t start_spinner(int core) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  sched_setaffinity(0, sizeof set, &set);
  for (;;) asm volatile("" ::: "memory");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  std::vector<std::string> cases = {"single", "chain1k", "chain10k", "fan",
                                    "random", "layered", "k4"};
  int samples = 7;
  int busy_core = -1;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--threads" && has_value) {
      thread_counts = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--cases" && has_value) {
      cases.clear();
      std::stringstream in(argv[++i]);
      for (std::string item; std::getline(in, item, ',');) cases.push_back(item);
    } else if (arg == "--samples" && has_value) {
      samples = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--busy-core" && has_value) {
      busy_core = std::atoi(argv[++i]);
    } else if (arg == "--json" && has_value) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads 1,2] [--cases chain1k,chain10k,fan,random,layered,k4] "
                   "[--samples 7] [--busy-core C] [--json FILE]\n",
                   argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  std::vector<Dag> dags;
  try {
    for (const std::string& c : cases) dags.push_back(make_dag(c));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_graph_peers: %s\n", e.what());
    return 2;
  }
  pid_t spinner = -1;
  if (busy_core >= 0) {
    spinner = start_spinner(busy_core);
    std::printf("a process spins on core %d for the whole run\n", busy_core);
  }

  std::vector<Result> results;
  std::printf("%-8s %-8s %3s | %-13s %s\n", "phase", "case", "thr", "system", "median (min-max)");
  for (int threads : thread_counts) {
    const double hit = cache_hit_ns(threads, samples);
    results.push_back({"cache hit", "two ints", "kiln", "ns", 1, threads, hit, hit, hit});
    std::printf("%-8s %-8s %3d | %-13s %10.1f ns\n", "hit", "two ints", threads, "kiln", hit);
    for (const Dag& dag : dags) {
      std::vector<System> systems = make_systems(dag, threads);
      if (dag.n > 1)
        measure(systems, &System::build, "build", "ms", 1e3, dag, threads, samples, results);
      measure(systems, &System::run, "replay", "ns/node", 1e9 / dag.n, dag, threads, samples,
              results);
      const auto m = [&](const char* phase, const char* system) {
        return median_of(results, phase, dag.name, threads, system);
      };
      double best_peer = 0;
      for (const char* peer : {"Taskflow", "oneTBB", "OpenMP tasks"})
        if (const double v = m("replay", peer); v > 0 && (best_peer == 0 || v < best_peer))
          best_peer = v;
      const double replay = m("replay", "kiln replay");
      std::printf("%-8s %-8s %3d | replay/best peer %.2f, replay/sequential %.1f", "ratios",
                  dag.name.c_str(), threads, best_peer > 0 ? replay / best_peer : 0.0,
                  replay / m("replay", "sequential"));
      if (const double tf = m("build", "Taskflow"); tf > 0)
        std::printf(", build/Taskflow build %.2f", m("build", "kiln replay") / tf);
      if (const double tf = m("replay", "Taskflow"); tf > 0)
        std::printf(", replay/Taskflow %.2f", replay / tf);
      std::printf("\n");
    }
  }
  if (spinner > 0) {
    kill(spinner, SIGKILL);
    waitpid(spinner, nullptr, 0);
  }

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\n  \"benchmark\": \"graph_peers\",\n  \"busy_core\": " << busy_core
        << ",\n  \"results\": [";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out << (i ? ",\n    " : "\n    ") << "{\"phase\": \"" << r.phase << "\", \"case\": \""
          << r.shape << "\", \"nodes\": " << r.nodes << ", \"threads\": " << r.threads
          << ", \"system\": \"" << r.system << "\", \"unit\": \"" << r.unit
          << "\", \"median\": " << r.median << ", \"min\": " << r.min << ", \"max\": " << r.max
          << "}";
    }
    out << "\n  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
