#include "runtime/cuda/nccl.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/dynamic_library.hpp"

namespace kiln::detail {
namespace {

#define KILN_NCCL_NAME2(x) #x
#define KILN_NCCL_NAME(x) KILN_NCCL_NAME2(x)

struct Loaded {
  Nccl api;
  std::string error;
};

Loaded load() {
  Loaded out;
  std::vector<std::string> candidates;
#ifdef KILN_CUDA_LIBRARY_DIR
  candidates.push_back(std::string(KILN_CUDA_LIBRARY_DIR) + "/libnccl.so.2");
#endif
  candidates.insert(candidates.end(), {"libnccl.so.2", "libnccl.so"});
  void* handle = open_optional_library(
      "KILN_NCCL_LIBRARY", std::move(candidates), "NCCL",
      "install NCCL (it comes with the CUDA toolkit) or set KILN_NCCL_LIBRARY", out.error);
  if (handle == nullptr) return out;
  std::vector<std::string> missing;
#define KILN_NCCL_LOAD(name)                                                           \
  out.api.name = library_symbol<decltype(out.api.name)>(handle, KILN_NCCL_NAME(name)); \
  if (out.api.name == nullptr) missing.push_back(KILN_NCCL_NAME(name));
  KILN_NCCL_ENTRIES(KILN_NCCL_LOAD)
#undef KILN_NCCL_LOAD
  if (!missing.empty()) out.error = cat("NCCL lacks ", join(missing, ", "));
  return out;
}

/// \p dtype as NCCL's, for an op that \p sums (bool cannot be summed).
ncclDataType_t nccl_type(DType dtype, bool sums, const char* what) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
      return ncclUint8;
    case DType::i8:
      return ncclInt8;
    case DType::bool_:
      if (!sums) return ncclUint8;
      break;
    default:
      break;
  }
  throw UserError(cat("Communicator (NCCL): ", what, " of ", dtype,
                      " values is not something NCCL does; cast to a numeric type first"));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::vector<Device> devices, std::vector<DeviceContext> contexts,
                   const Nccl& nccl)
      : nccl_(nccl), devices_(std::move(devices)), contexts_(std::move(contexts)) {
    std::vector<int> ordinals;
    for (const Device& d : devices_) ordinals.push_back(d.index());
    comms_.resize(devices_.size());
    nccl_.check(
        nccl_.ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), ordinals.data()),
        cat("ncclCommInitAll over ", devices_.size(), " GPUs"));
  }
  ~NcclCommunicator() override {
    for (ncclComm_t c : comms_) nccl_.ncclCommDestroy(c);
  }

  int size() const noexcept override { return static_cast<int>(comms_.size()); }

  void run(int rank, const Collective& c) override {
    check(rank, c);
    const DeviceContext& ctx = contexts_[static_cast<std::size_t>(rank)];
    ctx.enqueue_cuda_work([&](void* stream) { grouped(rank, c, stream); });
    ctx.synchronize();
  }

 protected:
  void enqueue_checked(const DeviceContext& ctx, int rank, Collective c) override {
    check_context(ctx.device(), rank, "enqueue");
    ctx.enqueue_cuda_work([self = shared(), rank, c = std::move(c)](void* stream) {
      self->grouped(rank, c, stream);
    });
  }

  DeviceGraphNode add_checked(DeviceGraphBuilder& builder, int rank, Collective c,
                              const DeviceGraphDependencies& dependencies) override {
    return builder.add_cuda_work(
        [self = shared(), rank, c = std::move(c)](void* stream) { self->grouped(rank, c, stream); },
        dependencies);
  }

  void enqueue_all_checked(std::span<const DeviceContext> contexts,
                           std::span<const Collective> parts) override {
    for (std::size_t r = 0; r < contexts.size(); ++r)
      check_context(contexts[r].device(), static_cast<int>(r), "enqueue_all");
    // One group for every rank: NCCL launches them together, so that no call waits on
    // the host for ranks not yet called.
    nccl_.check(nccl_.ncclGroupStart(), "ncclGroupStart");
    try {
      for (std::size_t r = 0; r < contexts.size(); ++r)
        contexts[r].enqueue_cuda_work(
            [self = shared(), rank = static_cast<int>(r), part = parts[r]](void* stream) {
              self->issue(rank, part, stream);
            });
    } catch (...) {
      nccl_.ncclGroupEnd();
      throw;
    }
    nccl_.check(nccl_.ncclGroupEnd(), "ncclGroupEnd");
  }

 private:
  std::shared_ptr<NcclCommunicator> shared() {
    return std::static_pointer_cast<NcclCommunicator>(shared_from_this());
  }

  void check_context(Device device, int rank, const char* where) const {
    if (device != devices_[static_cast<std::size_t>(rank)])
      throw UserError(cat("Communicator (NCCL): ", where, " of rank ", rank, " on a context of ",
                          device, ", but rank ", rank, " is ",
                          devices_[static_cast<std::size_t>(rank)],
                          "; use a context of the rank's own GPU"));
  }

  /// Rank \p rank's part of \p c on \p stream, in a group of its own (one NCCL launch).
  void grouped(int rank, const Collective& c, void* stream) const {
    nccl_.check(nccl_.ncclGroupStart(), "ncclGroupStart");
    try {
      issue(rank, c, stream);
    } catch (...) {
      nccl_.ncclGroupEnd();
      throw;
    }
    nccl_.check(nccl_.ncclGroupEnd(), "ncclGroupEnd");
  }

  /// NCCL's calls for rank \p rank's part of \p c on \p stream (inside a group).
  void issue(int rank, const Collective& c, void* stream) const {
    const ncclComm_t comm = comms_[static_cast<std::size_t>(rank)];
    const auto s = static_cast<cudaStream_t>(stream);
    const std::size_t es = size_of(c.dtype);
    const auto* in = static_cast<const unsigned char*>(c.in);
    auto* out = static_cast<unsigned char*>(c.out);
    const auto equal = [&] {
      return std::all_of(c.counts.begin(), c.counts.end(),
                         [&](std::size_t n) { return n == c.counts[0]; });
    };
    const std::string what = cat("NCCL ", to_string(c.kind), " (rank ", rank, " of ", size(), ")");
    switch (c.kind) {
      case CollectiveKind::allreduce_sum:
        return nccl_.check(
            nccl_.ncclAllReduce(c.in, c.out, c.counts[0], nccl_type(c.dtype, true, "allreduce_sum"),
                                ncclSum, comm, s),
            what);
      case CollectiveKind::broadcast:
        return nccl_.check(
            nccl_.ncclBroadcast(c.in, c.out, c.counts[0], nccl_type(c.dtype, false, "broadcast"),
                                c.root, comm, s),
            what);
      case CollectiveKind::allgather: {
        const ncclDataType_t t = nccl_type(c.dtype, false, "allgather");
        if (equal())
          return nccl_.check(nccl_.ncclAllGather(c.in, c.out, c.counts[0], t, comm, s), what);
        // Uneven parts: one broadcast per rank, from it into its slice of every output.
        std::size_t at = 0;
        for (int q = 0; q < size(); ++q) {
          const std::size_t n = c.counts[static_cast<std::size_t>(q)];
          nccl_.check(
              nccl_.ncclBroadcast(q == rank ? c.in : nullptr, out + at * es, n, t, q, comm, s),
              what);
          at += n;
        }
        return;
      }
      case CollectiveKind::reduce_scatter_sum: {
        const ncclDataType_t t = nccl_type(c.dtype, true, "reduce_scatter_sum");
        if (equal())
          return nccl_.check(nccl_.ncclReduceScatter(c.in, c.out, c.counts[0], t, ncclSum, comm, s),
                             what);
        // Uneven parts: one reduce per rank, of its slice of every input, onto it.
        std::size_t at = 0;
        for (int q = 0; q < size(); ++q) {
          const std::size_t n = c.counts[static_cast<std::size_t>(q)];
          nccl_.check(nccl_.ncclReduce(in + at * es, q == rank ? c.out : nullptr, n, t, ncclSum, q,
                                       comm, s),
                      what);
          at += n;
        }
        return;
      }
      case CollectiveKind::all_to_all: {
        const ncclDataType_t t = nccl_type(c.dtype, false, "all_to_all");
        const std::size_t n = c.counts[0];
        for (int q = 0; q < size(); ++q) {
          nccl_.check(nccl_.ncclSend(in + static_cast<std::size_t>(q) * n * es, n, t, q, comm, s),
                      what);
          nccl_.check(nccl_.ncclRecv(out + static_cast<std::size_t>(q) * n * es, n, t, q, comm, s),
                      what);
        }
        return;
      }
    }
  }

  const Nccl& nccl_;
  std::vector<Device> devices_;
  std::vector<DeviceContext> contexts_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

