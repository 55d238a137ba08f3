#include "fake_cuda_driver.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>

namespace kiln::testing {
namespace {

FakeCuda& fake() { return FakeCuda::get(); }

template <class T>
T* from_handle(std::uintptr_t h) {
  return reinterpret_cast<T*>(h);
}
void* host(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

struct FakeStream;

/// An event: complete once the stream it was last recorded on has run its work up to the
/// record (`sequence`), as on a GPU.
struct FakeEvent {
  bool recorded = false;  // the record has run
  std::chrono::steady_clock::time_point at;
  FakeStream* stream = nullptr;  // of the last record; null: recorded in a graph or never
  std::uint64_t sequence = 0;    // that stream's work up to and including the record
};
struct FakeExec {
  std::shared_ptr<FakeGraph> graph;
};
/// A stream. Work enqueued on it waits in `queue` and runs in order only when something
/// needs it done: a synchronisation of the stream or the context, a synchronous copy or
/// free, an event synchronisation or query (the GPU making progress), or another stream's
/// wait on an event recorded here, when that stream runs. So work that a missing wait or
/// synchronisation leaves unordered does not run early by chance, as it might on a GPU.
/// In capture, work enqueued on it becomes nodes of `capture`, each depending on the one
/// before, instead.
struct FakeStream {
  std::unique_ptr<FakeGraph> capture;
  bool invalidated = false;
  std::deque<std::function<void()>> queue;
  std::uint64_t enqueued = 0, executed = 0;
};

/// Every live stream (to drain them all).
std::set<FakeStream*>& streams() {
  static std::set<FakeStream*> all;
  return all;
}

/// Runs \p s's queued work in order until \p upto items of its work have run.
void drain(FakeStream* s, std::uint64_t upto = UINT64_MAX) {
  while (s->executed < upto && !s->queue.empty()) {
    std::function<void()> work = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->executed;
    work();  // may drain other streams (an event wait)
  }
}

/// What the legacy default stream and synchronous calls do: finish every stream's work.
void drain_all() {
  bool again = true;
  while (again) {  // work may enqueue more (a host function)
    again = false;
    for (FakeStream* s : std::vector<FakeStream*>(streams().begin(), streams().end())) {
      again = again || !s->queue.empty();
      drain(s);
    }
  }
}

/// Runs \p work in \p stream's order: queued on a stream, at once (after every stream's
/// work) on the null stream.
CUresult on_stream(CUstream stream, std::function<void()> work) {
  auto* s = reinterpret_cast<FakeStream*>(stream);
  if (s == nullptr) {
    drain_all();
    work();
    return CUDA_SUCCESS;
  }
  s->queue.push_back(std::move(work));
  ++s->enqueued;
  return CUDA_SUCCESS;
}

/// Runs \p e's stream up to \p e's last record: the event completes.
void complete(FakeEvent* e) {
  if (e->stream != nullptr) drain(e->stream, e->sequence);
}

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

/// Whether \p f may run with \p shared bytes of dynamic shared memory, as the driver checks.
bool shared_fits(CUfunction f, unsigned shared) {
  const auto* kernel = reinterpret_cast<const FakeKernel*>(f);
  const int limit =
      std::max(FakeCuda::kSharedDefault - kernel->static_shared, kernel->max_dynamic_shared);
  return static_cast<int>(shared) <= limit;
}

CUresult run_kernel(CUfunction f, const unsigned grid[3], const unsigned block[3],
                    const unsigned char* args, unsigned shared) {
  ++fake().kernel_launches;
  fake().last_shared_bytes = shared;
  const auto* kernel = reinterpret_cast<const FakeKernel*>(f);
  return kernel->run(args, grid, block);
}

CUresult record_error(CUresult r) {
  if (r != CUDA_SUCCESS && fake().sticky_error == CUDA_SUCCESS) fake().sticky_error = r;
  return CUDA_SUCCESS;  // a kernel's fault surfaces later, as on a GPU
}

void memset_2d(const CUDA_MEMSET_NODE_PARAMS& p) {
  for (std::size_t row = 0; row < p.height; ++row) {
    auto* base = static_cast<unsigned char*>(host(p.dst)) + row * p.pitch;
    for (std::size_t col = 0; col < p.width; ++col)
      std::memcpy(base + col * p.elementSize, &p.value, p.elementSize);
  }
}

/// An order a GPU may run \p graph's nodes in, and the one least like creation order: of
/// the nodes whose dependencies have run, the last created first. A missing edge then
/// shows as a wrong result instead of passing because nodes ran as they were added.
std::vector<const FakeNode*> launch_order(const FakeGraph& graph) {
  std::map<const FakeNode*, std::size_t> index;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) index[graph.nodes[i].get()] = i;
  std::vector<std::vector<std::size_t>> dependents(graph.nodes.size());
  std::vector<std::size_t> waiting(graph.nodes.size());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    waiting[i] = graph.nodes[i]->dependencies.size();
    for (const FakeNode* dep : graph.nodes[i]->dependencies) dependents[index.at(dep)].push_back(i);
  }
  std::priority_queue<std::size_t> ready;  // largest index first
  for (std::size_t i = 0; i < waiting.size(); ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<const FakeNode*> order;
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    order.push_back(graph.nodes[i].get());
    for (std::size_t d : dependents[i])
      if (--waiting[d] == 0) ready.push(d);
  }
  return order;
}

void run_graph(const FakeGraph& graph) {
  for (const FakeNode* node : launch_order(graph)) {
    switch (node->type) {
      case CU_GRAPH_NODE_TYPE_KERNEL:
        record_error(run_kernel(node->function, node->grid, node->block, node->args.data(),
                                node->shared_bytes));
        break;
      case CU_GRAPH_NODE_TYPE_MEMCPY:
        std::memcpy(host(node->copy.dstDevice), host(node->copy.srcDevice),
                    node->copy.WidthInBytes);
        break;
      case CU_GRAPH_NODE_TYPE_MEMSET:
        memset_2d(node->memset);
        break;
      case CU_GRAPH_NODE_TYPE_HOST:
        node->host.fn(node->host.userData);
        break;
      case CU_GRAPH_NODE_TYPE_GRAPH:
        run_graph(*node->child);
        break;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        if (node->condition_type == CU_GRAPH_COND_TYPE_WHILE) {
          while (fake().conditions[node->condition] != 0) run_graph(*node->child);
        } else if (fake().conditions[node->condition] != 0) {
          run_graph(*node->child);
        }
        break;
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
        auto* event = reinterpret_cast<FakeEvent*>(node->event);
        event->recorded = true;
        event->at = std::chrono::steady_clock::now();
        break;
      }
      default:
        break;
    }
  }
}

