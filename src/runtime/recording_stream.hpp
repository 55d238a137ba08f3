#pragma once
// Internal: the backend of DeviceGraphBuilder::recording_context().

#include <memory>
#include <vector>

#include "kiln/runtime/device_graph.hpp"
#include "runtime/stream_backend.hpp"

namespace kiln::detail {

/// What a recording context shares with its builder.
struct RecordingState {
  DeviceGraphBuilder* builder = nullptr;  // null once the build callback has returned
  std::vector<DeviceGraphNode> tail;      // what the next recorded node waits for

  /// Adds \p node to \p builder after \p after; returns the new node (the next tail).
  static DeviceGraphNode record(DeviceGraphBuilder& builder, GraphNodeDesc node,
                                const DeviceGraphDependencies& after);
};

/// A stream whose enqueues become nodes of \p state's builder, chained in order.
std::shared_ptr<StreamBackend> make_recording_stream(std::shared_ptr<RecordingState> state,
                                                     std::shared_ptr<StreamBackend> real);

}  // namespace kiln::detail
