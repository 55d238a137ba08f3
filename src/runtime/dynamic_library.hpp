#pragma once
// Internal: the optional libraries kiln loads at run time (the MPI plugin, NVRTC), so
// that nothing needs them unless it uses them.

#include <dlfcn.h>

#include <string>
#include <vector>

namespace kiln::detail {

/// dlopen of the first of \p candidates that loads, or nullptr; \p tried gets each
/// failure's dlerror() text, for the message that says what is missing.
inline void* open_first_library(const std::vector<std::string>& candidates,
                                std::vector<std::string>& tried) {
  for (const std::string& c : candidates) {
    if (void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    tried.push_back(dlerror());
  }
  return nullptr;
}

/// The address of \p symbol in \p handle as a \p Fn, or nullptr.
template <class Fn>
Fn library_symbol(void* handle, const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(handle, symbol));
}

}  // namespace kiln::detail
