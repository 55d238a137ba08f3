// Packed weights shared by a callable's plans (see weight_packs.hpp).

#include "compiler/cpu/weight_packs.hpp"

namespace kiln::compiler {

dnnl::memory WeightPacks::find_or_pack(const void* data, const dnnl::memory::desc& source,
                                       const dnnl::memory::desc& layout, bool rounded,
                                       const std::function<dnnl::memory()>& pack) {
  const std::lock_guard lock(mutex_);
  const auto [first, last] = entries_.equal_range(data);
  for (auto it = first; it != last; ++it)
    if (it->second.rounded == rounded && it->second.source == source && it->second.layout == layout)
      return it->second.packed;
  dnnl::memory packed = pack();
  entries_.emplace(data, Entry{source, layout, rounded, packed});
  bytes_ += layout.get_size();
  return packed;
}

std::size_t WeightPacks::count() const {
  const std::lock_guard lock(mutex_);
  return entries_.size();
}

std::size_t WeightPacks::bytes() const {
  const std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace kiln::compiler
