#include "runtime/cpu/cpu_work.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace kiln::detail {
namespace {
// Big copies and fills are split so several workers share them.
constexpr std::size_t kBytesPerBlock = std::size_t{1} << 20;
}  // namespace

CpuWork copy_work(void* dst, const void* src, std::size_t bytes) {
  CpuWork w;
  w.blocks = std::max<std::size_t>(1, (bytes + kBytesPerBlock - 1) / kBytesPerBlock);
  w.body = [dst, src, bytes](std::uint64_t begin, std::uint64_t end) {
    const std::size_t from = begin * kBytesPerBlock;
    const std::size_t to = std::min<std::size_t>(bytes, end * kBytesPerBlock);
    if (to > from)
      std::memmove(static_cast<char*>(dst) + from, static_cast<const char*>(src) + from, to - from);
  };
  return w;
}

CpuWork fill_work(void* dst, std::size_t count, const void* pattern, std::size_t pattern_size) {
  CpuWork w;
  const std::size_t per_block = std::max<std::size_t>(1, kBytesPerBlock / pattern_size);
  w.blocks = std::max<std::size_t>(1, (count + per_block - 1) / per_block);
  std::array<unsigned char, 16> value{};
  std::memcpy(value.data(), pattern, std::min(pattern_size, value.size()));
  w.body = [dst, count, pattern_size, per_block, value](std::uint64_t begin, std::uint64_t end) {
    auto* out = static_cast<unsigned char*>(dst);
    const std::size_t last = std::min(count, end * per_block);
    for (std::size_t i = begin * per_block; i < last; ++i)
      std::memcpy(out + i * pattern_size, value.data(), pattern_size);
  };
  return w;
}

}  // namespace kiln::detail
