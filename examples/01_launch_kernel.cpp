// Example 1: launch a kernel on the CPU device and read its result back.
//
// Enqueue calls return at once; the context runs the work in order on its worker threads,
// and synchronize() waits for it. The kernel is written CUDA-style: it finds its element
// from block_idx(), block_dim() and thread_idx().

#include <cstdio>
#include <exception>

#include "kiln/kiln.hpp"

namespace {

// y[i] = a * x[i] + y[i], one element per thread.
void saxpy(float a, const float* x, float* y, int n) {
  const auto i = static_cast<int>(kiln::block_idx().x * kiln::block_dim().x + kiln::thread_idx().x);
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

int main() try {
  kiln::DeviceContext ctx;  // cpu:0, one worker per available core
  constexpr int n = 1000;

  auto host_x = ctx.enqueue_create_host_buffer<float>(n);
  auto host_y = ctx.enqueue_create_host_buffer<float>(n);
  for (int i = 0; i < n; ++i) host_x[i] = static_cast<float>(i);

  auto x = ctx.enqueue_create_buffer<float>(n);
  auto y = ctx.enqueue_create_buffer<float>(n);
  ctx.enqueue_copy(x, host_x);
  ctx.enqueue_memset(y, 1.0f);

  auto fn = ctx.compile_function<&saxpy>();
  const int block = 128;
  const int grid = (n + block - 1) / block;
  ctx.enqueue_function(fn, kiln::LaunchConfig{grid, block}, 2.0f, x.data(), y.data(), n);
  ctx.enqueue_copy(host_y, y);
  ctx.synchronize();

  std::printf("kiln: ran kernel '%s' on %s with %d thread(s): %d blocks x %d threads\n",
              fn.name().c_str(), ctx.device().str().c_str(), ctx.num_threads(), grid, block);
  std::printf("y = 2*x + 1: y[0] = %g, y[1] = %g, y[%d] = %g\n", host_y[0], host_y[1], n - 1,
              host_y[n - 1]);
  for (int i = 0; i < n; ++i) {
    if (host_y[i] != 2.0f * static_cast<float>(i) + 1.0f) {
      std::fprintf(stderr, "wrong result at %d: %g\n", i, host_y[i]);
      return 1;
    }
  }
  std::printf("all %d results correct\n", n);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