CUresult add_node(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, std::size_t n,
                  std::unique_ptr<FakeNode> node) {
  auto* graph = reinterpret_cast<FakeGraph*>(g);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* dep = reinterpret_cast<const FakeNode*>(deps[i]);
    if (graph->index_of(dep) < 0) return CUDA_ERROR_INVALID_VALUE;
    node->dependencies.push_back(dep);
  }
  *out = reinterpret_cast<CUgraphNode>(node.get());
  graph->nodes.push_back(std::move(node));
  return CUDA_SUCCESS;
}

/// \p s when it is capturing (the null stream never is).
/// The stream this thread captures in a mode that forbids it unsafe calls (global or
/// thread-local), and this thread's capture mode (cuThreadExchangeStreamCaptureMode).
thread_local FakeStream* t_capturing = nullptr;
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/// What a real driver answers an allocation (or another unsafe call) on a thread that is
/// capturing and has not relaxed its mode: an error, and the capture invalidated.
CUresult unsafe_call_in_capture() {
  if (t_capturing == nullptr || t_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_SUCCESS;
  t_capturing->invalidated = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

FakeStream* capturing(CUstream s) {
  auto* stream = reinterpret_cast<FakeStream*>(s);
  return stream != nullptr && stream->capture ? stream : nullptr;
}

/// Appends \p node to \p s's capture after the node captured before it.
CUresult capture(FakeStream* s, std::unique_ptr<FakeNode> node) {
  if (!s->capture->nodes.empty()) node->dependencies.push_back(s->capture->nodes.back().get());
  s->capture->nodes.push_back(std::move(node));
  return CUDA_SUCCESS;
}

/// A memset node of \p p, or runs it now when \p stream is not capturing.
CUresult memset_on(CUstream stream, const CUDA_MEMSET_NODE_PARAMS& p) {
  if (FakeStream* s = capturing(stream)) {
    auto node = std::make_unique<FakeNode>();
    node->type = CU_GRAPH_NODE_TYPE_MEMSET;
    node->memset = p;
    return capture(s, std::move(node));
  }
  return on_stream(stream, [p] { memset_2d(p); });
}

}  // namespace

int FakeGraph::index_of(const FakeNode* node) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].get() == node) return static_cast<int>(i);
  return -1;
}

std::shared_ptr<FakeGraph> FakeGraph::clone() const {
  auto copy = std::make_shared<FakeGraph>();
  for (const auto& node : nodes) {
    auto n = std::make_unique<FakeNode>(*node);
    n->dependencies.clear();
    for (const FakeNode* dep : node->dependencies)
      n->dependencies.push_back(copy->nodes[static_cast<std::size_t>(index_of(dep))].get());
    if (node->child) n->child = node->child->clone();
    copy->nodes.push_back(std::move(n));
  }
  return copy;
}

namespace {
/// What kiln's conditional-node kernel does on a GPU: (handle, const int* condition).
FakeKernel set_conditional_kernel() {
  return {{8, 8}, [](const unsigned char* args, const unsigned*, const unsigned*) {
            CUgraphConditionalHandle handle;
            const int* condition;
            std::memcpy(&handle, args, 8);
            std::memcpy(&condition, args + 8, 8);
            auto it = FakeCuda::get().conditions.find(handle);
            if (it == FakeCuda::get().conditions.end()) return CUDA_ERROR_INVALID_HANDLE;
            it->second = *condition != 0 ? 1 : 0;
            return CUDA_SUCCESS;
          }};
}
}  // namespace

FakeCuda& FakeCuda::get() {
  static FakeCuda& state = []() -> FakeCuda& {
    static FakeCuda s;
    s.kernels["kiln_set_conditional"] = set_conditional_kernel();
    return s;
  }();
  return state;
}

void FakeCuda::reset() {
  auto registered = std::move(kernels);
  *this = FakeCuda();
  kernels = std::move(registered);
  kernels["kiln_set_conditional"] = set_conditional_kernel();
}

