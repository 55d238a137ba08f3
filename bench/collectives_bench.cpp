// Allreduce bandwidth, side by side in one run.
//
//   bench_collectives [--ranks 2,4] [--mib 1,16,64] [--reps 20] [--json FILE]
//       allreduce_sum of N floats over R virtual CPU devices (one thread each, signal
//       buffers) against one memcpy of the same bytes on one thread
//   mpirun -np 2 bench_collectives [--mib 1,16,64] [--reps 20]
//       kiln's MPI path (mpi_cluster communicator, the libkiln_mpi.so plugin) against
//       MPI_Allreduce called directly, in place, on the same buffers
//
// Bandwidth is bytes of one rank's buffer per second (algorithm bandwidth); medians.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "kiln/runtime/collectives.hpp"
#ifdef KILN_BENCH_HAVE_MPI
#include <mpi.h>
#endif

namespace {

using kiln::bench::median_seconds;

void local(const std::vector<int>& ranks_list, const std::vector<int>& mibs, int reps,
           std::ostringstream& json) {
  std::printf("allreduce_sum on virtual CPU devices (one thread each) vs memcpy, GB/s\n");
  std::printf("%6s %8s %12s %12s %10s\n", "ranks", "MiB", "allreduce", "memcpy", "ratio");
  for (int ranks : ranks_list) {
    kiln::set_cpu_device_count(std::max(kiln::cpu_device_count(), ranks));
    auto comm = kiln::Communicator::create_local(ranks);
    std::vector<kiln::DeviceContext> ctx;
    for (int r = 0; r < ranks; ++r)
      ctx.emplace_back(kiln::Device::cpu(r), kiln::DeviceContextOptions{1});
    for (int mib : mibs) {
      const std::size_t n = static_cast<std::size_t>(mib) * (1 << 20) / sizeof(float);
      std::vector<std::vector<float>> x(static_cast<std::size_t>(ranks),
                                        std::vector<float>(n, 1.0f));
      std::vector<float> copy(n);
      const double t_reduce = median_seconds(reps, [&] {
        for (int r = 0; r < ranks; ++r)
          comm->enqueue(ctx[static_cast<std::size_t>(r)], r,
                        kiln::Collective::allreduce_sum(x[static_cast<std::size_t>(r)].data(),
                                                        x[static_cast<std::size_t>(r)].data(), n,
                                                        kiln::DType::f32));
        for (auto& c : ctx) c.synchronize();
      });
      const double t_copy = median_seconds(reps, [&] {
        std::memcpy(copy.data(), x[0].data(), n * sizeof(float));
        asm volatile("" : : "r"(copy.data()) : "memory");
      });
      const double bytes = static_cast<double>(n * sizeof(float));
      std::printf("%6d %8d %12.2f %12.2f %9.2fx\n", ranks, mib, bytes / t_reduce / 1e9,
                  bytes / t_copy / 1e9, t_copy / t_reduce);
      json << (json.tellp() > 0 ? ",\n    " : "\n    ")
           << "{\"mode\": \"local\", \"ranks\": " << ranks << ", \"mib\": " << mib
           << ", \"allreduce_gbps\": " << bytes / t_reduce / 1e9
           << ", \"memcpy_gbps\": " << bytes / t_copy / 1e9 << "}";
    }
  }
}

#ifdef KILN_BENCH_HAVE_MPI
void mpi(const std::vector<int>& mibs, int reps, std::ostringstream& json) {
  auto cluster = kiln::mpi_cluster();  // initialises MPI through the plugin
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<kiln::Device> devices;
  for (int r = 0; r < size; ++r) devices.push_back(kiln::Device::cpu(r));
  auto comm = cluster->communicator(devices);
  if (rank == 0) {
    std::printf("allreduce_sum across %d processes: kiln's MPI path vs MPI_Allreduce, GB/s\n",
                size);
    std::printf("%8s %12s %14s %10s\n", "MiB", "kiln", "MPI_Allreduce", "kiln/MPI");
  }
  for (int mib : mibs) {
    const std::size_t n = static_cast<std::size_t>(mib) * (1 << 20) / sizeof(float);
    std::vector<float> x(n, 1.0f);
    const auto barrier_then = [&](auto&& f) {
      return median_seconds(reps, [&] {
        MPI_Barrier(MPI_COMM_WORLD);
        f();
      });
    };
    const double t_kiln = barrier_then([&] {
      comm->run(rank, kiln::Collective::allreduce_sum(x.data(), x.data(), n, kiln::DType::f32));
    });
    const double t_mpi = barrier_then([&] {
      MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    const double bytes = static_cast<double>(n * sizeof(float));
    if (rank == 0) {
      std::printf("%8d %12.2f %14.2f %9.2fx\n", mib, bytes / t_kiln / 1e9, bytes / t_mpi / 1e9,
                  t_mpi / t_kiln);
      json << (json.tellp() > 0 ? ",\n    " : "\n    ") << "{\"mode\": \"mpi\", \"ranks\": " << size
           << ", \"mib\": " << mib << ", \"kiln_gbps\": " << bytes / t_kiln / 1e9
           << ", \"mpi_allreduce_gbps\": " << bytes / t_mpi / 1e9 << "}";
    }
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ranks = {2, 4}, mibs = {1, 16, 64};
  int reps = 20;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ranks" && i + 1 < argc) {
      ranks = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--mib" && i + 1 < argc) {
      mibs = kiln::bench::parse_int_list(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--ranks 2,4] [--mib 1,16,64] [--reps 20] [--json FILE]\n",
                   argv[0]);
      return arg == "--help" ? 0 : 2;
    }
  }
  std::ostringstream json;
  if (kiln::launched_by_mpi()) {
#ifdef KILN_BENCH_HAVE_MPI
    mpi(mibs, reps, json);
#else
    std::fprintf(stderr, "bench_collectives: built without MPI; run it without mpirun\n");
    return 2;
#endif
  } else {
    local(ranks, mibs, reps, json);
  }
  if (!json_path.empty() && json.tellp() > 0) {
    std::ofstream(json_path) << "{\n  \"benchmark\": \"collectives\",\n  \"results\": ["
                             << json.str() << "\n  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
