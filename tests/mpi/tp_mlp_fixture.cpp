// The files of the MPI test (ctest label mpi, run_mpi_test.cmake): a tensor-parallel MLP
// over cpu:0 and cpu:1 (column-parallel W1, GELU, row-parallel W2, one allreduce) as
// kiln's text form with its weights and inputs; and a comparison of two runs' outputs.
//
//   kiln_mpi_fixture write DIR         DIR/tp.mlir, tp.safetensors, x0.npy, x1.npy
//   kiln_mpi_fixture compare DIR_A DIR_B   output0.npy and output1.npy agree within 1e-5

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/io/npy.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/stage/sharding.hpp"
#include "kiln/stage/stage.hpp"

namespace {

using namespace kiln;

void write(const std::string& dir) {
  set_cpu_device_count(2);
  const DeviceMesh mesh({{"tp", 2}});
  const std::int64_t batch = 4, dim = 32, hidden = 64;
  const ShardedLayout x_layout(DType::f32, {batch, dim}, mesh, {Replicated{}});
  const ShardedLayout w1_layout(DType::f32, {dim, hidden}, mesh, {Sharded{1}});
  const ShardedLayout w2_layout(DType::f32, {hidden, dim}, mesh, {Sharded{0}});
  const auto mlp = [&](std::vector<Tensor> xs) {
    const ShardedTensor x(xs, x_layout);
    const ShardedTensor y =
        matmul(gelu(matmul(x, sharded_weight("w1", w1_layout))), sharded_weight("w2", w2_layout));
    return redistribute(y, {Replicated{}}).shards();
  };
  const StagedGraph staged = stage(mlp)(x_layout.shards());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tp.mlir") << staged.str();
  std::map<std::string, Tensor> weights = shard_weights(
      "w1", Tensor::random(TensorLayout(DType::f32, {dim, hidden}), 1, -0.3, 0.3), w1_layout);
  weights.merge(shard_weights(
      "w2", Tensor::random(TensorLayout(DType::f32, {hidden, dim}), 2, -0.3, 0.3), w2_layout));
  save_safetensors(dir + "/tp.safetensors", weights);
  const std::vector<Tensor> x =
      shard_tensor(Tensor::random(TensorLayout(DType::f32, {batch, dim}), 3), x_layout);
  save_npy(dir + "/x0.npy", x[0]);
  save_npy(dir + "/x1.npy", x[1]);
}

int compare(const std::string& a, const std::string& b) {
  int bad = 0;
  for (const char* name : {"output0.npy", "output1.npy"}) {
    const std::vector<double> x = load_npy(a + "/" + name).to_doubles();
    const std::vector<double> y = load_npy(b + "/" + name).to_doubles();
    if (x.size() != y.size()) {
      std::fprintf(stderr, "%s: %zu vs %zu elements\n", name, x.size(), y.size());
      ++bad;
      continue;
    }
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
    std::printf("%s: %zu elements, max |difference| %.3g\n", name, x.size(), worst);
    bad += worst > 1e-5;
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "write" && argc == 3) {
      write(argv[2]);
      return 0;
    }
    if (mode == "compare" && argc == 4) return compare(argv[2], argv[3]);
    std::fprintf(stderr, "usage: %s write DIR | compare DIR_A DIR_B\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_mpi_fixture: %s\n", e.what());
    return 1;
  }
}
