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

CudaGraphExec::CudaGraphExec(std::shared_ptr<const CudaStreamState> state, GraphNodeDescs nodes,
                             std::shared_ptr<const CudaCode> setter, bool instantiate)
    : state_(std::move(state)), setter_(std::move(setter)), topology_(std::move(nodes)) {
  state_->make_current();
  params_ = materialize(topology_.parameters());
  // A conditional node's body: its parent adds the nodes to the node's body graph.
  if (!instantiate) return;
  try {
    graph_ = emit(params_, nullptr);
  } catch (...) {
    release(params_);
    throw;
  }
  const CUresult r = state_->cu->cuGraphInstantiate(&exec_, graph_, 0);
  if (r != CUDA_SUCCESS) {
    state_->cu->cuGraphDestroy(graph_);
    release(params_);
    state_->check(r, "DeviceGraph::create (cuGraphInstantiate)");
  }
}

CudaGraphExec::~CudaGraphExec() {
  const CudaDriver& cu = *state_->cu;
  cu.cuCtxSetCurrent(state_->context);
  // A replay in flight may still call the host callbacks this object owns; the driver
  // itself frees an in-flight executable graph when it completes.
  if (!host_slots_.empty()) cu.cuStreamSynchronize(state_->stream);
  drop_profiled();
  if (exec_ != nullptr) cu.cuGraphExecDestroy(exec_);
  if (graph_ != nullptr) cu.cuGraphDestroy(graph_);
  release(params_);
}

void CudaGraphExec::run_host_slot(void* data) {
  auto* slot = static_cast<HostSlot*>(data);
  try {
    slot->fn();
  } catch (...) {
    slot->state->host_failures.record(std::current_exception(), slot->where);
  }
}

std::vector<CudaGraphExec::NodeParams> CudaGraphExec::materialize(GraphNodeDescs& descs) {
  const CudaDriver& cu = *state_->cu;
  std::vector<NodeParams> params(descs.size());
  try {
    for (std::uint32_t i = 0; i < descs.size(); ++i) {
      GraphNodeDesc& d = descs[i];
      NodeParams& p = params[i];
      p.kind = d.kind;
      const std::string what = cat("DeviceGraph: adding ", topology_.describe(i));
      switch (d.kind) {
        case GraphNodeKind::kernel: {
          const KernelLaunch& launch = d.kernel();
          const auto* code = dynamic_cast<const CudaCode*>(launch.info->device_code.get());
          if (code == nullptr || code->state->context != state_->context)
            throw UserError(cat(what, ": the kernel was not loaded on ", state_->device,
                                "; compile it with the graph's context"));
          const LaunchConfig& c = launch.config;
          code->allow_dynamic_shared(c.dynamic_shared_bytes, "DeviceGraph", launch.info->name);
          std::memset(&p.kernel, 0, sizeof p.kernel);
          p.kernel.func = code->function;
          p.kernel.gridDimX = c.grid_dim.x;
          p.kernel.gridDimY = c.grid_dim.y;
          p.kernel.gridDimZ = c.grid_dim.z;
          p.kernel.blockDimX = c.block_dim.x;
          p.kernel.blockDimY = c.block_dim.y;
          p.kernel.blockDimZ = c.block_dim.z;
          p.kernel.sharedMemBytes = c.dynamic_shared_bytes;
          p.args = std::move(d.kernel().args);
          break;
        }
        case GraphNodeKind::copy:
          std::memset(&p.copy, 0, sizeof p.copy);
          p.copy.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
          p.copy.srcDevice = device_address(d.copy().src);
          p.copy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
          p.copy.dstDevice = device_address(d.copy().dst);
          p.copy.WidthInBytes = d.copy().bytes;
          p.copy.Height = 1;
          p.copy.Depth = 1;
          break;
        case GraphNodeKind::memset:  // a wide element is several CUDA nodes
          p.memsets = memset_params(device_address(d.memset().dst), d.memset().count,
                                    d.memset().pattern.data(), d.memset().pattern_size);
          break;
        case GraphNodeKind::host: {
          HostSlot& slot = host_slots_.emplace_back(
              HostSlot{std::move(d.host()), state_.get(), topology_.describe(i)});
          std::memset(&p.host, 0, sizeof p.host);
          p.host.fn = &run_host_slot;
          p.host.userData = &slot;
          break;
        }
        case GraphNodeKind::empty:
          break;
        case GraphNodeKind::child: {
          const auto* child = dynamic_cast<const CudaGraphExec*>(d.child().get());
          if (child == nullptr)
            throw UserError(cat(what, ": the child graph was not built for ", state_->device));
          // A copy: the child's own template changes when the child is updated.
          state_->check(cu.cuGraphClone(&p.graph, child->graph()), what.c_str());
          break;
        }
        case GraphNodeKind::cuda_work:
          p.graph = capture(d.cuda_work(), what);
          break;
        case GraphNodeKind::conditional: {
          if (setter_ == nullptr)
            throw InternalError("a conditional node reached a CUDA graph without its setter");
          GraphConditional& c = d.conditional();
          // CUDA runs only these in a conditional body (host functions and captured work,
          // which may hold anything, are refused by the driver): say so here, by node.
          for (std::uint32_t j = 0; j < c.body->size(); ++j) {
            const GraphNodeKind k = (*c.body)[j].kind;
            if (k == GraphNodeKind::host || k == GraphNodeKind::cuda_work)
              throw UserError(cat(what, ": node ", j, " of its body is a ", kind_name(k),
                                  " node; on CUDA a conditional body may hold kernels, copies, "
                                  "memsets, empty nodes, child graphs and conditional nodes "
                                  "(move host work before or after the conditional node)"));
          }
          p.condition = device_address(c.condition);
          p.loop = c.loop;
          p.body = std::make_shared<CudaGraphExec>(state_, std::move(*c.body), setter_, false);
          break;
        }
      }
    }
  } catch (...) {
    release(params);
    throw;
  }
  return params;
}

