// The fork-join pool under the CPU streams: every block runs once, on any number of
// helpers, with blocks claimed as shares (up to 64) or in chunks (more); a block that
// throws is rethrown and the pool stays usable.

#include "runtime/cpu/worker_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

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
