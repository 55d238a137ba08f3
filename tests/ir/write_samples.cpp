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

// Every op a user can stage on one device, on small shapes of several dtypes.
kiln::ir::Module every_op() {
  using kiln::Tensor;
  const auto model = [](Tensor x, Tensor ids, Tensor mask) {
    const Tensor w = kiln::weight("w", kiln::TensorLayout(kiln::DType::f32, {6, 6}));
    const Tensor gamma = kiln::weight("gamma", kiln::TensorLayout(kiln::DType::f32, {6}));
    const Tensor beta = kiln::weight("beta", kiln::TensorLayout(kiln::DType::f32, {6}));
    Tensor h = kiln::layer_norm(kiln::matmul(x, w), gamma, beta) + kiln::rms_norm(x, gamma);
    h = kiln::where(mask, kiln::gelu(h, "tanh"), kiln::silu(h) / (kiln::abs(h) + 1.0));
    h = kiln::pow(kiln::sigmoid(h), 2.0) - kiln::log(kiln::exp(kiln::tanh(h)) + 1.0);
    h = kiln::maximum(kiln::sqrt(kiln::relu(h)), kiln::minimum(kiln::rsqrt(h * h + 1.0), -h));
    const std::vector<Tensor> parts = kiln::split(h, {2, 4}, 1);
    Tensor joined = kiln::concat({parts[1], kiln::neg(parts[0])}, 1);
    joined = kiln::softmax(joined, -1) + kiln::log_softmax(kiln::permute(joined, {0, 1}), 0);
    const Tensor rows = kiln::gather(joined, ids, 0);  // [3, 6]
    const Tensor flat = kiln::reshape(kiln::transpose(rows), kiln::Shape({18}));
    const Tensor picked = kiln::slice(flat, 0, 1, 17, 2);
    const Tensor wide =
        kiln::broadcast_to(kiln::reshape(picked, kiln::Shape({8, 1})), kiln::Shape({8, 4}));
    const Tensor half =
        kiln::broadcast_to(kiln::reshape(picked, kiln::Shape({8, 1})) * 0.5, kiln::Shape({8, 4}));
    const Tensor flags = kiln::cast(kiln::equal(wide, half), kiln::DType::f32) +
                         kiln::cast(kiln::not_equal(half, wide), kiln::DType::f32) +
                         kiln::cast(wide <= half, kiln::DType::f32);
    return std::make_tuple(kiln::sum(wide, {1}) + kiln::mean(flags, {1}),
                           kiln::max(wide, {0}, true) - kiln::min(wide, {0}, true),
                           kiln::argmax(wide, 0), kiln::cast(wide >= half, kiln::DType::i32));
  };
  return kiln::ir::parse_module(
      kiln::stage(model)(kiln::TensorLayout(kiln::DType::f32, {"batch", 6}),
                         kiln::TensorLayout(kiln::DType::i64, {3}),
                         kiln::TensorLayout(kiln::DType::bool_, {"batch", 6}))
          .str());
}

// Values moving between two CPU devices: every collective, and transfers.
kiln::ir::Module two_devices() {
  using kiln::Tensor;
  const std::vector<kiln::Device> devices = {kiln::Device::cpu(0), kiln::Device::cpu(1)};
  const auto model = [&](Tensor x) {
    const std::vector<Tensor> copies = kiln::broadcast(x, devices);
    const std::vector<Tensor> sums = kiln::allreduce_sum(copies);
    const std::vector<Tensor> joined = kiln::allgather(sums, 0);
    const std::vector<Tensor> scattered = kiln::reduce_scatter_sum(joined, 0);
    const std::vector<Tensor> swapped = kiln::all_to_all(scattered, 1, 0);
    return kiln::transfer_to(swapped[1], devices[0]) + swapped[0];
  };
  return kiln::ir::parse_module(
      kiln::stage(model)(kiln::TensorLayout(kiln::DType::f32, {4, 4})).str());
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
  modules.emplace_back("every_op", every_op());
  modules.emplace_back("two_devices", two_devices());
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