void CudaGraphExec::release(std::vector<NodeParams>& params) const {
  for (NodeParams& p : params)
    if (p.graph != nullptr) state_->cu->cuGraphDestroy(p.graph);
  params.clear();
}

CUgraph CudaGraphExec::emit(const std::vector<NodeParams>& params,
                            const std::vector<CUevent>* events) const {
  const CudaDriver& cu = *state_->cu;
  CUgraph graph = nullptr;
  state_->check(cu.cuGraphCreate(&graph, 0), "DeviceGraph (cuGraphCreate)");
  try {
    add_nodes(graph, params, events);
  } catch (...) {
    cu.cuGraphDestroy(graph);
    throw;
  }
  return graph;
}

std::vector<CUgraphNode> CudaGraphExec::add_nodes(CUgraph graph,
                                                  const std::vector<NodeParams>& params,
                                                  const std::vector<CUevent>* events) const {
  const CudaDriver& cu = *state_->cu;
  // ends[i]: the CUDA nodes that node i's dependents wait for (a memset of 8- or 16-byte
  // elements is one CUDA node per 32-bit word; profiled: the node's end event).
  std::vector<std::vector<CUgraphNode>> ends(params.size());
  std::vector<bool> has_dependent(params.size(), false);
  std::vector<CUgraphNode> deps;
  {
    for (std::uint32_t i = 0; i < params.size(); ++i) {
      const NodeParams& p = params[i];
      deps.clear();
      for (std::uint32_t dep : topology_[i].dependencies) {
        deps.insert(deps.end(), ends[dep].begin(), ends[dep].end());
        has_dependent[dep] = true;
      }
      const std::string what = cat("DeviceGraph: adding ", topology_.describe(i));
      CUgraphNode node = nullptr;
      if (events != nullptr) {  // the node's begin event, which the node waits for
        state_->check(
            cu.cuGraphAddEventRecordNode(&node, graph, deps.data(), deps.size(), (*events)[2 * i]),
            what.c_str());
        deps.assign(1, node);
      }
      const CUgraphNode* dep_data = deps.empty() ? nullptr : deps.data();
      switch (p.kind) {
        case GraphNodeKind::kernel: {
          std::size_t size = p.args.size();
          void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER,
                           const_cast<unsigned char*>(p.args.data()), CU_LAUNCH_PARAM_BUFFER_SIZE,
                           &size, CU_LAUNCH_PARAM_END};
          CUDA_KERNEL_NODE_PARAMS k = p.kernel;
          k.extra = size > 0 ? extra : nullptr;  // the driver copies the parameters
          state_->check(cu.cuGraphAddKernelNode(&node, graph, dep_data, deps.size(), &k),
                        what.c_str());
          ends[i].push_back(node);
          break;
        }
        case GraphNodeKind::copy:
          state_->check(cu.cuGraphAddMemcpyNode(&node, graph, dep_data, deps.size(), &p.copy,
                                                state_->context),
                        what.c_str());
          ends[i].push_back(node);
          break;
        case GraphNodeKind::memset:
          for (const CUDA_MEMSET_NODE_PARAMS& m : p.memsets) {
            state_->check(
                cu.cuGraphAddMemsetNode(&node, graph, dep_data, deps.size(), &m, state_->context),
                what.c_str());
            ends[i].push_back(node);
          }
          break;
        case GraphNodeKind::host:
          state_->check(cu.cuGraphAddHostNode(&node, graph, dep_data, deps.size(), &p.host),
                        what.c_str());
          ends[i].push_back(node);
          break;
        case GraphNodeKind::empty:
          state_->check(cu.cuGraphAddEmptyNode(&node, graph, dep_data, deps.size()), what.c_str());
          ends[i].push_back(node);
          break;
        case GraphNodeKind::child:
        case GraphNodeKind::cuda_work:  // the driver clones the graph into the node
          state_->check(cu.cuGraphAddChildGraphNode(&node, graph, dep_data, deps.size(), p.graph),
                        what.c_str());
          ends[i].push_back(node);
          break;
        case GraphNodeKind::conditional:
          node = add_conditional(graph, deps, p, what);
          ends[i].push_back(node);
          break;
      }
      if (events != nullptr) {  // the node's end event, which its dependents wait for
        state_->check(cu.cuGraphAddEventRecordNode(&node, graph, ends[i].data(), ends[i].size(),
                                                   (*events)[2 * i + 1]),
                      what.c_str());
        ends[i].assign(1, node);
      }
    }
  }
  std::vector<CUgraphNode> sinks;  // what a node after the whole graph waits for
  for (std::uint32_t i = 0; i < params.size(); ++i)
    if (!has_dependent[i]) sinks.insert(sinks.end(), ends[i].begin(), ends[i].end());
  return sinks;
}

