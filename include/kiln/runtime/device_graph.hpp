#pragma once
/// \file
/// Device graphs (the Mojo `DeviceGraph` API): record a DAG of device work once through a
/// `DeviceGraphBuilder`, instantiate it, and replay it many times for a fraction of the
/// cost of enqueueing each operation again.

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/runtime/device_context.hpp"
#include "kiln/runtime/device_function.hpp"
#include "kiln/runtime/device_graph_key.hpp"
#include "kiln/runtime/inline_function.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln {

class DeviceGraph;
class DeviceGraphCache;

namespace detail {
class GraphExec;
struct RecordingState;

enum class GraphNodeKind : std::uint8_t { kernel, copy, memset, host, empty, child, cuda_work };

/// A copy node's parameters.
struct GraphCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
};
/// A memset node's parameters: \p count elements of \p pattern_size bytes each.
struct GraphMemset {
  void* dst = nullptr;
  std::size_t count = 0;
  std::array<unsigned char, 16> pattern{};
  std::size_t pattern_size = 0;
};

/// One recorded node, backend-neutral: what to run and what it waits for. What it runs
/// is one alternative of `work`, as `kind` says (a variant, so that a node is the size of
/// its largest kind, not of all of them together: graphs reach 10^6 nodes).
struct GraphNodeDesc {
  GraphNodeKind kind = GraphNodeKind::empty;
  std::vector<std::uint32_t> dependencies;
  std::variant<std::monostate, KernelLaunch, GraphCopy, GraphMemset,
               std::shared_ptr<const GraphExec>, HostCallback, CudaWork>
      work;
  std::string label;  // any kind: shown in DOT, traces, errors

  KernelLaunch& kernel() { return std::get<KernelLaunch>(work); }
  const KernelLaunch& kernel() const { return std::get<KernelLaunch>(work); }
  /// The kernel of a kernel node, else null.
  const std::shared_ptr<const FunctionInfo>* kernel_info() const {
    const auto* k = std::get_if<KernelLaunch>(&work);
    return k != nullptr ? &k->info : nullptr;
  }
  GraphCopy& copy() { return std::get<GraphCopy>(work); }
  const GraphCopy& copy() const { return std::get<GraphCopy>(work); }
  GraphMemset& memset() { return std::get<GraphMemset>(work); }
  const GraphMemset& memset() const { return std::get<GraphMemset>(work); }
  /// The graph of a child node, else null.
  std::shared_ptr<const GraphExec> child() const {
    const auto* c = std::get_if<std::shared_ptr<const GraphExec>>(&work);
    return c != nullptr ? *c : nullptr;
  }
  HostCallback& host() { return std::get<HostCallback>(work); }
  CudaWork& cuda_work() { return std::get<CudaWork>(work); }
  const CudaWork& cuda_work() const { return std::get<CudaWork>(work); }
};
}  // namespace detail

/// A handle to a node of the graph being built. Valid only with the builder that made it
/// and only while that builder's `build` callback runs; using it anywhere else throws.
class DeviceGraphNode {
 public:
  /// A handle that refers to no node (using it as a dependency throws).
  DeviceGraphNode() = default;
  /// Position of the node in its graph (creation order).
  std::uint32_t index() const noexcept { return index_; }

 private:
  friend class DeviceGraphBuilder;
  DeviceGraphNode(std::uint64_t builder, std::uint32_t index) : builder_(builder), index_(index) {}
  std::uint64_t builder_ = 0;
  std::uint32_t index_ = 0;
};

