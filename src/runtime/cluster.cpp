// Clusters: the local one (signal buffers) and the MPI one (the libkiln_mpi.so plugin,
// loaded on first use).

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/collectives.hpp"
#include "mpi/kiln_mpi_plugin.h"
#include "runtime/dynamic_library.hpp"

namespace kiln {
namespace {

using detail::cat;

class LocalCluster final : public Cluster {
 public:
  bool owns(Device) const override { return true; }
  std::shared_ptr<Communicator> communicator(const std::vector<Device>& devices) override {
    return Communicator::create_local(static_cast<int>(devices.size()));
  }
  std::string str() const override { return "local"; }
};

/// The plugin's functions.
struct MpiPlugin {
  decltype(&kiln_mpi_init) init = nullptr;
  decltype(&kiln_mpi_split) split = nullptr;
  decltype(&kiln_mpi_run) run = nullptr;
  decltype(&kiln_mpi_error_string) error_string = nullptr;
  int rank = 0, size = 1;

  void check(int code, const std::string& what) const {
    if (code != 0) throw DeviceError(cat("MPI: ", what, " failed: ", error_string(code)));
  }
};

std::string directory_of_program() {
  std::string path(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) return ".";
  path.resize(static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

/// The directory of the file this code was loaded from: libkiln.so, or the program
/// when kiln is linked statically.
std::string directory_of_kiln() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&directory_of_kiln), &info) == 0 ||
      info.dli_fname == nullptr)
    return ".";
  const std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// Loads libkiln_mpi.so and initialises MPI, once per process.
const MpiPlugin& plugin() {
  static MpiPlugin loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("KILN_MPI_PLUGIN"); env && *env) candidates.push_back(env);
    const std::string dir = directory_of_program();
    candidates.push_back(dir + "/libkiln_mpi.so");
    candidates.push_back(dir + "/../lib/libkiln_mpi.so");
    candidates.push_back(directory_of_kiln() + "/libkiln_mpi.so");  // beside libkiln.so
#ifdef KILN_MPI_PLUGIN_BUILD_PATH
    candidates.push_back(KILN_MPI_PLUGIN_BUILD_PATH);
#endif
    candidates.push_back("libkiln_mpi.so");
    std::vector<std::string> tried;
    void* handle = detail::open_first_library(candidates, tried);
    if (handle == nullptr)
      throw UserError(cat("mpi_cluster: cannot load the MPI plugin libkiln_mpi.so (",
                          detail::join(tried, "; "),
                          "); build kiln with Open MPI installed (scripts/setup.sh installs "
                          "libopenmpi-dev) or point KILN_MPI_PLUGIN at the plugin"));
    const auto load = [&](auto& fn, const char* name) {
      fn = detail::library_symbol<std::remove_reference_t<decltype(fn)>>(handle, name);
      if (fn == nullptr)
        throw UserError(cat("mpi_cluster: the MPI plugin lacks ", name, " (a stale build?)"));
    };
    load(loaded.init, "kiln_mpi_init");
    load(loaded.split, "kiln_mpi_split");
    load(loaded.run, "kiln_mpi_run");
    load(loaded.error_string, "kiln_mpi_error_string");
    loaded.check(loaded.init(&loaded.rank, &loaded.size), "MPI_Init_thread");
  });
  return loaded;
}

int mpi_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return KILN_MPI_F32;
    case DType::f64:
      return KILN_MPI_F64;
    case DType::i32:
      return KILN_MPI_I32;
    case DType::i64:
      return KILN_MPI_I64;
    default:
      throw UserError(cat("MPI collectives take f32, f64, i32 or i64 elements, not ", name(dtype),
                          "; cast before the collective"));
  }
}

