// The local communicator: ranks of one process meeting in signal buffers.

#include "kiln/runtime/collectives.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/cpu/worker_pool.hpp"

namespace kiln {
namespace {

using detail::cat;

std::size_t total(const std::vector<std::size_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

/// Elements before rank \p rank's slice.
std::size_t offset_of(const std::vector<std::size_t>& counts, int rank) {
  return std::accumulate(counts.begin(), counts.begin() + rank, std::size_t{0});
}

/// dst[i] = Σ srcs[q][i] for i < n (dst is none of the sources), in the dtype's own
/// arithmetic (f16/bf16 via double, rounded once; integers exactly, wrapping).
void reduce_sum(DType dtype, std::byte* dst, const std::byte* const* srcs, int n_src,
                std::size_t n) {
  const auto typed = [&](auto zero) {  // one vectorisable pass per source, in rank order
    using T = decltype(zero);
    auto* d = reinterpret_cast<T*>(dst);
    std::memcpy(d, srcs[0], n * sizeof(T));
    for (int q = 1; q < n_src; ++q) {
      const auto* s = reinterpret_cast<const T*>(srcs[q]);
      for (std::size_t i = 0; i < n; ++i) d[i] += s[i];
    }
  };
  switch (dtype) {
    case DType::f32:
      return typed(0.0f);
    case DType::f64:
      return typed(0.0);
    case DType::i32:  // unsigned: integer sums wrap (two's complement), as everywhere
      return typed(std::uint32_t{0});
    case DType::i64:
      return typed(std::uint64_t{0});
    default: {
      const std::size_t es = size_of(dtype);
      for (std::size_t i = 0; i < n; ++i) {
        if (is_floating(dtype)) {
          double sum = 0;
          for (int q = 0; q < n_src; ++q) sum += load_as_double(dtype, srcs[q] + i * es);
          store_from_double(dtype, sum, dst + i * es);
        } else {  // i8, u8, bool: exact, wrapped to the width
          std::uint64_t sum = 0;
          for (int q = 0; q < n_src; ++q)
            sum += static_cast<std::uint64_t>(load_as_int(dtype, srcs[q] + i * es));
          store_from_int(dtype, static_cast<std::int64_t>(sum), dst + i * es);
        }
      }
    }
  }
}

/// One rank's signal buffer: a cache line the other ranks read.
struct alignas(64) Signal {
  std::atomic<std::uint32_t> arrived{0};  // number of the collective it has reached
  std::atomic<std::uint32_t> left{0};     // number of the collective it has finished
  const std::byte* in = nullptr;          // published before `arrived`
  std::byte* out = nullptr;
  const Collective* what = nullptr;  // to check that every rank runs the same collective
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(int size, std::chrono::milliseconds timeout)
      : signals_(static_cast<std::size_t>(size)),
        count_(static_cast<std::size_t>(size), 0),
        scratch_(static_cast<std::size_t>(size)),
        timeout_(timeout) {
    for (Scratch& s : scratch_) {
      s.srcs.resize(static_cast<std::size_t>(size));
      s.tile.resize(kTile * sizeof(double));
    }
  }

  int size() const noexcept override { return static_cast<int>(signals_.size()); }

  void run(int rank, const Collective& c) override {
    check(rank, c);
    const auto r = static_cast<std::size_t>(rank);
    // Only rank r's thread touches count_[r]: collectives of one rank run in order.
    const std::uint32_t number = ++count_[r];
    Signal& mine = signals_[r];
    mine.in = static_cast<const std::byte*>(c.in);
    mine.out = static_cast<std::byte*>(c.out);
    mine.what = &c;
    mine.arrived.store(number, std::memory_order_release);
    wait_all(&Signal::arrived, number, rank, c, "arrive at");
    std::string disagreement = disagreement_with_others(rank, c);
    if (disagreement.empty()) execute(rank, c);
    mine.left.store(number, std::memory_order_release);
    wait_all(&Signal::left, number, rank, c, "finish");
    if (!disagreement.empty()) throw DeviceError(std::move(disagreement));
  }

 private:
  // Waits until every rank's counter \p field has reached \p number.
  void wait_all(std::atomic<std::uint32_t> Signal::*field, std::uint32_t number, int rank,
                const Collective& c, const char* what) const {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t q = 0; q < signals_.size(); ++q) {
      const std::atomic<std::uint32_t>& flag = signals_[q].*field;
      for (int round = 0;
           static_cast<std::int32_t>(flag.load(std::memory_order_acquire) - number) < 0; ++round) {
        if (round < 64) {
          detail::cpu_relax();
        } else if (round < 256) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
          if (std::chrono::steady_clock::now() - start > timeout_)
            throw DeviceError(cat("collective ", number, " (", to_string(c.kind), ") on rank ",
                                  rank, ": rank ", q, " did not ", what, " it within ",
                                  timeout_.count(),
                                  " ms; every rank must run the same collectives in the same "
                                  "order"));
        }
      }
    }
  }

