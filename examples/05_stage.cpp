// Example 5: trace C++ functions over tensors into a staged graph (seed 004, MAX's
// `max.experimental.compilation`, in C++).

#include <cstdio>
#include <exception>
#include <iostream>

#include "kiln/kiln.hpp"

kiln::Tensor scale(kiln::Tensor x) { return x * 2; }

int main() try {
  // The example: a function of one tensor, staged for an f32[4] input.
  auto staged = kiln::stage(scale)(kiln::TensorLayout(kiln::DType::f32, {4}, kiln::Device::cpu()));
  std::cout << staged;  // the MLIR of the whole module, subgraphs included

  // A small model: named weights, symbolic dims, one shared body for every layer.
  const kiln::nn::TransformerBlock block{.dim = 64, .heads = 4, .hidden = 128};
  const auto model = [&](kiln::Tensor ids) {
    kiln::Tensor x = kiln::nn::Embedding{.vocab = 1000, .dim = 64, .name = "embed"}(ids);
    const auto layer = kiln::as_subgraph(block, {.name = "block"});
    for (int i = 0; i < 4; ++i) {
      kiln::name_scope scope("layers." + std::to_string(i));
      x = layer(x);
    }
    return kiln::nn::RMSNorm{.dim = 64, .name = "final_norm"}(x);
  };
  auto lm = kiln::stage(model)(kiln::TensorLayout(kiln::DType::i64, {"batch", "seq"}));
  std::cout << "graphs: " << lm.graph().num_graphs()
            << ", ops in @main: " << lm.graph().entry().num_ops() << ", in: " << lm.in_layouts()[0]
            << ", out: " << lm.out_layouts()[0] << "\n";
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
