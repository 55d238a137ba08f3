// Example 2: the DeviceGraph examples of the Mojo reference (seed 000), in C++.
//
// A graph is recorded once by a build callback, instantiated, and replayed as often as
// needed; each replay re-runs every node with the arguments copied in at build time.

#include <cstdio>
#include <exception>

#include "kiln/kiln.hpp"

namespace {

void replaying() { std::printf("replaying\n"); }
void print_value(int x) { std::printf("Value: %d\n", x); }

}  // namespace

int main() try {
  kiln::DeviceContext ctx;

  // replay(): build a one-node graph and replay it twice.
  auto compiled_fn = ctx.compile_function<&replaying>();
  auto graph = kiln::DeviceGraph::create(ctx, [&](kiln::DeviceGraphBuilder& builder) {
    builder.add_function(compiled_fn, kiln::LaunchConfig{1, 1}, {});
  });
  graph.replay();
  graph.replay();  // replay as many times as needed
  ctx.synchronize();

  // create(ctx, build): a kernel argument (42) copied into the node at build time.
  auto print_fn = ctx.compile_function<&print_value>();
  auto with_arg = kiln::DeviceGraph::create(ctx, [&](kiln::DeviceGraphBuilder& builder) {
    builder.add_function(print_fn, kiln::LaunchConfig{1, 1}, {}, 42);
  });
  with_arg.replay();
  ctx.synchronize();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
