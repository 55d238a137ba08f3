#pragma once
/// \file
/// `stage`, `StagedGraph`, `as_subgraph` and `weight`: tracing C++ functions over tensors
/// into the graph IR (the MAX `max.experimental.compilation` API, in C++).
///
/// \code
///   kiln::Tensor scale(kiln::Tensor x) { return x * 2; }
///   auto staged = kiln::stage(scale)(kiln::TensorLayout(kiln::DType::f32, {4}));
///   std::cout << staged;   // the MLIR of the whole module, subgraphs included
/// \endcode

#include <any>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "kiln/core/source_location.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/stage/tensor.hpp"
#include "kiln/stage/tree.hpp"

namespace kiln {

namespace detail {
struct SubgraphCacheAccess;
}  // namespace detail

/// The table that `as_subgraph` stores traced bodies in (the seed's `subgraph_cache`),
/// for sharing bodies across `stage` calls: staging an encoder and a decoder, or a
/// prefill and a decode function, with one cache traces each distinct subgraph once, and
/// the module of each staged graph still holds every body it calls (copied in). Bodies
/// are keyed as within one `stage` call (the callable's code or shared name, argument
/// tree, operand types, prefix presence). Not thread-safe: stage with one cache from one
/// thread at a time. Must outlive the `stage` calls that use it.
///
/// \code
///   kiln::SubgraphCache cache;
///   const auto block = kiln::as_subgraph(layer, {.name = "block"});
///   auto enc = kiln::stage(encoder, {.prefix = "encoder", .subgraph_cache = &cache})(x);
///   auto dec = kiln::stage(decoder, {.prefix = "decoder", .subgraph_cache = &cache})(y);
///   // block traced once; enc and dec each print and compile with their own @block
/// \endcode
class SubgraphCache {
 public:
  SubgraphCache();
  ~SubgraphCache();
  SubgraphCache(const SubgraphCache&) = delete;
  SubgraphCache& operator=(const SubgraphCache&) = delete;
  /// Distinct bodies traced into the cache.
  std::size_t size() const noexcept;
  /// Drops every body (later calls trace again).
  void clear();

 private:
  friend struct detail::SubgraphCacheAccess;
  struct State;
  std::unique_ptr<State> state_;
};

/// How `stage` traces.
struct StageOptions {
  /// Trace `as_subgraph` callables into shared subgraph bodies (true) or inline every
  /// call (false, for A/B comparisons; the seed's `subgraph_cache=None`).
  bool subgraphs = true;
  /// Symbol name of the entry graph.
  std::string name = "main";
  /// The name prefix that weights created inside the function are relative to (the seed's
  /// `prefix`): `{.prefix = "encoder"}` makes `weight("w")` `encoder.w`, and `layers.0`
  /// inside `name_scope("layers.0")` `encoder.layers.0.w`. The full names are in the
  /// printed module, so `kiln run` needs nothing else. Empty: none.
  std::string prefix{};
  /// Where `as_subgraph` bodies are looked up and stored across `stage` calls (see
  /// `SubgraphCache`); null: a table of this call's own.
  SubgraphCache* subgraph_cache = nullptr;
};

/// The result of staging: the module, and the layouts and trees of inputs and outputs.
class StagedGraph {
 public:
  StagedGraph(ir::Module module, std::vector<TensorLayout> in_layouts, TreeDef in_tree,
              std::vector<TensorLayout> out_layouts, TreeDef out_tree)
      : module_(std::make_shared<const ir::Module>(std::move(module))),
        in_layouts_(std::move(in_layouts)),
        in_tree_(std::move(in_tree)),
        out_layouts_(std::move(out_layouts)),
        out_tree_(std::move(out_tree)) {}

  /// A module that was not staged here (parsed from text, built by hand) as a staged
  /// graph whose arguments are the entry graph's arguments, in order (leaf paths `0`, `1`,
  /// ...), and whose results are the entry's results.
  /// \throws UserError when the module does not verify (the verifier's message).
  static StagedGraph from_module(ir::Module module);

