#pragma once
/// \file
/// `DeviceGraphCache`: instantiated device graphs kept by key, so that
/// `DeviceGraph::create(ctx, build, cache, inputs...)` builds each distinct graph once.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>

#include "kiln/runtime/device_graph.hpp"
#include "kiln/runtime/device_graph_key.hpp"

namespace kiln {

/// A thread-safe map from `DeviceGraphKey` to instantiated `DeviceGraph`, optionally
/// bounded (least recently used graphs are dropped first).
///
/// The key of a `create` call is the type of its build callable, its context, and the key
/// of each input; on a hit the stored graph is returned and `build` is not called. The
/// cache holds a copy of each graph (so its context) until the graph is evicted or the
/// cache is cleared or destroyed. When a miss surprises you, `last_miss()` says which part
/// of the key differed from the nearest stored key.
///
/// \code
///   kiln::DeviceGraphCache cache;
///   auto build = [&](kiln::DeviceGraphBuilder& b) { b.add_function(fn, {1, 1}, {}); };
///   auto graph = kiln::DeviceGraph::create(ctx, build, cache);
///   auto same = kiln::DeviceGraph::create(ctx, build, cache);  // a hit: build not called
/// \endcode
class DeviceGraphCache {
 public:
  /// \p capacity: the most graphs kept; 0 keeps every graph.
  explicit DeviceGraphCache(std::size_t capacity = 0);
  DeviceGraphCache(const DeviceGraphCache&) = delete;
  DeviceGraphCache& operator=(const DeviceGraphCache&) = delete;
  ~DeviceGraphCache();

  /// Lookups that found a graph.
  std::size_t hits() const;
  /// Lookups that found none (each one built a graph).
  std::size_t misses() const;
  /// Graphs stored now.
  std::size_t size() const;
  /// The bound given at construction (0: unbounded).
  std::size_t capacity() const noexcept { return capacity_; }
  /// Graphs dropped to stay within the capacity.
  std::size_t evictions() const;
  /// Drops every graph; the counters stay.
  void clear();

  /// Why the most recent miss missed: the fields of its key that differ from the nearest
  /// stored key (the one of the same build callable and context sharing most fields), or
  /// that no graph of that build callable and context is stored. Empty before any miss.
  std::string last_miss() const;

  /// Looks \p key up, counting a hit or a miss. A miss of a key that keeps names
  /// (`DeviceGraphKey::named()`) is explained at once; one of a key without names is
  /// explained by the `insert` that follows it. A hit allocates nothing.
  std::optional<DeviceGraph> find(const DeviceGraphKey& key);
  /// Stores \p graph under \p key and returns it; if another thread stored a graph under
  /// the same key meanwhile, returns that one instead so every caller shares one graph.
  /// A new key is explained in `last_miss()` when the miss before it was not.
  DeviceGraph insert(const DeviceGraphKey& key, DeviceGraph graph);

 private:
  struct State;
  std::size_t capacity_;
  std::unique_ptr<State> state_;
};

template <class Build, DeviceGraphInput... Inputs>
requires std::is_invocable_v<Build&, DeviceGraphBuilder&> DeviceGraph DeviceGraph::create(
    const DeviceContext& ctx, Build&& build, DeviceGraphCache& cache, const Inputs&... inputs) {
  const detail::BuildIdentity identity = detail::build_identity<std::decay_t<Build>>(build);
  const auto fill = [&](DeviceGraphKey& key) {
    key.build_ = identity.type;
    key.build_address_ = identity.address;
    key.context_ = ctx.backend().get();
    std::size_t index = 0;
    const auto input = [&key, &index](const auto& value) {
      auto scope = key.scope("input ", index++);
      write_graph_key(key, value);
    };
    (input(inputs), ...);
    (void)input;  // unused when there are no inputs
  };
  DeviceGraphKey key{DeviceGraphKey::Unnamed{}};  // a lookup: no names, no allocation
  fill(key);
  if (std::optional<DeviceGraph> hit = cache.find(key)) return *std::move(hit);
  DeviceGraphKey named;  // a miss: the names explain it and stay with the stored graph
  fill(named);
  return cache.insert(named, create(ctx, build));
}

}  // namespace kiln
