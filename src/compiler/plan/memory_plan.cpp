// Liveness and arena offsets of a plan's values (see memory_plan.hpp).

#include "compiler/plan/memory_plan.hpp"

#include <algorithm>
#include <cstdint>

#include "core/str.hpp"

namespace kiln::compiler {

using detail::cat;

std::size_t ArenaAllocator::allocate(std::size_t bytes) {
  bytes = std::max<std::size_t>(kArenaAlign, (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign);
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->second >= bytes) {
      const std::size_t at = it->first;
      if (it->second == bytes) {
        free_.erase(it);
      } else {
        it->first += bytes;
        it->second -= bytes;
      }
      return at;
    }
  const std::size_t at = end_;
  // Saturates: an arena past 2^64 bytes is refused by the size check that follows.
  end_ = bytes > SIZE_MAX - end_ ? SIZE_MAX : end_ + bytes;
  return at;
}

void ArenaAllocator::release(std::size_t at, std::size_t bytes) {
  bytes = std::max<std::size_t>(kArenaAlign, (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign);
  auto it = std::lower_bound(free_.begin(), free_.end(), std::make_pair(at, std::size_t{0}));
  it = free_.insert(it, {at, bytes});
  if (std::next(it) != free_.end() && it->first + it->second == std::next(it)->first) {
    it->second += std::next(it)->second;
    free_.erase(std::next(it));
  }
  if (it != free_.begin() && std::prev(it)->first + std::prev(it)->second == it->first) {
    std::prev(it)->second += it->second;
    free_.erase(it);
  }
}

std::string arena_too_big(const Plan& plan, std::size_t bytes, std::size_t machine) {
  const auto gib = [](std::size_t b) { return cat(static_cast<double>(b) / (1u << 30), " GiB"); };
  std::size_t largest = 0, most = 0;  // among the values in the arena
  for (std::size_t s = 0; s < plan.storage.size(); ++s)
    if (plan.storage[s].arena_offset >= 0 && plan.storage[s].bytes > most) {
      largest = s;
      most = plan.storage[s].bytes;
    }
  const Storage& big = plan.storage[largest];
  return cat(
      "CompiledCallable: these input shapes need ", gib(bytes),
      " for the values of one call, more than ",
      machine != 0 && bytes > machine ? cat("this machine's memory and swap (", gib(machine), ")")
                                      : std::string("could be allocated"),
      "; the largest is ", big.dtype, "[", detail::join(big.shape, ", "), "] (", gib(big.bytes),
      ")",
      big.producer >= 0 ? cat(", made by ", plan.labels[static_cast<std::size_t>(big.producer)])
                        : std::string(", an input"),
      "; call it with smaller inputs");
}

ArenaSizes place_values(Plan& plan, std::size_t devices) {
  std::vector<ArenaAllocator> arenas(devices), kept_arenas(devices);  // one of each per device
  const auto release = [&](std::size_t s) {
    const Storage& st = plan.storage[s];
    arenas[st.device].release(static_cast<std::size_t>(st.arena_offset), st.bytes);
  };
  const std::size_t n = plan.launches.size();
  std::vector<std::size_t> last_use(plan.storage.size(), 0);
  std::vector<bool> keep(plan.storage.size(), false);
  for (std::size_t s : plan.outputs) keep[s] = true;
  for (std::size_t s = 0; s < plan.storage.size(); ++s)
    for (std::size_t r : plan.storage[s].readers) last_use[s] = std::max(last_use[s], r);
  std::vector<std::vector<std::size_t>> free_after(n);
  // Inputs live from the start to their last use (or the end when they are outputs).
  const auto place = [&](std::size_t s) {
    Storage& st = plan.storage[s];
    st.arena_offset = static_cast<std::int64_t>(arenas[st.device].allocate(st.bytes));
  };
  // Invariant launches' outputs in the kept arena, for the plan's life: they are written
  // once, when the plan is recorded, so no value of a call may share their bytes (nor, as
  // the call arena may be shared, a value of another plan's call).
  // (Plans made by hand, in tests, may leave `invariant` empty: none.)
  const auto invariant = [&](std::size_t i) {
    return i < plan.invariant.size() && plan.invariant[i];
  };
  for (std::size_t i = 0; i < n; ++i)
    if (invariant(i) && !plan.is_view[i])
      for (std::size_t s : plan.out(i)) {
        Storage& st = plan.storage[s];
        st.arena_offset = static_cast<std::int64_t>(kept_arenas[st.device].allocate(st.bytes));
        st.kept = true;
        keep[s] = true;
      }
  for (std::size_t s : plan.inputs) place(s);
  for (std::size_t s : plan.inputs)
    if (!keep[s] && !plan.storage[s].readers.empty()) free_after[last_use[s]].push_back(s);
  for (std::size_t i = 0; i < n; ++i) {
    if (plan.is_view[i]) {  // places nothing: its result is its input's bytes
      for (std::size_t s : free_after[i]) release(s);
      continue;
    }
    if (invariant(i)) {  // placed above
      for (std::size_t s : free_after[i]) release(s);
      continue;
    }
    for (std::size_t s : plan.out(i)) {
      place(s);
      if (!keep[s]) {
        if (plan.storage[s].readers.empty()) {
          free_after[i].push_back(s);
        } else {
          free_after[last_use[s]].push_back(s);
        }
      }
    }
    for (std::size_t s : free_after[i]) release(s);
  }
  ArenaSizes sizes;
  for (const ArenaAllocator& a : arenas) sizes.call.push_back(std::max(a.peak(), kArenaAlign));
  for (const ArenaAllocator& a : kept_arenas) sizes.kept.push_back(a.peak());
  return sizes;
}

}  // namespace kiln::compiler
