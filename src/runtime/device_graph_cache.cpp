#include "kiln/runtime/device_graph_cache.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
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

DeviceGraphKey::Scope::Scope(DeviceGraphKey& key, std::string_view label, std::size_t index,
                             std::string_view tail, bool indexed)
    : key_(key), saved_(key.prefix_.size()) {
  key_.append_tag(kOpen);
  key_.append_text(label);
  key_.append_count(indexed ? index + 1 : 0);
  key_.append_text(tail);
  if (!key_.named_) return;
  key_.prefix_ += label;
  if (indexed) key_.prefix_ += std::to_string(index);
  key_.prefix_ += tail;
}

DeviceGraphKey& DeviceGraphKey::operator=(const DeviceGraphKey& other) {
  if (this == &other) return *this;
  std::memcpy(inline_bytes_, other.inline_bytes_, std::min(other.size_, kInline));
  size_ = other.size_;
  heap_ = other.heap_;
  named_ = other.named_;
  fields_ = other.fields_;
  prefix_ = other.prefix_;
  build_ = other.build_;
  build_address_ = other.build_address_;
  context_ = other.context_;
  return *this;
}

void DeviceGraphKey::grow(std::size_t n) {
  if (heap_.empty()) heap_.assign(inline_bytes_, inline_bytes_ + size_);
  heap_.resize(std::max(heap_.size() * 2, size_ + n));
}

void DeviceGraphKey::name_field(std::string_view type, std::string_view value) {
  fields_.push_back({prefix_.empty() ? std::string(type) : prefix_ + ": " + std::string(type),
                     std::string(value)});
}

std::uint64_t DeviceGraphKey::hash() const noexcept {
  // FNV-1a over 8-byte words (then the tail), mixed with the identities: cheap for the
  // few dozen bytes a key has, and every byte counts.
  constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto mix = [&h](std::uint64_t word) { h = (h ^ word) * kPrime; };
  const std::string_view b = bytes();
  std::size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, b.data() + i, 8);
    mix(word);
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, b.data() + i, b.size() - i);
  mix(tail ^ (static_cast<std::uint64_t>(b.size()) << 56));
  mix(reinterpret_cast<std::uintptr_t>(build_address_));
  mix(reinterpret_cast<std::uintptr_t>(context_));
  return h ^ (h >> 29);
}

void write_graph_key(DeviceGraphKey& key, DType value) {
  key.add_bits("DType", static_cast<std::uint64_t>(value),
               [&] { return std::string(name(value)); });
}

void write_graph_key(DeviceGraphKey& key, const Shape& value) {
  // Each dim as its size (8 bytes), a symbolic one followed by its text and a NUL.
  char local[256];
  std::string spill;
  std::size_t n = 0;
  const auto put = [&](const void* data, std::size_t size) {
    if (spill.empty() && n + size <= sizeof local) {
      std::memcpy(local + n, data, size);
    } else {
      if (spill.empty()) spill.assign(local, n);
      spill.append(static_cast<const char*>(data), size);
    }
    n += size;
  };
  for (std::size_t axis = 0; axis < value.rank(); ++axis) {
    const Dim& d = value[axis];
    const std::int64_t size = d.is_static() ? d.size() : -1;
    put(&size, sizeof size);
    if (!d.is_static()) put(d.symbol().c_str(), d.symbol().size() + 1);
  }
  key.add_bytes("Shape", spill.empty() ? std::string_view(local, n) : std::string_view(spill),
                [&] { return value.str(); });
}

void write_graph_key(DeviceGraphKey& key, const Dim3& value) {
  const std::uint64_t xyz[3] = {value.x, value.y, value.z};
  key.add_bytes("Dim3", std::string_view(reinterpret_cast<const char*>(xyz), sizeof xyz),
                [&] { return detail::cat(value); });
}

namespace {

std::string demangle(const std::type_info& type) {
  int status = 0;
  char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && readable != nullptr ? readable : type.name();
  std::free(readable);  // NOLINT(cppcoreguidelines-no-malloc): the demangler's contract
  return out;
}

/// Whether two build callables are the same type (type_info objects may differ across
/// shared libraries for one type; a key without a build callable has null).
bool same_build_type(const std::type_info* a, const std::type_info* b) {
  return a == b || (a != nullptr && b != nullptr && *a == *b);
}

struct Entry {
  std::uint64_t hash;
  std::string bytes;
  const std::type_info* build;
  const void* build_address;
  const void* context;
  std::vector<DeviceGraphKey::Field> fields;
  DeviceGraph graph;

  bool matches(const DeviceGraphKey& key) const {
    return context == key.context() && build_address == key.build_address() &&
           same_build_type(build, key.build_type()) && bytes == key.bytes();
  }
};

}  // namespace

struct DeviceGraphCache::State {
  mutable std::mutex mutex;
  std::list<Entry> entries;  // most recently used first
  std::unordered_multimap<std::uint64_t, std::list<Entry>::iterator> index;  // by hash
  bool miss_unexplained = false;  // the last miss's key had no names

  std::list<Entry>::iterator lookup(const DeviceGraphKey& key, std::uint64_t hash) {
    auto [begin, end] = index.equal_range(hash);
    for (; begin != end; ++begin)
      if (begin->second->matches(key)) return begin->second;
    return entries.end();
  }
  void unindex(const Entry& e) {
    auto [begin, end] = index.equal_range(e.hash);
    for (; begin != end; ++begin)
      if (&*begin->second == &e) {
        index.erase(begin);
        return;
      }
  }
  std::size_t hits = 0;
  std::size_t misses = 0;
  std::size_t evictions = 0;
  std::string last_miss;

  std::string explain(const DeviceGraphKey& key) const {
    std::string build = key.build_type() != nullptr ? demangle(*key.build_type()) : "(none)";
    if (key.build_address() != nullptr) build += detail::cat(" at ", key.build_address());
    const Entry* nearest = nullptr;
    std::size_t nearest_equal = 0;
    std::size_t same_build = 0;
    for (const Entry& e : entries) {
      if (!same_build_type(e.build, key.build_type()) || e.build_address != key.build_address())
        continue;
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
  const std::uint64_t hash = key.hash();
  std::scoped_lock lock(state_->mutex);
  const auto it = state_->lookup(key, hash);
  if (it == state_->entries.end()) {
    ++state_->misses;
    state_->miss_unexplained = !key.named();
    if (key.named()) state_->last_miss = state_->explain(key);
    return std::nullopt;
  }
  ++state_->hits;
  state_->entries.splice(state_->entries.begin(), state_->entries, it);
  return it->graph;
}

DeviceGraph DeviceGraphCache::insert(const DeviceGraphKey& key, DeviceGraph graph) {
  const std::uint64_t hash = key.hash();
  std::list<Entry> evicted;  // released after the lock
  std::scoped_lock lock(state_->mutex);
  if (const auto it = state_->lookup(key, hash); it != state_->entries.end()) return it->graph;
  if (state_->miss_unexplained) {
    state_->last_miss = state_->explain(key);
    state_->miss_unexplained = false;
  }
  state_->entries.push_front(Entry{hash, std::string(key.bytes()), key.build_type(),
                                   key.build_address(), key.context(), key.fields(), graph});
  state_->index.emplace(hash, state_->entries.begin());
  while (capacity_ != 0 && state_->entries.size() > capacity_) {
    state_->unindex(state_->entries.back());
    evicted.splice(evicted.begin(), state_->entries, std::prev(state_->entries.end()));
    ++state_->evictions;
  }
  return graph;
}

}  // namespace kiln
