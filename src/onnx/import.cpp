// import_onnx: the model's graph traced through kiln's staging API, node by node, each
// by the converter of its op type (context.hpp), with what is known folded on the host.

#include "kiln/onnx/import.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/file.hpp"
#include "onnx/context.hpp"
#include "onnx/proto.hpp"
#include "stage/frame.hpp"

namespace kiln {
namespace onnx_import {
using detail::cat;

/// Initializers and Constants read as data become weights when floating or larger than
/// this (smaller integer ones, indices and shapes, are embedded as constants, and so are
/// floating scalars: the constants of formulas, such as GELU's, which the passes then see).
constexpr std::int64_t kMaxEmbeddedInts = 64;

class Importer {
 public:
  Importer(const onnx::ModelProto& model, TensorSource source, const OnnxImportOptions& options)
      : model_(model), source_(std::move(source)), options_(options) {}

  OnnxModel run();

  /// \p layout with the symbolic dims that `options_.dims` names fixed to their sizes.
  TensorLayout bind_dims(TensorLayout layout) {
    std::vector<Dim> dims;
    for (const Dim& d : layout.shape.dims()) {
      std::optional<std::int64_t> size;
      for (const auto& [name, value] : options_.dims)
        if (!d.is_static() && dim_symbol(name) == d.symbol()) size = value;
      if (!size) {
        dims.push_back(d);
        continue;
      }
      if (*size < 0)
        throw UserError(cat(source_.what, ": dim ", quote_name(d.symbol()), " fixed to ", *size,
                            "; sizes must be >= 0"));
      bound_.insert(d.symbol());
      dims.emplace_back(*size);
    }
    layout.shape = Shape(std::move(dims));
    return layout;
  }

  static std::set<std::string> symbols_of(const std::vector<Tensor>& layouts) {
    std::set<std::string> out;
    for (const Tensor& t : layouts)
      for (const Dim& d : t.shape().dims())
        if (!d.is_static()) out.insert(d.symbol());
    return out;
  }

  std::string describe_inputs() const {
    std::string out;
    for (const auto& in : model_.graph().input()) {
      if (values_.count(in.name()) != 0 && options_.constant_inputs.count(in.name()) == 0) continue;
      out += cat(out.empty() ? "" : ", ", quote_name(in.name()), " ", to_layout(in, source_.what));
    }
    return out.empty() ? std::string("none") : out;
  }

  OnnxValue& value(const std::string& name, const NodeContext& node) {
    const auto it = values_.find(name);
    if (it == values_.end())
      node.fail(cat("its input ", quote_name(name),
                    " is not a graph input, an initializer or the output of an earlier node "
                    "(ONNX graphs list their nodes in topological order)"));
    return it->second;
  }

  Tensor materialize(OnnxValue& v, const std::string& name) {
    if (!v.tensor.empty()) return v.tensor;
    if (v.data) {
      const Tensor& data = *v.data;
      const bool embed = static_cast<std::int64_t>(data.num_elements()) <=
                         (is_floating(data.dtype()) ? 1 : kMaxEmbeddedInts);
      if (!v.weight_name.empty() && !embed) {
        weights_.emplace(v.weight_name, data);
        v.tensor = weight(v.weight_name, data.layout());
      } else {
        v.tensor = data;
      }
      return v.tensor;
    }
    if (v.host) {
      v.tensor = to_tensor(*v.host, cat("value ", quote_name(name)));
      return v.tensor;
    }
    throw InternalError(cat("ONNX value ", quote_name(name), " has neither data nor a tensor"));
  }

  const std::string& what() const noexcept { return source_.what; }

 private:
  std::int64_t default_opset() const;
  void check_supported(std::int64_t opset) const;
  std::vector<Tensor> trace(const std::vector<Tensor>& inputs, std::int64_t opset);

