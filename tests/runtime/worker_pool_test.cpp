// The fork-join pool under the CPU streams: every block runs once, on any number of
// helpers, with blocks claimed as shares (up to 64) or in chunks (more); a block that
// throws is rethrown and the pool stays usable.

#include "runtime/cpu/worker_pool.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "kiln/core/error.hpp"

namespace kiln::detail {
namespace {

TEST(WorkerPool, EveryBlockRunsExactlyOnce) {
  for (int helpers : {0, 1, 3}) {
    WorkerPool pool(helpers, "test");
    for (std::uint64_t n : {1u, 2u, 3u, 5u, 63u, 64u, 65u, 200u}) {
      auto counts = std::make_unique<std::atomic<int>[]>(n);
      for (int round = 0; round < 50; ++round) {
        pool.parallel_for(n, BlockRunner([&](std::uint64_t begin, std::uint64_t end) {
                            ASSERT_LE(end, n);
                            for (std::uint64_t b = begin; b < end; ++b) counts[b].fetch_add(1);
                          }));
      }
      for (std::uint64_t b = 0; b < n; ++b)
        ASSERT_EQ(counts[b].load(), 50)
            << "block " << b << " of " << n << " with " << helpers << " helpers";
    }
  }
}

TEST(WorkerPool, MoreThreadsThanTheSystemGivesIsAnErrorNotACrash) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers reserve address space beyond any limit this test sets";
#else
  // In a child process whose address space ends 64 MiB past what it uses now, so that the
  // threads' stacks run out after a few: the threads started are stopped and joined, and
  // the error says which thread failed and what to do (it used to end in std::terminate).
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{64} << 20);
    const rlimit address_space{limit, limit};
    if (setrlimit(RLIMIT_AS, &address_space) != 0) _exit(3);
    try {
      WorkerPool pool(200, "test");
    } catch (const UserError& e) {
      const std::string what = e.what();
      _exit(what.find("cannot start worker thread") != std::string::npos &&
                    what.find("of 201") != std::string::npos &&
                    what.find("ask for fewer threads") != std::string::npos
                ? 0
                : 1);
    }
    _exit(2);  // every thread started: the limit did not bite
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended on signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: another message, 2: no error, 3: no limit";
#endif
}

TEST(WorkerPool, AThrowingBlockIsRethrownAndThePoolStaysUsable) {
  WorkerPool pool(2, "test");
  for (std::uint64_t n : {4u, 100u}) {
    EXPECT_THROW(pool.parallel_for(n, BlockRunner([](std::uint64_t begin, std::uint64_t end) {
                                     if (begin <= 2 && 2 < end) throw std::runtime_error("two");
                                   })),
                 std::runtime_error)
        << n << " blocks";
    std::atomic<std::uint64_t> ran{0};
    pool.parallel_for(n, BlockRunner([&](std::uint64_t begin, std::uint64_t end) {
                        ran.fetch_add(end - begin);
                      }));
    EXPECT_EQ(ran.load(), n);
  }
}

}  // namespace
}  // namespace kiln::detail
