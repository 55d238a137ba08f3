#pragma once
// Internal: NVRTC, CUDA's run-time compiler, loaded with dlopen on first use (so that a
// kiln built with the CUDA toolkit still starts where the toolkit is absent), and a cache
// of the PTX it produces, keyed by a hash of the source and the target.

#include <cstddef>
#include <filesystem>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::detail {

class Nvrtc {
 public:
  /// The loaded library. \throws UserError saying where it was looked for.
  static Nvrtc& instance();
  /// `12.8`, `13.0`.
  std::string version() const;
  /// CUDA C++ \p source (named \p name in messages) to PTX for \p arch (`compute_90`).
  /// \throws UserError with NVRTC's log when the source does not compile.
  std::string compile(const std::string& source, const std::string& name,
                      const std::string& arch) const;

 private:
  Nvrtc() = default;
  struct Api;
  const Api* api_ = nullptr;
};

/// PTX by source: in memory, then on disk (one `<hash>.ptx` per entry under the cache
/// directory: KILN_CACHE_DIR/ptx, else ~/.cache/kiln/ptx), then NVRTC. Entries are
/// written to a temporary file and renamed, so concurrent processes never read a partial
/// one; an entry that does not start as PTX is recompiled. Thread-safe.
class PtxCache {
 public:
  explicit PtxCache(std::filesystem::path directory = default_directory());
  static std::filesystem::path default_directory();

  std::string get(const std::string& source, const std::string& name, const std::string& arch);

  struct Stats {
    std::size_t memory_hits = 0, disk_hits = 0, compiles = 0;
  };
  Stats stats() const;

 private:
  std::filesystem::path directory_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::string> memory_;  // key -> PTX
  Stats stats_;
};

}  // namespace kiln::detail