/// The nodes a new node waits for: `{}` (a root), `{a, b}`, a vector, or a span.
class DeviceGraphDependencies {
 public:
  DeviceGraphDependencies() = default;
  DeviceGraphDependencies(std::initializer_list<DeviceGraphNode> nodes)  // NOLINT
      : nodes_(nodes) {}
  DeviceGraphDependencies(std::span<const DeviceGraphNode> nodes)  // NOLINT
      : nodes_(nodes.begin(), nodes.end()) {}
  DeviceGraphDependencies(const std::vector<DeviceGraphNode>& nodes)  // NOLINT
      : nodes_(nodes) {}
  DeviceGraphDependencies(DeviceGraphNode node) : nodes_{node} {}  // NOLINT
  const std::vector<DeviceGraphNode>& nodes() const noexcept { return nodes_; }

 private:
  std::vector<DeviceGraphNode> nodes_;
};

/// Records the nodes of a device graph. Handed to the `build` callback of
/// `DeviceGraph::create`; lives only during that call and is neither copyable nor movable.
///
/// Every `add_*` returns a node that later nodes may depend on. Dependencies can only name
/// nodes that already exist, so a cycle cannot be expressed; an empty list makes a root.
/// Nothing is serialised implicitly: nodes without a path between them may run in
/// parallel. Arguments and parameters are copied into the node now, as CUDA copies kernel
/// node parameters; memory they point to is read when the graph replays.
class DeviceGraphBuilder {
 public:
  DeviceGraphBuilder(const DeviceGraphBuilder&) = delete;
  DeviceGraphBuilder& operator=(const DeviceGraphBuilder&) = delete;
  DeviceGraphBuilder(DeviceGraphBuilder&&) = delete;
  DeviceGraphBuilder& operator=(DeviceGraphBuilder&&) = delete;
  ~DeviceGraphBuilder();

  /// A kernel launch of \p fn over \p config with copies of \p args.
  template <class K, class... A>
  DeviceGraphNode add_function(const DeviceFunction<K>& fn, const LaunchConfig& config,
                               const DeviceGraphDependencies& dependencies, A&&... args) {
    static_assert(detail::LaunchableWith<K, A...>,
                  "add_function: the kernel cannot be called with these argument types "
                  "(CUDA kernels take trivially copyable arguments: pass buffer.data())");
    return add_launch(fn.bind(config, std::forward<A>(args)...), dependencies);
  }

  /// A copy of all of \p src into \p dst (buffers, spans, vectors; sizes must match).
  template <detail::WritableElementRange Dst, detail::ElementRange Src>
  requires std::is_same_v<detail::RangeElement<Dst>, detail::RangeElement<Src>> DeviceGraphNode
  add_copy(Dst&& dst, const Src& src, const DeviceGraphDependencies& dependencies) {
    using T = detail::RangeElement<Dst>;
    return add_copy_bytes(std::data(dst), std::size(dst) * sizeof(T), std::data(src),
                          std::size(src) * sizeof(T), dtype_of<T>, dependencies);
  }

  /// Sets every element of \p dst to \p value.
  template <detail::WritableElementRange Dst>
  DeviceGraphNode add_memset(Dst&& dst, detail::RangeElement<Dst> value,
                             const DeviceGraphDependencies& dependencies) {
    using T = detail::RangeElement<Dst>;
    detail::GraphNodeDesc node;
    node.kind = detail::GraphNodeKind::memset;
    detail::GraphMemset& m = node.work.emplace<detail::GraphMemset>();
    m.dst = std::data(dst);
    m.count = std::size(dst);
    m.pattern_size = sizeof(T);
    std::memcpy(m.pattern.data(), &value, sizeof(T));
    return add(std::move(node), dependencies);
  }

  /// A host callback (runs on a worker thread when its dependencies are done).
  template <class F>
  requires std::is_invocable_v < const std::decay_t<F>
  & > DeviceGraphNode add_host_function(F&& fn, const DeviceGraphDependencies& dependencies) {
    detail::GraphNodeDesc node;
    node.kind = detail::GraphNodeKind::host;
    node.work.emplace<detail::HostCallback>(std::forward<F>(fn));
    return add(std::move(node), dependencies);
  }

