#pragma once
/// \file
/// Collectives between devices: allreduce, allgather, reduce-scatter, broadcast and
/// all-to-all over a group of ranks, each rank a device with its own context.
///
/// A `Communicator` joins `size()` ranks. Every rank enqueues the same collectives in the
/// same order (as with NCCL or MPI), each on its own context (`enqueue`) or recorded into
/// a device graph of its context (`add`, a graph node like any other, so graphs with
/// collectives replay as a whole). A collective runs when its rank's stream reaches it
/// and completes when every rank has reached it.
///
/// The local communicator synchronises the ranks of one process through signal buffers:
/// one cache line per rank holding its arrival and departure counts and its buffers'
/// addresses, which the other ranks read. Each rank counts its collectives, so a
/// collective is matched by number and a rank can start the next one (or the next replay
/// of a graph) as soon as everyone has left the current one: the barrier is reused
/// without reset. Ranks wait by spinning briefly, then yielding, then sleeping, so more
/// ranks than cores (virtual CPU devices) still make progress.
///
/// \code
///   kiln::set_cpu_device_count(4);                      // cpu:0 ... cpu:3
///   auto comm = kiln::Communicator::create_local(4);
///   std::vector<kiln::DeviceContext> ctx;
///   for (int r = 0; r < 4; ++r) ctx.emplace_back(kiln::Device::cpu(r));
///   for (int r = 0; r < 4; ++r)                         // x[r] += everyone's x, in place
///     comm->enqueue(ctx[r], r, kiln::Collective::allreduce_sum(x[r], x[r], n, kiln::DType::f32));
///   for (auto& c : ctx) c.synchronize();
/// \endcode

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/runtime/device_graph.hpp"

namespace kiln {

enum class CollectiveKind : std::uint8_t {
  allreduce_sum,
  allgather,
  reduce_scatter_sum,
  broadcast,
  all_to_all
};

/// One rank's part of a collective: what it does and its own buffers. Counts are in
/// elements of `dtype`; `in` and `out` may be the same buffer (in place) where noted.
struct Collective {
  CollectiveKind kind = CollectiveKind::allreduce_sum;
  DType dtype = DType::f32;
  const void* in = nullptr;
  void* out = nullptr;
  /// allreduce, broadcast: {count}. allgather: each rank's input count (uneven splits
  /// allowed); the output is their concatenation in rank order. reduce_scatter: each
  /// rank's output count; the input is their concatenation. all_to_all: {count}, the
  /// elements each rank sends to each rank.
  std::vector<std::size_t> counts;
  int root = 0;  ///< broadcast: the rank whose input everyone receives

