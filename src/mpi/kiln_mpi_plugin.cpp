// libkiln_mpi.so: MPI behind a small C interface (kiln_mpi_plugin.h). No kiln code lives
// here, so the plugin and the program that loads it share no C++ types.
//
// Collectives are started nonblocking and polled with a deadline, so that a rank that
// stopped (SIGSTOP, a hang in user code) cannot make the others wait forever. When the
// deadline passes, the rank finds out who is missing with a roll call: it sends every other
// rank of the communicator an empty message tagged with the collective's number; a rank
// polling the same collective answers with an empty "here" message and counts the caller as
// present (roll calls that arrive before its own deadline are answered at once, so ranks
// whose deadlines fall later are never taken for missing). After a grace period, ranks
// neither heard from nor answering are the missing ones.

#include "mpi/kiln_mpi_plugin.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

MPI_Datatype datatype(int dtype) {
  switch (dtype) {
    case KILN_MPI_F32:
      return MPI_FLOAT;
    case KILN_MPI_F64:
      return MPI_DOUBLE;
    case KILN_MPI_I32:
      return MPI_INT32_T;
    default:
      return MPI_INT64_T;
  }
}

std::size_t element_size(int dtype) {
  return dtype == KILN_MPI_F32 || dtype == KILN_MPI_I32 ? 4 : 8;
}

// Set when a collective timed out: MPI_Finalize would then wait for the missing rank.
std::atomic<bool> abort_at_exit{false};

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (abort_at_exit.load()) MPI_Abort(MPI_COMM_WORLD, 3);
  MPI_Finalize();
}

/// A communicator of the plugin: the MPI one and the state of its collectives.
struct Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  unsigned number = 0;             // collectives started on it
  bool out_of_step = false;        // a collective timed out: its request may still be pending
  std::vector<char> present;       // per rank: heard from during the current collective
  std::vector<int> sizes, displs;  // Iallgatherv's and Ireduce_scatter's, alive until done
};

// Tags of the roll call for collective `number` and of its answers. Empty messages on the
// plugin's communicators are only these (the collectives themselves use MPI's own context).
constexpr unsigned kTagNumbers = 8192;  // MPI guarantees tags up to 32767
int roll_call_tag(unsigned number) { return static_cast<int>(2 * (number % kTagNumbers)); }
int here_tag(unsigned number) { return roll_call_tag(number) + 1; }

void send_empty(const Comm& c, int to, int tag) {
  MPI_Request request;
  if (MPI_Isend(nullptr, 0, MPI_BYTE, to, tag, c.comm, &request) == MPI_SUCCESS)
    MPI_Request_free(&request);
}

// Receives every waiting message with \p tag, marking its sender present; answers roll
// calls with "here".
void read_notices(Comm& c, int tag, bool answer) {
  for (;;) {
    int waiting = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, tag, c.comm, &waiting, &status) != MPI_SUCCESS || !waiting)
      return;
    MPI_Recv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, tag, c.comm, MPI_STATUS_IGNORE);
    c.present[static_cast<std::size_t>(status.MPI_SOURCE)] = 1;
    if (answer) send_empty(c, status.MPI_SOURCE, here_tag(c.number));
  }
}

void read_notices(Comm& c) {
  read_notices(c, roll_call_tag(c.number), true);
  read_notices(c, here_tag(c.number), false);
}