const detail::CudaDriver& FakeCuda::driver() const {
  static const detail::CudaDriver table = [] {
    detail::CudaDriver d;
    d.cuInit = [](unsigned) { return CUDA_SUCCESS; };
    d.cuGetErrorString = [](CUresult r, const char** text) {
      switch (r) {
        case CUDA_ERROR_ILLEGAL_ADDRESS:
          *text = "an illegal memory access was encountered";
          break;
        case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
          *text = "operation failed due to a previous error during capture";
          break;
        case CUDA_ERROR_NOT_FOUND:
          *text = "named symbol not found";
          break;
        case CUDA_ERROR_INVALID_IMAGE:
          *text = "device kernel image is invalid";
          break;
        case CUDA_ERROR_LAUNCH_FAILED:
          *text = "unspecified launch failure";
          break;
        case CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
          *text =
              "the graph update was not performed because it included changes which "
              "violated constraints specific to instantiated graph update";
          break;
        default:
          *text = "fake CUDA error";
      }
      return CUDA_SUCCESS;
    };
    d.cuDeviceGetCount = [](int* n) {
      *n = fake().device_count;
      return CUDA_SUCCESS;
    };
    d.cuDeviceGet = [](CUdevice* dev, int i) {
      if (i >= fake().device_count) return CUDA_ERROR_INVALID_DEVICE;
      *dev = i;
      return CUDA_SUCCESS;
    };
    d.cuDeviceGetName = [](char* name, int len, CUdevice) {
      std::strncpy(name, "Fake GPU", static_cast<std::size_t>(len));
      return CUDA_SUCCESS;
    };
    d.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
      switch (a) {
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
          *v = fake().compute_capability / 10;
          break;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
          *v = fake().compute_capability % 10;
          break;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
          *v = FakeCuda::kSharedDefault;
          break;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
          *v = FakeCuda::kSharedOptIn;
          break;
        default:
          *v = 1;
      }
      return CUDA_SUCCESS;
    };
    d.cuDevicePrimaryCtxRetain = [](CUcontext* ctx, CUdevice dev) {
      ++fake().live_contexts;
      *ctx = reinterpret_cast<CUcontext>(static_cast<std::uintptr_t>(0x1000 + dev));
      return CUDA_SUCCESS;
    };
    d.cuDevicePrimaryCtxRelease = [](CUdevice) {
      --fake().live_contexts;
      return CUDA_SUCCESS;
    };
    d.cuCtxGetCurrent = [](CUcontext* ctx) {
      *ctx = fake().current_context;
      return CUDA_SUCCESS;
    };
    d.cuCtxSetCurrent = [](CUcontext ctx) {
      fake().current_context = ctx;
      ++fake().context_switches;
      return CUDA_SUCCESS;
    };
    d.cuCtxSynchronize = [] {
      drain_all();
      return CUDA_SUCCESS;
    };
    d.cuMemAlloc = [](CUdeviceptr* p, std::size_t n) {
      if (const CUresult r = unsafe_call_in_capture(); r != CUDA_SUCCESS) return r;
      ++fake().live_allocations;
      *p = reinterpret_cast<CUdeviceptr>(std::malloc(n));
      return CUDA_SUCCESS;
    };
    d.cuMemFree = [](CUdeviceptr p) {  // synchronous: waits for the device
      drain_all();
      --fake().live_allocations;
      std::free(host(p));
      return CUDA_SUCCESS;
    };
    d.cuMemcpyHtoD = [](CUdeviceptr dst, const void* src, std::size_t n) {
      drain_all();  // synchronous, on the legacy default stream
      std::memcpy(host(dst), src, n);
      return CUDA_SUCCESS;
    };
    d.cuMemcpyDtoH = [](void* dst, CUdeviceptr src, std::size_t n) {
      drain_all();
      std::memcpy(dst, host(src), n);
      return CUDA_SUCCESS;
    };
    d.cuMemAllocAsync = [](CUdeviceptr* p, std::size_t n, CUstream) {
      if (n > (std::size_t{1} << 40)) return CUDA_ERROR_OUT_OF_MEMORY;
      ++fake().live_allocations;
      *p = reinterpret_cast<CUdeviceptr>(std::malloc(n));
      return CUDA_SUCCESS;
    };
    d.cuMemFreeAsync = [](CUdeviceptr p, CUstream stream) {  // in stream order
      return on_stream(stream, [p] {
        --fake().live_allocations;
        std::free(host(p));
      });
    };
    d.cuMemAllocHost = [](void** p, std::size_t n) {
      ++fake().live_allocations;
      *p = std::malloc(n);
      return CUDA_SUCCESS;
    };
    d.cuMemFreeHost = [](void* p) {
      --fake().live_allocations;
      std::free(p);
      return CUDA_SUCCESS;
    };
    d.cuMemcpyAsync = [](CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream stream) {
      if (FakeStream* s = capturing(stream)) {
        auto node = std::make_unique<FakeNode>();
        node->type = CU_GRAPH_NODE_TYPE_MEMCPY;
        node->copy.srcMemoryType = node->copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
        node->copy.srcDevice = src;
        node->copy.dstDevice = dst;
        node->copy.WidthInBytes = n;
        node->copy.Height = node->copy.Depth = 1;
        return capture(s, std::move(node));
      }
      return on_stream(stream, [dst, src, n] { std::memcpy(host(dst), host(src), n); });
    };
    d.cuMemsetD8Async = [](CUdeviceptr dst, unsigned char v, std::size_t n, CUstream stream) {
      return memset_on(stream, CUDA_MEMSET_NODE_PARAMS{dst, 0, v, 1, n, 1});
    };
    d.cuMemsetD16Async = [](CUdeviceptr dst, unsigned short v, std::size_t n, CUstream stream) {
      return memset_on(stream, CUDA_MEMSET_NODE_PARAMS{dst, 0, v, 2, n, 1});
    };
    d.cuMemsetD32Async = [](CUdeviceptr dst, unsigned int v, std::size_t n, CUstream stream) {
      return memset_on(stream, CUDA_MEMSET_NODE_PARAMS{dst, 0, v, 4, n, 1});
    };
    d.cuMemsetD2D32Async = [](CUdeviceptr dst, std::size_t pitch, unsigned int v, std::size_t width,
                              std::size_t height, CUstream stream) {
      return memset_on(stream, CUDA_MEMSET_NODE_PARAMS{dst, pitch, v, 4, width, height});
    };
    d.cuModuleLoadData = [](CUmodule* m, const void* image) {
      const std::string text(static_cast<const char*>(image));
      if (text.rfind("bad", 0) == 0) return CUDA_ERROR_INVALID_IMAGE;
      fake().loaded_images.push_back(text);
      *m = reinterpret_cast<CUmodule>(new std::string(text));
      return CUDA_SUCCESS;
    };
    d.cuModuleUnload = [](CUmodule m) {
      delete reinterpret_cast<std::string*>(m);
      return CUDA_SUCCESS;
    };
    d.cuModuleGetFunction = [](CUfunction* f, CUmodule m, const char* name) {
      // The module must mention the entry (PTX: `.entry name(`) and a fake must run it.
      const auto& text = *reinterpret_cast<const std::string*>(m);
      auto it = fake().kernels.find(name);
      if (text.find(name) == std::string::npos || it == fake().kernels.end())
        return CUDA_ERROR_NOT_FOUND;
      *f = reinterpret_cast<CUfunction>(&it->second);
      return CUDA_SUCCESS;
    };
    d.cuFuncGetParamInfo = [](CUfunction f, std::size_t i, std::size_t* offset, std::size_t* size) {
      const auto& sizes = reinterpret_cast<const FakeKernel*>(f)->param_sizes;
      if (i >= sizes.size()) return CUDA_ERROR_INVALID_VALUE;
      std::size_t at = 0;
      for (std::size_t k = 0; k <= i; ++k) {
        at = align_up(at, std::min<std::size_t>(sizes[k], 8));
        if (k < i) at += sizes[k];
      }
      *offset = at;
      *size = sizes[i];
      return CUDA_SUCCESS;
    };
    d.cuFuncGetAttribute = [](int* v, CUfunction_attribute a, CUfunction f) {
      if (a != CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) return CUDA_ERROR_NOT_SUPPORTED;
      *v = reinterpret_cast<const FakeKernel*>(f)->static_shared;
      return CUDA_SUCCESS;
    };
    d.cuFuncSetAttribute = [](CUfunction f, CUfunction_attribute a, int v) {
      auto* kernel = reinterpret_cast<FakeKernel*>(f);
      if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ||
          v + kernel->static_shared > FakeCuda::kSharedOptIn)
        return CUDA_ERROR_INVALID_VALUE;
      kernel->max_dynamic_shared = v;
      return CUDA_SUCCESS;
    };
    d.cuLaunchKernel = [](CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params,
                          void** extra) {
      if (!shared_fits(f, shared)) return CUDA_ERROR_INVALID_VALUE;
      if (params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
      // The parameters, copied as the driver copies them: from `params` (one pointer per
      // parameter) or from the packed buffer in `extra`.
      std::vector<unsigned char> packed;
      if (params != nullptr) {
        const auto& sizes = reinterpret_cast<const FakeKernel*>(f)->param_sizes;
        for (std::size_t k = 0; k < sizes.size(); ++k) {
          packed.resize(align_up(packed.size(), std::min<std::size_t>(sizes[k], 8)));
          const auto* bytes = static_cast<const unsigned char*>(params[k]);
          packed.insert(packed.end(), bytes, bytes + sizes[k]);
        }
      } else if (extra != nullptr) {
        if (extra[0] != CU_LAUNCH_PARAM_BUFFER_POINTER || extra[2] != CU_LAUNCH_PARAM_BUFFER_SIZE ||
            extra[4] != CU_LAUNCH_PARAM_END)
          return CUDA_ERROR_INVALID_VALUE;
        const auto* bytes = static_cast<const unsigned char*>(extra[1]);
        packed.assign(bytes, bytes + *static_cast<std::size_t*>(extra[3]));
      }
      const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
      if (FakeStream* s = capturing(stream)) {
        auto node = std::make_unique<FakeNode>();
        node->type = CU_GRAPH_NODE_TYPE_KERNEL;
        node->function = f;
        std::copy(grid, grid + 3, node->grid);
        std::copy(block, block + 3, node->block);
        node->shared_bytes = shared;
        node->args = std::move(packed);
        return capture(s, std::move(node));
      }
      return on_stream(stream, [f, gx, gy, gz, bx, by, bz, shared, args = std::move(packed)] {
        const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
        record_error(run_kernel(f, g, b, args.empty() ? nullptr : args.data(), shared));
      });
    };
    d.cuLaunchHostFunc = [](CUstream stream, CUhostFn fn, void* data) {
      if (FakeStream* s = capturing(stream)) {
        auto node = std::make_unique<FakeNode>();
        node->type = CU_GRAPH_NODE_TYPE_HOST;
        node->host.fn = fn;
        node->host.userData = data;
        return capture(s, std::move(node));
      }
      return on_stream(stream, [fn, data] { fn(data); });
    };
    d.cuStreamCreate = [](CUstream* s, unsigned) {
      ++fake().live_streams;
      auto* stream = new FakeStream;
      streams().insert(stream);
      *s = reinterpret_cast<CUstream>(stream);
      return CUDA_SUCCESS;
    };
    d.cuStreamDestroy = [](CUstream s) {
      --fake().live_streams;  // its queued work still runs, as on a GPU
      auto* stream = reinterpret_cast<FakeStream*>(s);
      drain(stream);
      streams().erase(stream);
      delete stream;
      return CUDA_SUCCESS;
    };
    d.cuStreamSynchronize = [](CUstream stream) {
      if (FakeStream* s = capturing(stream)) {  // not allowed in capture: it invalidates it
        s->invalidated = true;
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
      }
      if (auto* s = reinterpret_cast<FakeStream*>(stream)) {
        drain(s);
      } else {
        drain_all();
      }
      const CUresult r = fake().sticky_error;
      return r;  // sticky, as a real context's fault is
    };
    d.cuStreamBeginCapture = [](CUstream stream, CUstreamCaptureMode mode) {
      auto* s = reinterpret_cast<FakeStream*>(stream);
      if (s == nullptr || s->capture) return CUDA_ERROR_ILLEGAL_STATE;
      s->capture = std::make_unique<FakeGraph>();
      s->invalidated = false;
      if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) t_capturing = s;
      ++fake().captures;
      return CUDA_SUCCESS;
    };
    d.cuStreamEndCapture = [](CUstream stream, CUgraph* graph) {
      FakeStream* s = capturing(stream);
      if (s == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
      std::unique_ptr<FakeGraph> captured = std::move(s->capture);
      if (t_capturing == s) t_capturing = nullptr;
      if (s->invalidated) {
        *graph = nullptr;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      }
      *graph = reinterpret_cast<CUgraph>(captured.release());
      return CUDA_SUCCESS;
    };
    d.cuThreadExchangeStreamCaptureMode = [](CUstreamCaptureMode* mode) {
      std::swap(*mode, t_capture_mode);
      return CUDA_SUCCESS;
    };
    d.cuStreamWaitEvent = [](CUstream stream, CUevent e, unsigned) {
      if (capturing(stream)) return CUDA_SUCCESS;  // (captures hold one stream's work)
      // Work enqueued after this waits for the event's record as it stands now.
      auto* event = reinterpret_cast<FakeEvent*>(e);
      FakeStream* const from = event->stream;
      const std::uint64_t upto = event->sequence;
      return on_stream(stream, [from, upto] {
        if (from != nullptr && streams().count(from) != 0) drain(from, upto);
      });
    };
    d.cuEventCreate = [](CUevent* e, unsigned) {
      *e = reinterpret_cast<CUevent>(new FakeEvent);
      return CUDA_SUCCESS;
    };
    d.cuEventDestroy = [](CUevent e) {  // released once its record has run
      complete(reinterpret_cast<FakeEvent*>(e));
      delete reinterpret_cast<FakeEvent*>(e);
      return CUDA_SUCCESS;
    };
    d.cuEventRecord = [](CUevent e, CUstream stream) {
      auto* event = reinterpret_cast<FakeEvent*>(e);
      const auto mark = [event] {
        event->recorded = true;
        event->at = std::chrono::steady_clock::now();
      };
      auto* s = reinterpret_cast<FakeStream*>(stream);
      if (s == nullptr || s->capture) {
        event->stream = nullptr;
        mark();
        return CUDA_SUCCESS;
      }
      event->stream = s;
      event->sequence = s->enqueued + 1;
      return on_stream(stream, mark);
    };
    d.cuEventQuery = [](CUevent e) {  // the GPU makes progress: the event's work runs
      complete(reinterpret_cast<FakeEvent*>(e));
      return CUDA_SUCCESS;
    };
    d.cuEventSynchronize = [](CUevent e) {
      complete(reinterpret_cast<FakeEvent*>(e));
      return CUDA_SUCCESS;
    };
    d.cuEventElapsedTime = [](float* ms, CUevent start, CUevent end) {
      const auto* a = reinterpret_cast<FakeEvent*>(start);
      const auto* b = reinterpret_cast<FakeEvent*>(end);
      if (!a->recorded || !b->recorded) return CUDA_ERROR_NOT_READY;  // as the driver says
      *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
      return CUDA_SUCCESS;
    };
    d.cuGraphCreate = [](CUgraph* g, unsigned) {
      *g = reinterpret_cast<CUgraph>(new FakeGraph);
      return CUDA_SUCCESS;
    };
    d.cuGraphDestroy = [](CUgraph g) {
      delete reinterpret_cast<FakeGraph*>(g);
      return CUDA_SUCCESS;
    };
    d.cuGraphAddKernelNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps, std::size_t n,
                                const CUDA_KERNEL_NODE_PARAMS* p) {
      auto node = std::make_unique<FakeNode>();
      node->type = CU_GRAPH_NODE_TYPE_KERNEL;
      node->function = p->func;
      node->grid[0] = p->gridDimX;
      node->grid[1] = p->gridDimY;
      node->grid[2] = p->gridDimZ;
      node->block[0] = p->blockDimX;
      node->block[1] = p->blockDimY;
      node->block[2] = p->blockDimZ;
      node->shared_bytes = p->sharedMemBytes;
      if (!shared_fits(p->func, p->sharedMemBytes)) return CUDA_ERROR_INVALID_VALUE;
      if (p->kernelParams != nullptr) return CUDA_ERROR_INVALID_VALUE;
      if (p->extra != nullptr) {
        const auto* bytes = static_cast<const unsigned char*>(p->extra[1]);
        node->args.assign(bytes, bytes + *static_cast<const std::size_t*>(p->extra[3]));
      }
      return add_node(out, g, deps, n, std::move(node));
    };
    d.cuGraphAddMemcpyNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps, std::size_t n,
                                const CUDA_MEMCPY3D* p, CUcontext) {
      if (p->srcMemoryType != CU_MEMORYTYPE_UNIFIED || p->Height != 1 || p->Depth != 1)
        return CUDA_ERROR_INVALID_VALUE;
      auto node = std::make_unique<FakeNode>();
      node->type = CU_GRAPH_NODE_TYPE_MEMCPY;
      node->copy = *p;
      return add_node(out, g, deps, n, std::move(node));
    };
    d.cuGraphAddMemsetNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps, std::size_t n,
                                const CUDA_MEMSET_NODE_PARAMS* p, CUcontext) {
      if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)
        return CUDA_ERROR_INVALID_VALUE;
      auto node = std::make_unique<FakeNode>();
      node->type = CU_GRAPH_NODE_TYPE_MEMSET;
      node->memset = *p;
      return add_node(out, g, deps, n, std::move(node));
    };
    d.cuGraphAddHostNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps, std::size_t n,
                              const CUDA_HOST_NODE_PARAMS* p) {
      auto node = std::make_unique<FakeNode>();
      node->type = CU_GRAPH_NODE_TYPE_HOST;
      node->host = *p;
      return add_node(out, g, deps, n, std::move(node));
    };
    d.cuGraphAddEmptyNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                               std::size_t n) {
      return add_node(out, g, deps, n, std::make_unique<FakeNode>());
    };
    d.cuGraphAddChildGraphNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                    std::size_t n, CUgraph child) {
      // The driver refuses a child graph with memory nodes (cuGraphAddChildGraphNode).
      for (const auto& member : reinterpret_cast<FakeGraph*>(child)->nodes)
        if (member->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
            member->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
          return CUDA_ERROR_NOT_SUPPORTED;
      auto node = std::make_unique<FakeNode>();
      node->type = CU_GRAPH_NODE_TYPE_GRAPH;
      node->child = reinterpret_cast<FakeGraph*>(child)->clone();  // as the driver clones
      return add_node(out, g, deps, n, std::move(node));
    };
    d.cuGraphClone = [](CUgraph* clone, CUgraph original) {
      *clone = reinterpret_cast<CUgraph>(
          new FakeGraph(std::move(*reinterpret_cast<FakeGraph*>(original)->clone())));
      return CUDA_SUCCESS;
    };
    d.cuGraphAddEventRecordNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                                     std::size_t n, CUevent event) {
      auto node = std::make_unique<FakeNode>();
      node->type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
      node->event = event;
      return add_node(out, g, deps, n, std::move(node));
    };
    d.cuGraphConditionalHandleCreate = [](CUgraphConditionalHandle* out, CUgraph, CUcontext,
                                          unsigned default_value, unsigned flags) {
      // Each launch starts from the default (kiln asks for CU_GRAPH_COND_ASSIGN_DEFAULT,
      // and its setter runs before every conditional node, so the fake needs no more).
      if (flags != CU_GRAPH_COND_ASSIGN_DEFAULT) return CUDA_ERROR_NOT_SUPPORTED;
      *out = fake().conditions.size() + 1;
      fake().conditions[*out] = default_value;
      return CUDA_SUCCESS;
    };
    d.cuGraphAddNode = [](CUgraphNode* out, CUgraph g, const CUgraphNode* deps,
                          const CUgraphEdgeData* edges, std::size_t n, CUgraphNodeParams* p) {
      if (p->type != CU_GRAPH_NODE_TYPE_CONDITIONAL || edges != nullptr)
        return CUDA_ERROR_NOT_SUPPORTED;  // kiln adds only conditional nodes this way
      const CUDA_CONDITIONAL_NODE_PARAMS& c = p->conditional;
      if (fake().conditions.count(c.handle) == 0 || c.size != 1 ||
          (c.type != CU_GRAPH_COND_TYPE_IF && c.type != CU_GRAPH_COND_TYPE_WHILE))
        return CUDA_ERROR_INVALID_VALUE;
      auto node = std::make_unique<FakeNode>();
      node->type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
      node->condition = c.handle;
      node->condition_type = c.type;
      node->child = std::make_shared<FakeGraph>();
      node->body_out = reinterpret_cast<CUgraph>(node->child.get());
      p->conditional.phGraph_out = &node->body_out;
      ++fake().conditional_nodes;
      return add_node(out, g, deps, n, std::move(node));
    };
    d.cuGraphInstantiate = [](CUgraphExec* e, CUgraph g, unsigned long long) {
      ++fake().instantiations;
      ++fake().live_graph_execs;
      auto* exec = new FakeExec{reinterpret_cast<FakeGraph*>(g)->clone()};
      fake().last_instantiated = exec->graph;
      *e = reinterpret_cast<CUgraphExec>(exec);
      return CUDA_SUCCESS;
    };
    d.cuGraphLaunch = [](CUgraphExec e, CUstream stream) {
      ++fake().graph_launches;
      // The graph as it is now: a later update or destroy does not change this launch.
      std::shared_ptr<FakeGraph> graph = reinterpret_cast<FakeExec*>(e)->graph;
      return on_stream(stream, [graph] { run_graph(*graph); });
    };
    d.cuGraphExecUpdate = [](CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo* info) {
      auto* exec = reinterpret_cast<FakeExec*>(e);
      const auto* graph = reinterpret_cast<FakeGraph*>(g);
      bool same = graph->nodes.size() == exec->graph->nodes.size();
      for (std::size_t i = 0; same && i < graph->nodes.size(); ++i)
        same = graph->nodes[i]->type == exec->graph->nodes[i]->type &&
               graph->nodes[i]->function == exec->graph->nodes[i]->function;
      if (!same || fake().refuse_updates) {
        info->result = same ? CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED
                            : CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
      }
      ++fake().graph_updates;
      exec->graph = graph->clone();
      info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
      return CUDA_SUCCESS;
    };
    d.cuGraphExecDestroy = [](CUgraphExec e) {
      --fake().live_graph_execs;
      delete reinterpret_cast<FakeExec*>(e);
      return CUDA_SUCCESS;
    };
