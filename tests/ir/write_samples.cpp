// Writes the sample modules (tests/ir/sample_modules.hpp) as .mlir files into a folder:
// the inputs of the mlir-opt check and the fuzzer's seed corpus.
//
//   ir_write_samples <folder>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>

#include "kiln/compiler/passes.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/stage.hpp"
#include "sample_modules.hpp"

namespace {

// A staged transformer stack: embedding, shared block bodies with weight prefixes, norms.
kiln::ir::Module staged_transformer(bool subgraphs) {
  const kiln::nn::TransformerBlock block{.dim = 64, .heads = 4, .hidden = 256};
  const auto model = [&](kiln::Tensor ids) {
    kiln::Tensor x = kiln::nn::Embedding{.vocab = 512, .dim = 64, .name = "embed"}(ids);
    const auto layer = kiln::as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 4; ++i) {
      kiln::name_scope scope("layers." + std::to_string(i));
      x = layer(x);
    }
    return kiln::nn::RMSNorm{.dim = 64, .name = "final_norm"}(x);
  };
  return kiln::ir::parse_module(kiln::stage(model, {.subgraphs = subgraphs})(
                                    kiln::TensorLayout(kiln::DType::i64, {"batch", "seq"}))
                                    .str());
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <folder>\n", argv[0]);
    return 2;
  }
  const std::filesystem::path folder = argv[1];
  std::filesystem::create_directories(folder);
  auto modules = kiln::ir::testing::sample_modules();
  modules.emplace_back("staged_transformer", staged_transformer(true));
  modules.emplace_back("staged_transformer_inlined", staged_transformer(false));
  modules.emplace_back(
      "optimized_transformer",
      kiln::passes::run_passes(staged_transformer(true), kiln::passes::default_pipeline()));
  for (const auto& [name, module] : modules) {
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
