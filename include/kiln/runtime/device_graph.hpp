#pragma once
/// \file
/// Device graphs (the Mojo `DeviceGraph` API): record a DAG of device work once through a
/// `DeviceGraphBuilder`, instantiate it, and replay it many times for a fraction of the
/// cost of enqueueing each operation again.

#include <algorithm>
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

enum class GraphNodeKind : std::uint8_t {
  kernel,
  copy,
  memset,
  host,
  empty,
  child,
  cuda_work,
  conditional
};

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

/// Blocks for the arrays of graph nodes that every build makes and every destroyed graph
/// frees: freed blocks of 64 KiB to 64 MiB are kept (up to 64 MiB in all) and handed to
/// the next build of a similar size, so that building graphs again and again does not
/// fault the same pages in each time. Other sizes go to operator new.
void* recycled_allocate(std::size_t bytes);
void recycled_free(void* block, std::size_t bytes) noexcept;

template <class T>
struct RecyclingAllocator {
  using value_type = T;
  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT
  T* allocate(std::size_t n) { return static_cast<T*>(recycled_allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { recycled_free(p, n * sizeof(T)); }
  friend bool operator==(const RecyclingAllocator&, const RecyclingAllocator&) { return true; }
};

/// A node's dependencies: up to 5 indices inline (most nodes), more on the heap, so that
/// recording a node allocates nothing for its edges.
class NodeIndices {
 public:
  NodeIndices() = default;
  NodeIndices(std::initializer_list<std::uint32_t> values) {
    reserve(values.size());
    for (std::uint32_t v : values) push_back(v);
  }
  NodeIndices(const NodeIndices& other) { *this = other; }
  NodeIndices(NodeIndices&& other) noexcept { *this = std::move(other); }
  NodeIndices& operator=(const NodeIndices& other) {
    if (this != &other) {
      size_ = 0;
      reserve(other.size_);
      std::memcpy(data(), other.data(), other.size_ * sizeof(std::uint32_t));
      size_ = other.size_;
    }
    return *this;
  }
  NodeIndices& operator=(NodeIndices&& other) noexcept {
    if (this == &other) return *this;
    release();
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.capacity_ > kInline) {
      heap_ = other.heap_;
    } else {
      std::memcpy(inline_, other.inline_, other.size_ * sizeof(std::uint32_t));
    }
    other.size_ = 0;
    other.capacity_ = kInline;
    return *this;
  }
  ~NodeIndices() { release(); }

  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    auto* grown = new std::uint32_t[n];
    std::memcpy(grown, data(), size_ * sizeof(std::uint32_t));
    release();
    heap_ = grown;
    capacity_ = static_cast<std::uint32_t>(n);
  }
  void push_back(std::uint32_t v) {
    if (size_ == capacity_) reserve(std::size_t{capacity_} * 2);
    data()[size_++] = v;
  }
  std::uint32_t* data() noexcept { return capacity_ > kInline ? heap_ : inline_; }
  const std::uint32_t* data() const noexcept { return capacity_ > kInline ? heap_ : inline_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const std::uint32_t* begin() const noexcept { return data(); }
  const std::uint32_t* end() const noexcept { return data() + size_; }
  std::uint32_t operator[](std::size_t i) const noexcept { return data()[i]; }
  friend bool operator==(const NodeIndices& a, const NodeIndices& b) noexcept {
    return a.size_ == b.size_ &&
           std::memcmp(a.data(), b.data(), a.size_ * sizeof(std::uint32_t)) == 0;
  }

 private:
  static constexpr std::uint32_t kInline = 5;
  void release() noexcept {
    if (capacity_ > kInline) delete[] heap_;
    capacity_ = kInline;
  }
  union {
    std::uint32_t inline_[kInline] = {};
    std::uint32_t* heap_;
  };
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;
};

struct GraphNodeDesc;
using GraphNodeDescs = std::vector<GraphNodeDesc, RecyclingAllocator<GraphNodeDesc>>;

/// A conditional node's parameters: the int32 it reads, whether it loops, and its body as
/// recorded (instantiated with the graph; an update gives it new parameters).
struct GraphConditional {
  const std::int32_t* condition = nullptr;
  bool loop = false;  // WHILE: the body runs again while the condition stays nonzero
  std::shared_ptr<GraphNodeDescs> body;
};

/// One recorded node, backend-neutral: what to run and what it waits for. What it runs
/// is one alternative of `work`, as `kind` says (a variant, so that a node is the size of
/// its largest kind, not of all of them together: graphs reach 10^6 nodes).
struct GraphNodeDesc {
  // User-provided: a node made by `emplace_back()` is not zeroed first (graphs reach
  // 10^6 nodes, each a few hundred bytes).
  GraphNodeDesc() {}  // NOLINT(modernize-use-equals-default)
  GraphNodeKind kind = GraphNodeKind::empty;
  NodeIndices dependencies;
  std::variant<std::monostate, KernelLaunch, GraphCopy, GraphMemset,
               std::shared_ptr<const GraphExec>, HostCallback, CudaWork, GraphConditional>
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
  GraphConditional& conditional() { return std::get<GraphConditional>(work); }
  const GraphConditional& conditional() const { return std::get<GraphConditional>(work); }
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

/// The nodes a new node waits for: `{}` (a root), `{a, b}`, a vector, a span or one node.
/// A single node and a braced list are held by value (so a `DeviceGraphDependencies`
/// variable made from them stays valid); a vector or span is referred to and must
/// outlive this object, as it does when passed straight to an `add_*` call. Making one
/// allocates nothing unless a braced list has more than 4 nodes.
class DeviceGraphDependencies {
 public:
  DeviceGraphDependencies() = default;
  DeviceGraphDependencies(std::initializer_list<DeviceGraphNode> nodes) {  // NOLINT
    if (nodes.size() <= kInline) {
      std::copy(nodes.begin(), nodes.end(), inline_.begin());
      inline_count_ = static_cast<std::uint8_t>(nodes.size());
    } else {
      owned_.assign(nodes.begin(), nodes.end());
      view_ = owned_;
    }
  }
  DeviceGraphDependencies(std::span<const DeviceGraphNode> nodes)  // NOLINT
      : view_(nodes) {}
  DeviceGraphDependencies(const std::vector<DeviceGraphNode>& nodes)  // NOLINT
      : view_(nodes) {}
  DeviceGraphDependencies(DeviceGraphNode node) : inline_count_(1) {  // NOLINT
    inline_[0] = node;
  }
  DeviceGraphDependencies(const DeviceGraphDependencies& other) { *this = other; }
  DeviceGraphDependencies& operator=(const DeviceGraphDependencies& other) {
    if (this == &other) return *this;
    inline_ = other.inline_;
    inline_count_ = other.inline_count_;
    owned_ = other.owned_;
    view_ = other.owned_.empty() ? other.view_ : std::span<const DeviceGraphNode>(owned_);
    return *this;
  }
  std::span<const DeviceGraphNode> nodes() const noexcept {
    return inline_count_ > 0 ? std::span<const DeviceGraphNode>(inline_.data(), inline_count_)
                             : view_;
  }

