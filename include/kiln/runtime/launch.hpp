#pragma once
/// \file
/// Launch geometry (`Dim3`, `LaunchConfig`) and the index functions a kernel calls to find
/// out which block and thread it is: `block_idx()`, `thread_idx()`, `block_dim()`,
/// `grid_dim()`, as in CUDA.

#include <concepts>
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

/// How many blocks, and how many threads per block, a kernel launch runs.
/// Every component must be >= 1 (checked when the launch is enqueued).
struct LaunchConfig {
  Dim3 grid_dim;
  Dim3 block_dim;
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
};
inline thread_local KernelIndices t_kernel_indices;
}  // namespace detail

/// Index of the current block in the grid. Valid inside a kernel only.
inline Dim3 block_idx() noexcept { return detail::t_kernel_indices.block_idx; }
/// Index of the current thread in its block ((0,0,0) in a `per_block` kernel).
inline Dim3 thread_idx() noexcept { return detail::t_kernel_indices.thread_idx; }
/// Threads per block of the running launch.
inline Dim3 block_dim() noexcept { return detail::t_kernel_indices.block_dim; }
/// Blocks in the grid of the running launch.
inline Dim3 grid_dim() noexcept { return detail::t_kernel_indices.grid_dim; }

}  // namespace kiln
