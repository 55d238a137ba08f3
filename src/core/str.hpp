#pragma once
// Internal: building error messages from mixed values without pulling <sstream> into
// public headers.

#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::detail {

/// Streams every argument into one string: cat("dim ", 3, " is ", -1).
template <class... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

/// Joins a range with a separator, streaming each element.
template <class Range>
std::string join(const Range& items, const char* separator) {
  std::ostringstream os;
  bool first = true;
  for (const auto& item : items) {
    if (!first) os << separator;
    os << item;
    first = false;
  }
  return os.str();
}

}  // namespace kiln::detail