  /// Work another CUDA library enqueues (cuBLAS, cuDNN, NCCL, CUDA-runtime launches), as
  /// one node: when the graph is instantiated, and again on each `update`, \p fn(stream)
  /// is called once on the calling thread with `stream` (a `CUstream`, as `void*`) in
  /// CUDA stream capture; what it enqueues there becomes a child graph that every replay
  /// runs. \p fn should only enqueue asynchronous work on `stream`: calls that capture
  /// forbids (synchronizing, most allocations) make instantiation throw DeviceError.
  /// \throws UserError on a CPU context's builder.
  template <class F>
  requires std::is_invocable_v < const std::decay_t<F>
  &, void* > DeviceGraphNode add_cuda_work(F&& fn, const DeviceGraphDependencies& dependencies) {
    detail::GraphNodeDesc node;
    node.kind = detail::GraphNodeKind::cuda_work;
    node.work.emplace<detail::CudaWork>(std::forward<F>(fn));
    return add(std::move(node), dependencies);
  }

  /// Internal: a node of a bound launch (`DeviceFunction::bind_bytes`; compiled plans).
  DeviceGraphNode add_launch(detail::KernelLaunch launch,
                             const DeviceGraphDependencies& dependencies) {
    detail::GraphNodeDesc node;
    node.kind = detail::GraphNodeKind::kernel;
    node.work = std::move(launch);
    return add(std::move(node), dependencies);
  }

  /// A node that does nothing: a join point for many dependencies.
  DeviceGraphNode add_empty(const DeviceGraphDependencies& dependencies);

  /// Runs all of \p child (a graph of the same context) as one node.
  DeviceGraphNode add_child_graph(const DeviceGraph& child,
                                  const DeviceGraphDependencies& dependencies);

  /// A context whose `enqueue_*` calls (functions, copies, memsets, host functions) add
  /// nodes to this graph instead of running: each recorded node depends on the previous
  /// one, the first on \p after. Existing eager code can so be captured unchanged, as CUDA
  /// stream capture does. Buffers it creates are allocated at once from the real context
  /// and must outlive the graph's replays. Calls that need work to have run throw
  /// UserError: `synchronize`, event records, waits and queries, creating, replaying or
  /// updating a graph (nest graphs with `add_child_graph`). Valid only during the build
  /// callback; using it afterwards throws UserError.
  DeviceContext recording_context(const DeviceGraphDependencies& after = {});

  /// Names \p node for people: DOT output, profiler traces and error messages show the
  /// label (e.g. the IR op a kernel node computes). Labels are not part of the topology.
  void set_label(const DeviceGraphNode& node, std::string label);

  /// The node added last, by an `add_*` call or a recording context.
  /// \throws UserError when no node has been added yet.
  DeviceGraphNode last_node() const;

  /// Nodes added so far.
  std::size_t size() const noexcept { return nodes_.size(); }
  /// Makes room for \p nodes nodes in all: a builder told its size up front never holds
  /// two copies of its nodes while it grows (what a graph of 10^6 nodes needs).
  void reserve(std::size_t nodes) { nodes_.reserve(nodes); }

 private:
  friend class DeviceGraph;
  friend struct detail::RecordingState;
  explicit DeviceGraphBuilder(const DeviceContext& ctx);
  DeviceGraphNode add(detail::GraphNodeDesc node, const DeviceGraphDependencies& dependencies);
  void check_node(const DeviceGraphNode& node, const char* role) const;
  DeviceGraphNode add_copy_bytes(void* dst, std::size_t dst_bytes, const void* src,
                                 std::size_t src_bytes, DType dtype,
                                 const DeviceGraphDependencies& dependencies);

  DeviceContext ctx_;
  std::uint64_t id_;
  std::vector<detail::GraphNodeDesc> nodes_;
  std::vector<std::shared_ptr<detail::RecordingState>> recordings_;  // closed on destruction
};

