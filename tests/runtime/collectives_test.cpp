#include "kiln/runtime/collectives.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "../cpu_devices.hpp"
#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

/// N virtual CPU devices, one single-threaded context each, and a local communicator.
struct Ranks {
  explicit Ranks(int n) : devices(n), comm(Communicator::create_local(n)) {
    for (int r = 0; r < n; ++r) ctx.emplace_back(Device::cpu(r), DeviceContextOptions{1});
  }
  void synchronize() {
    for (DeviceContext& c : ctx) c.synchronize();
  }
  testing::CpuDevices devices;
  std::shared_ptr<Communicator> comm;
  std::vector<DeviceContext> ctx;
};

/// Uneven counts: rank r gets base + r % 3 elements (shard sizes differ by at most two).
std::vector<std::size_t> uneven(int n, std::size_t base) {
  std::vector<std::size_t> counts;
  for (int r = 0; r < n; ++r) counts.push_back(base + static_cast<std::size_t>(r % 3));
  return counts;
}

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(static_cast<int>(rng() % 200) - 100) / T{4};  // exact sums
  return v;
}

template <class T>
class Collectives : public ::testing::Test {};
using Types = ::testing::Types<float, double, std::int32_t, std::int64_t>;
TYPED_TEST_SUITE(Collectives, Types);

TYPED_TEST(Collectives, EachEqualsTheSingleDeviceResultOnOneToEightDevices) {
  using T = TypeParam;
  const DType dtype = dtype_of<T>;
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    Ranks ranks(n);
    const std::vector<std::size_t> counts = uneven(n, 1000);
    const std::size_t sum = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    std::vector<std::vector<T>> in, reduced_in, all_in;
    for (int r = 0; r < n; ++r) {
      in.push_back(random_values<T>(counts[static_cast<std::size_t>(r)], 10 + r));
      reduced_in.push_back(random_values<T>(sum, 100 + r));
      all_in.push_back(random_values<T>(5 * static_cast<std::size_t>(n), 200 + r));
    }
    std::vector<std::vector<T>> allreduce = reduced_in, gathered(n, std::vector<T>(sum)),
                                scattered(n), broadcast(n, std::vector<T>(sum)),
                                exchanged(n, std::vector<T>(5 * static_cast<std::size_t>(n)));
    for (int r = 0; r < n; ++r) {
      const auto u = static_cast<std::size_t>(r);
      scattered[u].resize(counts[u]);
      ranks.comm->enqueue(
          ranks.ctx[u], r,  // in place
          Collective::allreduce_sum(allreduce[u].data(), allreduce[u].data(), sum, dtype));
      ranks.comm->enqueue(ranks.ctx[u], r,
                          Collective::allgather(in[u].data(), gathered[u].data(), counts, dtype));
      ranks.comm->enqueue(
          ranks.ctx[u], r,
          Collective::reduce_scatter_sum(reduced_in[u].data(), scattered[u].data(), counts, dtype));
      ranks.comm->enqueue(
          ranks.ctx[u], r,
          Collective::broadcast(reduced_in[u].data(), broadcast[u].data(), sum, n - 1, dtype));
      ranks.comm->enqueue(ranks.ctx[u], r,
                          Collective::all_to_all(all_in[u].data(), exchanged[u].data(), 5, dtype));
    }
    ranks.synchronize();
    // The single-device results.
    std::vector<T> total(sum, T{0}), concatenated;
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < sum; ++i) total[i] += reduced_in[static_cast<std::size_t>(r)][i];
      concatenated.insert(concatenated.end(), in[static_cast<std::size_t>(r)].begin(),
                          in[static_cast<std::size_t>(r)].end());
    }
    std::size_t offset = 0;
    for (int r = 0; r < n; ++r) {
      const auto u = static_cast<std::size_t>(r);
      EXPECT_EQ(allreduce[u], total) << "allreduce, rank " << r;
      EXPECT_EQ(gathered[u], concatenated) << "allgather, rank " << r;
      EXPECT_EQ(scattered[u], std::vector<T>(total.begin() + static_cast<long>(offset),
                                             total.begin() + static_cast<long>(offset + counts[u])))
          << "reduce_scatter, rank " << r;
      offset += counts[u];
      EXPECT_EQ(broadcast[u], reduced_in[static_cast<std::size_t>(n - 1)])
          << "broadcast, rank " << r;
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < 5; ++i)
          ASSERT_EQ(exchanged[u][static_cast<std::size_t>(q) * 5 + i],
                    all_in[static_cast<std::size_t>(q)][u * 5 + i])
              << "all_to_all, rank " << r << " from " << q;
    }
  }
}

TEST(Collectives, HalfPrecisionSumsRoundOnce) {
  Ranks ranks(3);
  std::vector<std::vector<BFloat16>> x(3, std::vector<BFloat16>(64));
  for (int r = 0; r < 3; ++r)
    for (std::size_t i = 0; i < 64; ++i)
      x[static_cast<std::size_t>(r)][i] = BFloat16(0.5f * (r + 1));
  for (int r = 0; r < 3; ++r)
    ranks.comm->enqueue(
        ranks.ctx[static_cast<std::size_t>(r)], r,
        Collective::allreduce_sum(x[static_cast<std::size_t>(r)].data(),
                                  x[static_cast<std::size_t>(r)].data(), 64, DType::bf16));
  ranks.synchronize();
  for (const auto& v : x)
    for (BFloat16 e : v) EXPECT_EQ(static_cast<float>(e), 3.0f);
}