 private:
  static constexpr std::size_t kInline = 4;
  std::array<DeviceGraphNode, kInline> inline_{};
  std::uint8_t inline_count_ = 0;
  std::vector<DeviceGraphNode> owned_;  // a braced list of more than kInline nodes
  std::span<const DeviceGraphNode> view_;
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
    if constexpr (std::is_same_v<K, CudaKernel>) {
      return add_launch(fn.bind(config, std::forward<A>(args)...), dependencies);
    } else {  // bound straight into the new node
      detail::KernelLaunch& launch = new_launch(dependencies);
      try {
        fn.bind_into(launch, config, std::forward<A>(args)...);
        check_launch(launch);
      } catch (...) {
        drop_last_node();
        throw;
      }
      return last_node();
    }
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
    check_launch(launch);
    detail::GraphNodeDesc& node = new_node(detail::GraphNodeKind::kernel, dependencies);
    node.work.emplace<detail::KernelLaunch>(std::move(launch));  // built in place
    return last_node();
  }

  /// A conditional node (CUDA 12.4's IF node): when the node runs it reads the `int32` at
  /// \p condition (device memory that an earlier node sets, e.g. `flag.data()`) and, if
  /// it is nonzero, runs once the graph `build_body(body_builder)` records. So whether
  /// work runs is decided on the device at each replay, inside one replay.
  /// \p build_body is called now, with a builder of its own for the same context (its
  /// nodes are valid only inside it; it may nest conditional nodes and child graphs).
  /// On the CPU the body runs on the thread that runs the node. On CUDA the node is a
  /// CUDA conditional node: a one-thread kernel copies the int32 into its conditional
  /// handle just before it (and, in a WHILE, again at the end of each pass), and the body
  /// is its body graph, which CUDA lets hold kernels, copies, memsets, empty nodes, child
  /// graphs and conditional nodes only.
  /// \throws UserError for a null condition, and (when the graph is instantiated) for a
  /// CUDA body holding a host function or CUDA work.
  template <class Build>
  requires std::is_invocable_v<Build&, DeviceGraphBuilder&> DeviceGraphNode
  add_if(const std::int32_t* condition, Build&& build_body,
         const DeviceGraphDependencies& dependencies) {
    return add_conditional("add_if", condition, false, record_body(build_body), dependencies);
  }

