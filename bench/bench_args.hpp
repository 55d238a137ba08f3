#pragma once
// Small helpers the benchmark programs share: list arguments and medians.

#include <algorithm>
#include <chrono>
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

/// Seconds \p f takes, the median of \p reps timed calls after one untimed warm-up call.
template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(t);
}

}  // namespace kiln::bench