  /// out = Σ over ranks of in (`count` elements; in place allowed).
  static Collective allreduce_sum(const void* in, void* out, std::size_t count, DType dtype);
  /// out = in of rank 0, then rank 1, ... (`counts[r]` elements from rank r).
  static Collective allgather(const void* in, void* out, std::vector<std::size_t> counts,
                              DType dtype);
  /// out (rank r: `counts[r]` elements) = Σ over ranks of that rank's slice of in
  /// (slices in rank order; in holds Σ counts elements).
  static Collective reduce_scatter_sum(const void* in, void* out, std::vector<std::size_t> counts,
                                       DType dtype);
  /// out = in of rank \p root (`count` elements; in place allowed).
  static Collective broadcast(const void* in, void* out, std::size_t count, int root, DType dtype);
  /// Chunk q of rank r's out = chunk r of rank q's in (`count` elements per chunk, `size`
  /// chunks per buffer).
  static Collective all_to_all(const void* in, void* out, std::size_t count, DType dtype);
};

/// A group of ranks that run collectives together. Thread-safe: each rank's collectives
/// run on its own context's thread.
class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  /// \p size ranks in this process, synchronised through signal buffers in memory.
  /// A rank that waits longer than \p timeout for the others throws DeviceError (a rank
  /// missing a collective would otherwise hang every other rank).
  /// \throws UserError if \p size < 1.
  static std::shared_ptr<Communicator> create_local(
      int size, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  /// NCCL ranks over GPUs of this process: rank r is \p devices[r] (CUDA devices, each
  /// once), its collectives NCCL kernels on the stream of a context of that device. NCCL
  /// asks that one thread drive all ranks of a collective together: use `enqueue_all` for
  /// that; `enqueue` and `add` of a communicator of several ranks need a thread per rank
  /// (each rank's call may wait for the others'). The one-rank communicator (a single
  /// GPU) works either way.
  /// \throws UserError for a device that is not CUDA or appears twice, in a build without
  /// CUDA, or when NCCL cannot be loaded or initialised (with NCCL's words).
  static std::shared_ptr<Communicator> create_nccl(const std::vector<Device>& devices);

  virtual ~Communicator() = default;
  virtual int size() const noexcept = 0;

  /// Runs \p c as rank \p rank when \p ctx's stream reaches it.
  /// \throws UserError for a bad rank or collective (checked now); the stream raises
  /// DeviceError if the ranks disagree on the collective or one does not arrive in time.
  void enqueue(const DeviceContext& ctx, int rank, Collective c);
  /// Records \p c as rank \p rank's node of a graph after \p dependencies.
  DeviceGraphNode add(DeviceGraphBuilder& builder, int rank, Collective c,
                      const DeviceGraphDependencies& dependencies);
  /// Enqueues every rank's part of one collective from the calling thread: \p parts[r] as
  /// rank r on \p contexts[r] (one each, in rank order).
  /// \throws UserError for a count other than size() or a bad part.
  void enqueue_all(std::span<const DeviceContext> contexts, std::span<const Collective> parts);

  /// Runs \p c as rank \p rank now, on the calling thread (what `enqueue` and `add` run;
  /// the buffers are rank \p rank's). After it throws DeviceError (disagreeing ranks, a
  /// timeout) the communicator's ranks are out of step: create a new one.
  virtual void run(int rank, const Collective& c) = 0;

 protected:
  /// \throws UserError naming what is wrong with \p c for rank \p rank.
  void check(int rank, const Collective& c) const;
  /// What `enqueue` does with a checked part (by default: a host function calling run).
  virtual void enqueue_checked(const DeviceContext& ctx, int rank, Collective c);
  /// What `add` does with a checked part (by default: a host node calling run).
  virtual DeviceGraphNode add_checked(DeviceGraphBuilder& builder, int rank, Collective c,
                                      const DeviceGraphDependencies& dependencies);
  /// What `enqueue_all` does with checked parts (by default: `enqueue_checked` in turn).
  virtual void enqueue_all_checked(std::span<const DeviceContext> contexts,
                                   std::span<const Collective> parts);
};

/// Where the devices of a multi-device program run: which of them this process drives,
/// and how the ranks of a collective over several devices meet. The local cluster drives
/// every device and joins them through signal buffers; the MPI cluster (`mpi_cluster`)
/// spreads devices over processes, one each.
class Cluster {
 public:
  virtual ~Cluster() = default;
  /// True when this process runs \p device's work.
  virtual bool owns(Device device) const = 0;
  /// A communicator over \p devices (rank i is devices[i]). Every process asks for every
  /// group of the program in the same order (cross-process clusters create them with a
  /// collective call), including groups it has no device in.
  /// \throws UserError if a device belongs to no process.
  virtual std::shared_ptr<Communicator> communicator(const std::vector<Device>& devices) = 0;
  virtual std::string str() const = 0;  ///< for messages: `local`, `MPI rank 1 of 2`

  /// Every device in this process; local communicators.
  static std::shared_ptr<Cluster> local();
};

/// True when this process was started by an MPI launcher (mpirun sets
/// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK).
bool launched_by_mpi();
/// The MPI cluster: process p of P drives `cpu:p`; collectives between processes go
/// through MPI (MPI_Allreduce, MPI_Allgatherv, MPI_Reduce_scatter, MPI_Bcast,
/// MPI_Alltoall) on sub-communicators split from MPI_COMM_WORLD. MPI is loaded on first
/// use from the plugin libkiln_mpi.so (`KILN_MPI_PLUGIN`, else beside the program, in
/// its ../lib or beside libkiln.so, else the loader's search path), so programs that
/// never call this do not need MPI at run time. Initialises MPI once
/// (MPI_THREAD_SERIALIZED) and finalises it at exit, and exposes at least as many CPU
/// devices as there are processes.
/// A rank that waits longer than \p collective_timeout in a collective (another process
/// stopped, or hangs in user code) throws DeviceError naming the ranks that did not arrive;
/// MPI cannot cancel the collective, so the process then aborts the MPI job at exit
/// instead of waiting in MPI_Finalize for the missing rank.
/// \throws UserError naming what is missing (the plugin, MPI), or for a timeout <= 0.
std::shared_ptr<Cluster> mpi_cluster(
    std::chrono::milliseconds collective_timeout = std::chrono::seconds(60));

/// Elements of the output of \p c on a communicator of \p size ranks, for rank \p rank.
std::size_t collective_output_count(const Collective& c, int size, int rank);
/// Elements of the input of \p c on a communicator of \p size ranks, for rank \p rank.
std::size_t collective_input_count(const Collective& c, int size, int rank);
/// `allreduce_sum`, `allgather`, ...
std::string to_string(CollectiveKind kind);

}  // namespace kiln
