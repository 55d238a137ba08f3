// The backend behind DeviceGraphBuilder::recording_context(): every enqueue becomes a graph
// node that depends on the previous one (as CUDA stream capture does); memory comes from
// the real stream; whatever needs the device to have run (synchronize, event queries)
// throws.

#include "runtime/recording_stream.hpp"

#include <cstring>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::detail {
namespace {

[[noreturn]] void not_recordable(const char* what, const char* instead) {
  throw UserError(cat(what,
                      " cannot be recorded into a device graph: a recording context only "
                      "adds nodes, nothing runs until the graph replays; ",
                      instead));
}

/// An event made by a recording context: it can never be recorded, so asking about it is
/// always a mistake.
class RecordingEvent final : public EventState {
 public:
  bool is_complete() const override {
    not_recordable("DeviceEvent::is_complete", "query events of the real context instead");
  }
  void synchronize() const override {
    not_recordable("DeviceEvent::synchronize", "synchronize the real context after replay");
  }
  double elapsed_ms_since(const EventState&) const override {
    not_recordable("DeviceEvent::elapsed_ms", "time replays with events of the real context");
  }
};

class RecordingStream final : public StreamBackend {
 public:
  RecordingStream(std::shared_ptr<RecordingState> state, std::shared_ptr<StreamBackend> real)
      : state_(std::move(state)), real_(std::move(real)) {}

  Device device() const override { return real_->device(); }
  int num_threads() const override { return real_->num_threads(); }

  void* allocate(std::size_t bytes, bool host) override { return real_->allocate(bytes, host); }
  void deallocate(void* ptr, std::size_t bytes, bool host) noexcept override {
    real_->deallocate(ptr, bytes, host);
  }

  std::shared_ptr<const DeviceCode> load_device_code(const DeviceCodeRequest& request) override {
    return real_->load_device_code(request);
  }

  void launch(KernelLaunch kernel) override {
    GraphNodeDesc node;
    node.kind = GraphNodeKind::kernel;
    node.work = std::move(kernel);
    record(std::move(node));
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    GraphNodeDesc node;
    node.kind = GraphNodeKind::copy;
    node.work = GraphCopy{dst, src, bytes};
    record(std::move(node));
  }
  void fill(void* dst, std::size_t count, const void* pattern, std::size_t size) override {
    GraphNodeDesc node;
    node.kind = GraphNodeKind::memset;
    GraphMemset& m = node.work.emplace<GraphMemset>();
    m.dst = dst;
    m.count = count;
    m.pattern_size = size;
    std::memcpy(m.pattern.data(), pattern, size);
    record(std::move(node));
  }
  void host_function(HostCallback fn) override {
    GraphNodeDesc node;
    node.kind = GraphNodeKind::host;
    node.work = std::move(fn);
    record(std::move(node));
  }
  void cuda_work(CudaWork fn) override {
    GraphNodeDesc node;
    node.kind = GraphNodeKind::cuda_work;
    node.work = std::move(fn);
    record(std::move(node));
  }

  std::shared_ptr<EventState> create_event() override { return std::make_shared<RecordingEvent>(); }
  void record(const std::shared_ptr<EventState>&) override {
    not_recordable("enqueue_record", "order graph nodes with their dependencies instead");
  }
  void wait(const std::shared_ptr<EventState>&) override {
    not_recordable("enqueue_wait", "order graph nodes with their dependencies instead");
  }
  std::shared_ptr<const GraphExec> instantiate_graph(GraphNodeDescs) override {
    not_recordable("DeviceGraph::create", "create graphs with the real context");
  }
  void launch_graph(std::shared_ptr<const GraphExec>) override {
    not_recordable("DeviceGraph::replay", "nest the graph with add_child_graph");
  }
  void update_graph(const std::shared_ptr<const GraphExec>&, GraphNodeDescs) override {
    not_recordable("DeviceGraph::update", "update graphs with the real context");
  }
  void synchronize() override {
    not_recordable("synchronize", "synchronize the real context after replaying the graph");
  }
  void set_profiler(std::shared_ptr<Profiler>) override {
    not_recordable("set_profiler", "attach the profiler to the real context");
  }
  std::shared_ptr<Profiler> profiler() const override { return real_->profiler(); }

 private:
  void record(GraphNodeDesc node) {
    if (state_->builder == nullptr)
      throw UserError(
          "a recording context was used after the build callback of its DeviceGraphBuilder "
          "returned; record work only inside the callback");
    state_->tail = {RecordingState::record(*state_->builder, std::move(node), state_->tail)};
  }

  std::shared_ptr<RecordingState> state_;
  std::shared_ptr<StreamBackend> real_;
};

}  // namespace

std::shared_ptr<StreamBackend> make_recording_stream(std::shared_ptr<RecordingState> state,
                                                     std::shared_ptr<StreamBackend> real) {
  return std::make_shared<RecordingStream>(std::move(state), std::move(real));
}

}  // namespace kiln::detail
