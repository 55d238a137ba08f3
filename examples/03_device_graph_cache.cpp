// Example 3: the DeviceGraphCache example of the Mojo reference (seed 000), in C++.
//
// `DeviceGraph::create(ctx, build, cache, inputs...)` builds a graph only on a cache miss;
// a call with the same build callable, context and inputs gets the stored graph back.

#include <cstdio>
#include <exception>

#include "kiln/kiln.hpp"

namespace {

void kernel() { std::printf("replaying\n"); }

}  // namespace

int main() try {
  kiln::DeviceContext ctx;
  auto compiled_fn = ctx.compile_function<&kernel>();
  kiln::DeviceGraphCache cache;

  int builds = 0;
  auto build = [&](kiln::DeviceGraphBuilder& builder) {
    ++builds;
    builder.add_function(compiled_fn, kiln::LaunchConfig{1, 1}, {});
  };

  // The second call reuses the graph the first one built.
  auto graph = kiln::DeviceGraph::create(ctx, build, cache);
  auto same = kiln::DeviceGraph::create(ctx, build, cache);
  ctx.synchronize();
  std::printf("builds: %d, hits: %zu, misses: %zu\n", builds, cache.hits(), cache.misses());

  // Inputs are part of the key: a new size is a miss, and the cache says why.
  for (int size : {256, 256, 512}) kiln::DeviceGraph::create(ctx, build, cache, size);
  std::printf("builds: %d, hits: %zu, misses: %zu\n", builds, cache.hits(), cache.misses());
  std::printf("%s\n", cache.last_miss().c_str());

  same.replay();
  ctx.synchronize();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