CUgraphNode CudaGraphExec::add_setter(CUgraph graph, const std::vector<CUgraphNode>& deps,
                                      CUgraphConditionalHandle handle, CUdeviceptr condition,
                                      const std::string& what) const {
  struct {
    CUgraphConditionalHandle handle;
    CUdeviceptr condition;
  } args{handle, condition};
  std::size_t size = sizeof args;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUDA_KERNEL_NODE_PARAMS k;
  std::memset(&k, 0, sizeof k);
  k.func = setter_->function;
  k.gridDimX = k.gridDimY = k.gridDimZ = 1;
  k.blockDimX = k.blockDimY = k.blockDimZ = 1;
  k.extra = extra;  // the driver copies the parameters
  CUgraphNode node = nullptr;
  state_->check(state_->cu->cuGraphAddKernelNode(&node, graph, deps.empty() ? nullptr : deps.data(),
                                                 deps.size(), &k),
                (what + " (its condition)").c_str());
  return node;
}

CUgraphNode CudaGraphExec::add_conditional(CUgraph graph, const std::vector<CUgraphNode>& deps,
                                           const NodeParams& p, const std::string& what) const {
  const CudaDriver& cu = *state_->cu;
  // The handle's value is 0 at each launch until the setter, which runs just before the
  // node, copies the int32 into it; a WHILE body ends with the setter again.
  CUgraphConditionalHandle handle = 0;
  state_->check(cu.cuGraphConditionalHandleCreate(&handle, graph, state_->context, 0,
                                                  CU_GRAPH_COND_ASSIGN_DEFAULT),
                (what + " (cuGraphConditionalHandleCreate)").c_str());
  CUgraphNode set = add_setter(graph, deps, handle, p.condition, what);
  CUgraphNodeParams params;
  std::memset(&params, 0, sizeof params);
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = handle;
  params.conditional.type = p.loop ? CU_GRAPH_COND_TYPE_WHILE : CU_GRAPH_COND_TYPE_IF;
  params.conditional.size = 1;
  params.conditional.ctx = state_->context;
  CUgraphNode node = nullptr;
  state_->check(cu.cuGraphAddNode(&node, graph, &set, nullptr, 1, &params),
                (what + " (cuGraphAddNode)").c_str());
  // The body's nodes go straight into the node's body graph (not as a child graph), so
  // that the handles of conditional nodes nested in it belong to the graph holding them.
  CUgraph body = params.conditional.phGraph_out[0];
  const std::vector<CUgraphNode> sinks = p.body->add_nodes(body, p.body->params_, nullptr);
  if (p.loop) add_setter(body, sinks, handle, p.condition, what);
  return node;
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

std::string CudaGraphExec::topology_difference(const GraphNodeDescs& nodes) const {
  if (std::string difference = topology_.difference(nodes); !difference.empty()) return difference;
  for (std::uint32_t i = 0; i < params_.size(); ++i)
    if (params_[i].body != nullptr)
      if (std::string difference =
              params_[i].body->topology_difference(*nodes[i].conditional().body);
          !difference.empty())
        return cat("in the body of conditional node ", i, ": ", difference);
  return {};
}

void CudaGraphExec::update(GraphNodeDescs nodes) {
  if (std::string difference = topology_difference(nodes); !difference.empty())
    throw UserError(
        cat("DeviceGraph::update: the build callback recorded a different graph: ", difference,
            "; record the same nodes in the same order (create a new "
            "graph for a different shape)"));
  std::scoped_lock lock(mutex_);
  state_->make_current();
  const CudaDriver& cu = *state_->cu;
  std::vector<NodeParams> params = materialize(nodes);
  CUgraph graph = nullptr;
  try {
    graph = emit(params, nullptr);
  } catch (...) {
    release(params);
    throw;
  }
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
      release(params);
      state_->check(ri, "DeviceGraph::update (cuGraphInstantiate)");
    }
    cu.cuGraphExecDestroy(exec_);
    exec_ = fresh;
    fallback_ = cat("cuGraphExecUpdate refused the update (", update_result_name(info.result), "; ",
                    cu.error_text(r), "), so the graph was instantiated again");
  }
  cu.cuGraphDestroy(graph_);
  graph_ = graph;
  release(params_);
  params_ = std::move(params);
  drop_profiled();  // built again, from the new parameters, by the next profiled replay
  topology_.set_configs(nodes);
}

