#include "compiler/cuda_launches.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/cuda_codegen.hpp"
#include "compiler/fused_program.hpp"
#include "compiler/kernel_support.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/gemm.hpp"

namespace kiln::compiler {
namespace {

using kernel::broadcast_strides;
using kernel::elements;
using kiln::detail::cat;

std::function<void(const std::string&, const std::string&)>& source_observer() {
  static std::function<void(const std::string&, const std::string&)> observer;
  return observer;
}

bool all_f32(const Launch& l) {
  for (const View& v : l.in)
    if (v.dtype != DType::f32) return false;
  for (const View& v : l.out)
    if (v.dtype != DType::f32) return false;
  return true;
}

[[noreturn]] void refuse(const Launch& l, const std::string& what) {
  throw UserError(cat("CompiledCallable on CUDA: ", l.view().describe(), ": ", what));
}

/// A generated kernel over \p l's elements, and its KilnFusedArgs as 8-byte words.
DeviceGraphNode add_elementwise(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                const DeviceGraphDependencies& after, CudaKernelCache& kernels) {
  if (!l.fused || !l.fused->f32 || !all_f32(l) || l.out.size() != 1)
    refuse(l,
           "elementwise ops run on CUDA over f32 values only so far; compute it on a CPU "
           "device");
  const CudaKernelShape shape = cuda_kernel_shape(l);
  // The name is the source's hash, so that one source is one kernel whatever launch asks.
  const std::string generic = cuda_fused_source(*l.fused, shape, "kiln_fused");
  const std::string name = cat("kiln_fused_", std::hex, std::hash<std::string>{}(generic));
  auto it = kernels.find(generic);
  if (it == kernels.end()) {
    std::string source = cuda_fused_source(*l.fused, shape, name);
    if (source_observer()) source_observer()(name, source);
    it = kernels.emplace(generic, ctx.compile_function(CudaSource{std::move(source), name})).first;
  }
  const View& out = l.out[0];
  const std::size_t k = std::max<std::size_t>(1, l.in.size());
  const std::size_t rank = std::max<std::size_t>(1, out.shape.size());
  std::vector<std::uint64_t> words;  // in[k], strides[k][rank], shape[rank], out, n
  for (std::size_t i = 0; i < k; ++i)
    words.push_back(i < l.in.size() ? reinterpret_cast<std::uint64_t>(l.in[i].data) : 0);
  for (std::size_t i = 0; i < k; ++i) {
    const Index st = i < l.in.size() ? broadcast_strides(l.in[i].shape, out.shape) : Index{};
    for (std::size_t d = 0; d < rank; ++d)
      words.push_back(static_cast<std::uint64_t>(d < st.size() ? st[d] : 0));
  }
  for (std::size_t d = 0; d < rank; ++d)
    words.push_back(static_cast<std::uint64_t>(d < out.shape.size() ? out.shape[d] : 1));
  const std::int64_t n = elements(out.shape);
  words.push_back(reinterpret_cast<std::uint64_t>(out.data));
  words.push_back(static_cast<std::uint64_t>(n));
  // A grid-stride loop: 256 threads a block, at most 4096 blocks (enough for every SM).
  constexpr std::int64_t kThreads = 256, kMostBlocks = 4096;
  const std::int64_t blocks =
      std::clamp<std::int64_t>((n + kThreads - 1) / kThreads, 1, kMostBlocks);
  const detail::ArgBytes arg{words.data(), words.size() * sizeof(std::uint64_t)};
  return b.add_launch(it->second.bind_bytes(LaunchConfig{blocks, kThreads},
                                            std::span<const detail::ArgBytes>(&arg, 1)),
                      after);
}

/// The cuBLAS GEMM of a matmul launch over contiguous operands.
detail::GemmF32 gemm_of(const Launch& l) {
  const View &a = l.in[0], &b = l.in[1], &c = l.out[0];
  if (!all_f32(l)) refuse(l, "matmuls run on CUDA in f32 only so far");
  if (a.shape.size() < 2 || b.shape.size() < 2)
    refuse(l, "matmuls of vectors run on CPU devices only so far");
  const std::size_t ra = a.shape.size(), rb = b.shape.size();
  detail::GemmF32 g;
  g.m = a.shape[ra - 2];
  g.k = a.shape[ra - 1];
  g.n = b.shape[rb - 1];
  g.a = reinterpret_cast<const float*>(a.data);
  g.b = reinterpret_cast<const float*>(b.data);
  g.c = reinterpret_cast<float*>(c.data);
  const Index batch_a(a.shape.begin(), a.shape.end() - 2);
  const Index batch_b(b.shape.begin(), b.shape.end() - 2);
  const std::int64_t count_a = elements(batch_a), count_b = elements(batch_b);
  if (count_b == 1) {  // one B (a weight): A's batch is more rows
    g.m *= count_a;
  } else if (count_a == 1) {  // one A against a batch of B
    g.batch = count_b;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;
  } else if (batch_a == batch_b) {
    g.batch = count_a;
    g.stride_a = g.m * g.k;
    g.stride_b = g.k * g.n;
    g.stride_c = g.m * g.n;
  } else {
    refuse(l,
           "matmuls that broadcast batch dimensions of both operands run on CPU devices "
           "only so far; broadcast_to one operand first");
  }
  return g;
}

}  // namespace

void set_cuda_source_observer(
    std::function<void(const std::string& name, const std::string& source)> observer) {
  source_observer() = std::move(observer);
}

std::string cuda_unsupported(std::string_view op_name) {
  if (op_name == "kiln.fused" || is_elementwise(op_name) || op_name == "kiln.matmul" ||
      op_name == "kiln.reshape")
    return {};
  return cat("no CUDA kernel for ", op_name,
             " yet: compiled graphs on CUDA run elementwise ops, matmul and reshape so far; "
             "compile the module for a CPU device");
}

DeviceGraphNode add_cuda_launch(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                const DeviceGraphDependencies& after, CudaKernelCache& kernels) {
  const std::string& name = l.view().name();
  if (name == "kiln.matmul") {
    const detail::GemmF32 g = gemm_of(l);
    return b.add_cuda_work([ctx, g](void* stream) { detail::enqueue_gemm_f32(ctx, stream, g); },
                           after);
  }
  if (name == "kiln.reshape") {  // the same bytes under another shape
    const std::size_t bytes =
        static_cast<std::size_t>(elements(l.out[0].shape)) * size_of(l.out[0].dtype);
    return b.add_copy(
        std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(l.out[0].data), bytes),
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(l.in[0].data), bytes),
        after);
  }
  return add_elementwise(b, ctx, l, after, kernels);
}

}  // namespace kiln::compiler