/// The ranks of one device group, one per process: this process's rank is `position`.
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::vector<int> processes, int position, void* comm,
                  std::chrono::milliseconds timeout)
      : processes_(std::move(processes)),
        position_(position),
        comm_(comm),
        timeout_(timeout),
        missing_(processes_.size()) {}
  int size() const noexcept override { return static_cast<int>(processes_.size()); }

  void run(int rank, const Collective& c) override {
    check(rank, c);
    if (comm_ == nullptr || rank != position_)
      throw InternalError(cat("MpiCommunicator: rank ", rank, " runs here, but this process is ",
                              position_ < 0 ? "not in the group" : cat("rank ", position_)));
    const MpiPlugin& p = plugin();
    ++number_;
    int n_missing = 0;
    const int code = p.run(comm_, static_cast<int>(c.kind), mpi_dtype(c.dtype), c.in, c.out,
                           c.counts.data(), static_cast<int>(c.counts.size()), c.root,
                           timeout_.count(), missing_.data(), &n_missing);
    if (code == KILN_MPI_TIMED_OUT) throw DeviceError(timed_out(c, n_missing));
    p.check(code, to_string(c.kind));
  }

 private:
  std::string who(int rank) const {
    return cat("rank ", rank, " (MPI process ", processes_[static_cast<std::size_t>(rank)], ")");
  }

  std::string timed_out(const Collective& c, int n_missing) {
    const std::string here =
        cat("collective ", number_, " (", to_string(c.kind), ") on ", who(position_), ": ");
    std::string why;
    if (timed_out_at_ != 0) {
      why = cat("collective ", timed_out_at_,
                " on this communicator timed out, so its ranks are out of step");
    } else if (n_missing == 0) {
      why = cat("every rank arrived, but it did not complete within ", timeout_.count(),
                " ms; the ranks must run the same collective with the same counts");
    } else {
      std::vector<std::string> ranks;
      for (int i = 0; i < n_missing; ++i)
        ranks.push_back(who(missing_[static_cast<std::size_t>(i)]));
      why = cat(detail::join(ranks, ", "), " did not arrive at it within ", timeout_.count(),
                " ms; every rank must run the same collectives in the same order");
    }
    if (timed_out_at_ == 0) timed_out_at_ = number_;
    return cat(here, why,
               " (MPI cannot cancel a collective: this process aborts the MPI job at exit rather "
               "than wait in MPI_Finalize)");
  }

  std::vector<int> processes_;  // rank i is MPI process processes_[i]
  int position_;
  void* comm_;  // the plugin's communicator, null when this process is not in the group
                // (never freed: MPI communicators live until MPI_Finalize)
  std::chrono::milliseconds timeout_;
  std::vector<int> missing_;        // room for the plugin's answer: allocated once
  std::uint64_t number_ = 0;        // collectives run, for messages
  std::uint64_t timed_out_at_ = 0;  // the collective that timed out, 0 if none
};

class MpiCluster final : public Cluster {
 public:
  explicit MpiCluster(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  bool owns(Device device) const override { return device.index() == plugin().rank; }

  std::shared_ptr<Communicator> communicator(const std::vector<Device>& devices) override {
    const MpiPlugin& p = plugin();
    int position = -1;
    std::vector<int> processes;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      processes.push_back(devices[i].index());
      if (devices[i].index() >= p.size)
        throw UserError(cat("mpi_cluster: ", devices[i], " has no process: ", p.size,
                            " processes drive cpu:0 to cpu:", p.size - 1, "; run with mpirun -np ",
                            devices[i].index() + 1, " or more"));
      if (owns(devices[i])) position = static_cast<int>(i);
    }
    void* comm = nullptr;
    p.check(p.split(next_color_++, position >= 0 ? 1 : 0, position, &comm), "MPI_Comm_split");
    return std::make_shared<MpiCommunicator>(std::move(processes), position, comm, timeout_);
  }

  std::string str() const override {
    return cat("MPI rank ", plugin().rank, " of ", plugin().size);
  }

 private:
  std::chrono::milliseconds timeout_;
  int next_color_ = 0;  // every process splits every group in the same order
};

}  // namespace

std::shared_ptr<Cluster> Cluster::local() { return std::make_shared<LocalCluster>(); }

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (const char* v = std::getenv(var); v && *v) return true;
  return false;
}

std::shared_ptr<Cluster> mpi_cluster(std::chrono::milliseconds collective_timeout) {
  if (collective_timeout.count() <= 0)
    throw UserError(cat("mpi_cluster: the collective timeout must be positive, not ",
                        collective_timeout.count(), " ms"));
  const MpiPlugin& p = plugin();  // load and initialise now, so that errors surface here
  // Process p drives cpu:p, so it needs that many CPU devices to open a context on it.
  if (cpu_device_count() < p.size) set_cpu_device_count(p.size);
  return std::make_shared<MpiCluster>(collective_timeout);
}

}  // namespace kiln
