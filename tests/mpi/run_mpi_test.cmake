# ctest mpi.tensor_parallel_mlp_across_two_processes: the tensor-parallel MLP run by
# `mpirun -np 2 kiln run` (each process drives one device; the allreduce goes through
# MPI) must equal the same module run in one process on two virtual CPU devices.
# Arguments: FIXTURE, KILN, MPIRUN, WORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${FIXTURE} write ${WORK_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "writing the module failed (${rc})")
endif()
set(run_args run ${WORK_DIR}/tp.mlir --weights ${WORK_DIR}/tp.safetensors
    --input arg0=${WORK_DIR}/x0.npy --input arg1=${WORK_DIR}/x1.npy --threads 1)
execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_CPU_DEVICES=2
                        ${KILN} ${run_args} --output ${WORK_DIR}/single
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "single-process run failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -np 2
                        ${KILN} ${run_args} --output ${WORK_DIR}/mpi
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
message(STATUS "mpirun output:\n${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun -np 2 failed (${rc}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${FIXTURE} compare ${WORK_DIR}/single ${WORK_DIR}/mpi
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the MPI run differs from the single-process run:\n${out}\n${err}")
endif()
