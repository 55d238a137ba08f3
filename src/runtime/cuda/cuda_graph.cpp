#include "runtime/cuda/cuda_graph.hpp"

#include <cstring>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::detail {
namespace {

const char* update_result_name(CUgraphExecUpdateResult r) {
  switch (r) {
    case CU_GRAPH_EXEC_UPDATE_SUCCESS:
      return "success";
    case CU_GRAPH_EXEC_UPDATE_ERROR:
      return "the update failed for an unexpected reason";
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
      return "the topology changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
      return "a node's type changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
      return "a kernel node's function changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
      return "parameters changed in a way the driver cannot update (e.g. a memset's size or "
             "element width, or a copy between other kinds of memory)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
      return "something about the node is not supported by in-place update";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
      return "the kernel function changed in an unsupported way";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
      return "a node's attributes changed";
  }
  return "an unknown reason";
}

}  // namespace

CudaGraphExec::CudaGraphExec(std::shared_ptr<const CudaStreamState> state,
                             std::vector<GraphNodeDesc> nodes)
    : state_(std::move(state)), topology_(nodes) {
  state_->make_current();
  graph_ = build(nodes);
  const CUresult r = state_->cu->cuGraphInstantiate(&exec_, graph_, 0);
  if (r != CUDA_SUCCESS) {
    state_->cu->cuGraphDestroy(graph_);
    state_->check(r, "DeviceGraph::create (cuGraphInstantiate)");
  }
}

CudaGraphExec::~CudaGraphExec() {
  const CudaDriver& cu = *state_->cu;
  cu.cuCtxSetCurrent(state_->context);
  // A replay in flight may still call the host callbacks this object owns; the driver
  // itself frees an in-flight executable graph when it completes.
  if (!host_slots_.empty()) cu.cuStreamSynchronize(state_->stream);
  cu.cuGraphExecDestroy(exec_);
  cu.cuGraphDestroy(graph_);
}

void CudaGraphExec::run_host_slot(void* data) {
  auto* slot = static_cast<HostSlot*>(data);
  try {
    slot->fn();
  } catch (...) {
    slot->state->host_failures.record(std::current_exception(), slot->where);
  }
}

CUgraph CudaGraphExec::build(std::vector<GraphNodeDesc>& descs) {
  const CudaDriver& cu = *state_->cu;
  CUgraph graph = nullptr;
  state_->check(cu.cuGraphCreate(&graph, 0), "DeviceGraph (cuGraphCreate)");
  // ends[i]: the CUDA nodes that node i's dependents wait for (a memset of 8- or 16-byte
  // elements is one CUDA node per 32-bit word).
  std::vector<std::vector<CUgraphNode>> ends(descs.size());
  std::vector<CUgraphNode> deps;
  try {
    for (std::uint32_t i = 0; i < descs.size(); ++i) {
      GraphNodeDesc& d = descs[i];
      deps.clear();
      for (std::uint32_t dep : topology_[i].dependencies)
        deps.insert(deps.end(), ends[dep].begin(), ends[dep].end());
      const CUgraphNode* dep_data = deps.empty() ? nullptr : deps.data();
      const std::string what = cat("DeviceGraph: adding ", topology_.describe(i));
      CUgraphNode node = nullptr;
      switch (d.kind) {
        case GraphNodeKind::kernel: {
          const auto* code = dynamic_cast<const CudaCode*>(d.kernel.info->device_code.get());
          if (code == nullptr || code->state->context != state_->context)
            throw UserError(cat(what, ": the kernel was not loaded on ", state_->device,
                                "; compile it with the graph's context"));
          std::size_t size = d.kernel.args.size();
          void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, d.kernel.args.data(),
                           CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
          CUDA_KERNEL_NODE_PARAMS p;
          std::memset(&p, 0, sizeof p);
          const LaunchConfig& c = d.kernel.config;
          p.func = code->function;
          p.gridDimX = c.grid_dim.x;
          p.gridDimY = c.grid_dim.y;
          p.gridDimZ = c.grid_dim.z;
          p.blockDimX = c.block_dim.x;
          p.blockDimY = c.block_dim.y;
          p.blockDimZ = c.block_dim.z;
          code->allow_dynamic_shared(c.dynamic_shared_bytes, "DeviceGraph", d.kernel.info->name);
          p.sharedMemBytes = c.dynamic_shared_bytes;
          p.extra = size > 0 ? extra : nullptr;  // the driver copies the parameters
          state_->check(cu.cuGraphAddKernelNode(&node, graph, dep_data, deps.size(), &p),
                        what.c_str());
          ends[i].push_back(node);
          break;
        }
        case GraphNodeKind::copy: {
          CUDA_MEMCPY3D p;
          std::memset(&p, 0, sizeof p);
          p.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
          p.srcDevice = device_address(d.src);
          p.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
          p.dstDevice = device_address(d.dst);
          p.WidthInBytes = d.bytes;
          p.Height = 1;
          p.Depth = 1;
          state_->check(
              cu.cuGraphAddMemcpyNode(&node, graph, dep_data, deps.size(), &p, state_->context),
              what.c_str());
          ends[i].push_back(node);
          break;
        }
        case GraphNodeKind::memset: {
          // A wide element is several CUDA nodes (see memset_params).
          for (const CUDA_MEMSET_NODE_PARAMS& p :
               memset_params(device_address(d.dst), d.count, d.pattern.data(), d.pattern_size)) {
            state_->check(
                cu.cuGraphAddMemsetNode(&node, graph, dep_data, deps.size(), &p, state_->context),
                what.c_str());
            ends[i].push_back(node);
          }
          break;
        }
        case GraphNodeKind::host: {
          HostSlot& slot = host_slots_.emplace_back(
              HostSlot{std::move(d.host), state_.get(), topology_.describe(i)});
          CUDA_HOST_NODE_PARAMS p;
          std::memset(&p, 0, sizeof p);
          p.fn = &run_host_slot;
          p.userData = &slot;
          state_->check(cu.cuGraphAddHostNode(&node, graph, dep_data, deps.size(), &p),
                        what.c_str());
          ends[i].push_back(node);
          break;
        }
        case GraphNodeKind::empty:
          state_->check(cu.cuGraphAddEmptyNode(&node, graph, dep_data, deps.size()), what.c_str());
          ends[i].push_back(node);
          break;
        case GraphNodeKind::cuda_work: {
          const CUgraph captured = capture(d.cuda_work, what);
          const CUresult r =
              cu.cuGraphAddChildGraphNode(&node, graph, dep_data, deps.size(), captured);
          cu.cuGraphDestroy(captured);  // the node holds a copy
          state_->check(r, what.c_str());
          ends[i].push_back(node);
          break;
        }
        case GraphNodeKind::child: {
          const auto* child = dynamic_cast<const CudaGraphExec*>(d.child.get());
          if (child == nullptr)
            throw UserError(cat(what, ": the child graph was not built for ", state_->device));
          state_->check(
              cu.cuGraphAddChildGraphNode(&node, graph, dep_data, deps.size(), child->graph()),
              what.c_str());
          ends[i].push_back(node);
          break;
        }
      }
    }
  } catch (...) {
    cu.cuGraphDestroy(graph);
    throw;
  }
  return graph;
}

