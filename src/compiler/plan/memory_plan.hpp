#pragma once
// Internal: where each value of a plan lives during a call. Values are placed in one arena
// per device by liveness: a value takes a place when its launch runs and gives it back
// after its last reader, so later values reuse it. Invariant launches' outputs take places
// in a second arena per device, the plan's own, for the plan's life. Linear in the launches
// (first-fit over the free places, which stay few in programs that free as they go).

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "compiler/plan/plan.hpp"

namespace kiln::compiler {

/// Every place is a multiple of this many bytes, at a multiple of it.
constexpr std::size_t kArenaAlign = 64;

/// First-fit allocation of places in one arena, with coalescing frees.
class ArenaAllocator {
 public:
  /// The offset of a new place of \p bytes (rounded up to kArenaAlign; at least that).
  std::size_t allocate(std::size_t bytes);
  /// Gives back the place of \p bytes at \p at (as allocated).
  void release(std::size_t at, std::size_t bytes);
  /// The arena's size so far: the end of the last place it ever gave (saturating at 2^64).
  std::size_t peak() const { return end_; }

 private:
  std::vector<std::pair<std::size_t, std::size_t>> free_;  // (offset, bytes), by offset
  std::size_t end_ = 0;
};

/// The sizes of each device's two arenas (both multiples of kArenaAlign).
struct ArenaSizes {
  /// Per device: the values of one call, at least kArenaAlign. Calls of a callable never
  /// overlap, so its plans may share this memory (see Lowering::call_arena).
  std::vector<std::size_t> call;
  /// Per device: the invariant launches' outputs (`Storage::kept`), written once when the
  /// plan is recorded and read by every call of that plan: the plan's own. 0: none.
  std::vector<std::size_t> kept;
};

/// Places every arena value of \p plan (storage with `arena_offset >= 0`, not a view): sets
/// their `arena_offset`, and `kept` for invariant launches' outputs, which go to the kept
/// arena for the plan's life. Inputs live from the start to their last reader, outputs to
/// the end, every other value from its launch to its last reader (a value nobody reads: to
/// the end of its own launch). \returns the sizes of the \p devices arenas of each kind.
ArenaSizes place_values(Plan& plan, std::size_t devices);

/// The error for an arena of \p bytes that cannot be allocated: how much, against \p
/// machine (memory and swap; 0: unknown), and the largest value in it, by the launch that
/// makes it (attention's scores, say, at a long sequence).
std::string arena_too_big(const Plan& plan, std::size_t bytes, std::size_t machine);

}  // namespace kiln::compiler