#define KILN_FAKE_CHECK(name) \
  if (d.name == nullptr) throw std::logic_error("the fake CUDA driver lacks " #name);
    KILN_CUDA_ENTRIES(KILN_FAKE_CHECK)
#undef KILN_FAKE_CHECK
    return d;
  }();
  return table;
}

namespace {

struct FakeBlasHandle {
  CUstream stream = nullptr;
  bool workspace = false;  // a user workspace set since the last cublasSetStream
};

struct FakeGemm {
  int m, n, k, lda, ldb, ldc, batch;
  long long sa, sb, sc;
  float alpha, beta;
  const float *a, *b;
  float* c;

  static void run(void* data) {
    const auto& g = *static_cast<const FakeGemm*>(data);
    ++fake().gemms;
    for (int p = 0; p < g.batch; ++p)
      for (int j = 0; j < g.n; ++j)
        for (int i = 0; i < g.m; ++i) {  // column-major, no transposes
          double sum = 0;
          for (int l = 0; l < g.k; ++l)
            sum +=
                static_cast<double>(g.a[p * g.sa + i + l * g.lda]) * g.b[p * g.sb + l + j * g.ldb];
          float& out = g.c[p * g.sc + i + j * g.ldc];
          out = static_cast<float>(g.alpha * sum + (g.beta == 0 ? 0.0 : g.beta * out));
        }
  }
};

}  // namespace

