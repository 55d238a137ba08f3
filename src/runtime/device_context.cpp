#include "kiln/runtime/device_context.hpp"

#include <sched.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>
#include <string_view>
#include <thread>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/checks.hpp"
#include "runtime/gemm.hpp"
#include "runtime/stream_backend.hpp"

namespace kiln {
namespace detail {
int cores_available() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void* block_shared_memory(std::size_t bytes) {
  struct Buffer {
    std::byte* data = nullptr;
    std::size_t size = 0;
    ~Buffer() { ::operator delete (data, std::align_val_t{64}); }
  };
  thread_local Buffer buffer;
  if (bytes > buffer.size) {
    auto* grown = static_cast<std::byte*>(::operator new (bytes, std::align_val_t{64}));
    ::operator delete (buffer.data, std::align_val_t{64});
    buffer.data = grown;
    buffer.size = bytes;
  }
  return buffer.data;
}
}  // namespace detail

namespace {
using detail::cores_available;

std::atomic<int> g_cpu_devices{0};  // 0: not set, read KILN_CPU_DEVICES

/// An environment variable holding a count >= 1, or 0 when unset or empty.
int env_count(const char* name, const char* meaning) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == 0) return 0;
  const std::string_view text(env);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1)
    throw UserError(detail::cat(name, "='", text, "' is not ", meaning,
                                "; set it to an integer >= 1 or unset it"));
  return value;
}

int resolve_num_threads(int requested) {
  if (requested < 0)
    throw UserError(detail::cat("DeviceContext: num_threads = ", requested,
                                " is negative; pass 0 for the default or a count >= 1"));
  if (requested > 0) return requested;
  if (const int env = env_count("KILN_NUM_THREADS", "a thread count"); env > 0) return env;
  return std::max(1, cores_available() / cpu_device_count());
}

/// \throws UserError unless every core in \p cores is one this process may run on.
void check_cores(const std::vector<int>& cores) {
  if (cores.empty()) return;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_ZERO(&allowed);
  std::vector<int> usable;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) usable.push_back(c);
  for (int core : cores)
    if (core < 0 || core >= CPU_SETSIZE || !CPU_ISSET(core, &allowed))
      throw UserError(detail::cat("DeviceContext: pin_to_cores names core ", core,
                                  ", which this process may not run on; its cores are [",
                                  detail::join(usable, ", "), "]"));
}

}  // namespace

int cpu_device_count() {
  if (const int set = g_cpu_devices.load(std::memory_order_acquire); set > 0) return set;
  const int env = env_count("KILN_CPU_DEVICES", "a CPU device count");
  return env > 0 ? env : 1;
}

void set_cpu_device_count(int count) {
  if (count < 1)
    throw UserError(detail::cat("set_cpu_device_count: ", count, " must be at least 1"));
  g_cpu_devices.store(count, std::memory_order_release);
}

namespace detail {

void throw_bad_dim3_component(long long value) {
  throw UserError(cat("launch dimension component ", value,
                      " is out of range; each of x, y, z must be in [0, 4294967295] (and >= 1 in a "
                      "launch's grid_dim and block_dim)"));
}

std::string pretty_type_name(std::string_view pretty) {
  // GCC: "... [with T = NAME; std::string = ...]"; Clang: "... [T = NAME]".
  std::size_t start = pretty.find(" = ");
  if (start == std::string_view::npos) return std::string(pretty);
  start += 3;
  std::size_t end = pretty.find(';', start);
  if (end == std::string_view::npos) end = pretty.rfind(']');
  if (end == std::string_view::npos || end < start) end = pretty.size();
  std::string_view name = pretty.substr(start, end - start);
  if (name.starts_with('&')) name.remove_prefix(1);
  std::string result(name);
  // Anonymous namespaces add noise, not information, to a kernel's name.
  for (std::string_view noise : {"{anonymous}::", "(anonymous namespace)::"})
    for (std::size_t at; (at = result.find(noise)) != std::string::npos;)
      result.erase(at, noise.size());
  return result;
}

void check_launch(const char* where, const KernelLaunch& kernel) {
  const LaunchConfig& c = kernel.config;
  if (c.grid_dim.count() == 0 || c.block_dim.count() == 0)
    throw UserError(cat(where, ": kernel '", kernel.info->name, "' launched with grid_dim ",
                        c.grid_dim, " and block_dim ", c.block_dim,
                        "; every component must be >= 1"));
}

std::vector<unsigned char> pack_device_args(const FunctionInfo& info,
                                            std::span<const ArgBytes> args) {
  const DeviceCode& code = *info.device_code;
  const auto describe = [&] {
    std::string sizes;
    for (const DeviceCode::Param& p : code.params) sizes += cat(sizes.empty() ? "" : ", ", p.size);
    return cat("kernel '", info.name, "' takes ", code.params.size(), " parameter",
               code.params.size() == 1 ? "" : "s", " of ", sizes.empty() ? "no" : sizes,
               code.params.size() == 1 ? " byte" : " bytes");
  };
  if (args.size() != code.params.size())
    throw UserError(cat("launch of CUDA ", describe(), ", but ", args.size(), " argument",
                        args.size() == 1 ? " was" : "s were",
                        " given; pass one value per parameter"));
  std::vector<unsigned char> packed(code.args_bytes);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const DeviceCode::Param& p = code.params[i];
    if (args[i].size != p.size)
      throw UserError(cat("launch of CUDA ", describe(), ", but argument ", i, " has ",
                          args[i].size, " bytes where parameter ", i, " has ", p.size,
                          "; pass a value of the parameter's type (a pointer for a pointer: "
                          "buffer.data(), not the buffer; float, not double, for a float)"));
    std::memcpy(packed.data() + p.offset, args[i].data, p.size);
  }
  return packed;
}

