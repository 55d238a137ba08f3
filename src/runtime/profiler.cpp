#include "kiln/runtime/profiler.hpp"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/file.hpp"

namespace kiln {
namespace {

using detail::cat;

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Small ids for threads, with the OS name each had when it first recorded.
struct ThreadRegistry {
  std::mutex mutex;
  std::vector<std::string> names;

  static ThreadRegistry& instance() {
    static ThreadRegistry registry;
    return registry;
  }
  std::uint32_t add() {
    char name[32] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = '\0';
    std::scoped_lock lock(mutex);
    names.emplace_back(name[0] != '\0' ? name : "thread");
    return static_cast<std::uint32_t>(names.size() - 1);
  }
};

std::uint32_t this_thread_id() {
  thread_local const std::uint32_t id = ThreadRegistry::instance().add();
  return id;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + '"';
}

std::string microseconds(std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

}  // namespace

Profiler::Profiler(std::size_t capacity) : origin_ns_(steady_ns()), events_(capacity) {}

std::int64_t Profiler::now_ns() const noexcept { return steady_ns() - origin_ns_; }

void Profiler::record(std::string_view name, std::uint32_t node, std::uint64_t replay,
                      std::int64_t begin_ns, std::int64_t end_ns) noexcept {
  const std::size_t at = next_.fetch_add(1, std::memory_order_relaxed);
  if (at >= events_.size()) return;  // counted by dropped()
  ProfileEvent& e = events_[at];
  const std::size_t n = std::min(name.size(), e.name.size() - 1);
  std::memcpy(e.name.data(), name.data(), n);
  e.name[n] = '\0';
  e.node = node;
  e.replay = replay;
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  try {
    e.thread = this_thread_id();  // allocates once per thread, on its first event
  } catch (...) {
    e.thread = 0;
  }
}

std::vector<ProfileEvent> Profiler::events() const {
  const std::size_t n = std::min(next_.load(std::memory_order_acquire), events_.size());
  std::vector<ProfileEvent> out(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(n));
  std::stable_sort(out.begin(), out.end(), [](const ProfileEvent& a, const ProfileEvent& b) {
    return a.begin_ns < b.begin_ns;
  });
  return out;
}

std::uint64_t Profiler::dropped() const noexcept {
  const std::size_t n = next_.load(std::memory_order_relaxed);
  return n > events_.size() ? n - events_.size() : 0;
}

void Profiler::clear() {
  next_.store(0, std::memory_order_relaxed);
  replays_.store(0, std::memory_order_relaxed);
}

std::string Profiler::thread_name(std::uint32_t thread) {
  ThreadRegistry& r = ThreadRegistry::instance();
  std::scoped_lock lock(r.mutex);
  return thread < r.names.size() ? r.names[thread] : "thread";
}

std::string Profiler::chrome_trace() const {
  const std::vector<ProfileEvent> all = events();
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  std::set<std::uint32_t> threads;
  for (const ProfileEvent& e : all) {
    threads.insert(e.thread);
    out += cat("{\"name\": ", json_string(e.name.data()),
               ", \"ph\": \"X\", \"pid\": 1, \"tid\": ", e.thread,
               ", \"ts\": ", microseconds(e.begin_ns),
               ", \"dur\": ", microseconds(e.end_ns - e.begin_ns),
               ", \"args\": {\"node\": ", e.node, ", \"replay\": ", e.replay, "}},\n");
  }
  for (std::uint32_t t : threads)
    out += cat("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": ", t,
               ", \"args\": {\"name\": ", json_string(cat(thread_name(t), " #", t)), "}},\n");
  out +=
      cat("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": "
          "\"kiln\"}}\n],\n\"otherData\": {\"replays\": ",
          replays(), ", \"dropped_events\": ", dropped(), "}}\n");
  return out;
}

void Profiler::write_chrome_trace(const std::string& path) const {
  write_file_atomically(path, chrome_trace());
}

}  // namespace kiln