  /// A loop node (CUDA 12.4's WHILE node): when the node runs it reads the `int32` at
  /// \p condition and, while it is nonzero, runs the graph `build_body` records and reads
  /// it again. A node of the body (or of the graph before it) must set it to zero for the
  /// loop to end: a decode loop or an iterative solver as one replay. Otherwise as
  /// `add_if`.
  template <class Build>
  requires std::is_invocable_v<Build&, DeviceGraphBuilder&> DeviceGraphNode
  add_while(const std::int32_t* condition, Build&& build_body,
            const DeviceGraphDependencies& dependencies) {
    return add_conditional("add_while", condition, true, record_body(build_body), dependencies);
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
  /// Appends a node of \p kind waiting for \p dependencies (checked first) and returns it
  /// for its work to be set in place.
  detail::GraphNodeDesc& new_node(detail::GraphNodeKind kind,
                                  const DeviceGraphDependencies& dependencies);
  /// \throws UserError for a launch this graph cannot run (empty grid, wrong device).
  void check_launch(const detail::KernelLaunch& launch) const;
  /// A new kernel node with an empty launch, for add_function to bind into.
  detail::KernelLaunch& new_launch(const DeviceGraphDependencies& dependencies) {
    return new_node(detail::GraphNodeKind::kernel, dependencies)
        .work.emplace<detail::KernelLaunch>();
  }
  void drop_last_node() noexcept { nodes_.pop_back(); }
  /// \throws UserError naming \p role (and \p new_node, the node being added, when it is
  /// not `kNoNode`) unless \p node is a node of this builder. No formatting on success.
  void check_node(const DeviceGraphNode& node, const char* role,
                  std::uint32_t new_node = kNoNode) const {
    if (node.builder_ != id_ || node.index_ >= nodes_.size()) bad_node(node, role, new_node);
  }
  template <class Build>
  std::shared_ptr<detail::GraphNodeDescs> record_body(Build& build_body) {
    DeviceGraphBuilder body(ctx_);
    build_body(body);
    return std::make_shared<detail::GraphNodeDescs>(std::move(body.nodes_));
  }
  DeviceGraphNode add_conditional(const char* where, const std::int32_t* condition, bool loop,
                                  std::shared_ptr<detail::GraphNodeDescs> body,
                                  const DeviceGraphDependencies& dependencies);
  [[noreturn]] void bad_node(const DeviceGraphNode& node, const char* role,
                             std::uint32_t new_node) const;
  static constexpr std::uint32_t kNoNode = ~std::uint32_t{0};
  DeviceGraphNode add_copy_bytes(void* dst, std::size_t dst_bytes, const void* src,
                                 std::size_t src_bytes, DType dtype,
                                 const DeviceGraphDependencies& dependencies);

  DeviceContext ctx_;
  std::uint64_t id_;
  detail::GraphNodeDescs nodes_;
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
  /// replay(), then `context().synchronize()` (and throws as it does), where the backend
  /// can on the calling thread: the CPU stream's own thread is not woken, which saves a
  /// system call per replay and, on a core the caller shares, its polling afterwards.
  void replay_and_synchronize() const;
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
