#include "runtime/cuda/cuda_stream.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "runtime/cuda/cuda_graph.hpp"
#include "runtime/cuda/nvrtc.hpp"
#include "runtime/gemm.hpp"

namespace kiln::detail {

void HostFailures::record(std::exception_ptr error, std::string where) {
  std::scoped_lock lock(mutex_);
  if (error_) return;
  error_ = std::move(error);
  where_ = std::move(where);
}

std::pair<std::exception_ptr, std::string> HostFailures::take() {
  std::scoped_lock lock(mutex_);
  return {std::exchange(error_, nullptr), std::exchange(where_, {})};
}

CudaStreamState::CudaStreamState(const CudaDriver& driver, Device dev, const Cublas* blas)
    : cu(&driver), device(dev), blas_(blas) {
  int count = 0;
  cu->check(cu->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (device.index() >= count)
    throw UserError(cat("DeviceContext: ", device, " is not available: this machine has ", count,
                        " CUDA device", count == 1 ? "" : "s", " (cuda:0 to cuda:", count - 1,
                        "); pick one of them"));
  cu->check(cu->cuDeviceGet(&handle, device.index()), "cuDeviceGet");
  char text[256] = {};
  cu->check(cu->cuDeviceGetName(text, sizeof text - 1, handle), "cuDeviceGetName");
  name = text;
  int major = 0, minor = 0;
  cu->check(cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle),
            "cuDeviceGetAttribute");
  cu->check(cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle),
            "cuDeviceGetAttribute");
  arch = cat("compute_", major * 10 + minor);
  cu->check(cu->cuDeviceGetAttribute(&shared_default,
                                     CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, handle),
            "cuDeviceGetAttribute");
  cu->check(cu->cuDeviceGetAttribute(&shared_opt_in,
                                     CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, handle),
            "cuDeviceGetAttribute");
  cu->check(cu->cuDevicePrimaryCtxRetain(&context, handle), "cuDevicePrimaryCtxRetain");
  try {
    make_current();
    check(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  } catch (...) {
    cu->cuDevicePrimaryCtxRelease(handle);
    throw;
  }
}

CudaStreamState::~CudaStreamState() {
  cu->cuCtxSetCurrent(context);
  cu->cuStreamSynchronize(stream);  // work still queued uses memory about to be freed
  if (blas_handle_ != nullptr) {
    blas_->cublasDestroy(blas_handle_);
    cu->cuMemFree(blas_workspace_);
  }
  cu->cuStreamDestroy(stream);
  cu->cuDevicePrimaryCtxRelease(handle);
}

void CudaStreamState::make_current() const {
  // Asked each time (a thread-local read in the driver): other code on this thread, the
  // CUDA runtime included, may have made another context current since.
  CUcontext current = nullptr;
  if (cu->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == context) return;
  check(cu->cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

void CudaStreamState::check(CUresult r, const char* what) const {
  if (r == CUDA_SUCCESS) return;
  throw DeviceError(cat(what, " failed on ", device, ": ", cu->error_text(r)),
                    static_cast<long>(r));
}

std::vector<CUDA_MEMSET_NODE_PARAMS> memset_params(CUdeviceptr dst, std::size_t count,
                                                   const void* pattern, std::size_t size) {
  const bool words = size > 4;
  if ((size != 1 && size != 2 && size % 4 != 0) || size > 16)
    throw InternalError(cat("memset of elements of ", size, " bytes"));
  const std::size_t element = words ? 4 : size;
  std::vector<CUDA_MEMSET_NODE_PARAMS> out(words ? size / 4 : 1);
  for (std::size_t w = 0; w < out.size(); ++w) {
    CUDA_MEMSET_NODE_PARAMS& p = out[w];
    std::memset(&p, 0, sizeof p);
    std::memcpy(&p.value, static_cast<const unsigned char*>(pattern) + 4 * w, element);
    p.dst = dst + 4 * w;
    p.elementSize = static_cast<unsigned int>(element);
    p.width = words ? 1 : count;
    p.height = words ? count : 1;
    p.pitch = words ? size : count * element;
  }
  return out;
}

CudaCode::~CudaCode() {
  state->cu->cuCtxSetCurrent(state->context);
  state->cu->cuModuleUnload(module);
}

std::pair<const Cublas*, cublasHandle_t> CudaStreamState::blas() const {
  std::scoped_lock lock(blas_mutex_);
  if (blas_handle_ == nullptr) {
    if (blas_ == nullptr) blas_ = &Cublas::instance();
    make_current();
    // The first GEMM is often recorded while a graph captures this thread's work, where
    // allocating is an error that ruins the capture: this thread's capture mode is
    // relaxed while the handle and its workspace are made, as CUDA's documentation
    // suggests for such lazy set-up, then restored.
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    check(cu->cuThreadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode");
    struct Restore {
      const CudaDriver* cu;
      CUstreamCaptureMode mode;
      ~Restore() { cu->cuThreadExchangeStreamCaptureMode(&mode); }
    } restore{cu, mode};
    // A workspace of the handle's own: cuBLAS then allocates nothing while a graph
    // captures its GEMMs (32 MiB: what NVIDIA suggests for Hopper).
    check(cu->cuMemAlloc(&blas_workspace_, kBlasWorkspace), "cuMemAlloc (cuBLAS workspace)");
    cublasHandle_t created = nullptr;
    try {
      blas_->check(blas_->cublasCreate(&created), cat("cublasCreate on ", device));
      blas_->check(blas_->cublasSetWorkspace(created, reinterpret_cast<void*>(blas_workspace_),
                                             kBlasWorkspace),
                   "cublasSetWorkspace");
    } catch (...) {
      if (created != nullptr) blas_->cublasDestroy(created);
      cu->cuMemFree(blas_workspace_);
      blas_workspace_ = 0;
      throw;
    }
    blas_handle_ = created;
  }
  return {blas_, blas_handle_};
}

void CudaStreamState::use_blas_workspace() const {
  blas_->check(blas_->cublasSetWorkspace(blas_handle_, reinterpret_cast<void*>(blas_workspace_),
                                         kBlasWorkspace),
               "cublasSetWorkspace");
}

void CudaCode::allow_dynamic_shared(std::uint32_t bytes, const char* where,
                                    const std::string& name) const {
  if (bytes == 0 || static_cast<long long>(bytes) <= dynamic_shared_allowed.load()) return;
  const long long total = static_cast<long long>(bytes) + static_shared;
  if (total > state->shared_opt_in)
    throw UserError(cat(
        where, ": kernel '", name, "' asks for ", bytes,
        " bytes of dynamic shared memory per block",
        static_shared > 0 ? cat(" on top of its ", static_shared, " static bytes") : std::string(),
        ", but ", state->device, " (", state->name, ") gives a block at most ",
        state->shared_opt_in,
        " bytes; give each block less work (more blocks), or keep the data in "
        "global memory"));
  if (total > state->shared_default) {
    state->make_current();
    state->check(
        state->cu->cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(bytes)),
        "cuFuncSetAttribute (max dynamic shared memory)");
  }
  int allowed = dynamic_shared_allowed.load();
  while (allowed < static_cast<int>(bytes) &&
         !dynamic_shared_allowed.compare_exchange_weak(allowed, static_cast<int>(bytes))) {
  }
}

namespace {

/// The PTX of every process's NVRTC compilations, by source hash.
PtxCache& ptx_cache() {
  static PtxCache cache;
  return cache;
}

struct HostCall {
  HostCallback fn;
  const CudaStreamState* state;
};

void run_host_call(void* data) {
  std::unique_ptr<HostCall> call(static_cast<HostCall*>(data));
  try {
    call->fn();
  } catch (...) {
    call->state->host_failures.record(std::current_exception(), "host function");
  }
}

class CudaEvent final : public EventState {
 public:
  explicit CudaEvent(std::shared_ptr<const CudaStreamState> state) : state_(std::move(state)) {
    state_->make_current();
    state_->check(state_->cu->cuEventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~CudaEvent() override {
    state_->cu->cuCtxSetCurrent(state_->context);
    state_->cu->cuEventDestroy(event_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  CUevent handle() const { return event_; }
  void mark_recorded() { recorded_.store(true, std::memory_order_release); }

  bool is_complete() const override {
    if (!recorded_.load(std::memory_order_acquire)) return true;
    state_->make_current();
    const CUresult r = state_->cu->cuEventQuery(event_);
    if (r == CUDA_ERROR_NOT_READY) return false;
    state_->check(r, "cuEventQuery");
    return true;
  }
  void synchronize() const override {
    if (!recorded_.load(std::memory_order_acquire)) return;
    state_->make_current();
    state_->check(state_->cu->cuEventSynchronize(event_), "cuEventSynchronize");
  }
  double elapsed_ms_since(const EventState& start_state) const override {
    const auto* start = dynamic_cast<const CudaEvent*>(&start_state);
    if (start == nullptr)
      throw UserError(
          "DeviceEvent::elapsed_ms: the start event belongs to another kind of device; time "
          "CUDA work with two events of CUDA contexts");
    // The same words as the CPU backend's, naming the event at fault.
    const auto which = [&](const CudaEvent* e) { return e == start ? "start" : "end"; };
    for (const CudaEvent* e : {start, this})
      if (!e->recorded_.load(std::memory_order_acquire))
        throw UserError(cat("DeviceEvent::elapsed_ms: the ", which(e),
                            " event was never recorded; call ctx.enqueue_record(event) first"));
    state_->make_current();
    float ms = 0;
    const CUresult r = state_->cu->cuEventElapsedTime(&ms, start->event_, event_);
    if (r == CUDA_ERROR_NOT_READY) {
      const bool start_done = state_->cu->cuEventQuery(start->event_) == CUDA_SUCCESS;
      throw UserError(cat("DeviceEvent::elapsed_ms: the ", which(start_done ? this : start),
                          " event has not completed yet; call event.synchronize() first"));
    }
    state_->check(r, "cuEventElapsedTime");
    return ms;
  }

 private:
  std::shared_ptr<const CudaStreamState> state_;
  CUevent event_ = nullptr;
  std::atomic<bool> recorded_{false};
};

class CudaStream final : public StreamBackend {
 public:
  explicit CudaStream(std::shared_ptr<CudaStreamState> state) : state_(std::move(state)) {}

  Device device() const override { return state_->device; }
  int num_threads() const override { return 1; }

  void* allocate(std::size_t bytes, bool host) override {
    if (bytes == 0) return nullptr;
    state_->make_current();
    CUresult r = CUDA_SUCCESS;
    void* ptr = nullptr;
    if (host) {
      r = state_->cu->cuMemAllocHost(&ptr, bytes);
    } else {
      CUdeviceptr d = 0;
      r = state_->cu->cuMemAllocAsync(&d, bytes, state_->stream);
      ptr = reinterpret_cast<void*>(d);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
      throw DeviceError(
          cat("out of memory on ", state_->device, " (", state_->name, "): could not allocate ",
              bytes, " bytes of ", host ? "pinned host" : "device", " memory"),
          static_cast<long>(r));
    state_->check(r, host ? "cuMemAllocHost" : "cuMemAllocAsync");
    return ptr;
  }

  void deallocate(void* ptr, std::size_t, bool host) noexcept override {
    if (ptr == nullptr) return;
    state_->cu->cuCtxSetCurrent(state_->context);
    if (host) {
      // Pinned memory is freed at once, not in stream order: wait for the copies that
      // may still read or write it.
      state_->cu->cuStreamSynchronize(state_->stream);
      state_->cu->cuMemFreeHost(ptr);
    } else {
      state_->cu->cuMemFreeAsync(device_address(ptr), state_->stream);
    }
  }

  std::shared_ptr<const DeviceCode> load_device_code(const DeviceCodeRequest& request) override {
    const std::string ptx = request.compile
                                ? ptx_cache().get(request.text, request.entry, state_->arch)
                                : std::string();
    const std::string& image = request.compile ? ptx : request.text;
    state_->make_current();
    auto code = std::make_shared<CudaCode>();
    code->state = state_;
    const CudaDriver& cu = *state_->cu;
    if (const CUresult r = cu.cuModuleLoadData(&code->module, image.c_str()); r != CUDA_SUCCESS)
      throw UserError(cat("compile_function: '", request.name, "': ", state_->device, " (",
                          state_->name, ") cannot load the module: ", cu.error_text(r),
                          request.compile ? ""
                                          : " (pass PTX text, a cubin or a fatbin built for "
                                            "this GPU's architecture)"));
    if (const CUresult r =
            cu.cuModuleGetFunction(&code->function, code->module, request.entry.c_str());
        r != CUDA_SUCCESS) {
      const std::string why = cu.error_text(r);
      cu.cuModuleUnload(code->module);
      code->module = nullptr;
      throw UserError(cat("compile_function: the module has no __global__ function named '",
                          request.entry, "' (", why,
                          "); in C++ source declare it extern \"C\" so that its name is kept"));
    }
    state_->check(cu.cuFuncGetAttribute(&code->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                        code->function),
                  "cuFuncGetAttribute");
    for (std::size_t i = 0;; ++i) {
      std::size_t offset = 0, size = 0;
      if (cu.cuFuncGetParamInfo(code->function, i, &offset, &size) != CUDA_SUCCESS) break;
      code->params.push_back({offset, size});
      code->args_bytes = std::max(code->args_bytes, offset + size);
    }
    return code;
  }

  void launch(KernelLaunch kernel) override {
    const auto* code = dynamic_cast<const CudaCode*>(kernel.info->device_code.get());
    if (code == nullptr || code->state->context != state_->context)
      throw UserError(cat("enqueue_function: kernel '", kernel.info->name,
                          "' was not loaded on this context (", state_->device,
                          "); compile it with the context that launches it"));
    state_->make_current();
    std::size_t size = kernel.args.size();
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, kernel.args.data(),
                     CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    const LaunchConfig& c = kernel.config;
    code->allow_dynamic_shared(c.dynamic_shared_bytes, "enqueue_function", kernel.info->name);
    const CUresult r = state_->cu->cuLaunchKernel(
        code->function, c.grid_dim.x, c.grid_dim.y, c.grid_dim.z, c.block_dim.x, c.block_dim.y,
        c.block_dim.z, c.dynamic_shared_bytes, state_->stream, nullptr, size > 0 ? extra : nullptr);
    if (r != CUDA_SUCCESS)
      throw DeviceError(
          cat("launching kernel '", kernel.info->name, "' on ", state_->device, " with grid ",
              c.grid_dim, " and block ", c.block_dim, " failed: ", state_->cu->error_text(r)),
          static_cast<long>(r));
  }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    state_->make_current();
    state_->check(
        state_->cu->cuMemcpyAsync(device_address(dst), device_address(src), bytes, state_->stream),
        "enqueue_copy (cuMemcpyAsync)");
  }

  void fill(void* dst, std::size_t count, const void* pattern, std::size_t size) override {
    state_->make_current();
    const CudaDriver& cu = *state_->cu;
    for (const CUDA_MEMSET_NODE_PARAMS& p :
         memset_params(device_address(dst), count, pattern, size)) {
      const CUstream s = state_->stream;
      CUresult r = CUDA_SUCCESS;
      if (p.height != 1)
        r = cu.cuMemsetD2D32Async(p.dst, p.pitch, p.value, p.width, p.height, s);
      else if (p.elementSize == 1)
        r = cu.cuMemsetD8Async(p.dst, static_cast<unsigned char>(p.value), p.width, s);
      else if (p.elementSize == 2)
        r = cu.cuMemsetD16Async(p.dst, static_cast<unsigned short>(p.value), p.width, s);
      else
        r = cu.cuMemsetD32Async(p.dst, p.value, p.width, s);
      state_->check(r, "enqueue_memset");
    }
  }

  void host_function(HostCallback fn) override {
    state_->make_current();
    auto call = std::make_unique<HostCall>(HostCall{std::move(fn), state_.get()});
    state_->check(state_->cu->cuLaunchHostFunc(state_->stream, &run_host_call, call.get()),
                  "enqueue_host_function (cuLaunchHostFunc)");
    call.release();  // run_host_call owns it now
  }

  void cuda_work(CudaWork fn) override {
    state_->make_current();
    fn(state_->stream);
  }

  std::shared_ptr<EventState> create_event() override {
    return std::make_shared<CudaEvent>(state_);
  }
  void record(const std::shared_ptr<EventState>& event) override {
    CudaEvent& e = as_cuda_event(event, "enqueue_record");
    state_->make_current();
    state_->check(state_->cu->cuEventRecord(e.handle(), state_->stream), "cuEventRecord");
    e.mark_recorded();
  }
  void wait(const std::shared_ptr<EventState>& event) override {
    CudaEvent& e = as_cuda_event(event, "enqueue_wait");
    state_->make_current();
    state_->check(state_->cu->cuStreamWaitEvent(state_->stream, e.handle(), 0),
                  "cuStreamWaitEvent");
  }

  std::shared_ptr<const GraphExec> instantiate_graph(GraphNodeDescs nodes) override {
    auto setter = conditional_setter(nodes);
    return std::make_shared<CudaGraphExec>(state_, std::move(nodes), std::move(setter));
  }

  /// The kernel that copies a conditional node's int32 into its handle, loaded on first
  /// use (NVRTC); null when \p nodes hold no conditional node.
  std::shared_ptr<const CudaCode> conditional_setter(const GraphNodeDescs& nodes) {
    const bool needed = std::any_of(nodes.begin(), nodes.end(), [](const GraphNodeDesc& d) {
      return d.kind == GraphNodeKind::conditional;
    });
    if (!needed) return nullptr;
    std::scoped_lock lock(setter_mutex_);
    if (setter_ == nullptr) {
      // cudaGraphSetConditional is the device runtime's (cuda_device_runtime_api.h),
      // declared here so that no toolkit header is needed when kiln runs.
      static const char* const kSource =
          "extern \"C\" __device__ void cudaGraphSetConditional(unsigned long long handle,\n"
          "                                                     unsigned int value);\n"
          "extern \"C\" __global__ void kiln_set_conditional(unsigned long long handle,\n"
          "                                                  const int* condition) {\n"
          "  cudaGraphSetConditional(handle, *condition != 0 ? 1u : 0u);\n"
          "}\n";
      setter_ = std::dynamic_pointer_cast<const CudaCode>(load_device_code(
          DeviceCodeRequest{kSource, true, "kiln_set_conditional", "kiln_set_conditional"}));
    }
    return setter_;
  }
  void launch_graph(std::shared_ptr<const GraphExec> graph) override {
    const CudaGraphExec& exec = as_cuda_graph(graph, "DeviceGraph::replay");
    if (const std::shared_ptr<Profiler> p = profiler_.load(std::memory_order_acquire)) {
      exec.launch_profiled(*p);
    } else {
      exec.launch();
    }
  }
  void update_graph(const std::shared_ptr<const GraphExec>& graph, GraphNodeDescs nodes) override {
    const_cast<CudaGraphExec&>(as_cuda_graph(graph, "DeviceGraph::update"))
        .update(std::move(nodes));
  }

  void synchronize() override {
    state_->make_current();
    const CUresult r = state_->cu->cuStreamSynchronize(state_->stream);
    auto [error, where] = state_->host_failures.take();
    if (r != CUDA_SUCCESS)
      throw DeviceError(cat("work on ", state_->device, " (", state_->name,
                            ") failed: ", state_->cu->error_text(r),
                            "; a kernel fault leaves the CUDA context unusable: restart the "
                            "process (compute-sanitizer names the kernel)"),
                        static_cast<long>(r));
    if (!error) return;
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    try {
      std::rethrow_exception(error);
    } catch (...) {
      std::throw_with_nested(DeviceError(
          cat(where, " failed on ", state_->device, ": ", what, ". The context remains usable.")));
    }
  }

  void set_profiler(std::shared_ptr<Profiler> profiler) override {
    profiler_.store(std::move(profiler), std::memory_order_release);
  }
  std::shared_ptr<Profiler> profiler() const override {
    return profiler_.load(std::memory_order_acquire);
  }

 private:
  static CudaEvent& as_cuda_event(const std::shared_ptr<EventState>& event, const char* what) {
    auto* e = dynamic_cast<CudaEvent*>(event.get());
    if (e == nullptr)
      throw UserError(cat(what,
                          ": the event was created by a context of another kind of device; "
                          "create it with a CUDA context"));
    return *e;
  }
  const CudaGraphExec& as_cuda_graph(const std::shared_ptr<const GraphExec>& graph,
                                     const char* what) const {
    const auto* exec = dynamic_cast<const CudaGraphExec*>(graph.get());
    if (exec == nullptr)
      throw UserError(cat(what, ": the graph was instantiated for another kind of device than ",
                          state_->device, "; use it on the context that built it"));
    return *exec;
  }

  std::shared_ptr<CudaStreamState> state_;
  std::atomic<std::shared_ptr<Profiler>> profiler_;  // attached to replays enqueued next
  std::mutex setter_mutex_;
  std::shared_ptr<const CudaCode> setter_;  // conditional nodes' kernel, once needed

 public:
  const CudaStreamState& state() const { return *state_; }
};

}  // namespace

std::shared_ptr<StreamBackend> make_cuda_stream(Device device, const CudaDriver& driver,
                                                const Cublas* blas) {
  return std::make_shared<CudaStream>(std::make_shared<CudaStreamState>(driver, device, blas));
}

void enqueue_gemm_f32(const DeviceContext& ctx, void* stream, const GemmF32& g) {
  const auto* cuda = dynamic_cast<const CudaStream*>(ctx.backend().get());
  if (cuda == nullptr)
    throw UserError(cat("a GPU GEMM was asked of ", ctx.device(), ", which is not a CUDA device"));
  constexpr std::int64_t kMax = 0x7fffffff;
  if (g.m > kMax || g.n > kMax || g.k > kMax || g.batch > kMax)
    throw UserError(cat("a GEMM of ", g.batch, " x ", g.m, " x ", g.k, " x ", g.n,
                        " is too large for one cuBLAS call (sizes up to 2^31 - 1)"));
  const auto [blas, handle] = cuda->state().blas();
  const auto s = static_cast<CUstream>(stream);
  blas->check(blas->cublasSetStream(handle, s), "cublasSetStream");
  // cublasSetStream puts the handle back on cuBLAS's own workspace pool, from which a
  // captured GEMM allocates (a memory node, which a child graph may not hold): ours again.
  cuda->state().use_blas_workspace();
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS reads B as n x k, A as k x m.
  const float one = 1.0f, zero = 0.0f;
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };
  blas->check(blas->cublasSgemmStridedBatched(
                  handle, CUBLAS_OP_N, CUBLAS_OP_N, i(g.n), i(g.m), i(g.k), &one, g.b, i(g.n),
                  g.stride_b, g.a, i(g.k), g.stride_a, &zero, g.c, i(g.n), g.stride_c, i(g.batch)),
              cat("cublasSgemmStridedBatched (", g.batch, " x ", g.m, " x ", g.k, " x ", g.n,
                  ") on ", ctx.device()));
}

std::shared_ptr<StreamBackend> make_cuda_stream(Device device) {
  const CudaDriver* driver = nullptr;
  try {
    driver = &CudaDriver::instance();
  } catch (const UserError& e) {
    throw UserError(cat("DeviceContext: ", device, " is not available: ", e.what(),
                        "; use a CPU device such as cpu:0"));
  }
  return make_cuda_stream(device, *driver);
}

}  // namespace kiln::detail
