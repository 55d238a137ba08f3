#include "kiln/runtime/device_graph_cache.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <list>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "core/str.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/runtime/launch.hpp"

namespace kiln {
namespace detail {

std::string buffer_key(const void* data, std::size_t count, DType dtype) {
  std::ostringstream out;
  out << data << " x " << count << ' ' << name(dtype);
  return out.str();
}

}  // namespace detail

void write_graph_key(DeviceGraphKey& key, DType value) { key.add("DType", name(value)); }
void write_graph_key(DeviceGraphKey& key, const Shape& value) { key.add("Shape", value.str()); }
void write_graph_key(DeviceGraphKey& key, const Dim3& value) {
  key.add("Dim3", detail::cat(value));
}

namespace {

std::string demangle(const std::type_info& type) {
  int status = 0;
  char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && readable != nullptr ? readable : type.name();
  std::free(readable);  // NOLINT(cppcoreguidelines-no-malloc): the demangler's contract
  return out;
}

// One string that is equal for two keys exactly when the keys are equal: every part is
// length-prefixed so no choice of field text can make two different keys collide.
std::string encode(const DeviceGraphKey& key) {
  std::string out =
      detail::cat(key.build_type()->name(), '|', key.build_address(), '|', key.context(), '|');
  for (const DeviceGraphKey::Field& f : key.fields())
    out += detail::cat(f.name.size(), ':', f.name, f.value.size(), ':', f.value);
  return out;
}

struct Entry {
  std::string encoded;
  const std::type_info* build;
  const void* build_address;
  const void* context;
  std::vector<DeviceGraphKey::Field> fields;
  DeviceGraph graph;
};

}  // namespace

struct DeviceGraphCache::State {
  mutable std::mutex mutex;
  std::list<Entry> entries;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  std::size_t hits = 0;
  std::size_t misses = 0;
  std::size_t evictions = 0;
  std::string last_miss;

  std::string explain(const DeviceGraphKey& key) const {
    std::string build = demangle(*key.build_type());
    if (key.build_address() != nullptr) build += detail::cat(" at ", key.build_address());
    const Entry* nearest = nullptr;
    std::size_t nearest_equal = 0;
    std::size_t same_build = 0;
    for (const Entry& e : entries) {
      if (*e.build != *key.build_type() || e.build_address != key.build_address()) continue;
      ++same_build;
      if (e.context != key.context()) continue;
      std::size_t equal = 0;
      for (std::size_t i = 0; i < e.fields.size() && i < key.fields().size(); ++i)
        equal += e.fields[i] == key.fields()[i] ? 1 : 0;
      if (nearest == nullptr || equal > nearest_equal) {
        nearest = &e;
        nearest_equal = equal;
      }
    }
    std::string why = detail::cat("DeviceGraphCache miss for build callable '", build, "': ");
    if (nearest == nullptr) {
      why += same_build == 0
                 ? detail::cat("no graph of this build callable is cached (the cache holds ",
                               entries.size(), " graphs of other build callables)")
                 : detail::cat("no graph of this build callable is cached for this context (",
                               same_build, " are cached for other contexts)");
      if (evictions > 0)
        why += detail::cat("; ", evictions, " graphs were evicted to stay within the capacity");
      return why;
    }
    const std::vector<DeviceGraphKey::Field>& mine = key.fields();
    const std::vector<DeviceGraphKey::Field>& theirs = nearest->fields;
    std::vector<std::string> differences;
    for (std::size_t i = 0; i < mine.size() || i < theirs.size(); ++i) {
      if (i >= theirs.size()) {
        differences.push_back(detail::cat(mine[i].name, " is ", mine[i].value,
                                          " here but absent in the nearest cached graph"));
      } else if (i >= mine.size()) {
        differences.push_back(detail::cat(theirs[i].name, " (", theirs[i].value,
                                          ") of the nearest cached graph is absent here"));
      } else if (mine[i].name != theirs[i].name) {
        differences.push_back(detail::cat("field ", i, " is ", mine[i].name, " here but ",
                                          theirs[i].name, " in the nearest cached graph"));
      } else if (mine[i].value != theirs[i].value) {
        differences.push_back(detail::cat(mine[i].name, " is ", mine[i].value, " here but ",
                                          theirs[i].value, " in the nearest cached graph"));
      }
    }
    return why + detail::join(differences, "; ");
  }
};

DeviceGraphCache::DeviceGraphCache(std::size_t capacity)
    : capacity_(capacity), state_(std::make_unique<State>()) {}
DeviceGraphCache::~DeviceGraphCache() = default;

std::size_t DeviceGraphCache::hits() const {
  std::scoped_lock lock(state_->mutex);
  return state_->hits;
}
std::size_t DeviceGraphCache::misses() const {
  std::scoped_lock lock(state_->mutex);
  return state_->misses;
}
std::size_t DeviceGraphCache::size() const {
  std::scoped_lock lock(state_->mutex);
  return state_->entries.size();
}
std::size_t DeviceGraphCache::evictions() const {
  std::scoped_lock lock(state_->mutex);
  return state_->evictions;
}
std::string DeviceGraphCache::last_miss() const {
  std::scoped_lock lock(state_->mutex);
  return state_->last_miss;
}

void DeviceGraphCache::clear() {
  std::list<Entry> dropped;  // graphs are released outside the lock
  std::scoped_lock lock(state_->mutex);
  state_->index.clear();
  dropped.swap(state_->entries);
}

std::optional<DeviceGraph> DeviceGraphCache::find(const DeviceGraphKey& key) {
  const std::string encoded = encode(key);
  std::scoped_lock lock(state_->mutex);
  auto it = state_->index.find(encoded);
  if (it == state_->index.end()) {
    ++state_->misses;
    state_->last_miss = state_->explain(key);
    return std::nullopt;
  }
  ++state_->hits;
  state_->entries.splice(state_->entries.begin(), state_->entries, it->second);
  return it->second->graph;
}

DeviceGraph DeviceGraphCache::insert(const DeviceGraphKey& key, DeviceGraph graph) {
  std::string encoded = encode(key);
  std::list<Entry> evicted;  // released after the lock
  std::scoped_lock lock(state_->mutex);
  auto it = state_->index.find(encoded);
  if (it != state_->index.end()) return it->second->graph;
  state_->entries.push_front(
      Entry{encoded, key.build_type(), key.build_address(), key.context(), key.fields(), graph});
  state_->index.emplace(std::move(encoded), state_->entries.begin());
  while (capacity_ != 0 && state_->entries.size() > capacity_) {
    state_->index.erase(state_->entries.back().encoded);
    evicted.splice(evicted.begin(), state_->entries, std::prev(state_->entries.end()));
    ++state_->evictions;
  }
  return graph;
}

}  // namespace kiln
