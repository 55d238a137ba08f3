#pragma once
// Internal: a compiled plan's launches on a CUDA context, as device-graph nodes.
// Elementwise launches (fused bodies and single ops, any dtype) are CUDA kernels generated
// from the body (cuda_codegen.hpp) and compiled by NVRTC once per source; f32 matmuls are cuBLAS
// GEMMs captured into the graph (CUDA work); softmax, log-softmax, layer and RMS norm,
// reductions, transpose, broadcast_to, slice, concat, split, gather, gather_elements,
// gather_nd, scatter_elements, scatter_nd, cumsum, top_k, conv, conv_transpose, the pools
// and resize are kernels of kiln's CUDA library (`cuda_library_source`); reshapes are
// copies. Other ops (collectives) have no CUDA kernel yet: `cuda_unsupported` says so
// before anything runs.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/cpu/kernels.hpp"
#include "kiln/runtime/device_graph.hpp"

namespace kiln::compiler {

/// Kernels compiled for one context, by source (elementwise) or library entry.
using CudaKernelCache = std::map<std::string, DeviceFunction<CudaKernel>>;

/// What the launches of one plan's recording share: the kernels compiled for the context
/// (kept by the lowering, across plans) and what the plan's graph reads beyond its arena
/// and the weights (kept with the plan: resize's tap tables on the device).
struct CudaRecording {
  CudaKernelCache& kernels;
  std::vector<std::shared_ptr<void>>& keep;
};

/// Called with each elementwise kernel's name and CUDA source just before it is compiled
/// (for tests and tools that want to see or emulate the generated code); none by default.
void set_cuda_source_observer(
    std::function<void(const std::string& name, const std::string& source)> observer);

/// Empty when launches of op \p op can run on CUDA, else what to tell the user (the op's
/// `KernelDef::no_cuda`).
std::string cuda_unsupported(const ir::OpDef& op);

/// How the CUDA lowering records one launch of an op that is a kernel of its own (see
/// `KernelDef::cuda`): \p l (its views bound to device memory of \p ctx) added to \p b
/// after \p after; \p error as for add_cuda_launch.
using CudaLaunchFn = DeviceGraphNode (*)(DeviceGraphBuilder& b, const DeviceContext& ctx,
                                         const Launch& l, const DeviceGraphDependencies& after,
                                         CudaRecording& rec, long long* error);

/// The CUDA launches of the ops that have one, each a CudaLaunchFn.
namespace cuda_op {
DeviceGraphNode matmul(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode reshape(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                        const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode transpose(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                          const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode broadcast_to(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                             const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode slice(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                      const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode concat(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode split(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                      const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode gather(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode gather_elements(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                                const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode gather_nd(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                          const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode cumsum(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode scatter_nd(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                           const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode scatter_elements(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                                 const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode top_k(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                      const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode resize(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
/// conv, conv_transpose, max_pool and avg_pool (the kind is the op's `KernelDef::variant`).
DeviceGraphNode window(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
/// Reductions (the kind is the op's `KernelDef::variant`).
DeviceGraphNode reduce(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
DeviceGraphNode argmax(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                       const DeviceGraphDependencies&, CudaRecording&, long long*);
/// Softmax, log_softmax, layer_norm and rms_norm (by the op's `KernelDef::variant`).
DeviceGraphNode rows(DeviceGraphBuilder&, const DeviceContext&, const Launch&,
                     const DeviceGraphDependencies&, CudaRecording&, long long*);
}  // namespace cuda_op

/// The CUDA C++ of kiln's kernel library (entries kiln_rows, kiln_copy, kiln_reduce,
/// kiln_gather, kiln_gather_elements, kiln_gather_nd, kiln_cumsum, ...).
const std::string& cuda_library_source();

/// Adds \p l (its views bound to device memory of \p ctx) to \p b after \p after.
/// \p error is 3 words of device memory where a gather reports an index out of range
/// ({op, index, axis length}: op 1 gather, 2 gather_elements, 3 gather_nd, 4 scatter_nd,
/// 5 scatter_elements; the caller checks and clears it).
/// \throws UserError for what the CUDA kernels do not cover (dtypes other than f32,
/// matmuls that broadcast batch dimensions both ways).
DeviceGraphNode add_cuda_launch(DeviceGraphBuilder& b, const DeviceContext& ctx, const Launch& l,
                                const DeviceGraphDependencies& after, CudaRecording& rec,
                                long long* error);

}  // namespace kiln::compiler