const detail::Cublas& FakeCuda::blas() const {
  static const detail::Cublas table = [] {
    detail::Cublas t;
    t.cublasCreate = [](cublasHandle_t* h) {
      *h = reinterpret_cast<cublasHandle_t>(new FakeBlasHandle);
      return CUBLAS_STATUS_SUCCESS;
    };
    t.cublasDestroy = [](cublasHandle_t h) {
      delete reinterpret_cast<FakeBlasHandle*>(h);
      return CUBLAS_STATUS_SUCCESS;
    };
    t.cublasSetStream = [](cublasHandle_t h, cudaStream_t s) {
      // As the real one: setting the stream puts the handle back on cuBLAS's own
      // workspace pool, forgetting the user's workspace.
      reinterpret_cast<FakeBlasHandle*>(h)->stream = reinterpret_cast<CUstream>(s);
      reinterpret_cast<FakeBlasHandle*>(h)->workspace = false;
      return CUBLAS_STATUS_SUCCESS;
    };
    t.cublasSetWorkspace = [](cublasHandle_t h, void*, std::size_t) {
      reinterpret_cast<FakeBlasHandle*>(h)->workspace = true;
      return CUBLAS_STATUS_SUCCESS;
    };
    t.cublasSgemmStridedBatched =
        [](cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
           const float* alpha, const float* a, int lda, long long sa, const float* b, int ldb,
           long long sb, const float* beta, float* c, int ldc, long long sc, int batch) {
          if (ta != CUBLAS_OP_N || tb != CUBLAS_OP_N || lda < m || ldb < k || ldc < m)
            return CUBLAS_STATUS_INVALID_VALUE;
          auto call = std::make_shared<FakeGemm>(
              FakeGemm{m, n, k, lda, ldb, ldc, batch, sa, sb, sc, *alpha, *beta, a, b, c});
          fake().gemm_calls.push_back(call);
          // Without a user workspace, a captured GEMM allocates its own, stream-ordered,
          // as cuBLAS 13 does on an H200 (m = 128, split-K): a memory node in the graph.
          auto* handle = reinterpret_cast<FakeBlasHandle*>(h);
          if (FakeStream* s = capturing(handle->stream); s != nullptr && !handle->workspace) {
            auto node = std::make_unique<FakeNode>();
            node->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
            capture(s, std::move(node));
          }
          const CUresult r = fake().driver().cuLaunchHostFunc(
              reinterpret_cast<FakeBlasHandle*>(h)->stream, &FakeGemm::run, call.get());
          return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
        };
    t.cublasGetStatusString = [](cublasStatus_t) { return "fake cuBLAS error"; };
    return t;
  }();
  return table;
}

