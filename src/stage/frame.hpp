#pragma once
// Internal: the state of one staging run. A Frame is a graph being traced (the entry
// graph, or a subgraph body while its first call traces it); traced tensors point to
// their frame, and the thread's current frame is where new ops go.

#include <any>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "kiln/core/source_location.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln::detail {

/// A concrete tensor's elements: in `dense.bytes`, or, for a borrowed tensor
/// (`Tensor::borrow`), in memory someone else owns (`view`, kept alive by `owner`; then
/// `dense.bytes` is empty). `elements()` is where they are either way.
struct TensorData {
  ir::DenseData dense;
  std::span<const std::byte> view{};
  std::shared_ptr<const void> owner{};

  std::span<const std::byte> elements() const noexcept {
    if (owner) return view;
    return {reinterpret_cast<const std::byte*>(dense.bytes.data()), dense.bytes.size()};
  }
  /// The elements as IR dense data (a copy for a borrowed tensor).
  ir::DenseData to_dense() const {
    if (!owner) return dense;
    return {dense.dtype, dense.shape,
            std::string(reinterpret_cast<const char*>(view.data()), view.size())};
  }
};

struct SessionState;

class Frame : public std::enable_shared_from_this<Frame> {
 public:
  Frame(ir::Graph& graph, SessionState& session, Frame* parent)
      : graph_(graph), session_(&session), parent_(parent) {}

  ir::Graph& graph() const noexcept { return graph_; }
  SessionState& session() const noexcept { return *session_; }
  Frame* parent() const noexcept { return parent_; }
  bool open() const noexcept { return open_; }
  void close() noexcept { open_ = false; }

  /// Weight-name prefix segments of this frame (body frames start empty).
  std::vector<std::string> prefix;
  /// Constants already embedded in this graph, by their data. The data is held so that
  /// its address cannot be reused by another constant while this graph is traced.
  std::map<const TensorData*, std::pair<std::shared_ptr<const TensorData>, std::uint32_t>>
      constants;
  /// Weights declared in this graph, by full name.
  std::map<std::string, std::uint32_t> weights;

 private:
  ir::Graph& graph_;
  SessionState* session_;
  Frame* parent_;
  bool open_ = true;
};

/// A subgraph body traced once: its symbol and what a call needs to rebuild the result.
struct SubgraphBody {
  std::string symbol;
  std::vector<ir::TensorType> result_types;
  std::vector<TensorLayout> result_layouts;
  std::any prototype;
};

/// The body the last call through one Subgraph object used, to skip building the key when
/// the next call has the same tree and operand types (the usual loop over layers).
struct LastCall {
  const std::type_info* callable = nullptr;
  std::string name;
  bool has_prefix = false;
  TreeDef tree;
  std::vector<ir::TensorType> types;
  const SubgraphBody* body = nullptr;
};

/// A body in a SubgraphCache: the graphs to copy into a module that calls it (the body
/// first, then every body it calls), and what a call needs.
struct CachedBody {
  std::vector<ir::Graph> graphs;
  SubgraphBody body;
};

struct SubgraphCacheAccess {
  static std::unordered_map<std::string, CachedBody>& bodies(SubgraphCache& cache);
};

struct SessionState {
  StageOptions options;
  ir::Module module;
  std::unordered_map<std::string, std::unique_ptr<SubgraphBody>> bodies;     // by key
  std::map<std::string, int> symbol_uses;                                    // for unique symbols
  std::map<std::pair<std::type_index, std::uint64_t>, LastCall> last_calls;  // by callable
  std::vector<std::shared_ptr<Frame>> frames;                                // closed at the end
};

/// The frame ops go to on this thread, or nullptr outside staging.
Frame* current_frame() noexcept;
void set_current_frame(Frame* frame) noexcept;
/// The current frame. \throws UserError naming \p op when not staging.
Frame& require_frame(std::string_view op, const SourceLocation& where);
/// While one lives on this thread (the outermost, if they nest), every op staged and every
/// staging error is located at its \p where instead of the op's own location: kiln's
/// helpers built from other ops (kiln::nn layers, sharded ops) open one at their public
/// boundary, so that the ops they make point at the user's call, not at kiln's sources.
class UserCallSite {
 public:
  explicit UserCallSite(const SourceLocation& where) noexcept;
  ~UserCallSite();
  UserCallSite(const UserCallSite&) = delete;
  UserCallSite& operator=(const UserCallSite&) = delete;

 private:
  bool outermost_;
};
/// `file:line:col` of a source location (or of the user's call site, see UserCallSite).
std::string where_string(const SourceLocation& where);
/// The IR location of a source location (or of the user's call site, see UserCallSite).
ir::Location location_of(const SourceLocation& where);

ir::TensorType to_ir(const TensorLayout& layout);
/// Which operand or leaf a tensor is, for messages; its text is built only on error.
struct Role {
  const char* what;   // "operand", "output leaf", "argument leaf"
  std::size_t index;  // operand number, or leaf number in `tree`
  const TreeDef* tree = nullptr;
  std::string str() const;
};
/// The IR value of \p t in \p frame (embedding a constant). \throws UserError naming \p op,
/// \p where and \p role for an empty tensor, a placeholder, or a tensor of another graph.
ir::Value value_of(Frame& frame, const Tensor& t, std::string_view op, const SourceLocation& where,
                   const Role& role);
/// The IR values of output leaves (their paths name them in errors).
std::vector<ir::Value> output_values(Frame& frame, const std::vector<Tensor>& leaves,
                                     const TreeDef& tree, std::string_view what);
/// Dot-joined prefix of \p frame plus \p name.
std::string qualified(const Frame& frame, const std::string& name);
TensorLayout to_layout(const ir::TensorType& type);

}  // namespace kiln::detail