CUgraph CudaGraphExec::capture(const CudaWork& work, const std::string& what) const {
  const CudaDriver& cu = *state_->cu;
  CUstream stream = nullptr;
  state_->check(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), what.c_str());
  CUgraph captured = nullptr;
  CUresult ended = CUDA_SUCCESS;
  try {
    // Thread-local mode: only this thread's unsafe calls (synchronizing, allocating)
    // invalidate the capture; other threads' CUDA work goes on as usual.
    state_->check(cu.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                  what.c_str());
    try {
      work(stream);
    } catch (...) {
      cu.cuStreamEndCapture(stream, &captured);
      if (captured != nullptr) cu.cuGraphDestroy(captured);
      throw;
    }
    ended = cu.cuStreamEndCapture(stream, &captured);
  } catch (...) {
    cu.cuStreamDestroy(stream);
    throw;
  }
  cu.cuStreamDestroy(stream);
  if (ended != CUDA_SUCCESS || captured == nullptr) {
    if (captured != nullptr) cu.cuGraphDestroy(captured);
    throw DeviceError(
        cat(what, ": its CUDA work could not be captured into the graph (", cu.error_text(ended),
            "); the work must only enqueue asynchronous operations on the stream "
            "it is given: no synchronization, no cudaMalloc or cudaFree, no "
            "waiting on work outside the capture"),
        static_cast<long>(ended));
  }
  return captured;
}

void CudaGraphExec::launch() const {
  std::scoped_lock lock(mutex_);
  state_->make_current();
  state_->check(state_->cu->cuGraphLaunch(exec_, state_->stream),
                "DeviceGraph::replay (cuGraphLaunch)");
}

void CudaGraphExec::update(std::vector<GraphNodeDesc> nodes) {
  if (std::string difference = topology_.difference(nodes); !difference.empty())
    throw UserError(
        cat("DeviceGraph::update: the build callback recorded a different graph: ", difference,
            "; record the same nodes in the same order (create a new "
            "graph for a different shape)"));
  std::scoped_lock lock(mutex_);
  state_->make_current();
  const CudaDriver& cu = *state_->cu;
  CUgraph graph = build(nodes);
  CUgraphExecUpdateResultInfo info;
  std::memset(&info, 0, sizeof info);
  const CUresult r = cu.cuGraphExecUpdate(exec_, graph, &info);
  if (r == CUDA_SUCCESS) {
    fallback_.clear();
  } else {
    // The driver could not update in place: instantiate again. Replays already enqueued
    // keep the old executable graph, which the driver frees when they are done.
    CUgraphExec fresh = nullptr;
    if (const CUresult ri = cu.cuGraphInstantiate(&fresh, graph, 0); ri != CUDA_SUCCESS) {
      cu.cuGraphDestroy(graph);
      state_->check(ri, "DeviceGraph::update (cuGraphInstantiate)");
    }
    cu.cuGraphExecDestroy(exec_);
    exec_ = fresh;
    fallback_ = cat("cuGraphExecUpdate refused the update (", update_result_name(info.result), "; ",
                    cu.error_text(r), "), so the graph was instantiated again");
  }
  cu.cuGraphDestroy(graph_);
  graph_ = graph;
  topology_.set_configs(nodes);
}

CUgraph CudaGraphExec::graph() const {
  std::scoped_lock lock(mutex_);
  return graph_;
}

std::string CudaGraphExec::last_update_fallback() const {
  std::scoped_lock lock(mutex_);
  return fallback_;
}

std::string CudaGraphExec::to_dot() const {
  std::scoped_lock lock(mutex_);
  return topology_.to_dot();
}

}  // namespace kiln::detail
