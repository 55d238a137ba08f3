// Links against an installed kiln (libkiln.so), runs a kernel and a compiled matmul (oneDNN
// and OpenMP behind kiln), and checks both results.
#include <cstdio>
#include <kiln/kiln.hpp>
#include <vector>

kiln::Tensor affine(kiln::Tensor x, kiln::Tensor w) { return kiln::relu(kiln::matmul(x, w) + 1); }

int main() try {
  kiln::DeviceContext ctx;
  auto x = ctx.enqueue_create_buffer<int>(64);
  auto iota = ctx.compile_function(
      [](int* v) { v[kiln::thread_idx().x] = static_cast<int>(kiln::thread_idx().x); });
  ctx.enqueue_function(iota, kiln::LaunchConfig{1, 64}, x.data());
  std::vector<int> out(64);
  ctx.enqueue_copy(out, x);
  ctx.synchronize();
  for (int i = 0; i < 64; ++i)
    if (out[i] != i) return 1;

  const kiln::TensorLayout x_layout(kiln::DType::f32, {2, 3}), w_layout(kiln::DType::f32, {3, 2});
  const kiln::StagedGraph staged = kiln::stage(affine)(x_layout, w_layout);
  kiln::CompiledCallable compiled(staged, {});
  const auto a = kiln::Tensor::from_data(std::vector<float>{1, 2, 3, -4, -5, -6}, {2, 3});
  const auto b = kiln::Tensor::from_data(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2});
  const std::vector<float> got = compiled(a, b)[0].to_vector<float>();
  const std::vector<float> want{5, 6, 0, 0};  // relu([[4, 5], [-10, -11]] + 1)
  if (got != want) {
    std::printf("consumer: compiled matmul gave %g %g %g %g\n", got[0], got[1], got[2], got[3]);
    return 1;
  }
  std::printf("consumer: kiln::kiln works (%s)\n", kiln::name(kiln::DType::f32).data());
  return 0;
} catch (const std::exception& e) {
  std::printf("consumer: %s\n", e.what());
  return 1;
}
