// libkiln_mpi.so: MPI behind a small C interface (kiln_mpi_plugin.h). No kiln code lives
// here, so the plugin and the program that loads it share no C++ types.

#include "mpi/kiln_mpi_plugin.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

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

void finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::vector<int> as_ints(const size_t* counts, int n) {
  return std::vector<int>(counts, counts + n);
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
  auto* c = new MPI_Comm;
  if (int e = MPI_Comm_split(MPI_COMM_WORLD, member ? color : MPI_UNDEFINED, key, c)) {
    delete c;
    return e;
  }
  if (*c == MPI_COMM_NULL) {
    delete c;
    *comm = nullptr;
  } else {
    *comm = c;
  }
  return MPI_SUCCESS;
}

extern "C" int kiln_mpi_collective(void* comm, int kind, int dtype, const void* in, void* out,
                                   const size_t* counts, int n_counts, int root) {
  const MPI_Comm c = *static_cast<MPI_Comm*>(comm);
  const MPI_Datatype t = datatype(dtype);
  const int count = static_cast<int>(counts[0]);
  switch (kind) {
    case KILN_MPI_ALLREDUCE_SUM:
      return MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, count, t, MPI_SUM, c);
    case KILN_MPI_ALLGATHER: {
      int rank = 0;
      MPI_Comm_rank(c, &rank);
      const std::vector<int> sizes = as_ints(counts, n_counts);
      std::vector<int> displs(sizes.size(), 0);
      for (std::size_t i = 1; i < sizes.size(); ++i) displs[i] = displs[i - 1] + sizes[i - 1];
      return MPI_Allgatherv(in, sizes[static_cast<std::size_t>(rank)], t, out, sizes.data(),
                            displs.data(), t, c);
    }
    case KILN_MPI_REDUCE_SCATTER_SUM: {
      const std::vector<int> sizes = as_ints(counts, n_counts);
      return MPI_Reduce_scatter(in, out, sizes.data(), t, MPI_SUM, c);
    }
    case KILN_MPI_BROADCAST: {
      int rank = 0;
      MPI_Comm_rank(c, &rank);
      if (rank == root && in != out) std::memcpy(out, in, counts[0] * element_size(dtype));
      return MPI_Bcast(out, count, t, root, c);
    }
    default:
      return MPI_Alltoall(in, count, t, out, count, t, c);
  }
}

extern "C" const char* kiln_mpi_error_string(int code) {
  static char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "unknown MPI error";
  return text;
}
