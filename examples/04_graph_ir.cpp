// Example 4: build a graph IR by hand, print it as MLIR, parse it back and verify it.

#include <cstdio>
#include <exception>
#include <iostream>

#include "kiln/kiln.hpp"

int main() try {
  kiln::ir::Module module;
  auto& g = module.add_graph("main");
  auto x = g.add_argument({kiln::DType::f32, {"batch", 4}, kiln::Device::cpu()});
  auto w = g.add_argument({kiln::DType::f32, {4, 8}, kiln::Device::cpu()});
  auto y = g.add_op("kiln.matmul", {x, w}).result(0);  // f32[batch, 8], inferred
  g.set_results({g.add_op("kiln.softmax", {y}, {{"axis", -1}}).result(0)});
  std::cout << module;  // MLIR text
  kiln::ir::verify_or_throw(kiln::ir::parse_module(module.str()));

  // A shape error is caught while building, naming the op and the operand types.
  try {
    g.add_op("kiln.matmul", {w, w});
  } catch (const kiln::UserError& e) {
    std::cout << "error: " << e.what() << "\n";
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