namespace {

struct FakeNcclComm {
  int rank = 0, size = 1;
};

struct FakeNcclCall {
  enum Kind { allreduce, allgather, reduce_scatter, broadcast, reduce, send, recv } kind;
  int rank = 0, size = 1;
  const float* in = nullptr;
  float* out = nullptr;
  std::size_t count = 0;
  int root = 0;  // broadcast, reduce; send, recv: the peer
  CUstream stream = nullptr;
};

/// The calls of one group, computed once every rank's are known: the j-th call of each
/// rank together (collectives), sends matched with receives.
struct FakeNcclGroup {
  std::vector<FakeNcclCall> calls;

  static void run(void* data) {
    const auto& g = *static_cast<const FakeNcclGroup*>(data);
    const int size = g.calls.front().size;
    std::vector<std::vector<const FakeNcclCall*>> by_rank(static_cast<std::size_t>(size));
    for (const FakeNcclCall& c : g.calls) by_rank[static_cast<std::size_t>(c.rank)].push_back(&c);
    for (std::size_t j = 0; j < by_rank[0].size(); ++j) {
      std::vector<const FakeNcclCall*> at;
      for (const auto& calls : by_rank) at.push_back(calls[j]);
      const FakeNcclCall& first = *at[0];
      const std::size_t n = first.count;
      // Σ over ranks of in[offset + i].
      const auto sum = [&](std::size_t offset, std::size_t i) {
        float s = 0;
        for (const FakeNcclCall* c : at) s += c->in[offset + i];
        return s;
      };
      switch (first.kind) {
        case FakeNcclCall::allreduce: {
          std::vector<float> total(n);
          for (std::size_t i = 0; i < n; ++i) total[i] = sum(0, i);
          for (const FakeNcclCall* c : at) std::copy(total.begin(), total.end(), c->out);
          break;
        }
        case FakeNcclCall::allgather:
          for (const FakeNcclCall* c : at)
            for (const FakeNcclCall* src : at)
              std::copy(src->in, src->in + n, c->out + static_cast<std::size_t>(src->rank) * n);
          break;
        case FakeNcclCall::reduce_scatter:
          for (const FakeNcclCall* c : at)
            for (std::size_t i = 0; i < n; ++i)
              c->out[i] = sum(static_cast<std::size_t>(c->rank) * n, i);
          break;
        case FakeNcclCall::broadcast: {
          const float* src = at[static_cast<std::size_t>(first.root)]->in;
          const std::vector<float> values(src, src + n);
          for (const FakeNcclCall* c : at) std::copy(values.begin(), values.end(), c->out);
          break;
        }
        case FakeNcclCall::reduce:
          for (std::size_t i = 0; i < n; ++i)
            at[static_cast<std::size_t>(first.root)]->out[i] = sum(0, i);
          break;
        case FakeNcclCall::send:
        case FakeNcclCall::recv:
          break;  // matched below
      }
    }
    for (const FakeNcclCall& r : g.calls)
      if (r.kind == FakeNcclCall::recv)
        for (const FakeNcclCall& s : g.calls)
          if (s.kind == FakeNcclCall::send && s.rank == r.root && s.root == r.rank &&
              s.count == r.count)
            std::copy(s.in, s.in + s.count, r.out);
    ++fake().nccl_launches;
  }
};

ncclResult_t nccl_group_end() {
  if (--fake().nccl_group_depth > 0) return ncclSuccess;
  auto group = std::make_shared<FakeNcclGroup>();
  for (const auto& p : fake().nccl_pending)
    group->calls.push_back(*static_cast<const FakeNcclCall*>(p.get()));
  fake().nccl_pending.clear();
  if (group->calls.empty()) return ncclSuccess;
  // Every rank must be here, with as many calls as the others.
  std::vector<int> calls(static_cast<std::size_t>(group->calls.front().size), 0);
  for (const FakeNcclCall& c : group->calls) ++calls[static_cast<std::size_t>(c.rank)];
  if (std::any_of(calls.begin(), calls.end(), [&](int k) { return k != calls[0]; }))
    return ncclInvalidUsage;
  fake().nccl_calls.push_back(group);
  // As NCCL does, the group runs after each rank's earlier work on that rank's stream, and
  // each rank's later work runs after it: on the first rank's stream, once the others have
  // reached their calls; the others' streams wait for it there.
  auto* first = reinterpret_cast<FakeStream*>(group->calls.front().stream);
  std::set<FakeStream*> others;
  for (const FakeNcclCall& c : group->calls)
    if (auto* other = reinterpret_cast<FakeStream*>(c.stream); other != first) others.insert(other);
  const bool plain = first != nullptr && !first->capture &&
                     std::none_of(others.begin(), others.end(), [](FakeStream* o) {
                       return o == nullptr || o->capture != nullptr;
                     });
  if (others.empty() || !plain) {  // one stream (or a capture): a host function on it
    const CUresult r = fake().driver().cuLaunchHostFunc(group->calls.front().stream,
                                                        &FakeNcclGroup::run, group.get());
    return r == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
  }
  std::vector<std::pair<FakeStream*, std::uint64_t>> reached;
  for (FakeStream* o : others) reached.emplace_back(o, o->enqueued);
  on_stream(reinterpret_cast<CUstream>(first), [reached, g = group.get()] {
    for (const auto& [o, upto] : reached)
      if (streams().count(o) != 0) drain(o, upto);
    FakeNcclGroup::run(g);
  });
  const std::uint64_t done = first->enqueued;
  for (FakeStream* o : others)
    on_stream(reinterpret_cast<CUstream>(o), [first, done] {
      if (streams().count(first) != 0) drain(first, done);
    });
  return ncclSuccess;
}

ncclResult_t nccl_call(FakeNcclCall::Kind kind, const void* in, void* out, std::size_t n,
                       ncclDataType_t type, int root, ncclComm_t comm, cudaStream_t s) {
  if (type != ncclFloat32) return ncclInvalidArgument;
  const auto* c = reinterpret_cast<const FakeNcclComm*>(comm);
  fake().nccl_pending.push_back(std::make_shared<FakeNcclCall>(
      FakeNcclCall{kind, c->rank, c->size, static_cast<const float*>(in), static_cast<float*>(out),
                   n, root, reinterpret_cast<CUstream>(s)}));
  if (fake().nccl_group_depth > 0) return ncclSuccess;
  ++fake().nccl_group_depth;  // a lone call is a group of its own
  return nccl_group_end();
}

}  // namespace