  // Every rank compares every other rank's collective with its own, so all of them see
  // the same disagreement and fail together (no rank waits for one that gave up).
  std::string disagreement_with_others(int rank, const Collective& c) const {
    for (std::size_t q = 0; q < signals_.size(); ++q) {
      const Collective& other = *signals_[q].what;
      if (other.kind != c.kind || other.dtype != c.dtype || other.counts != c.counts ||
          other.root != c.root)
        return cat("collective ", count_[static_cast<std::size_t>(rank)], ": rank ", rank, " runs ",
                   to_string(c.kind), " of ", total(c.counts), " ", name(c.dtype), " but rank ", q,
                   " runs ", to_string(other.kind), " of ", total(other.counts), " ",
                   name(other.dtype),
                   "; every rank must run the same collectives in the same order");
    }
    return {};
  }

  // Rank r does its share: reads the others' buffers, writes only where no other rank
  // reads or writes during this collective.
  void execute(int rank, const Collective& c) const {
    const int n = size();
    const std::size_t es = size_of(c.dtype);
    const auto r = static_cast<std::size_t>(rank);
    // Rank r's own scratch (only its thread runs its collectives): nothing is allocated.
    std::vector<const std::byte*>& srcs = scratch_[r].srcs;
    std::vector<std::byte>& tile = scratch_[r].tile;
    switch (c.kind) {
      case CollectiveKind::allreduce_sum: {
        // Rank r reduces slice r and writes it to every rank's output; a tile at a time
        // through a local buffer, so that in-place buffers are read before written.
        const std::size_t count = c.counts[0];
        const std::size_t begin = count * r / static_cast<std::size_t>(n),
                          end = count * (r + 1) / static_cast<std::size_t>(n);
        for (std::size_t at = begin; at < end; at += kTile) {
          const std::size_t len = std::min(kTile, end - at);
          for (std::size_t q = 0; q < srcs.size(); ++q) srcs[q] = signals_[q].in + at * es;
          reduce_sum(c.dtype, tile.data(), srcs.data(), n, len);
          for (const Signal& s : signals_) std::memcpy(s.out + at * es, tile.data(), len * es);
        }
        return;
      }
      case CollectiveKind::allgather: {
        const std::size_t at = offset_of(c.counts, rank) * es, bytes = c.counts[r] * es;
        for (const Signal& s : signals_)
          if (s.out + at != signals_[r].in) std::memmove(s.out + at, signals_[r].in, bytes);
        return;
      }
      case CollectiveKind::reduce_scatter_sum: {
        const std::size_t at = offset_of(c.counts, rank) * es;
        for (std::size_t q = 0; q < srcs.size(); ++q) srcs[q] = signals_[q].in + at;
        reduce_sum(c.dtype, signals_[r].out, srcs.data(), n, c.counts[r]);
        return;
      }
      case CollectiveKind::broadcast: {
        const std::byte* from = signals_[static_cast<std::size_t>(c.root)].in;
        if (signals_[r].out != from) std::memcpy(signals_[r].out, from, c.counts[0] * es);
        return;
      }
      case CollectiveKind::all_to_all: {
        const std::size_t chunk = c.counts[0] * es;
        for (std::size_t q = 0; q < signals_.size(); ++q)
          std::memcpy(signals_[q].out + r * chunk, signals_[r].in + q * chunk, chunk);
        return;
      }
    }
  }

  static constexpr std::size_t kTile = 4096;  // elements reduced at a time
  struct Scratch {
    std::vector<const std::byte*> srcs;
    std::vector<std::byte> tile;
  };

  std::vector<Signal> signals_;
  std::vector<std::uint32_t> count_;
  mutable std::vector<Scratch> scratch_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::string to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::allreduce_sum:
      return "allreduce_sum";
    case CollectiveKind::allgather:
      return "allgather";
    case CollectiveKind::reduce_scatter_sum:
      return "reduce_scatter_sum";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::all_to_all:
      return "all_to_all";
  }
  return "collective";
}

Collective Collective::allreduce_sum(const void* in, void* out, std::size_t count, DType dtype) {
  return {CollectiveKind::allreduce_sum, dtype, in, out, {count}, 0};
}
Collective Collective::allgather(const void* in, void* out, std::vector<std::size_t> counts,
                                 DType dtype) {
  return {CollectiveKind::allgather, dtype, in, out, std::move(counts), 0};
}
Collective Collective::reduce_scatter_sum(const void* in, void* out,
                                          std::vector<std::size_t> counts, DType dtype) {
  return {CollectiveKind::reduce_scatter_sum, dtype, in, out, std::move(counts), 0};
}
Collective Collective::broadcast(const void* in, void* out, std::size_t count, int root,
                                 DType dtype) {
  return {CollectiveKind::broadcast, dtype, in, out, {count}, root};
}
Collective Collective::all_to_all(const void* in, void* out, std::size_t count, DType dtype) {
  return {CollectiveKind::all_to_all, dtype, in, out, {count}, 0};
}

