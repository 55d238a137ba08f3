// Example 8: the same kiln on a GPU. A CUDA kernel compiled at run time by NVRTC,
// launched on its own and replayed as a CUDA graph; then a staged MLP compiled for cuda:0
// and checked against the same module compiled for the CPU. On a machine without an
// NVIDIA GPU (or a build without the CUDA code paths) it says why and stops there.

#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "kiln/kiln.hpp"

int main() try {
  std::shared_ptr<kiln::DeviceContext> gpu;
  try {
    gpu = std::make_shared<kiln::DeviceContext>(kiln::Device::cuda(0));
  } catch (const kiln::UserError& e) {
    std::printf("no GPU here: %s\n", e.what());
    return 0;
  }

  // A kernel from CUDA C++ source, launched, then replayed three times as a CUDA graph.
  const auto scale = gpu->compile_function(kiln::CudaSource{
      R"(extern "C" __global__ void scale(float* x, float s, int n) {
           int i = blockIdx.x * blockDim.x + threadIdx.x;
           if (i < n) x[i] *= s;
         })",
      "scale"});
  constexpr int n = 1 << 16;
  auto x = gpu->enqueue_create_buffer<float>(n);
  gpu->enqueue_memset(x, 1.0f);
  gpu->enqueue_function(scale, kiln::LaunchConfig{n / 256, 256}, x.data(), 2.0f, n);
  auto graph = kiln::DeviceGraph::create(*gpu, [&](kiln::DeviceGraphBuilder& b) {
    b.add_function(scale, kiln::LaunchConfig{n / 256, 256}, {}, x.data(), 3.0f, n);
  });
  for (int i = 0; i < 3; ++i) graph.replay();
  std::vector<float> host(n);
  gpu->enqueue_copy(host, x);
  gpu->synchronize();
  std::printf("x[0] = %g (1 x 2 x 3^3)\n", host[0]);

  // A staged MLP compiled for the GPU: one CUDA graph of cuBLAS GEMMs and generated
  // elementwise kernels per input shape.
  const auto model = [](kiln::Tensor in) {
    const kiln::Tensor h = kiln::relu(kiln::nn::Linear{.in = 64, .out = 128, .name = "fc1"}(in));
    return kiln::softmax(kiln::nn::Linear{.in = 128, .out = 10, .name = "fc2"}(h), -1);
  };
  const kiln::StagedGraph staged =
      kiln::stage(model)(kiln::TensorLayout(kiln::DType::f32, {"batch", 64}));
  std::map<std::string, kiln::Tensor> weights;
  std::uint64_t seed = 1;
  for (const auto& [name, type] : kiln::module_weights(staged.graph()))
    weights.emplace(name, kiln::Tensor::random({type.dtype, type.shape}, seed++, -0.1, 0.1));
  kiln::CompiledCallable on_gpu(staged, weights, {.context = gpu});
  kiln::CompiledCallable on_cpu(staged, weights);
  const kiln::Tensor batch = kiln::Tensor::random({kiln::DType::f32, {32, 64}}, 7, -1, 1);
  const std::vector<double> got = on_gpu(batch)[0].to_doubles();
  const std::vector<double> want = on_cpu(batch)[0].to_doubles();
  double max_error = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    max_error = std::max(max_error, std::fabs(got[i] - want[i]));
  std::printf("GPU vs CPU: largest difference %.2g %s\n", max_error,
              max_error < 1e-5 ? "(ok)" : "(MISMATCH)");
  return max_error < 1e-5 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "example 8 failed: %s\n", e.what());
  return 1;
}