  /// The module: the entry graph and every subgraph.
  const ir::Module& graph() const noexcept { return *module_; }
  /// The same module, shared: copies of a staged graph share one (it never changes), so
  /// that copying a staged graph of 10^6 ops costs no second module.
  const std::shared_ptr<const ir::Module>& shared_graph() const noexcept { return module_; }
  /// Layouts of the tensor leaves of the inputs, in leaf order.
  const std::vector<TensorLayout>& in_layouts() const noexcept { return in_layouts_; }
  /// Structure of the arguments (a tuple, one child per parameter), static values included.
  const TreeDef& in_tree() const noexcept { return in_tree_; }
  const std::vector<TensorLayout>& out_layouts() const noexcept { return out_layouts_; }
  const TreeDef& out_tree() const noexcept { return out_tree_; }
  /// The MLIR text of the module.
  std::string str() const { return module_->str(); }
  /// The devices (indices of `cpu:N`) whose values take part in a collective or transfer,
  /// ascending: the devices that need signal buffers. On the CPU, a compiled callable
  /// owns them (one cache line per device and communicator), so they are not inputs.
  std::vector<int> signal_device_ids() const;
  /// Where the signal buffers start among the graph's inputs (the seed's
  /// `signal_buffer_index`): always none in kiln. On the CPU the compiled callable owns
  /// the signal buffers; on CUDA kiln's collectives go through NCCL, which needs none (and
  /// a compiled graph on CUDA runs one device). The inputs are the layouts' shards only.
  std::optional<std::size_t> signal_buffer_index() const noexcept { return std::nullopt; }

 private:
  std::shared_ptr<const ir::Module> module_;
  std::vector<TensorLayout> in_layouts_;
  TreeDef in_tree_;
  std::vector<TensorLayout> out_layouts_;
  TreeDef out_tree_;
};

std::ostream& operator<<(std::ostream& os, const StagedGraph& staged);

/// Declares a named external weight while staging. The name is relative to the current
/// prefix (`name_scope`, `as_subgraph` prefixes): `weight("w1", ...)` inside scope
/// `layers.3.mlp` is `layers.3.mlp.w1`. \throws UserError outside staging.
Tensor weight(const std::string& name, TensorLayout layout, Loc where = Loc::current());

/// Prefixes the names of weights declared while it lives (`name_scope s("layers.3");`).
/// Scopes nest with dots.
class [[nodiscard]] name_scope {
 public:
  explicit name_scope(const std::string& name);
  ~name_scope();
  name_scope(const name_scope&) = delete;
  name_scope& operator=(const name_scope&) = delete;

