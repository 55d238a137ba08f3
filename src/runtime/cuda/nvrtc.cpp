#include "runtime/cuda/nvrtc.hpp"

#include <nvrtc.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <type_traits>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/dynamic_library.hpp"

namespace kiln::detail {

struct Nvrtc::Api {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error = nullptr;
};

Nvrtc& Nvrtc::instance() {
  static Nvrtc nvrtc;
  static Api api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
#ifdef KILN_CUDA_LIBRARY_DIR
    candidates.push_back(std::string(KILN_CUDA_LIBRARY_DIR) + "/libnvrtc.so");
#endif
    candidates.insert(candidates.end(), {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"});
    std::string error;
    void* handle =
        open_optional_library("KILN_NVRTC_LIBRARY", std::move(candidates), "NVRTC",
                              "install the CUDA toolkit or set KILN_NVRTC_LIBRARY", error);
    if (handle == nullptr) throw UserError(error);
    const auto load = [&](auto& fn, const char* symbol) {
      fn = library_symbol<std::remove_reference_t<decltype(fn)>>(handle, symbol);
      if (fn == nullptr) throw UserError(cat("NVRTC lacks ", symbol));
    };
    load(api.version, "nvrtcVersion");
    load(api.create, "nvrtcCreateProgram");
    load(api.compile, "nvrtcCompileProgram");
    load(api.ptx_size, "nvrtcGetPTXSize");
    load(api.ptx, "nvrtcGetPTX");
    load(api.log_size, "nvrtcGetProgramLogSize");
    load(api.log, "nvrtcGetProgramLog");
    load(api.destroy, "nvrtcDestroyProgram");
    load(api.error, "nvrtcGetErrorString");
    nvrtc.api_ = &api;
  });
  return nvrtc;
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->version(&major, &minor);
  return cat(major, ".", minor);
}

std::string Nvrtc::compile(const std::string& source, const std::string& name,
                           const std::string& arch) const {
  nvrtcProgram program = nullptr;
  if (nvrtcResult r =
          api_->create(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS)
    throw DeviceError(cat("NVRTC: creating ", name, " failed: ", api_->error(r)));
  const std::string arch_option = "--gpu-architecture=" + arch;
  const char* options[] = {arch_option.c_str(), "--std=c++17"};
  const nvrtcResult compiled = api_->compile(program, 2, options);
  std::size_t log_size = 0;
  api_->log_size(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) api_->log(program, log.data());
  if (compiled != NVRTC_SUCCESS) {
    api_->destroy(&program);
    throw UserError(cat("NVRTC could not compile ", name, " for ", arch, " (",
                        api_->error(compiled), "):\n", log, "\nsource:\n", source));
  }
  std::size_t ptx_size = 0;
  api_->ptx_size(program, &ptx_size);
  std::string ptx(ptx_size, '\0');
  api_->ptx(program, ptx.data());
  api_->destroy(&program);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

PtxCache::PtxCache(std::filesystem::path directory) : directory_(std::move(directory)) {}

std::filesystem::path PtxCache::default_directory() {
  if (const char* env = std::getenv("KILN_CACHE_DIR"); env && *env)
    return std::filesystem::path(env) / "ptx";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "kiln" / "ptx";
  return std::filesystem::temp_directory_path() / "kiln-ptx";
}

std::string PtxCache::get(const std::string& source, const std::string& name,
                          const std::string& arch) {
  const std::string key = arch + "\n" + source;
  std::ostringstream hex;
  hex << std::hex << std::hash<std::string>{}(key) << "-" << source.size();
  const std::filesystem::path file = directory_ / (hex.str() + "-" + arch + ".ptx");
  {
    std::scoped_lock lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      ++stats_.memory_hits;
      return it->second;
    }
  }
  std::string ptx;
  if (std::ifstream in{file, std::ios::binary}) {
    ptx.assign(std::istreambuf_iterator<char>(in), {});
    // A PTX module starts with comments and `.version`: anything else is not ours.
    if (ptx.find(".version") == std::string::npos || ptx.find(".entry") == std::string::npos)
      ptx.clear();
  }
  const bool from_disk = !ptx.empty();
  if (!from_disk) {
    ptx = Nvrtc::instance().compile(source, name, arch);
    std::error_code error;  // the disk cache is best effort: a failure only costs a compile
    std::filesystem::create_directories(directory_, error);
    const std::filesystem::path partial = cat(file.string(), ".", getpid(), ".partial");
    if (!error) {
      std::ofstream(partial, std::ios::binary) << ptx;
      std::filesystem::rename(partial, file, error);
    }
  }
  std::scoped_lock lock(mutex_);
  ++(from_disk ? stats_.disk_hits : stats_.compiles);
  return memory_.emplace(key, ptx).first->second;
}

PtxCache::Stats PtxCache::stats() const {
  std::scoped_lock lock(mutex_);
  return stats_;
}

}  // namespace kiln::detail
