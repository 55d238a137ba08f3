#pragma once
// Internal: what an ONNX op's converter sees (the node, its inputs as kiln tensors or as
// values known while importing, its attributes) and the table of converters, one entry
// per ONNX op type.

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/stage/tensor.hpp"

namespace kiln::onnx_import {

/// A value known while importing, small enough to compute with on the host: shapes, axes,
/// indices, and what `Shape -> Gather -> Concat` chains compute from them. Integer
/// elements may be symbolic dims (`Shape` of an input of dims [batch, 8] is [batch, 8]).
struct HostValue {
  DType dtype = DType::i64;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> ints;    // integer and bool dtypes: one per element
  std::vector<double> floats;        // floating dtypes: one per element
  std::vector<std::string> symbols;  // empty, or one per element: "" static, else the dim

  bool is_float() const noexcept { return is_floating(dtype); }
  std::size_t size() const noexcept { return is_float() ? floats.size() : ints.size(); }
  bool symbolic() const noexcept;
  /// Element \p i as a kiln dim (static or symbolic).
  Dim dim(std::size_t i) const;
  /// The elements as dims, `[batch, 8]`.
  std::string dims_text() const;
};

/// The most elements a host value holds: larger known tensors stay tensors.
inline constexpr std::size_t kMaxHostElements = 1 << 16;

/// The longest backwards Slice imported (its indices are gathered, one constant each).
inline constexpr std::size_t kMaxBackwardSlice = std::size_t{1} << 24;

/// `Constant` nodes larger than this become weights (named after their output).
inline constexpr std::size_t kMaxEmbeddedConstant = 1024;

/// One ONNX value while importing.
struct OnnxValue {
  Tensor tensor;                  // traced, or a constant; empty while only known
  std::optional<Tensor> data;     // an initializer's or a Constant's data (CPU)
  std::optional<HostValue> host;  // known on the host (small), possibly symbolic
  std::string weight_name;        // for an initializer: its name (a weight when read as data)
};

class Importer;

/// The node being converted, with its inputs and attributes.
class NodeContext {
 public:
  NodeContext(Importer& importer, const onnx::NodeProto& node, std::int64_t opset)
      : importer_(importer), node_(node), opset_(opset) {}

  const onnx::NodeProto& node() const noexcept { return node_; }
  /// The default domain's opset the model imports.
  std::int64_t opset() const noexcept { return opset_; }
  /// `node 'name' (Op)`, for messages.
  std::string where() const;
  [[noreturn]] void fail(const std::string& message) const;

  std::size_t num_inputs() const noexcept { return static_cast<std::size_t>(node_.input_size()); }
  /// Input \p i is given (present and not the empty name of an omitted optional input).
  bool has_input(std::size_t i) const;
  /// Input \p i as a kiln tensor (a weight, a constant or a traced value).
  Tensor input(std::size_t i);
  /// Input \p i's value when it is known while importing, else null.
  const HostValue* host(std::size_t i);
  /// host(i) for an input that must hold integers (\p what: "the shape"): null when it is
  /// not known, an error when it is floating.
  const HostValue* int_host(std::size_t i, std::string_view what);
  /// Input \p i's values, which must be known and static (\p what: "the shape").
  std::vector<std::int64_t> ints(std::size_t i, std::string_view what);
  /// Input \p i's layout, whether or not it is known.
  TensorLayout layout(std::size_t i);

  const onnx::AttributeProto* attribute(std::string_view name) const;
  std::int64_t attr_int(std::string_view name, std::int64_t otherwise) const;
  double attr_float(std::string_view name, double otherwise) const;
  std::string attr_string(std::string_view name, std::string otherwise) const;
  std::optional<std::vector<std::int64_t>> attr_ints(std::string_view name) const;
  /// Fails, naming them, when the node has attributes other than \p known.
  void only_attributes(std::initializer_list<std::string_view> known) const;

  /// \p axis (negative counts from the end) for a tensor of \p rank; fails out of range.
  std::int64_t axis(std::int64_t axis, std::size_t rank, std::string_view what = "axis") const;

 private:
  Importer& importer_;
  const onnx::NodeProto& node_;
  std::int64_t opset_;
};

/// An output computed by staging.
inline OnnxValue traced(Tensor t) {
  OnnxValue v;
  v.tensor = std::move(t);
  return v;
}
/// An output known while importing.
inline OnnxValue known(HostValue h) {
  OnnxValue v;
  v.host = std::move(h);
  return v;
}

/// How one ONNX op type becomes kiln: `convert` stages it (its outputs in order);
/// `fold`, where there is one, computes it on the host when every input is known, and
/// returns nothing to leave it to `convert`.
struct OpConverter {
  std::string_view op_type;
  std::vector<OnnxValue> (*convert)(NodeContext&);
  std::optional<std::vector<HostValue>> (*fold)(NodeContext&) = nullptr;
  /// The oldest opset whose semantics `convert` implements: the op's first version at or
  /// before kOnnxMinOpset that is unchanged since, or its first version where that is later
  /// (a converter for an op that later opsets changed reads the opset and follows them).
  std::int64_t since = 13;
};

// The tables of the op families (ops_*.cpp).
std::span<const OpConverter> elementwise_converters();
std::span<const OpConverter> shape_converters();
std::span<const OpConverter> nn_converters();
std::span<const OpConverter> indexing_converters();
std::span<const OpConverter> window_converters();
std::span<const OpConverter> layout_converters();
std::span<const OpConverter> einsum_converters();

/// The converter for \p op_type in the default domain, or null.
const OpConverter* find_converter(std::string_view op_type);
/// Every supported op type, sorted.
std::vector<std::string> supported_op_types();

// Host values <-> tensors.
/// \p t's elements on the host, or nothing when it holds more than kMaxHostElements.
std::optional<HostValue> to_host(const Tensor& t);
/// A CPU tensor of \p h; symbolic elements (at most kMaxSymbolicElements, integers) are
/// their dims' sizes computed at run time. \throws UserError for more, or floats.
Tensor to_tensor(const HostValue& h, const std::string& where);
/// \p d's size as an i64 scalar computed at run time (a sum of d ones: a symbolic dim
/// such as `seq` is a size in the graph, not a value).
Tensor size_value(const Dim& d);
/// The most symbolic elements a host value read as data holds (each is a few ops).
inline constexpr std::size_t kMaxSymbolicElements = 64;

}  // namespace kiln::onnx_import
