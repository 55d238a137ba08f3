// Large blocks for graph-node arrays, kept after they are freed (see device_graph.hpp).

#include <array>
#include <bit>
#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

#include "kiln/runtime/device_graph.hpp"

namespace kiln::detail {
namespace {

constexpr std::size_t kSmallest = std::size_t{64} << 10;   // below: plain operator new
constexpr std::size_t kKeptBytes = std::size_t{64} << 20;  // freed blocks kept, in all
constexpr std::size_t kClasses = 27;                       // 2^26 = kKeptBytes is the largest class

// Blocks of 64 KiB and up are rounded up to a power of two; each class keeps a few freed
// blocks. One mutex: blocks this size are taken once per graph build, not per node.
struct Recycler {
  std::mutex mutex;
  std::array<std::vector<void*>, kClasses> free;
  std::size_t kept = 0;
};

Recycler& recycler() {
  static auto* r = new Recycler;  // never destroyed: graphs may be freed at exit
  return *r;
}

std::size_t class_of(std::size_t bytes) { return std::bit_width(bytes - 1); }

/// Blocks kept for reuse: from 64 KiB up to the most that is kept in all (larger ones
/// could never be kept, so they are neither rounded up nor remembered).
bool recyclable(std::size_t bytes) { return bytes >= kSmallest && bytes <= kKeptBytes; }

}  // namespace

void* recycled_allocate(std::size_t bytes) {
  if (!recyclable(bytes)) return ::operator new(bytes);
  const std::size_t c = class_of(bytes);
  {
    Recycler& r = recycler();
    std::scoped_lock lock(r.mutex);
    if (!r.free[c].empty()) {
      void* block = r.free[c].back();
      r.free[c].pop_back();
      r.kept -= std::size_t{1} << c;
      return block;
    }
  }
  return ::operator new (std::size_t{1} << c);
}

void recycled_free(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  if (!recyclable(bytes)) {
    ::operator delete(block);
    return;
  }
  const std::size_t c = class_of(bytes);
  const std::size_t size = std::size_t{1} << c;
  {
    Recycler& r = recycler();
    std::scoped_lock lock(r.mutex);
    if (r.kept + size <= kKeptBytes && r.free[c].size() < 4) {
      try {
        r.free[c].push_back(block);
        r.kept += size;
        return;
      } catch (...) {  // no room to remember it: free it
      }
    }
  }
  ::operator delete(block);
}

}  // namespace kiln::detail
