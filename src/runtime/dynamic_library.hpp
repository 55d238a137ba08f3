#pragma once
// Internal: the optional libraries kiln loads at run time (the MPI plugin, NVRTC), so
// that nothing needs them unless it uses them.

#include <dlfcn.h>

#include <cstdlib>
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

/// An optional library: the path in environment variable \p env_var if it is set, else
/// the first of \p candidates that loads. nullptr when none does, with \p error saying
/// "<what> is not available (<each failure>); <fix>".
inline void* open_optional_library(const char* env_var, std::vector<std::string> candidates,
                                   const std::string& what, const std::string& fix,
                                   std::string& error) {
  if (const char* env = std::getenv(env_var); env && *env)
    candidates.insert(candidates.begin(), env);
  std::vector<std::string> tried;
  void* handle = open_first_library(candidates, tried);
  if (handle == nullptr) {
    error = what + " is not available (";
    for (std::size_t i = 0; i < tried.size(); ++i) error += (i > 0 ? "; " : "") + tried[i];
    error += "); " + fix;
  }
  return handle;
}

/// The address of \p symbol in \p handle as a \p Fn, or nullptr.
template <class Fn>
Fn library_symbol(void* handle, const char* symbol) {
  return reinterpret_cast<Fn>(dlsym(handle, symbol));
}

}  // namespace kiln::detail