TEST(Collectives, ThousandBackToBackReplaysNeitherDeadlockNorMixIterations) {
  // Each rank's graph: write this iteration's input, allreduce it, check the sum, count
  // mismatches. All replays are enqueued before any is waited for, so fast ranks run
  // ahead into the next replay while slow ones are still in the collective.
  constexpr int kRanks = 4, kReplays = 1000;
  Ranks ranks(kRanks);
  std::vector<std::vector<std::int64_t>> x(kRanks, std::vector<std::int64_t>(256));
  std::vector<std::int64_t> iteration(kRanks, 0), mismatches(kRanks, 0);
  std::vector<DeviceGraph> graphs;
  for (int r = 0; r < kRanks; ++r) {
    const auto u = static_cast<std::size_t>(r);
    graphs.push_back(DeviceGraph::create(ranks.ctx[u], [&](DeviceGraphBuilder& b) {
      auto fill = b.add_host_function(
          [&, u] {
            ++iteration[u];
            for (std::size_t i = 0; i < x[u].size(); ++i)
              x[u][i] = iteration[u] * 1000 + static_cast<std::int64_t>(u * 10 + i);
          },
          {});
      auto reduce = ranks.comm->add(
          b, r, Collective::allreduce_sum(x[u].data(), x[u].data(), x[u].size(), DType::i64), fill);
      b.add_host_function(
          [&, u] {
            for (std::size_t i = 0; i < x[u].size(); ++i) {
              std::int64_t want = 0;
              for (std::int64_t q = 0; q < kRanks; ++q)
                want += iteration[u] * 1000 + q * 10 + static_cast<std::int64_t>(i);
              if (x[u][i] != want) ++mismatches[u];
            }
          },
          reduce);
    }));
  }
  for (int k = 0; k < kReplays; ++k)
    for (const DeviceGraph& g : graphs) g.replay();
  ranks.synchronize();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(iteration[static_cast<std::size_t>(r)], kReplays) << "rank " << r;
    EXPECT_EQ(mismatches[static_cast<std::size_t>(r)], 0) << "rank " << r;
  }
}

TEST(Collectives, BadArgumentsAreNamedWhenEnqueued) {
  Ranks ranks(2);
  std::vector<float> a(4), b(8);
  KILN_EXPECT_THROW_MSG(
      ranks.comm->enqueue(ranks.ctx[0], 2,
                          Collective::allreduce_sum(a.data(), a.data(), 4, DType::f32)),
      UserError, "allreduce_sum for rank 2: ranks are 0 to 1");
  KILN_EXPECT_THROW_MSG(
      ranks.comm->enqueue(ranks.ctx[0], 0,
                          Collective::allgather(a.data(), b.data(), {4}, DType::f32)),
      UserError, "allgather needs 2 counts (one per rank), got 1");
  KILN_EXPECT_THROW_MSG(
      ranks.comm->enqueue(ranks.ctx[0], 0,
                          Collective::broadcast(a.data(), a.data(), 4, 5, DType::f32)),
      UserError, "root 5 is not a rank");
  KILN_EXPECT_THROW_MSG(Communicator::create_local(0), UserError, "size 0 must be at least 1");
}

TEST(Collectives, RanksThatDisagreeFailTogetherWithTheDifference) {
  Ranks ranks(2);
  std::vector<float> a(4), b(8);
  ranks.comm->enqueue(ranks.ctx[0], 0,
                      Collective::allreduce_sum(a.data(), a.data(), 4, DType::f32));
  ranks.comm->enqueue(ranks.ctx[1], 1,
                      Collective::allgather(a.data(), b.data(), {4, 4}, DType::f32));
  KILN_EXPECT_THROW_MSG(ranks.ctx[0].synchronize(), DeviceError,
                        "rank 0 runs allreduce_sum of 4 f32 but rank 1 runs allgather of 8 f32");
  KILN_EXPECT_THROW_MSG(ranks.ctx[1].synchronize(), DeviceError, "rank 1 runs allgather");
}

TEST(Collectives, ARankThatNeverArrivesTimesOut) {
  const testing::CpuDevices devices(2);
  auto comm = Communicator::create_local(2, std::chrono::milliseconds(50));
  DeviceContext ctx(Device::cpu(0), {1});
  std::vector<float> a(4);
  comm->enqueue(ctx, 0, Collective::allreduce_sum(a.data(), a.data(), 4, DType::f32));
  KILN_EXPECT_THROW_MSG(ctx.synchronize(), DeviceError,
                        "collective 1 (allreduce_sum) on rank 0: rank 1 did not arrive at it "
                        "within 50 ms");
}

TEST(VirtualCpuDevices, ContextsExistOnlyForExposedDevices) {
  {
    const testing::CpuDevices devices(3);
    EXPECT_EQ(cpu_device_count(), 3);
    DeviceContext ctx(Device::cpu(2), {1});
    EXPECT_EQ(ctx.device(), Device::cpu(2));
  }
  EXPECT_EQ(cpu_device_count(), 1);
  KILN_EXPECT_THROW_MSG(DeviceContext(Device::cpu(1)), UserError,
                        "cpu:1 is not available: this process has 1 CPU device",
                        "KILN_CPU_DEVICES");
  KILN_EXPECT_THROW_MSG(set_cpu_device_count(0), UserError, "0 must be at least 1");
}

}  // namespace
}  // namespace kiln