const detail::Nccl& FakeCuda::nccl() const {
  static const detail::Nccl table = [] {
    using K = FakeNcclCall;
    detail::Nccl t;
    t.ncclCommInitAll = [](ncclComm_t* comms, int n, const int* devices) {
      for (int r = 0; r < n; ++r) {
        if (devices[r] >= fake().device_count) return ncclInvalidArgument;
        comms[r] = reinterpret_cast<ncclComm_t>(new FakeNcclComm{r, n});
      }
      return ncclSuccess;
    };
    t.ncclCommDestroy = [](ncclComm_t c) {
      delete reinterpret_cast<FakeNcclComm*>(c);
      return ncclSuccess;
    };
    t.ncclGetErrorString = [](ncclResult_t) { return "fake NCCL error"; };
    t.ncclGroupStart = [] {
      ++fake().nccl_group_depth;
      return ncclSuccess;
    };
    t.ncclGroupEnd = [] { return nccl_group_end(); };
    t.ncclAllReduce = [](const void* in, void* out, std::size_t n, ncclDataType_t type, ncclRedOp_t,
                         ncclComm_t comm, cudaStream_t s) {
      return nccl_call(K::allreduce, in, out, n, type, 0, comm, s);
    };
    t.ncclAllGather = [](const void* in, void* out, std::size_t n, ncclDataType_t type,
                         ncclComm_t comm, cudaStream_t s) {
      return nccl_call(K::allgather, in, out, n, type, 0, comm, s);
    };
    t.ncclReduceScatter = [](const void* in, void* out, std::size_t n, ncclDataType_t type,
                             ncclRedOp_t, ncclComm_t comm, cudaStream_t s) {
      return nccl_call(K::reduce_scatter, in, out, n, type, 0, comm, s);
    };
    t.ncclBroadcast = [](const void* in, void* out, std::size_t n, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t s) {
      return nccl_call(K::broadcast, in, out, n, type, root, comm, s);
    };
    t.ncclReduce = [](const void* in, void* out, std::size_t n, ncclDataType_t type, ncclRedOp_t,
                      int root, ncclComm_t comm, cudaStream_t s) {
      return nccl_call(K::reduce, in, out, n, type, root, comm, s);
    };
    t.ncclSend = [](const void* in, std::size_t n, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t s) {
      return nccl_call(K::send, in, nullptr, n, type, peer, comm, s);
    };
    t.ncclRecv = [](void* out, std::size_t n, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t s) {
      return nccl_call(K::recv, nullptr, out, n, type, peer, comm, s);
    };
    return t;
  }();
  return table;
}

}  // namespace kiln::testing