const Nccl& Nccl::instance() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) throw UserError(loaded.error);
  return loaded.api;
}

void Nccl::check(ncclResult_t r, const std::string& what) const {
  if (r == ncclSuccess) return;
  const char* text = ncclGetErrorString != nullptr ? ncclGetErrorString(r) : nullptr;
  throw DeviceError(cat(what, " failed: ", text != nullptr ? text : "NCCL error"),
                    static_cast<long>(r));
}

/// \throws UserError unless \p devices are distinct CUDA devices, at least one.
static void check_nccl_devices(const std::vector<Device>& devices) {
  if (devices.empty())
    throw UserError("Communicator::create_nccl: no devices; pass the GPUs, one per rank");
  std::set<int> seen;
  for (const Device& d : devices) {
    if (!d.is_cuda())
      throw UserError(cat("Communicator::create_nccl: ", d,
                          " is not a GPU; NCCL ranks are CUDA devices (create_local joins CPU "
                          "devices)"));
    if (!seen.insert(d.index()).second)
      throw UserError(
          cat("Communicator::create_nccl: ", d, " appears twice; each rank is its own GPU"));
  }
}

std::shared_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices,
                                                     std::vector<DeviceContext> contexts,
                                                     const Nccl& nccl) {
  check_nccl_devices(devices);
  return std::make_shared<NcclCommunicator>(devices, std::move(contexts), nccl);
}

}  // namespace kiln::detail

namespace kiln {

std::shared_ptr<Communicator> Communicator::create_nccl(const std::vector<Device>& devices) {
  detail::check_nccl_devices(devices);
  std::vector<DeviceContext> contexts(devices.begin(), devices.end());
  return detail::make_nccl_communicator(devices, std::move(contexts), detail::Nccl::instance());
}

}  // namespace kiln
