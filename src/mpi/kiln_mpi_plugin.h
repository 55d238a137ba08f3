/* The C interface of libkiln_mpi.so, the plugin that puts MPI behind kiln's cross-process
 * communicators. kiln loads it with dlopen only when an MPI cluster is asked for, so
 * kiln itself never links MPI. Every function returns an MPI error code (0: success). */
#ifndef KILN_MPI_PLUGIN_H
#define KILN_MPI_PLUGIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective kinds and element types, as kiln numbers them. */
enum {
  KILN_MPI_ALLREDUCE_SUM,
  KILN_MPI_ALLGATHER,
  KILN_MPI_REDUCE_SCATTER_SUM,
  KILN_MPI_BROADCAST,
  KILN_MPI_ALL_TO_ALL
};
enum { KILN_MPI_F32, KILN_MPI_F64, KILN_MPI_I32, KILN_MPI_I64 };

/* MPI_Init_thread(MPI_THREAD_SERIALIZED) unless MPI is initialised; finalises at exit.
 * Writes this process's rank and the world size. */
int kiln_mpi_init(int* rank, int* size);
/* MPI_Comm_split of MPI_COMM_WORLD: processes passing member != 0 form one communicator,
 * ordered by key; the others pass member == 0 and get NULL. Collective over the world. */
int kiln_mpi_split(int color, int member, int key, void** comm);
/* One collective on comm (see kiln::Collective for in, out and counts). */
int kiln_mpi_collective(void* comm, int kind, int dtype, const void* in, void* out,
                        const size_t* counts, int n_counts, int root);
/* The text of an MPI error code (static storage). */
const char* kiln_mpi_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif
