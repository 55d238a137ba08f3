// Links against an installed kiln, runs a kernel, and checks its result.
#include <cstdio>
#include <kiln/kiln.hpp>
#include <vector>

int main() {
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
  std::printf("consumer: kiln::kiln works (%s)\n", kiln::name(kiln::DType::f32).data());
  return 0;
}
