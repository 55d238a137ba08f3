// Writes the sample modules (tests/ir/sample_modules.hpp) as .mlir files into a folder:
// the inputs of the mlir-opt check and the fuzzer's seed corpus.
//
//   ir_write_samples <folder>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>

#include "kiln/ir/text.hpp"
#include "sample_modules.hpp"

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <folder>\n", argv[0]);
    return 2;
  }
  const std::filesystem::path folder = argv[1];
  std::filesystem::create_directories(folder);
  for (const auto& [name, module] : kiln::ir::testing::sample_modules()) {
    std::ofstream out(folder / (name + ".mlir"));
    out << kiln::ir::print(module);
    if (!out) {
      std::fprintf(stderr, "could not write %s\n", (folder / (name + ".mlir")).c_str());
      return 1;
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
