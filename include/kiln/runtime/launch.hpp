#pragma once
/// \file
/// Launch geometry (`Dim3`, `LaunchConfig`) and the index functions a kernel calls to find
/// out which block and thread it is: `block_idx()`, `thread_idx()`, `block_dim()`,
/// `grid_dim()`, as in CUDA.

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iosfwd>

namespace kiln {

namespace detail {
[[noreturn]] void throw_bad_dim3_component(long long value);
}  // namespace detail

/// Up to three extents or indices (x fastest). Sizes default to 1 in y and z.
struct Dim3 {
  std::uint32_t x = 1;
  std::uint32_t y = 1;
  std::uint32_t z = 1;

  constexpr Dim3() = default;
  /// \throws UserError if a component is negative or above 2^32-1.
  template <std::integral X, std::integral Y = std::uint32_t, std::integral Z = std::uint32_t>
  Dim3(X x_, Y y_ = 1, Z z_ = 1)  // NOLINT(google-explicit-constructor): `LaunchConfig{4, 256}`
      : x(checked(x_)), y(checked(y_)), z(checked(z_)) {}

  /// x * y * z.
  constexpr std::uint64_t count() const noexcept {
    return std::uint64_t{x} * std::uint64_t{y} * std::uint64_t{z};
  }
  friend constexpr bool operator==(const Dim3&, const Dim3&) = default;

 private:
  template <std::integral T>
  static std::uint32_t checked(T v) {
    if constexpr (std::is_signed_v<T>) {
      if (v < 0) detail::throw_bad_dim3_component(static_cast<long long>(v));
    }
    if (static_cast<unsigned long long>(v) > 0xffffffffull)
      detail::throw_bad_dim3_component(static_cast<long long>(v));
    return static_cast<std::uint32_t>(v);
  }
};

/// `(x, y, z)`.
std::ostream& operator<<(std::ostream& os, const Dim3& d);

/// How many blocks, and how many threads per block, a kernel launch runs, and how many
/// bytes of dynamic shared memory each block gets. Every dimension must be >= 1 (checked
/// when the launch is enqueued).
struct LaunchConfig {
  Dim3 grid_dim;
  Dim3 block_dim;
  /// Bytes of memory shared by the threads of one block for the launch's duration, beyond
  /// what the kernel declares statically: CUDA kernels reach it through `extern
  /// __shared__`, CPU kernels through `dynamic_shared_memory<T>()`. Its contents start
  /// undefined. On CUDA, more than the device's default per-block limit (48 KiB) is
  /// requested from the driver as the kernel is launched, up to the device's opt-in limit
  /// (227 KiB on an H100/H200); beyond it, the launch throws UserError naming the limit.
  std::uint32_t dynamic_shared_bytes = 0;
};

/// How a CPU kernel is invoked.
enum class KernelForm : std::uint8_t {
  /// Called once per thread, as in CUDA: `thread_idx()` varies within a block.
  per_thread,
  /// Called once per block; the kernel loops over the block's work itself
  /// (`thread_idx()` is always (0, 0, 0)). The fast form for bulk loops on the CPU.
  per_block,
};

namespace detail {
/// The indices of the kernel invocation running on this thread.
struct KernelIndices {
  Dim3 block_idx{0u, 0u, 0u};
  Dim3 thread_idx{0u, 0u, 0u};
  Dim3 block_dim;
  Dim3 grid_dim;
  void* dynamic_shared = nullptr;  // the block's dynamic shared memory (CPU kernels)
};
inline thread_local KernelIndices t_kernel_indices;
/// This thread's buffer of at least \p bytes (64-byte aligned) for the dynamic shared
/// memory of the blocks it runs; grows (allocates) only when a launch asks for more.
void* block_shared_memory(std::size_t bytes);
}  // namespace detail

/// Index of the current block in the grid. Valid inside a kernel only.
inline Dim3 block_idx() noexcept { return detail::t_kernel_indices.block_idx; }
/// Index of the current thread in its block ((0,0,0) in a `per_block` kernel).
inline Dim3 thread_idx() noexcept { return detail::t_kernel_indices.thread_idx; }
/// Threads per block of the running launch.
inline Dim3 block_dim() noexcept { return detail::t_kernel_indices.block_dim; }
/// Blocks in the grid of the running launch.
inline Dim3 grid_dim() noexcept { return detail::t_kernel_indices.grid_dim; }
/// The current block's dynamic shared memory (`LaunchConfig::dynamic_shared_bytes` bytes,
/// 64-byte aligned), as CUDA's `extern __shared__ T memory[]`: the threads of one block
/// (in a `per_thread` kernel, its invocations) see the same bytes, other blocks other
/// bytes. nullptr when the launch asked for none. Valid inside a CPU kernel only.
template <class T = std::byte>
T* dynamic_shared_memory() noexcept {
  return static_cast<T*>(detail::t_kernel_indices.dynamic_shared);
}

}  // namespace kiln
