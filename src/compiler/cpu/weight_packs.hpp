#pragma once
// Internal: the weights (and constants) a callable's plans have packed into the layouts
// oneDNN's kernels read, shared by every plan of that callable. A plan for a new input
// shape finds a weight already packed in the layout its primitive asks for and reads that
// copy: one packed copy per weight and layout, not one per plan (a server seeing many
// sequence lengths would otherwise hold its weights once per length).

#include <cstddef>
#include <dnnl.hpp>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace kiln::compiler {

class WeightPacks {
 public:
  /// \p source's bytes at \p data (a weight or constant: never written while the callable
  /// lives) packed into \p layout, with \p rounded (rounded to bf16 first, as emulated bf16
  /// GEMMs read them): the copy made earlier, else the one \p pack makes now, kept.
  dnnl::memory find_or_pack(const void* data, const dnnl::memory::desc& source,
                            const dnnl::memory::desc& layout, bool rounded,
                            const std::function<dnnl::memory()>& pack);
  /// The packed copies kept, and their bytes.
  std::size_t count() const;
  std::size_t bytes() const;

 private:
  struct Entry {
    dnnl::memory::desc source, layout;
    bool rounded;
    dnnl::memory packed;
  };
  mutable std::mutex mutex_;
  std::unordered_multimap<const void*, Entry> entries_;  // by the source's address
  std::size_t bytes_ = 0;
};

}  // namespace kiln::compiler
