// One definition per op that runs as a kernel of its own (see kernel_defs.hpp).

#include "compiler/ops/kernel_defs.hpp"

#include <unordered_map>
#include <vector>

#include "compiler/cpu/kernel_support.hpp"

namespace kiln::compiler {
namespace {

using G = KernelGrid;

/// What compiled graphs on CUDA cannot run yet, and what to do instead.
constexpr std::string_view kNoCudaCollectives =
    "compiled graphs on CUDA run every op but collectives so far; compile the module for a "
    "CPU device";

std::vector<KernelDef> make_definitions() {
  using namespace kernel;
  const auto def = [](const char* name, Kernel cpu, G grid, CudaLaunchFn cuda,
                      void (*prepare)(Launch&, int) = nullptr, std::uint8_t variant = 0) {
    return KernelDef{.op = &ir::lookup_op(name),
                     .cpu = cpu,
                     .grid = grid,
                     .prepare = prepare,
                     .cuda = cuda,
                     .variant = variant};
  };
  const auto collective = [](const char* name, variant::Collective v) {
    return KernelDef{.op = &ir::lookup_op(name),
                     .cpu = run_collective,
                     .prepare = [](Launch& l, int) { prepare_collective(l); },
                     .no_cuda = kNoCudaCollectives,
                     .variant = v};
  };
  const auto same_type = [](const ir::OpView&, bool same) { return same; };
  KernelDef reshape = def("kiln.reshape", copy_all, G::copy, cuda_op::reshape);
  reshape.view_strides = reshape_view_strides;
  reshape.returns_operand = same_type;
  KernelDef broadcast =
      def("kiln.broadcast_to", broadcast_to, G::copy, cuda_op::broadcast_to, prepare_broadcast_to);
  broadcast.returns_operand = same_type;
  KernelDef transpose_def =
      def("kiln.transpose", transpose, G::copy, cuda_op::transpose, prepare_transpose);
  transpose_def.view_strides = transpose_view_strides;
  transpose_def.returns_operand = [](const ir::OpView& op, bool) {
    const Index perm = op.find("perm")->as_int_array();
    for (std::size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<std::int64_t>(i)) return false;
    return true;
  };
  KernelDef matmul_def =
      def("kiln.matmul", kernel::matmul, G::matmul, cuda_op::matmul, prepare_matmul);
  matmul_def.strided_operands = matmul_def.takes_epilogue = true;
  KernelDef conv_def =
      def("kiln.conv", conv, G::single, cuda_op::window, prepare_conv, variant::conv);
  KernelDef conv_transpose_def =
      def("kiln.conv_transpose", conv_transpose, G::single, cuda_op::window, prepare_conv_transpose,
          variant::conv_transpose);
  conv_def.takes_epilogue = conv_transpose_def.takes_epilogue = true;
  KernelDef gather_def = def("kiln.gather", gather, G::copy, cuda_op::gather);
  gather_def.reports_errors = true;
  KernelDef gather_elements_def =
      def("kiln.gather_elements", gather_elements, G::copy, cuda_op::gather_elements);
  KernelDef gather_nd_def = def("kiln.gather_nd", gather_nd, G::copy, cuda_op::gather_nd);
  KernelDef scatter_nd_def =
      def("kiln.scatter_nd", kernel::scatter_nd, G::single, cuda_op::scatter_nd);
  KernelDef scatter_elements_def =
      def("kiln.scatter_elements", kernel::scatter_elements, G::single, cuda_op::scatter_elements);
  gather_elements_def.reports_errors = gather_nd_def.reports_errors =
      scatter_nd_def.reports_errors = scatter_elements_def.reports_errors = true;
  return {
      // ---- data movement ----------------------------------------------------------------
      reshape,
      broadcast,
      transpose_def,
      def("kiln.slice", slice, G::copy, cuda_op::slice),
      def("kiln.concat", concat, G::copy, cuda_op::concat),
      def("kiln.split", split, G::copy, cuda_op::split),
      gather_def,
      gather_elements_def,
      gather_nd_def,
      def("kiln.cumsum", kernel::cumsum, G::copy, cuda_op::cumsum),
      scatter_elements_def,
      scatter_nd_def,
      def("kiln.top_k", kernel::top_k, G::copy, cuda_op::top_k),
      // ---- matmul -----------------------------------------------------------------------
      matmul_def,
      // ---- sliding windows ---------------------------------------------------------------
      conv_def,
      conv_transpose_def,
      def("kiln.max_pool", max_pool, G::single, cuda_op::window, prepare_pool, variant::max_pool),
      def("kiln.avg_pool", avg_pool, G::single, cuda_op::window, prepare_pool, variant::avg_pool),
      def("kiln.resize", kernel::resize, G::copy, cuda_op::resize, prepare_resize),
      // ---- reductions ---------------------------------------------------------------------
      def("kiln.reduce_sum", reduce_sum, G::reduce, cuda_op::reduce, nullptr, variant::sum),
      def("kiln.reduce_mean", reduce_mean, G::reduce, cuda_op::reduce, nullptr, variant::mean),
      def("kiln.reduce_max", reduce_max, G::reduce, cuda_op::reduce, nullptr, variant::max),
      def("kiln.reduce_min", reduce_min, G::reduce, cuda_op::reduce, nullptr, variant::min),
      def("kiln.reduce_prod", reduce_prod, G::reduce, cuda_op::reduce, nullptr, variant::prod),
      def("kiln.argmax", argmax, G::single, cuda_op::argmax),
      // ---- rows: softmax and norms --------------------------------------------------------
      def("kiln.softmax", softmax, G::rows, cuda_op::rows, nullptr, variant::softmax),
      def("kiln.log_softmax", log_softmax, G::rows, cuda_op::rows, nullptr, variant::log_softmax),
      def("kiln.layer_norm", layer_norm, G::rows, cuda_op::rows, nullptr, variant::layer_norm),
      def("kiln.rms_norm", rms_norm, G::rows, cuda_op::rows, nullptr, variant::rms_norm),
      // ---- collectives: one launch per participating device (the planner's) -------------
      collective("kiln.transfer", variant::transfer),
      collective("kiln.allreduce_sum", variant::allreduce_sum),
      collective("kiln.allgather", variant::allgather),
      collective("kiln.reduce_scatter_sum", variant::reduce_scatter_sum),
      collective("kiln.all_to_all", variant::all_to_all),
  };
}

}  // namespace

std::span<const KernelDef> kernel_defs() {
  static const std::vector<KernelDef> defs = make_definitions();
  return defs;
}

const KernelDef* find_kernel_def(const ir::OpDef& op) {
  static const std::unordered_map<const ir::OpDef*, const KernelDef*> by_op = [] {
    std::unordered_map<const ir::OpDef*, const KernelDef*> m;
    for (const KernelDef& d : kernel_defs()) m.emplace(d.op, &d);
    return m;
  }();
  const auto it = by_op.find(&op);
  return it == by_op.end() ? nullptr : it->second;
}

}  // namespace kiln::compiler
