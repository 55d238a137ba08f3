// Would one plan for every sequence length (a "symbolic plan") call as fast as a plan per
// length? Its GEMMs would be oneDNN matmuls created once with the row count left to run
// time (DNNL_RUNTIME_DIM_VAL) instead of one primitive per row count. This times both, side
// by side in interleaved rounds, on the shapes of the transformer bench_new_shapes calls
// (d_model 512, MLP 2048: K x N = 512 x 512, 512 x 2048, 2048 x 512) at the row counts
// of its shapes (batch x seq = 1x17 ... 16x128), one thread, the weights in the layout
// each primitive prefers (packed once, outside the timing).
//
//   bench_runtime_dims [--rounds 7] [--calls 50]

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using Desc = dnnl::memory::desc;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

/// One matmul [m, k] x [k, n] ready to run: its primitive and bound memories.
struct Gemm {
  dnnl::matmul primitive;
  std::unordered_map<int, dnnl::memory> args;
};

/// A matmul for \p m rows, or (\p runtime_rows) for any row count, run here at \p m;
/// \p weights (k x n, row-major) reordered into the layout the primitive asks for.
Gemm make_gemm(const dnnl::engine& engine, dnnl::memory::dim m, dnnl::memory::dim k,
               dnnl::memory::dim n, bool runtime_rows, const std::vector<float>& weights,
               std::vector<float>& src, std::vector<float>& dst) {
  const dnnl::memory::dim rows = runtime_rows ? DNNL_RUNTIME_DIM_VAL : m;
  const Desc a({rows, k}, dt::f32, tag::ab), b({k, n}, dt::f32, tag::any),
      c({rows, n}, dt::f32, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
  Gemm g{dnnl::matmul(pd), {}};
  dnnl::stream stream(engine);
  const Desc plain({k, n}, dt::f32, tag::ab);
  dnnl::memory given(plain, engine, const_cast<float*>(weights.data()));
  dnnl::memory packed(pd.weights_desc(), engine);
  dnnl::reorder(given, packed).execute(stream, given, packed);
  stream.wait();
  g.args[DNNL_ARG_SRC] = dnnl::memory(Desc({m, k}, dt::f32, tag::ab), engine, src.data());
  g.args[DNNL_ARG_WEIGHTS] = packed;
  g.args[DNNL_ARG_DST] = dnnl::memory(Desc({m, n}, dt::f32, tag::ab), engine, dst.data());
  return g;
}

double median_us(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7, calls = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--calls" && i + 1 < argc) {
      calls = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--rounds 7] [--calls 50]\n", argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  omp_set_num_threads(1);
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::printf(
      "oneDNN matmul, one thread: rows fixed at creation against rows given at run time "
      "(medians of %d interleaved rounds of %d calls)\n",
      rounds, calls);
  std::printf("| rows | K x N | fixed rows us | run-time rows us | run-time / fixed |\n");
  std::printf("| ---: | --- | ---: | ---: | ---: |\n");
  for (const dnnl::memory::dim m : {17, 33, 128, 512, 2048}) {
    for (const auto& [k, n] :
         {std::pair<dnnl::memory::dim, dnnl::memory::dim>{512, 512}, {512, 2048}, {2048, 512}}) {
      std::vector<float> weights(static_cast<std::size_t>(k * n)),
          src(static_cast<std::size_t>(m * k)), dst(static_cast<std::size_t>(m * n));
      for (std::size_t i = 0; i < weights.size(); ++i)
        weights[i] = static_cast<float>(i % 7) * 0.01f;
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 5) * 0.1f;
      Gemm fixed = make_gemm(engine, m, k, n, false, weights, src, dst);
      Gemm runtime = make_gemm(engine, m, k, n, true, weights, src, dst);
      std::vector<double> t_fixed, t_runtime;
      for (int r = 0; r < rounds; ++r) {
        for (Gemm* g : {&fixed, &runtime}) {
          g->primitive.execute(stream, g->args);  // warm
          stream.wait();
          const auto start = Clock::now();
          for (int c = 0; c < calls; ++c) g->primitive.execute(stream, g->args);
          stream.wait();
          const double us =
              std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls;
          (g == &fixed ? t_fixed : t_runtime).push_back(us);
        }
      }
      const double f = median_us(t_fixed), rt = median_us(t_runtime);
      std::printf("| %lld | %lld x %lld | %.1f | %.1f | %.2f |\n", static_cast<long long>(m),
                  static_cast<long long>(k), static_cast<long long>(n), f, rt, rt / f);
      std::fflush(stdout);
    }
  }
  return 0;
}