void check_kernel_device(const char* where, const KernelLaunch& kernel, Device device) {
  const bool device_code = kernel.info->device_code != nullptr;
  if (device_code == device.is_cuda()) return;
  throw UserError(cat(where, ": kernel '", kernel.info->name, "' is ",
                      device_code ? "CUDA code" : "a C++ callable", " but the context is ", device,
                      "; compile the function with the context that launches it"));
}

void check_copy_sizes(const char* where, std::size_t dst_bytes, std::size_t src_bytes,
                      DType dtype) {
  if (dst_bytes == src_bytes) return;
  const std::size_t element = size_of(dtype);
  throw UserError(cat(where, ": the destination holds ", dst_bytes / element, " ", dtype,
                      " elements but the source holds ", src_bytes / element,
                      "; copy between ranges of equal size (take a std::span of the part you "
                      "need)"));
}

Allocation::~Allocation() {
  if (owner_) owner_->deallocate(ptr_, bytes_, host_);
}

Device Allocation::device() const noexcept { return owner_ ? owner_->device() : Device{}; }

}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Dim3& d) {
  return os << '(' << d.x << ", " << d.y << ", " << d.z << ')';
}

DeviceContext::DeviceContext() : DeviceContext(Device::cpu()) {}

DeviceContext::DeviceContext(Device device, Options options) {
  if (device.is_cuda()) {
    if (options.num_threads < 0)
      throw UserError(detail::cat("DeviceContext: num_threads = ", options.num_threads,
                                  " is negative; pass 0 for the default or a count >= 1"));
    if (!options.pin_to_cores.empty())
      throw UserError(detail::cat("DeviceContext: pin_to_cores applies to CPU contexts; ", device,
                                  " runs its work on the GPU (leave it empty)"));
#ifdef KILN_CUDA_PATHS
    impl_ = detail::make_cuda_stream(device);
    return;
#else
    throw UserError(detail::cat("DeviceContext: ", device,
                                " is not available: this build of kiln has no CUDA backend (it "
                                "was configured without the CUDA toolkit; reconfigure with "
                                "-DKILN_CUDA=ON); use a CPU device such as cpu:0"));
#endif
  }
  if (device.index() >= cpu_device_count())
    throw UserError(detail::cat("DeviceContext: ", device, " is not available: this process has ",
                                cpu_device_count(), " CPU device",
                                cpu_device_count() == 1 ? "" : "s",
                                " (set KILN_CPU_DEVICES or call kiln::set_cpu_device_count for "
                                "virtual CPU devices)"));
  check_cores(options.pin_to_cores);
  impl_ = detail::make_cpu_stream(device, resolve_num_threads(options.num_threads),
                                  std::move(options.pin_to_cores));
}

Device DeviceContext::device() const { return impl_->device(); }
int DeviceContext::num_threads() const { return impl_->num_threads(); }

std::size_t DeviceContext::checked_bytes(std::size_t count, std::size_t element_size) {
  if (count > std::numeric_limits<std::size_t>::max() / 2 / element_size)
    throw UserError(detail::cat("buffer of ", count, " elements of ", element_size,
                                " bytes is too large to address"));
  return count * element_size;
}

detail::Allocation DeviceContext::allocate(std::size_t bytes, bool host) const {
  return detail::Allocation(impl_, impl_->allocate(bytes, host), bytes, host);
}

