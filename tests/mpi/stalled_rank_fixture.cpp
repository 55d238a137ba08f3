// The program of ctest mpi.a_stalled_rank_times_out (run_stalled_rank_test.cmake), run as
// `mpirun -np 2 kiln_mpi_stalled_rank sleep|stop`: both processes run one allreduce, then
// process 1 stops (`stop`: SIGSTOP) or hangs in user code (`sleep`) before the second one.
// Process 0 must get a DeviceError naming rank 1 within the communicator's timeout (2 s)
// instead of waiting forever, and a third collective must be refused at once. Process 0
// prints what it saw and exits 0; MPI then aborts the job at exit (MPI_Finalize would wait
// for process 1), which ends process 1 too.

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kiln/core/error.hpp"
#include "kiln/runtime/collectives.hpp"

int main(int argc, char** argv) {
  using namespace kiln;
  const std::string mode = argc > 1 ? argv[1] : "sleep";
  try {
    const auto cluster = mpi_cluster(std::chrono::milliseconds(2000));
    const auto comm = cluster->communicator({Device::cpu(0), Device::cpu(1)});
    const int rank = cluster->owns(Device::cpu(0)) ? 0 : 1;
    std::vector<float> in(4, 1.0f + static_cast<float>(rank)), out(4, 0.0f);
    comm->run(rank, Collective::allreduce_sum(in.data(), out.data(), in.size(), DType::f32));
    if (out[0] != 3.0f) {
      std::printf("rank %d: the first allreduce gave %g, not 3\n", rank, out[0]);
      return 1;
    }
    if (rank == 1) {
      std::fflush(stdout);
      if (mode == "stop") std::raise(SIGSTOP);
      std::this_thread::sleep_for(std::chrono::hours(1));
      return 1;
    }
    try {
      comm->run(0, Collective::allreduce_sum(in.data(), out.data(), in.size(), DType::f32));
      std::printf("rank 0: the second allreduce completed without rank 1\n");
      return 1;
    } catch (const DeviceError& e) {
      std::printf("rank 0 timed out: %s\n", e.what());
    }
    try {
      comm->run(0, Collective::allreduce_sum(in.data(), out.data(), in.size(), DType::f32));
      std::printf("rank 0: the third allreduce completed\n");
      return 1;
    } catch (const DeviceError& e) {
      std::printf("rank 0 then: %s\n", e.what());
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
