#pragma once
// Test helper: one fused elementwise chain, gelu(x * w + b, "tanh") * 0.5 + x with x
// [rows, cols], w [cols] (broadcast) and b a scalar, as the generated CUDA kernel takes
// it (program, input accesses, each input's values and broadcast strides, in the fused
// op's operand order) and as the CPU computes it (the expected output).

#include <cstdint>
#include <vector>

#include "compiler/cuda/codegen.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/passes.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln::testing {

struct FusedCudaCase {
  std::shared_ptr<const compiler::FusedProgram> program;
  compiler::CudaKernelShape shape;
  std::vector<std::vector<float>> values;
  std::vector<std::vector<long long>> strides;
  std::vector<long long> out_shape;
  std::vector<double> expected;
};

inline FusedCudaCase fused_cuda_case(std::int64_t rows, std::int64_t cols) {
  const auto f = [](Tensor x, Tensor w, Tensor b) { return gelu(x * w + b, "tanh") * 0.5 + x; };
  const TensorLayout x_layout(DType::f32, {rows, cols}), w_layout(DType::f32, {cols}),
      b_layout(DType::f32, {});
  const StagedGraph staged = stage(f)(x_layout, w_layout, b_layout);
  const ir::Module fused = passes::run_passes(staged.graph(), {"fuse"});
  const ir::Graph& entry = fused.entry();
  const ir::OpView call = entry.op(entry.num_ops() - 1);
  const std::vector<Tensor> in = {Tensor::random(x_layout, 1, -2, 2),
                                  Tensor::random(w_layout, 2, -2, 2), Tensor::scalar(0.25)};
  FusedCudaCase c;
  c.program = compiler::compile_fused(*fused.find(call.find("callee")->as_symbol().name));
  c.shape.rank = 2;
  c.out_shape = {rows, cols};
  for (ir::Value v : call.operands()) {
    const std::size_t rank = entry.type(v).shape.rank();
    if (rank == 2) {
      c.values.push_back(in[0].to_vector<float>());
      c.strides.push_back({cols, 1});
      c.shape.inputs.push_back(compiler::InputAccess::same_shape);
    } else if (rank == 1) {
      c.values.push_back(in[1].to_vector<float>());
      c.strides.push_back({0, 1});
      c.shape.inputs.push_back(compiler::InputAccess::broadcast);
    } else {  // a scalar: b, or the constant 0.5 staging made
      const std::int64_t at = entry.producer(v);
      float value = 0.25f;
      if (at >= 0 && entry.op(static_cast<std::size_t>(at)).name() == "kiln.constant") {
        const ir::DenseData& d = entry.op(static_cast<std::size_t>(at)).find("value")->as_dense();
        value = static_cast<float>(load_as_double(d.dtype, d.bytes.data()));
      }
      c.values.push_back({value});
      c.strides.push_back({0, 0});
      c.shape.inputs.push_back(compiler::InputAccess::scalar);
    }
  }
  c.expected = CompiledCallable(staged, {}).run(in)[0].to_doubles();
  return c;
}

}  // namespace kiln::testing