// Polls \p request until it completes or the deadline and the roll call's grace pass.
int wait(Comm& c, MPI_Request& request, long long timeout_ms, int* missing, int* n_missing) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(std::max(timeout_ms, 0LL));
  const auto grace = std::chrono::milliseconds(std::clamp(timeout_ms / 10, 200LL, 2000LL));
  bool called = false;
  Clock::time_point grace_end{};
  for (unsigned round = 0;; ++round) {
    int done = 0;
    if (int e = MPI_Test(&request, &done, MPI_STATUS_IGNORE)) return e;
    if (done) return MPI_SUCCESS;
    if (round % 64 != 0) continue;  // spin on MPI_Test first: most collectives end soon
    read_notices(c);
    const auto now = Clock::now();
    if (now - start < std::chrono::milliseconds(1)) continue;
    if (!called && now >= deadline) {
      for (int q = 0; q < c.size; ++q)
        if (q != c.rank) send_empty(c, q, roll_call_tag(c.number));
      called = true;
      grace_end = now + grace;
    } else if (called && now >= grace_end) {
      c.out_of_step = true;
      abort_at_exit.store(true);
      *n_missing = 0;
      for (int q = 0; q < c.size; ++q)
        if (q != c.rank && !c.present[static_cast<std::size_t>(q)]) missing[(*n_missing)++] = q;
      return KILN_MPI_TIMED_OUT;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// The element counts as MPI's ints; false if one does not fit.
bool as_ints(const size_t* counts, int n, std::vector<int>& out) {
  out.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (counts[i] > static_cast<size_t>(INT_MAX)) return false;
    out[static_cast<std::size_t>(i)] = static_cast<int>(counts[i]);
  }
  return true;
}

int start(Comm& c, int kind, int dtype, const void* in, void* out, const size_t* counts,
          int n_counts, int root, MPI_Request* request) {
  const MPI_Datatype t = datatype(dtype);
  if (!as_ints(counts, n_counts, c.sizes)) return MPI_ERR_COUNT;
  const int count = c.sizes[0];
  switch (kind) {
    case KILN_MPI_ALLREDUCE_SUM:
      return MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, count, t, MPI_SUM, c.comm, request);
    case KILN_MPI_ALLGATHER: {
      c.displs.assign(c.sizes.size(), 0);
      for (std::size_t i = 1; i < c.sizes.size(); ++i) {
        if (c.displs[i - 1] > INT_MAX - c.sizes[i - 1]) return MPI_ERR_COUNT;
        c.displs[i] = c.displs[i - 1] + c.sizes[i - 1];
      }
      return MPI_Iallgatherv(in, c.sizes[static_cast<std::size_t>(c.rank)], t, out, c.sizes.data(),
                             c.displs.data(), t, c.comm, request);
    }
    case KILN_MPI_REDUCE_SCATTER_SUM:
      return MPI_Ireduce_scatter(in, out, c.sizes.data(), t, MPI_SUM, c.comm, request);
    case KILN_MPI_BROADCAST:
      if (c.rank == root && in != out) std::memcpy(out, in, counts[0] * element_size(dtype));
      return MPI_Ibcast(out, count, t, root, c.comm, request);
    default:
      return MPI_Ialltoall(in, count, t, out, count, t, c.comm, request);
  }
}

}  // namespace

extern "C" int kiln_mpi_init(int* rank, int* size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (int e = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided)) return e;
    std::atexit(finalize);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  return MPI_Comm_size(MPI_COMM_WORLD, size);
}

extern "C" int kiln_mpi_split(int color, int member, int key, void** comm) {
  MPI_Comm split = MPI_COMM_NULL;
  if (int e = MPI_Comm_split(MPI_COMM_WORLD, member ? color : MPI_UNDEFINED, key, &split)) return e;
  if (split == MPI_COMM_NULL) {
    *comm = nullptr;
    return MPI_SUCCESS;
  }
  auto* c = new Comm;  // never freed: MPI communicators live until MPI_Finalize
  c->comm = split;
  MPI_Comm_rank(split, &c->rank);
  MPI_Comm_size(split, &c->size);
  c->present.assign(static_cast<std::size_t>(c->size), 0);
  *comm = c;
  return MPI_SUCCESS;
}

extern "C" int kiln_mpi_run(void* comm, int kind, int dtype, const void* in, void* out,
                            const size_t* counts, int n_counts, int root, long long timeout_ms,
                            int* missing, int* n_missing) {
  Comm& c = *static_cast<Comm*>(comm);
  *n_missing = 0;
  if (c.out_of_step) return KILN_MPI_TIMED_OUT;
  // Roll calls about the previous collective that came after it ended: nobody waits on them.
  read_notices(c, roll_call_tag(c.number), false);
  read_notices(c, here_tag(c.number), false);
  ++c.number;
  std::fill(c.present.begin(), c.present.end(), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  if (int e = start(c, kind, dtype, in, out, counts, n_counts, root, &request)) return e;
  return wait(c, request, timeout_ms, missing, n_missing);
}

extern "C" const char* kiln_mpi_error_string(int code) {
  if (code == KILN_MPI_TIMED_OUT) return "timed out";
  static char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "unknown MPI error";
  return text;
}
