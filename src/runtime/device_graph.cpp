#include "kiln/runtime/device_graph.hpp"

#include <atomic>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/checks.hpp"
#include "runtime/recording_stream.hpp"
#include "runtime/stream_backend.hpp"

namespace kiln {
namespace {
// Builder ids start at 1 so a default-constructed node (id 0) never matches a builder.
std::atomic<std::uint64_t> next_builder_id{1};
}  // namespace

DeviceGraphBuilder::DeviceGraphBuilder(const DeviceContext& ctx)
    : ctx_(ctx), id_(next_builder_id.fetch_add(1, std::memory_order_relaxed)) {}

DeviceGraphBuilder::~DeviceGraphBuilder() {
  for (const auto& recording : recordings_) recording->builder = nullptr;
}

DeviceContext DeviceGraphBuilder::recording_context(const DeviceGraphDependencies& after) {
  for (const DeviceGraphNode& dep : after.nodes()) check_node(dep, "recording_context");
  auto state = std::make_shared<detail::RecordingState>();
  state->builder = this;
  state->tail.assign(after.nodes().begin(), after.nodes().end());
  recordings_.push_back(state);
  return DeviceContext(detail::make_recording_stream(std::move(state), ctx_.backend()));
}

DeviceGraphNode DeviceGraphBuilder::last_node() const {
  if (nodes_.empty()) throw UserError("DeviceGraphBuilder::last_node: no node has been added yet");
  return DeviceGraphNode(id_, static_cast<std::uint32_t>(nodes_.size() - 1));
}

namespace detail {
DeviceGraphNode RecordingState::record(DeviceGraphBuilder& builder, GraphNodeDesc node,
                                       const DeviceGraphDependencies& after) {
  return builder.add(std::move(node), after);
}
}  // namespace detail

void DeviceGraphBuilder::check_launch(const detail::KernelLaunch& launch) const {
  detail::check_launch("DeviceGraphBuilder::add_function", launch);
  detail::check_kernel_device("DeviceGraphBuilder::add_function", launch, ctx_.device());
}

detail::GraphNodeDesc& DeviceGraphBuilder::new_node(detail::GraphNodeKind kind,
                                                    const DeviceGraphDependencies& dependencies) {
  const auto index = static_cast<std::uint32_t>(nodes_.size());
  for (const DeviceGraphNode& dep : dependencies.nodes())
    check_node(dep, "dependency of new node", index);
  detail::GraphNodeDesc& node = nodes_.emplace_back();
  node.kind = kind;
  node.dependencies.reserve(dependencies.nodes().size());
  for (const DeviceGraphNode& dep : dependencies.nodes()) node.dependencies.push_back(dep.index_);
  return node;
}

DeviceGraphNode DeviceGraphBuilder::add(detail::GraphNodeDesc node,
                                        const DeviceGraphDependencies& dependencies) {
  if (node.kind == detail::GraphNodeKind::kernel) check_launch(node.kernel());
  if (node.kind == detail::GraphNodeKind::cuda_work && !ctx_.device().is_cuda())
    throw UserError(detail::cat("DeviceGraphBuilder::add_cuda_work: the graph is for ",
                                ctx_.device(),
                                ", which has no CUDA stream; build it with a CUDA context "
                                "(Device::cuda(n))"));
  detail::GraphNodeDesc& slot = new_node(node.kind, dependencies);
  node.dependencies = std::move(slot.dependencies);
  slot = std::move(node);
  return last_node();
}

void DeviceGraphBuilder::bad_node(const DeviceGraphNode& node, const char* role,
                                  std::uint32_t new_node) const {
  const std::string what =
      new_node == kNoNode ? std::string(role) : detail::cat(role, " ", new_node);
  if (node.builder_ == 0)
    throw UserError(detail::cat("DeviceGraphBuilder: ", what,
                                " is a default-constructed DeviceGraphNode that refers to no "
                                "node; pass a node returned by an add_* call of this builder"));
  if (node.builder_ != id_)
    throw UserError(detail::cat(
        "DeviceGraphBuilder: ", what, " is node ", node.index_,
        " of another graph builder; nodes are valid only in the build callback that created "
        "them (nest another graph with add_child_graph instead)"));
  throw InternalError(detail::cat("node ", node.index_, " of this builder does not exist yet"));
}

void DeviceGraphBuilder::set_label(const DeviceGraphNode& node, std::string label) {
  check_node(node, "set_label");
  nodes_[node.index()].label = std::move(label);
}

DeviceGraphNode DeviceGraphBuilder::add_empty(const DeviceGraphDependencies& dependencies) {
  return add(detail::GraphNodeDesc{}, dependencies);
}

DeviceGraphNode DeviceGraphBuilder::add_child_graph(const DeviceGraph& child,
                                                    const DeviceGraphDependencies& dependencies) {
  if (child.context().backend() != ctx_.backend())
    throw UserError(
        detail::cat("DeviceGraphBuilder::add_child_graph: the child graph was built "
                    "for another context (",
                    child.context().device(), "); build it with the same context as the parent"));
  detail::GraphNodeDesc node;
  node.kind = detail::GraphNodeKind::child;
  node.work = child.exec_;
  return add(std::move(node), dependencies);
}

DeviceGraphNode DeviceGraphBuilder::add_conditional(const char* where,
                                                    const std::int32_t* condition, bool loop,
                                                    std::shared_ptr<detail::GraphNodeDescs> body,
                                                    const DeviceGraphDependencies& dependencies) {
  if (condition == nullptr)
    throw UserError(detail::cat("DeviceGraphBuilder::", where,
                                ": the condition is a null pointer; pass the address of an "
                                "int32 in device memory that an earlier node sets"));
  detail::GraphNodeDesc& node = new_node(detail::GraphNodeKind::conditional, dependencies);
  node.work = detail::GraphConditional{condition, loop, std::move(body)};
  return last_node();
}

DeviceGraphNode DeviceGraphBuilder::add_copy_bytes(void* dst, std::size_t dst_bytes,
                                                   const void* src, std::size_t src_bytes,
                                                   DType dtype,
                                                   const DeviceGraphDependencies& dependencies) {
  detail::check_copy_sizes("DeviceGraphBuilder::add_copy", dst_bytes, src_bytes, dtype);
  detail::GraphNodeDesc node;
  node.kind = detail::GraphNodeKind::copy;
  node.work = detail::GraphCopy{dst, src, dst_bytes};
  return add(std::move(node), dependencies);
}

DeviceGraph DeviceGraph::instantiate(DeviceGraphBuilder& builder) {
  auto exec = builder.ctx_.backend()->instantiate_graph(std::move(builder.nodes_));
  builder.nodes_.clear();
  return DeviceGraph(builder.ctx_, std::move(exec));
}

void DeviceGraph::apply_update(DeviceGraphBuilder& builder) const {
  auto nodes = std::move(builder.nodes_);
  builder.nodes_.clear();
  ctx_.backend()->update_graph(exec_, std::move(nodes));
}

void DeviceGraph::replay() const { ctx_.backend()->launch_graph(exec_); }
void DeviceGraph::replay_and_synchronize() const {
  ctx_.backend()->launch_graph_and_synchronize(exec_);
}
std::size_t DeviceGraph::size() const { return exec_->size(); }
std::string DeviceGraph::to_dot() const { return exec_->to_dot(); }
std::string DeviceGraph::last_update_fallback() const { return exec_->last_update_fallback(); }

}  // namespace kiln