  const onnx::ModelProto& model_;
  TensorSource source_;
  const OnnxImportOptions& options_;
  std::map<std::string, OnnxValue> values_;
  std::set<std::string> bound_;  // the symbolic dims options_.dims fixed
  std::map<std::string, Tensor> weights_;
  std::vector<std::string> input_names_;
};

std::string node_label(const onnx::NodeProto& node) {
  if (!node.name().empty()) return quote_name(node.name());
  if (node.output_size() > 0) return cat("(unnamed, output ", quote_name(node.output(0)), ")");
  return "(unnamed)";
}

std::string NodeContext::where() const {
  return cat("ONNX node ", node_label(node_), " (", node_.op_type(), ")");
}

void NodeContext::fail(const std::string& message) const {
  throw UserError(cat(importer_.what(), ": ", where(), ": ", message));
}

bool NodeContext::has_input(std::size_t i) const {
  return i < num_inputs() && !node_.input(static_cast<int>(i)).empty();
}

Tensor NodeContext::input(std::size_t i) {
  if (!has_input(i)) fail(cat("input ", i, " is required but not given"));
  const std::string& name = node_.input(static_cast<int>(i));
  return importer_.materialize(importer_.value(name, *this), name);
}

const HostValue* NodeContext::host(std::size_t i) {
  if (!has_input(i)) return nullptr;
  OnnxValue& v = importer_.value(node_.input(static_cast<int>(i)), *this);
  if (!v.host && v.data) v.host = to_host(*v.data);
  return v.host ? &*v.host : nullptr;
}

const HostValue* NodeContext::int_host(std::size_t i, std::string_view what) {
  const HostValue* h = host(i);
  if (h != nullptr && h->is_float())
    fail(cat(what, " (input ", i, ") must be integers, not ", h->dtype));
  return h;
}

std::vector<std::int64_t> NodeContext::ints(std::size_t i, std::string_view what) {
  if (!has_input(i)) fail(cat(what, " (input ", i, ") is required but not given"));
  const HostValue* h = int_host(i, what);
  if (h == nullptr)
    fail(cat(what, " (input ", i, ", ", quote_name(node_.input(static_cast<int>(i))),
             ") must be known when the model is imported (a constant, an initializer, or "
             "computed from shapes); kiln does not take it at run time"));
  if (h->symbolic()) {
    fail(cat(what, " (input ", i, ") holds symbolic dims ", h->dims_text(),
             " where this op needs numbers"));
  }
  return h->ints;
}

TensorLayout NodeContext::layout(std::size_t i) {
  if (!has_input(i)) fail(cat("input ", i, " is required but not given"));
  OnnxValue& v = importer_.value(node_.input(static_cast<int>(i)), *this);
  if (!v.tensor.empty()) return v.tensor.layout();
  if (v.data) return v.data->layout();
  if (v.host) {
    std::vector<Dim> dims(v.host->shape.begin(), v.host->shape.end());
    return TensorLayout(v.host->dtype, Shape(std::move(dims)));
  }
  return input(i).layout();
}

const onnx::AttributeProto* NodeContext::attribute(std::string_view name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t NodeContext::attr_int(std::string_view name, std::int64_t otherwise) const {
  const auto* a = attribute(name);
  if (a == nullptr) return otherwise;
  if (a->type() != onnx::AttributeProto::INT) fail(cat("attribute '", name, "' must be an int"));
  return a->i();
}

double NodeContext::attr_float(std::string_view name, double otherwise) const {
  const auto* a = attribute(name);
  if (a == nullptr) return otherwise;
  if (a->type() != onnx::AttributeProto::FLOAT) fail(cat("attribute '", name, "' must be a float"));
  return a->f();
}

std::string NodeContext::attr_string(std::string_view name, std::string otherwise) const {
  const auto* a = attribute(name);
  if (a == nullptr) return otherwise;
  if (a->type() != onnx::AttributeProto::STRING)
    fail(cat("attribute '", name, "' must be a string"));
  return a->s();
}

std::optional<std::vector<std::int64_t>> NodeContext::attr_ints(std::string_view name) const {
  const auto* a = attribute(name);
  if (a == nullptr) return std::nullopt;
  if (a->type() != onnx::AttributeProto::INTS) fail(cat("attribute '", name, "' must be ints"));
  return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

void NodeContext::only_attributes(std::initializer_list<std::string_view> known) const {
  for (const auto& a : node_.attribute())
    if (std::find(known.begin(), known.end(), a.name()) == known.end())
      fail(cat("attribute '", a.name(), "' is not supported by kiln's ", node_.op_type()));
}

std::int64_t NodeContext::axis(std::int64_t axis, std::size_t rank, std::string_view what) const {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)  // a scalar has no axis
    fail(cat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + r : axis;
}

std::int64_t Importer::default_opset() const {
  std::optional<std::int64_t> opset;
  for (const auto& o : model_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (!opset)
    throw UserError(cat(source_.what,
                        ": the model imports no opset of the default domain "
                        "(ai.onnx)"));
  if (*opset < 1 || *opset > kOnnxMaxOpset)  // older ones: check_supported, op by op
    throw UserError(cat(source_.what, ": the model uses opset ", *opset, "; kiln reads opsets ",
                        kOnnxMinOpset, " to ", kOnnxMaxOpset,
                        " (convert it with onnx.version_converter.convert_version)"));
  return *opset;
}

void Importer::check_supported(std::int64_t opset) const {
  std::vector<std::string> problems;
  std::set<std::string> types;
  for (const auto& node : model_.graph().node()) {
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    const OpConverter* c = default_domain ? find_converter(node.op_type()) : nullptr;
    if (c != nullptr && opset >= c->since) continue;
    const std::string type =
        default_domain ? node.op_type() : cat(node.domain(), ".", node.op_type());
    types.insert(type);
    if (problems.size() >= 20) continue;
    if (c != nullptr && opset < kOnnxMinOpset)
      problems.push_back(cat("ONNX op '", type, "' (opset ", opset, ") at node ", node_label(node),
                             " is read from opset ", c->since, " on; kiln reads opsets ",
                             kOnnxMinOpset, " to ", kOnnxMaxOpset,
                             " (convert the model with "
                             "onnx.version_converter.convert_version)"));
    else
      problems.push_back(cat("ONNX op '", type, "' (opset ", opset, ") at node ", node_label(node),
                             " is not supported"));
  }
  if (problems.empty()) return;
  std::string message = cat(source_.what, ": ", problems.front());
  for (std::size_t i = 1; i < problems.size(); ++i) message += "\n  " + problems[i];
  message += cat("\nunsupported ops in this model (", types.size(),
                 "): ", detail::join(types, ", "), "\n(docs/onnx.md lists the ops kiln supports)");
  throw UserError(message);
}

std::vector<Tensor> Importer::trace(const std::vector<Tensor>& inputs, std::int64_t opset) {
  for (std::size_t i = 0; i < inputs.size(); ++i) values_[input_names_[i]] = traced(inputs[i]);
  const auto& nodes = model_.graph().node();
  for (int index = 0; index < nodes.size(); ++index) {
    const onnx::NodeProto& node = nodes.Get(index);
    // The ops staged for this node are located at it, its name (else its op type) and its
    // place in the graph from 1 (column 1), not at kiln's converter: printed IR, `kiln bench
    // --profile`'s labels and staging errors name the model's node.
    const std::string site_name = node.name().empty() ? node.op_type() : node.name();
    const SourceLocation site_where =
        SourceLocation::at(site_name.c_str(), static_cast<std::uint32_t>(index) + 1, 1);
    const detail::UserCallSite site(site_where);
    NodeContext context(*this, node, opset);
    const OpConverter& c = *find_converter(node.op_type());
    std::vector<OnnxValue> outputs;
    try {
      if (c.fold != nullptr) {
        if (std::optional<std::vector<HostValue>> folded = c.fold(context))
          for (HostValue& h : *folded) outputs.push_back(known(std::move(h)));
      }
      if (outputs.empty()) outputs = c.convert(context);
    } catch (const UserError& e) {  // a staging op or a dim refused: say which node it was
      const std::string message = e.what();
      if (message.rfind(source_.what + ": ", 0) == 0) throw;
      context.fail(message);
    }
    if (outputs.size() < static_cast<std::size_t>(node.output_size()))
      context.fail(cat("gives ", node.output_size(), " outputs; kiln's ", node.op_type(),
                       " computes ", outputs.size()));
    for (int k = 0; k < node.output_size(); ++k)
      if (!node.output(k).empty()) values_[node.output(k)] = std::move(outputs[k]);
  }
  std::vector<Tensor> results;
  for (const auto& out : model_.graph().output()) {
    const auto it = values_.find(out.name());
    if (it == values_.end())
      throw UserError(
          cat(source_.what, ": graph output ", quote_name(out.name()), " is computed by no node"));
    results.push_back(materialize(it->second, out.name()));
  }
  return results;
}

OnnxModel Importer::run() {
  const std::int64_t opset = default_opset();
  const onnx::GraphProto& graph = model_.graph();
  if (graph.sparse_initializer_size() > 0)
    throw UserError(cat(source_.what, ": sparse initializers are not supported"));
  check_supported(opset);
  for (const auto& init : graph.initializer()) {
    OnnxValue v;
    v.data = to_tensor(init, source_);
    v.weight_name = init.name();
    values_[init.name()] = std::move(v);
  }
  std::vector<Tensor> layouts;
  std::set<std::string> fixed;
  for (const auto& in : graph.input()) {
    if (const auto c = options_.constant_inputs.find(in.name());
        c != options_.constant_inputs.end()) {
      const TensorLayout layout = to_layout(in, source_.what);
      if (c->second.dtype() != layout.dtype || c->second.rank() != layout.shape.rank() ||
          c->second.bytes().size() != c->second.num_elements() * size_of(c->second.dtype()))
        throw UserError(cat(source_.what, ": constant input ", quote_name(in.name()), " is ",
                            c->second.layout(), " but the model's input is ", layout));
      for (std::size_t i = 0; i < layout.shape.rank(); ++i)
        if (layout.shape.dims()[i].is_static() &&
            layout.shape.dims()[i] != c->second.shape().dims()[i])
          throw UserError(cat(source_.what, ": constant input ", quote_name(in.name()), " is ",
                              c->second.layout(), " but the model's input is ", layout));
      OnnxValue v;
      v.data = c->second;
      values_[in.name()] = std::move(v);
      fixed.insert(in.name());
      continue;
    }
    if (values_.count(in.name()) != 0) continue;  // an initializer (a default for an input)
    input_names_.push_back(in.name());
    layouts.emplace_back(bind_dims(to_layout(in, source_.what)));
  }
  for (const auto& [name, size] : options_.dims)
    if (bound_.count(dim_symbol(name)) == 0)
      throw UserError(cat(source_.what, ": no input has a symbolic dim named ", quote_name(name),
                          " (to fix with a size); its inputs are ", describe_inputs()));
  for (const auto& [name, t] : options_.constant_inputs)
    if (fixed.count(name) == 0)
      throw UserError(cat(source_.what, ": constant input ", quote_name(name),
                          " is not an input of the model"));
  const StagedGraph staged = [&] {
    try {
      return stage([&](const std::vector<Tensor>& inputs) { return trace(inputs, opset); })(
          layouts);
    } catch (const UserError& e) {
      // Shape arithmetic kiln cannot keep symbolic yet folds once the dims have sizes.
      const std::string message = e.what();
      const std::set<std::string> symbols = symbols_of(layouts);
      if (symbols.empty() || message.find("symbolic") == std::string::npos) throw;
      throw UserError(cat(message, "\n(the model's inputs have the symbolic dims ",
                          detail::join(symbols, ", "),
                          ": fixing their sizes while importing "
                          "folds this: `kiln import --dim ",
                          *symbols.begin(),
                          "=N`, or OnnxImportOptions::dims; `kiln run` and `kiln bench` fix "
                          "them from their inputs)"));
    }
  }();
  // The entry's arguments and results carry the model's names (`kiln run --input NAME=`).
  ir::Module module = staged.graph();
  ir::Graph& entry = *module.find(module.entry().name());
  std::vector<std::string> output_names;
  for (std::size_t i = 0; i < input_names_.size(); ++i) entry.set_argument_name(i, input_names_[i]);
  for (int i = 0; i < graph.output_size(); ++i) {
    output_names.push_back(graph.output(i).name());
    entry.set_result_name(static_cast<std::size_t>(i), graph.output(i).name());
  }
  StagedGraph named(std::move(module), staged.in_layouts(), staged.in_tree(), staged.out_layouts(),
                    staged.out_tree());
  return OnnxModel{std::move(named), std::move(weights_), input_names_, std::move(output_names),
                   opset};
}

}  // namespace onnx_import

namespace {
/// Models may be large, but protobuf reads at most 2 GiB; larger ones keep their weights in
/// external data.
constexpr std::uint64_t kMaxModelBytes = std::uint64_t{2} << 30;

/// \p bytes as an ONNX model; \p what names it in the error.
onnx::ModelProto parse_model(std::string_view bytes, const std::string& what) {
  onnx::ModelProto model;
  if (bytes.size() >= kMaxModelBytes ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw UserError(detail::cat(what, ": not a valid ONNX model (the protobuf does not parse)"));
  return model;
}

OnnxModel import_model(std::string_view bytes, const onnx_import::TensorSource& source,
                       const OnnxImportOptions& options) {
  const onnx::ModelProto model = parse_model(bytes, source.what);
  onnx_import::Importer importer(model, source, options);
  return importer.run();
}
}  // namespace

OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const std::string bytes = read_regular_file(path, "an ONNX model", kMaxModelBytes);
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  return import_model(bytes, {folder.empty() ? std::string(".") : folder.string(), path}, options);
}

OnnxModel import_onnx_bytes(std::string_view bytes, const std::string& base_dir,
                            const std::string& what, const OnnxImportOptions& options) {
  return import_model(bytes, {base_dir, what}, options);
}

std::vector<OnnxInput> onnx_inputs(const std::string& path) {
  const onnx::ModelProto model =
      parse_model(read_regular_file(path, "an ONNX model", kMaxModelBytes), path);
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<OnnxInput> out;
  for (const auto& in : model.graph().input())
    if (initializers.count(in.name()) == 0)
      out.push_back({in.name(), onnx_import::to_layout(in, path)});
  return out;
}

std::vector<std::string> onnx_supported_ops() { return onnx_import::supported_op_types(); }

std::int64_t onnx_op_oldest_opset(std::string_view op_type) {
  const onnx_import::OpConverter* c = onnx_import::find_converter(op_type);
  return c == nullptr ? 0 : c->since;
}

Tensor load_onnx_tensor(const std::string& path) {
  const std::string bytes = read_regular_file(path, "an ONNX tensor", kMaxModelBytes);
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes))
    throw UserError(detail::cat(path, ": not a valid ONNX TensorProto"));
  std::string base = std::filesystem::path(path).parent_path().string();
  return onnx_import::to_tensor(proto, {base.empty() ? "." : base, path});
}

}  // namespace kiln
