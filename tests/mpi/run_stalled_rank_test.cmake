# ctest mpi.a_stalled_rank_times_out.MODE: under `mpirun -np 2`, process 1 stops or hangs
# before a collective (stalled_rank_fixture.cpp); process 0 must report it within the
# timeout, naming rank 1, and the whole job must end, not wait forever.
# Arguments: FIXTURE, MPIRUN, MODE (sleep or stop).
execute_process(COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -np 2 ${FIXTURE} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
message(STATUS "mpirun (exit ${rc}) output:\n${out}")
if(rc MATCHES "timeout|Process terminated due to timeout")
  message(FATAL_ERROR "the MPI job did not end within 120 s:\n${out}\n${err}")
endif()
set(expected
    "rank 0 timed out: collective 2 \\(allreduce_sum\\) on rank 0 \\(MPI process 0\\): rank 1 \\(MPI process 1\\) did not arrive at it within 2000 ms"
    "rank 0 then: collective 3 \\(allreduce_sum\\) on rank 0 \\(MPI process 0\\): collective 2 on this communicator timed out")
foreach(line IN LISTS expected)
  if(NOT out MATCHES "${line}")
    message(FATAL_ERROR "expected a line matching\n  ${line}\nin:\n${out}\n${err}")
  endif()
endforeach()
if(out MATCHES "completed|error:")
  message(FATAL_ERROR "a collective completed without rank 1, or the fixture failed:\n${out}\n${err}")
endif()