std::size_t collective_output_count(const Collective& c, int size, int rank) {
  switch (c.kind) {
    case CollectiveKind::allgather:
      return total(c.counts);
    case CollectiveKind::reduce_scatter_sum:
      return c.counts.at(static_cast<std::size_t>(rank));
    case CollectiveKind::all_to_all:
      return c.counts.at(0) * static_cast<std::size_t>(size);
    default:
      return c.counts.at(0);
  }
}

std::size_t collective_input_count(const Collective& c, int size, int rank) {
  switch (c.kind) {
    case CollectiveKind::allgather:
      return c.counts.at(static_cast<std::size_t>(rank));
    case CollectiveKind::reduce_scatter_sum:
      return total(c.counts);
    case CollectiveKind::all_to_all:
      return c.counts.at(0) * static_cast<std::size_t>(size);
    default:
      return c.counts.at(0);
  }
}

std::shared_ptr<Communicator> Communicator::create_local(int size,
                                                         std::chrono::milliseconds timeout) {
  if (size < 1)
    throw UserError(cat("Communicator::create_local: size ", size, " must be at least 1"));
  return std::make_shared<LocalCommunicator>(size, timeout);
}

void Communicator::check(int rank, const Collective& c) const {
  const std::string where = cat("Communicator (", size(), " ranks): ", to_string(c.kind));
  if (rank < 0 || rank >= size())
    throw UserError(cat(where, " for rank ", rank, ": ranks are 0 to ", size() - 1));
  const bool per_rank =
      c.kind == CollectiveKind::allgather || c.kind == CollectiveKind::reduce_scatter_sum;
  const std::size_t want = per_rank ? static_cast<std::size_t>(size()) : 1;
  if (c.counts.size() != want)
    throw UserError(cat(where, " needs ", want, per_rank ? " counts (one per rank)" : " count",
                        ", got ", c.counts.size()));
  if (c.kind == CollectiveKind::broadcast && (c.root < 0 || c.root >= size()))
    throw UserError(cat(where, ": root ", c.root, " is not a rank (0 to ", size() - 1, ")"));
  if ((c.in == nullptr && collective_input_count(c, size(), rank) > 0) ||
      (c.out == nullptr && collective_output_count(c, size(), rank) > 0))
    throw UserError(cat(where, " for rank ", rank, ": a null buffer"));
}

void Communicator::enqueue(const DeviceContext& ctx, int rank, Collective c) {
  check(rank, c);
  enqueue_checked(ctx, rank, std::move(c));
}

DeviceGraphNode Communicator::add(DeviceGraphBuilder& builder, int rank, Collective c,
                                  const DeviceGraphDependencies& dependencies) {
  check(rank, c);
  return add_checked(builder, rank, std::move(c), dependencies);
}

void Communicator::enqueue_all(std::span<const DeviceContext> contexts,
                               std::span<const Collective> parts) {
  if (contexts.size() != static_cast<std::size_t>(size()) || parts.size() != contexts.size())
    throw UserError(cat("Communicator::enqueue_all: ", contexts.size(), " contexts and ",
                        parts.size(), " parts for ", size(), " ranks; pass one of each per rank"));
  for (int r = 0; r < size(); ++r) check(r, parts[static_cast<std::size_t>(r)]);
  enqueue_all_checked(contexts, parts);
}

void Communicator::enqueue_checked(const DeviceContext& ctx, int rank, Collective c) {
  ctx.enqueue_host_function(
      [self = shared_from_this(), rank, c = std::move(c)] { self->run(rank, c); });
}

DeviceGraphNode Communicator::add_checked(DeviceGraphBuilder& builder, int rank, Collective c,
                                          const DeviceGraphDependencies& dependencies) {
  return builder.add_host_function(
      [self = shared_from_this(), rank, c = std::move(c)] { self->run(rank, c); }, dependencies);
}

void Communicator::enqueue_all_checked(std::span<const DeviceContext> contexts,
                                       std::span<const Collective> parts) {
  for (std::size_t r = 0; r < parts.size(); ++r)
    enqueue_checked(contexts[r], static_cast<int>(r), parts[r]);
}

#ifndef KILN_CUDA_PATHS
std::shared_ptr<Communicator> Communicator::create_nccl(const std::vector<Device>&) {
  throw UserError(
      "Communicator::create_nccl: this build of kiln has no CUDA backend (configure with the "
      "CUDA toolkit, -DKILN_CUDA=ON)");
}
#endif

}  // namespace kiln
