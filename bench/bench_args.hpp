#pragma once
// Small helpers the benchmark programs share: list arguments and medians.

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::bench {

/// "1,8,32" -> {1, 8, 32}.
inline std::vector<int> parse_int_list(const char* text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

/// The median of \p values (sorts them).
inline double median(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace kiln::bench
