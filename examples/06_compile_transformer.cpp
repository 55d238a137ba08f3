// Example 6: stage a 2-layer transformer with kiln::nn, save random weights to a
// safetensors file, load them, compile, run, and check against the reference interpreter.

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>

#include "kiln/kiln.hpp"

int main() try {
  constexpr std::int64_t kDim = 32, kVocab = 100;
  const kiln::nn::TransformerBlock block{.dim = kDim, .heads = 4, .hidden = 64};
  const auto model = [&](kiln::Tensor ids) {
    kiln::Tensor x = kiln::nn::Embedding{.vocab = kVocab, .dim = kDim, .name = "embed"}(ids);
    const auto layer = kiln::as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 2; ++i) {
      kiln::name_scope scope(std::string("layers.").append(std::to_string(i)));
      x = layer(x);
    }
    return kiln::nn::RMSNorm{.dim = kDim, .name = "final_norm"}(x);
  };
  const kiln::StagedGraph staged =
      kiln::stage(model)(kiln::TensorLayout(kiln::DType::i64, {"batch", "seq"}));

  // Random weights for every weight the module declares, written as safetensors.
  std::map<std::string, kiln::Tensor> weights;
  std::uint64_t seed = 1;
  const auto add = [&](const std::string& name, kiln::Shape shape) {
    weights.emplace(name,
                    kiln::Tensor::random({kiln::DType::f32, std::move(shape)}, seed++, -0.2, 0.2));
  };
  add("embed.weight", {kVocab, kDim});
  add("final_norm.weight", {kDim});
  for (const char* layer : {"layers.0.", "layers.1."}) {
    for (const char* p : {"attn.q.", "attn.k.", "attn.v.", "attn.o."}) {
      add(std::string(layer) + p + "weight", {kDim, kDim});
      add(std::string(layer) + p + "bias", {kDim});
    }
    for (const char* n : {"norm1.", "norm2."}) {
      add(std::string(layer) + n + "weight", {kDim});
      add(std::string(layer) + n + "bias", {kDim});
    }
    add(std::string(layer) + "mlp.w1.weight", {kDim, 64});
    add(std::string(layer) + "mlp.w1.bias", {64});
    add(std::string(layer) + "mlp.w2.weight", {64, kDim});
    add(std::string(layer) + "mlp.w2.bias", {kDim});
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "kiln_example_06.safetensors").string();
  kiln::save_safetensors(path, weights);

  kiln::CompiledCallable compiled(staged, kiln::SafetensorsFile::open(path));
  const kiln::Tensor ids =
      kiln::Tensor::from_data(std::vector<std::int64_t>{1, 7, 42, 99, 3, 5}, {2, 3});
  const std::vector<kiln::Tensor> out = compiled(ids);
  const std::vector<kiln::Tensor> expected = kiln::reference_run(staged.graph(), {ids}, weights);
  double max_error = 0;
  const std::vector<double> got = out[0].to_doubles(), want = expected[0].to_doubles();
  for (std::size_t i = 0; i < got.size(); ++i)
    max_error = std::max(max_error, std::fabs(got[i] - want[i]));
  std::cout << "output " << out[0].layout() << ", first values:";
  for (std::size_t i = 0; i < 4; ++i) std::printf(" %.4f", got[i]);
  std::printf("\nmax |compiled - reference| = %.2e (%s)\n", max_error,
              max_error < 1e-4 ? "ok" : "MISMATCH");
  std::filesystem::remove(path);
  return max_error < 1e-4 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