 private:
  std::size_t saved_;
};

/// Options of `as_subgraph`.
struct SubgraphOptions {
  /// Symbol name of the body; callables sharing a name share bodies (with equal trees and
  /// operand types): naming is your promise that they compute the same. Empty: bodies are
  /// shared by calls of the same code, named `@subgraph`, `@subgraph_1`, ... The code is
  /// the function for a function pointer (its address), the type for a lambda or function
  /// object without state, and the object returned by `as_subgraph` (and its copies) for
  /// one with state (captures, fields, a `std::function`): wrap it once and call the
  /// wrapper wherever it repeats, or name it.
  std::string name{};
  /// Prefix for the weight names of this call (`layers.3`): the body's weights are named
  /// relative to it, so layers differing only by prefix share one body.
  std::string prefix{};
};

namespace detail {

/// True when the last of \p A is a SourceLocation: the callable takes its call site.
template <class... A>
constexpr bool ends_with_location() {
  if constexpr (sizeof...(A) == 0) {
    return false;
  } else {
    return std::is_same_v<std::decay_t<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>>,
                          SourceLocation>;
  }
}
template <class Tuple, class Indices>
struct FirstOf;
template <class Tuple, std::size_t... I>
struct FirstOf<Tuple, std::index_sequence<I...>> {
  using type = std::tuple<std::tuple_element_t<I, Tuple>...>;
};

/// The signature of a callable with one `operator()` or of a function (pointer). A last
/// parameter of type SourceLocation (kiln::nn's layers have one) is not an argument:
/// `stage` and `as_subgraph` pass their own call site for it (`located`).
template <class F>
struct Signature : Signature<decltype(&F::operator())> {};
template <class R, class... A>
struct Signature<R (*)(A...)> {
  using Result = R;
  static constexpr bool located = ends_with_location<A...>();
  using Args = typename FirstOf<std::tuple<std::decay_t<A>...>,
                                std::make_index_sequence<sizeof...(A) - (located ? 1 : 0)>>::type;
};
template <class R, class... A>
struct Signature<R(A...)> : Signature<R (*)(A...)> {};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...) const> : Signature<R (*)(A...)> {};
template <class C, class R, class... A>
struct Signature<R (C::*)(A...)> : Signature<R (*)(A...)> {};

/// Calls \p fn with the tuple \p args, and \p where last if \p fn takes its call site.
template <class F, class Tuple>
decltype(auto) apply_at(const F& fn, Tuple&& args, const SourceLocation& where) {
  if constexpr (Signature<F>::located) {
    return std::apply(
        [&](auto&&... a) -> decltype(auto) { return fn(std::forward<decltype(a)>(a)..., where); },
        std::forward<Tuple>(args));
  } else {
    (void)where;
    return std::apply(fn, std::forward<Tuple>(args));
  }
}

/// The call operator of `Subgraph<F>`: F's parameters, then the caller's location (which
/// a variadic template could not take).
template <class Self, class Args>
class SubgraphCallOperator;
template <class Self, class... P>
class SubgraphCallOperator<Self, std::tuple<P...>> {
 public:
  /// Calls the subgraph (see `Subgraph`); \p where is the call op's location.
  auto operator()(const P&... args, SourceLocation where = SourceLocation::current()) const {
    return static_cast<const Self&>(*this).call(where, args...);
  }
};

/// One staging run (the entry graph's frame and everything the module collects).
class Session {
 public:
  explicit Session(const StageOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Graph arguments for the input leaves (placeholders; constants are also accepted and
  /// become arguments of their layout). \throws UserError for an empty tensor or a traced
  /// one, naming the leaf path.
  std::vector<Tensor> add_inputs(const std::vector<Tensor>& leaves, const TreeDef& tree);
  /// Sets the outputs, verifies the module and returns the staged graph.
  StagedGraph finish(TreeDef in_tree, const std::vector<Tensor>& in_leaves, TreeDef out_tree,
                     const std::vector<Tensor>& out_leaves);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The subgraph machinery behind `Subgraph::operator()`.
struct SubgraphCall {
  const std::type_info* callable;
  std::uint64_t instance;  // with the type, which code: see SubgraphOptions::name
  const SubgraphOptions* options;
  TreeDef in_tree;
  std::vector<Tensor> in_leaves;
  SourceLocation where;
};
/// Looks the body up (or traces it with \p trace, which receives the body's input
/// tensors and returns the output leaves, tree and a prototype of the result), emits the
/// call, and returns the call's results with the prototype to rebuild the result.
struct SubgraphResult {
  std::vector<Tensor> leaves;
  const std::any* prototype;
};
/// A non-owning reference to the body-tracing callable (no allocation per call site).
class TraceBody {
 public:
  using Result = std::pair<std::vector<Tensor>, TreeDef>;
  template <class F>
  TraceBody(const F& f)  // NOLINT(google-explicit-constructor)
      : object_(&f), call_([](const void* o, const std::vector<Tensor>& in, std::any& proto) {
          return (*static_cast<const F*>(o))(in, proto);
        }) {}
  Result operator()(const std::vector<Tensor>& inputs, std::any& prototype) const {
    return call_(object_, inputs, prototype);
  }

 private:
  const void* object_;
  Result (*call_)(const void*, const std::vector<Tensor>&, std::any&);
};
SubgraphResult call_subgraph(SubgraphCall call, const TraceBody& trace);
/// True while staging with subgraphs on.
bool subgraphs_enabled();
/// A number no other call has returned in this process (stateful callables' instances).
std::uint64_t next_subgraph_instance() noexcept;
/// What, with its type, identifies the code of subgraph callable \p fn.
template <class F>
std::uint64_t subgraph_instance(const F& fn) {
  if constexpr (std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>) {
    return reinterpret_cast<std::uintptr_t>(fn);  // the function
  } else if constexpr (std::is_empty_v<F> && !std::is_polymorphic_v<F>) {
    return 0;  // the type alone says what it computes
  } else {
    return next_subgraph_instance();  // state: this object (and its copies)
  }
}

}  // namespace detail

/// The callable `stage(fn)` returns: call it with the inputs' layouts.
template <class F>
class Stager {
 public:
  Stager(F fn, StageOptions options, SourceLocation where = {})
      : fn_(std::move(fn)), options_(std::move(options)), where_(where) {}

  /// Traces the function. Pass, for each parameter, a value of its type in which every
  /// tensor is a placeholder (`TensorLayout` converts to one); other values are static.
  template <class... A>
  StagedGraph operator()(A&&... args) const {
    using Sig = detail::Signature<F>;
    using Args = typename Sig::Args;
    static_assert(std::tuple_size_v<Args> == sizeof...(A),
                  "stage(fn)(...): pass one value per parameter of fn");
    detail::Session session(options_);
    const Args inputs(std::forward<A>(args)...);
    std::vector<Tensor> in_leaves;
    TreeDef in_tree = tree_flatten(inputs, in_leaves);
    const Args traced_args = tree_replace_leaves(inputs, session.add_inputs(in_leaves, in_tree));
    auto result = detail::apply_at(fn_, traced_args, where_);
    std::vector<Tensor> out_leaves;
    TreeDef out_tree = tree_flatten(result, out_leaves);
    return session.finish(std::move(in_tree), in_leaves, std::move(out_tree), out_leaves);
  }

 private:
  F fn_;
  StageOptions options_;
  SourceLocation where_;  // passed to a callable that takes its call site
};

/// Returns a callable that traces \p fn into a `StagedGraph` when called with the
/// inputs' layouts. \p fn must have one signature (no generic lambdas); its parameters and
/// result may be tensor trees (see `kiln/stage/tree.hpp`). A callable whose last parameter
/// is a SourceLocation (a kiln::nn layer) gets \p where, this call's site.
template <class F>
Stager<std::decay_t<F>> stage(F&& fn, StageOptions options = {},
                              SourceLocation where = SourceLocation::current()) {
  return Stager<std::decay_t<F>>(std::forward<F>(fn), std::move(options), where);
}

/// A callable that, while staging, traces \p fn once per distinct key (callable identity
/// or shared name, argument tree, operand types, prefix presence) into a subgraph, and
/// emits a call to it at every call site. It takes \p fn's parameters (a last
/// SourceLocation parameter excepted) and records its caller's location on the call op;
/// a callable that takes its call site (a kiln::nn layer) gets the first call's, which
/// traced the body.
template <class F>
class Subgraph
    : public detail::SubgraphCallOperator<Subgraph<F>, typename detail::Signature<F>::Args> {
 public:
  Subgraph(F fn, SubgraphOptions options)
      : fn_(std::move(fn)),
        options_(std::move(options)),
        instance_(detail::subgraph_instance(fn_)) {}

 private:
  friend class detail::SubgraphCallOperator<Subgraph<F>, typename detail::Signature<F>::Args>;

  template <class... A>
  auto call(const SourceLocation& where, const A&... args) const {
    using Sig = detail::Signature<F>;
    using Result = std::decay_t<typename Sig::Result>;
    using Args = typename Sig::Args;
    const Args inputs(args...);
    if (!detail::subgraphs_enabled()) {
      if (options_.prefix.empty()) return Result(detail::apply_at(fn_, inputs, where));
      name_scope scope(options_.prefix);
      return Result(detail::apply_at(fn_, inputs, where));
    }
    detail::SubgraphCall call{&typeid(F), instance_, &options_, {}, {}, where};
    call.in_tree = tree_flatten(inputs, call.in_leaves);
    const auto trace = [&](const std::vector<Tensor>& body_inputs, std::any& prototype) {
      Result result = detail::apply_at(fn_, tree_replace_leaves(inputs, body_inputs), where);
      std::vector<Tensor> out_leaves;
      TreeDef out_tree = tree_flatten(result, out_leaves);
      prototype = result;
      return std::make_pair(std::move(out_leaves), std::move(out_tree));
    };
    const detail::SubgraphResult called = detail::call_subgraph(std::move(call), trace);
    return tree_replace_leaves(std::any_cast<const Result&>(*called.prototype), called.leaves);
  }

  F fn_;
  SubgraphOptions options_;
  std::uint64_t instance_;
};

/// Wraps \p fn so that calls while staging become calls of a shared subgraph.
template <class F>
Subgraph<std::decay_t<F>> as_subgraph(F&& fn, SubgraphOptions options = {}) {
  return Subgraph<std::decay_t<F>>(std::forward<F>(fn), std::move(options));
}

}  // namespace kiln