void DeviceContext::enqueue_copy_bytes(void* dst, std::size_t dst_bytes, const void* src,
                                       std::size_t src_bytes, DType dtype) const {
  detail::check_copy_sizes("enqueue_copy", dst_bytes, src_bytes, dtype);
  if (dst_bytes == 0) return;
  impl_->copy(dst, src, dst_bytes);
}

void DeviceContext::enqueue_fill(void* dst, std::size_t count, const void* pattern,
                                 std::size_t pattern_size) const {
  if (count == 0) return;
  impl_->fill(dst, count, pattern, pattern_size);
}

void DeviceContext::enqueue_kernel(detail::KernelLaunch kernel) const {
  detail::check_launch("enqueue_function", kernel);
  detail::check_kernel_device("enqueue_function", kernel, device());
  impl_->launch(std::move(kernel));
}

void DeviceContext::enqueue_host(detail::HostCallback fn) const {
  impl_->host_function(std::move(fn));
}

#ifndef KILN_CUDA_PATHS
namespace detail {
void enqueue_gemm_f32(const DeviceContext& ctx, void*, const GemmF32&) {
  throw UserError(cat("a GPU GEMM was asked of ", ctx.device(),
                      ", but this build of kiln has no CUDA backend"));
}
}  // namespace detail
#endif

void DeviceContext::enqueue_cuda(detail::CudaWork fn) const {
  if (!device().is_cuda())
    throw UserError(detail::cat("enqueue_cuda_work: ", device(),
                                " has no CUDA stream; CUDA libraries' work runs on a CUDA "
                                "context (Device::cuda(n))"));
  impl_->cuda_work(std::move(fn));
}

void DeviceContext::check_host_callable(const std::string& name) const {
  if (device().is_cuda())
    throw UserError(detail::cat("compile_function: '", name, "' is a C++ callable, which runs on ",
                                "the CPU; a ", device(),
                                " context launches CUDA code: compile_function(kiln::CudaSource{"
                                "code, entry}) or compile_function(kiln::CudaModule{image, "
                                "entry})"));
}

DeviceFunction<CudaKernel> DeviceContext::load_cuda(std::string code, bool compile,
                                                    std::string entry,
                                                    FunctionOptions options) const {
  if (entry.empty())
    throw UserError(detail::cat("compile_function: the CUDA ", compile ? "source" : "module",
                                " names no entry; set `entry` to the __global__ function's "
                                "name"));
  if (options.name.empty()) options.name = entry;
  detail::DeviceCodeRequest request{std::move(code), compile, std::move(entry), options.name};
  auto info = std::make_shared<const detail::FunctionInfo>(detail::FunctionInfo{
      std::move(options.name), options.form, impl_->load_device_code(request)});
  return DeviceFunction<CudaKernel>(CudaKernel{}, std::move(info), device());
}

DeviceFunction<CudaKernel> DeviceContext::compile_function(const CudaSource& source,
                                                           FunctionOptions options) const {
  return load_cuda(source.code, true, source.entry, std::move(options));
}

DeviceFunction<CudaKernel> DeviceContext::compile_function(const CudaModule& module,
                                                           FunctionOptions options) const {
  return load_cuda(module.image, false, module.entry, std::move(options));
}

void DeviceContext::check_function_device(Device function_device, const std::string& name) const {
  if (function_device.kind() != device().kind())
    throw UserError(detail::cat("enqueue_function: kernel '", name, "' was compiled for ",
                                function_device, " but launched on ", device(),
                                "; compile it with this context"));
}

DeviceEvent DeviceContext::create_event() const { return DeviceEvent(impl_->create_event()); }
void DeviceContext::enqueue_record(const DeviceEvent& event) const { impl_->record(event.state_); }
void DeviceContext::enqueue_wait(const DeviceEvent& event) const { impl_->wait(event.state_); }
void DeviceContext::synchronize() const { impl_->synchronize(); }
void DeviceContext::set_profiler(std::shared_ptr<Profiler> profiler) const {
  impl_->set_profiler(std::move(profiler));
}
std::shared_ptr<Profiler> DeviceContext::profiler() const { return impl_->profiler(); }

bool DeviceEvent::is_complete() const { return state_->is_complete(); }
void DeviceEvent::synchronize() const { state_->synchronize(); }
double DeviceEvent::elapsed_ms(const DeviceEvent& start, const DeviceEvent& end) {
  return end.state_->elapsed_ms_since(*start.state_);
}

}  // namespace kiln
