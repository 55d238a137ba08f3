#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/verifier.hpp"
#include "stage/frame.hpp"

namespace kiln {
namespace detail {
namespace {
thread_local Frame* t_frame = nullptr;
thread_local const SourceLocation* t_user_call_site = nullptr;  // see UserCallSite

const SourceLocation& located(const SourceLocation& where) noexcept {
  return t_user_call_site != nullptr && where.line() != 0 ? *t_user_call_site : where;
}
}  // namespace

UserCallSite::UserCallSite(const SourceLocation& where) noexcept
    : outermost_(t_user_call_site == nullptr) {
  if (outermost_) t_user_call_site = &where;
}
UserCallSite::~UserCallSite() {
  if (outermost_) t_user_call_site = nullptr;
}

Frame* current_frame() noexcept { return t_frame; }
void set_current_frame(Frame* frame) noexcept { t_frame = frame; }

Frame& require_frame(std::string_view op, const SourceLocation& where) {
  if (t_frame == nullptr)
    throw UserError(cat(op, " at ", where_string(where),
                        ": no function is being staged; call it inside a function traced by "
                        "kiln::stage"));
  return *t_frame;
}

std::string where_string(const SourceLocation& where) {
  const SourceLocation& at = located(where);
  return cat(at.file_name(), ":", at.line(), ":", at.column());
}

ir::Location location_of(const SourceLocation& where) {
  const SourceLocation& at = located(where);
  return {at.file_name(), at.line(), at.column()};
}

ir::TensorType to_ir(const TensorLayout& layout) {
  return {layout.dtype, layout.shape, layout.device};
}
TensorLayout to_layout(const ir::TensorType& type) { return {type.dtype, type.shape, type.device}; }

std::string demangled_type_name(const char* mangled) {
  int status = 0;
  char* readable = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && readable != nullptr ? readable : mangled;
  std::free(readable);  // NOLINT(cppcoreguidelines-no-malloc): the demangler's contract
  return out;
}

// ---- Session -----------------------------------------------------------------------------

struct Session::Impl {
  SessionState state;
  std::shared_ptr<Frame> entry;
  Frame* saved = nullptr;
};

Session::Session(const StageOptions& options) : impl_(std::make_unique<Impl>()) {
  if (t_frame != nullptr)
    throw UserError(
        "kiln::stage was called while another function is being staged; stage functions one "
        "at a time (use as_subgraph to call one staged piece from another)");
  impl_->state.options = options;
  ir::Graph& graph = impl_->state.module.add_graph(options.name);
  impl_->entry = std::make_shared<Frame>(graph, impl_->state, nullptr);
  if (!options.prefix.empty()) impl_->entry->prefix.push_back(options.prefix);
  impl_->state.frames.push_back(impl_->entry);
  impl_->saved = t_frame;
  t_frame = impl_->entry.get();
}

Session::~Session() {
  for (const auto& frame : impl_->state.frames) frame->close();
  t_frame = impl_->saved;
}

std::vector<Tensor> Session::add_inputs(const std::vector<Tensor>& leaves, const TreeDef& tree) {
  const std::vector<std::string> paths = tree.leaf_paths();
  std::vector<Tensor> out;
  out.reserve(leaves.size());
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& t = leaves[i];
    if (t.empty() || t.is_traced())
      throw UserError(cat("stage: input leaf '", paths[i], "' is ",
                          t.empty() ? "an empty Tensor" : "a traced tensor of another staging",
                          "; pass a TensorLayout (or a placeholder Tensor) for every tensor "
                          "input"));
    const ir::Value v = impl_->entry->graph().add_argument(to_ir(t.layout()));
    out.push_back(Tensor::traced(impl_->entry, v.id, t.layout()));
  }
  return out;
}

std::vector<ir::Value> output_values(Frame& frame, const std::vector<Tensor>& leaves,
                                     const TreeDef& tree, std::string_view what);

StagedGraph Session::finish(TreeDef in_tree, const std::vector<Tensor>& in_leaves, TreeDef out_tree,
                            const std::vector<Tensor>& out_leaves) {
  Frame& entry = *impl_->entry;
  entry.graph().set_results(output_values(entry, out_leaves, out_tree, "stage"));
  ir::verify_or_throw(impl_->state.module);
  std::vector<TensorLayout> in_layouts, out_layouts;
  for (const Tensor& t : in_leaves) in_layouts.push_back(t.layout());
  for (ir::Value v : entry.graph().results())
    out_layouts.push_back(to_layout(entry.graph().type(v)));
  return StagedGraph(std::move(impl_->state.module), std::move(in_layouts), std::move(in_tree),
                     std::move(out_layouts), std::move(out_tree));
}

}  // namespace detail

StagedGraph StagedGraph::from_module(ir::Module module) {
  ir::verify_or_throw(module);
  const ir::Graph& entry = module.entry();
  std::vector<TensorLayout> in_layouts, out_layouts;
  for (ir::Value v : entry.arguments()) in_layouts.push_back(detail::to_layout(entry.type(v)));
  for (ir::Value v : entry.results()) out_layouts.push_back(detail::to_layout(entry.type(v)));
  const auto tensors = [](std::size_t n) {
    return TreeDef::node(TreeDef::Kind::tuple, "tuple", {},
                         std::vector<TreeDef>(n, TreeDef::tensor()));
  };
  TreeDef in_tree = tensors(in_layouts.size()), out_tree = tensors(out_layouts.size());
  return StagedGraph(std::move(module), std::move(in_layouts), std::move(in_tree),
                     std::move(out_layouts), std::move(out_tree));
}

std::vector<int> StagedGraph::signal_device_ids() const {
  std::set<int> ids;
  for (std::size_t g = 0; g < module_->num_graphs(); ++g) {
    const ir::Graph& graph = module_->graph(g);
    for (std::size_t i = 0; i < graph.num_ops(); ++i) {
      const ir::OpView op = graph.op(i);
      if (!op.def().has(ir::OpTrait::collective)) continue;
      for (ir::Value v : op.operands()) ids.insert(graph.type(v).device.index());
      for (std::size_t r = 0; r < op.num_results(); ++r)
        ids.insert(graph.type(op.result(r)).device.index());
    }
  }
  return {ids.begin(), ids.end()};
}

std::ostream& operator<<(std::ostream& os, const StagedGraph& staged) {
  return os << staged.graph();
}

}  // namespace kiln