void CudaGraphExec::launch_profiled(Profiler& profiler) const {
  std::scoped_lock lock(mutex_);
  state_->make_current();
  const CudaDriver& cu = *state_->cu;
  if (profiled_exec_ == nullptr) {
    // A twin of the graph with an event recorded before and after every node.
    events_.resize(2 * params_.size() + 1);
    for (CUevent& e : events_)
      state_->check(cu.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    const CUgraph twin = emit(params_, &events_);
    const CUresult r = cu.cuGraphInstantiate(&profiled_exec_, twin, 0);
    cu.cuGraphDestroy(twin);
    state_->check(r, "DeviceGraph::replay with a profiler (cuGraphInstantiate)");
  }
  const CUevent origin = events_.back();
  const std::int64_t origin_ns = profiler.now_ns();
  state_->check(cu.cuEventRecord(origin, state_->stream), "cuEventRecord");
  state_->check(cu.cuGraphLaunch(profiled_exec_, state_->stream),
                "DeviceGraph::replay (cuGraphLaunch)");
  state_->check(cu.cuStreamSynchronize(state_->stream),
                "DeviceGraph::replay with a profiler (cuStreamSynchronize)");
  const std::uint64_t replay = profiler.begin_replay();
  for (std::uint32_t i = 0; i < params_.size(); ++i) {
    float begin_ms = 0, end_ms = 0;
    state_->check(cu.cuEventElapsedTime(&begin_ms, origin, events_[2 * i]), "cuEventElapsedTime");
    state_->check(cu.cuEventElapsedTime(&end_ms, origin, events_[2 * i + 1]), "cuEventElapsedTime");
    profiler.record(topology_.name(i), i, replay,
                    origin_ns + static_cast<std::int64_t>(static_cast<double>(begin_ms) * 1e6),
                    origin_ns + static_cast<std::int64_t>(static_cast<double>(end_ms) * 1e6));
  }
}

void CudaGraphExec::drop_profiled() const {
  const CudaDriver& cu = *state_->cu;
  if (profiled_exec_ != nullptr) cu.cuGraphExecDestroy(profiled_exec_);
  profiled_exec_ = nullptr;
  for (CUevent e : events_)
    if (e != nullptr) cu.cuEventDestroy(e);
  events_.clear();
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