/// An instantiated device graph, ready to replay.
///
/// Cheap to copy: copies share one instantiated graph (like the seed's reference count);
/// the last copy releases it, and a replay still running keeps it alive until it ends.
/// `replay()` submits the whole graph to the context's stream and returns at once; replays
/// run in submission order, ordered with other work on the stream; independent nodes inside
/// one replay run in parallel on the context's workers. A failure in a node surfaces from
/// the next `ctx.synchronize()` naming the node; the graph and context stay usable.
///
/// \code
///   kiln::DeviceContext ctx;
///   auto fn = ctx.compile_function([](int x) { std::printf("Value: %d\n", x); });
///   auto graph = kiln::DeviceGraph::create(ctx, [&](kiln::DeviceGraphBuilder& b) {
///     b.add_function(fn, kiln::LaunchConfig{1, 1}, {}, 42);
///   });
///   graph.replay();
///   graph.replay();  // as many times as needed
///   ctx.synchronize();
/// \endcode
class DeviceGraph {
 public:
  /// Calls `build(builder)` once, then instantiates what it recorded.
  /// \throws whatever `build` throws, or UserError for a misused builder.
  template <class Build>
  requires std::is_invocable_v<Build&, DeviceGraphBuilder&>
  static DeviceGraph create(const DeviceContext& ctx, Build&& build) {
    DeviceGraphBuilder builder(ctx);
    build(builder);
    return instantiate(builder);
  }

  /// Like `create(ctx, build)`, but returns the graph an earlier call stored in \p cache
  /// under an equal key (same build callable type, same context, equal \p inputs) without
  /// calling `build`; on a miss builds, stores and returns a new graph. Defined in
  /// `kiln/runtime/device_graph_cache.hpp`.
  template <class Build, DeviceGraphInput... Inputs>
  requires std::is_invocable_v<Build&, DeviceGraphBuilder&>
  static DeviceGraph create(const DeviceContext& ctx, Build&& build, DeviceGraphCache& cache,
                            const Inputs&... inputs);

  /// Why the last `update` of a CUDA graph instantiated the graph again instead of
  /// updating it in place (the driver's reason); empty after an in-place update, and on
  /// the CPU, where updates are always in place.
  std::string last_update_fallback() const;

  /// Re-runs \p build against this graph to change node parameters in place (buffer
  /// addresses, scalars, kernel arguments, launch dimensions) without instantiating again.
  /// \p build must record the same topology: the same nodes, kinds, dependencies, kernel
  /// functions and child graphs, in the same order. The change is stream-ordered: replays
  /// submitted before `update` run with the old parameters, later ones with the new.
  /// Every copy of this graph (and a cache holding it) sees the update.
  /// \throws UserError naming the first difference when the topology differs (the graph
  /// is then unchanged), or whatever \p build throws.
  template <class Build>
  requires std::is_invocable_v<Build&, DeviceGraphBuilder&>
  void update(Build&& build) const {
    DeviceGraphBuilder builder(ctx_);
    build(builder);
    apply_update(builder);
  }

  /// Submits one replay of the whole graph to its context's stream; returns at once.
  void replay() const;
  /// Number of nodes.
  std::size_t size() const;
  /// The context the graph replays on.
  const DeviceContext& context() const noexcept { return ctx_; }
  /// Graphviz DOT text: one vertex per node (kind, kernel name, launch dims), one edge per
  /// dependency.
  std::string to_dot() const;

 private:
  friend class DeviceGraphBuilder;
  DeviceGraph(DeviceContext ctx, std::shared_ptr<const detail::GraphExec> exec)
      : ctx_(std::move(ctx)), exec_(std::move(exec)) {}
  static DeviceGraph instantiate(DeviceGraphBuilder& builder);
  void apply_update(DeviceGraphBuilder& builder) const;

  DeviceContext ctx_;
  std::shared_ptr<const detail::GraphExec> exec_;
};

}  // namespace kiln
