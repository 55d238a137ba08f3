/* The C interface of libkiln_mpi.so, the plugin that puts MPI behind kiln's cross-process
 * communicators. kiln loads it with dlopen only when an MPI cluster is asked for, so
 * kiln itself never links MPI. Every function returns an MPI error code (0: success) or
 * KILN_MPI_TIMED_OUT. */
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
/* What kiln_mpi_run returns when the other ranks did not all arrive in time (no MPI error
 * code is negative). */
enum { KILN_MPI_TIMED_OUT = -1 };

/* MPI_Init_thread(MPI_THREAD_SERIALIZED) unless MPI is initialised; finalises at exit
 * (after a timed-out collective it aborts the MPI job instead: MPI_Finalize would wait for
 * the rank that never came). Writes this process's rank and the world size. */
int kiln_mpi_init(int* rank, int* size);
/* MPI_Comm_split of MPI_COMM_WORLD: processes passing member != 0 form one communicator,
 * ordered by key; the others pass member == 0 and get NULL. Collective over the world. */
int kiln_mpi_split(int color, int member, int key, void** comm);
/* One collective on comm (see kiln::Collective for in, out and counts), started
 * nonblocking and polled for at most timeout_ms milliseconds. If it has not completed
 * by then, returns KILN_MPI_TIMED_OUT and writes to missing[0 .. *n_missing) the ranks
 * of comm that did not reach it (missing holds room for every rank of comm; *n_missing
 * is 0 when they all arrived but the collective still did not complete, as when they
 * disagree on it). The communicator is out of step after a timeout: every later
 * collective on it returns KILN_MPI_TIMED_OUT at once, naming no rank. */
int kiln_mpi_run(void* comm, int kind, int dtype, const void* in, void* out, const size_t* counts,
                 int n_counts, int root, long long timeout_ms, int* missing, int* n_missing);
/* The text of an MPI error code (static storage). */
const char* kiln_mpi_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif
