#pragma once
/// \file
/// `import_onnx`: an ONNX model file as a `StagedGraph` and its weights.
///
/// \code
///   kiln::OnnxModel model = kiln::import_onnx("bert.onnx");
///   kiln::CompiledCallable call(model.graph, model.weights);
///   auto outputs = call.run({ids, mask});   // in the order of model.input_names
/// \endcode
///
/// The graph's nodes are traced through kiln's staging API (`kiln/stage/tensor.hpp`), one
/// converter per ONNX op type (docs/onnx.md lists them with their opsets). Values known
/// while importing (initializers read as shapes or indices, `Constant`, `Shape` of static
/// dims and what is computed from them) are folded there: a `Shape -> Gather -> Concat ->
/// Reshape` chain becomes one `kiln.reshape` whose shape holds the symbolic dims of the
/// inputs. Initializers read as data become weights named as in the model.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/stage/stage.hpp"
#include "kiln/stage/tensor.hpp"

namespace kiln {

/// What `import_onnx` returns.
struct OnnxModel {
  /// The entry graph takes the model's inputs (initializers excepted) in the model's
  /// order, and returns its outputs in order.
  StagedGraph graph;
  /// The initializers the graph reads as data, by their ONNX names (CPU tensors).
  std::map<std::string, Tensor> weights;
  /// The graph's input and output names, in order.
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  /// The default domain's opset the model imports (`ai.onnx`).
  std::int64_t opset = 0;
};

/// The oldest and newest default-domain opsets `import_onnx` reads. A model of an older
/// opset is read too when each of its ops is unchanged since that opset
/// (`onnx_op_oldest_opset`: Einsum from 12, OneHot from 11, And, Or, Xor from 7, Not from 1).
inline constexpr std::int64_t kOnnxMinOpset = 13;
inline constexpr std::int64_t kOnnxMaxOpset = 22;

/// How `import_onnx` reads a model.
struct OnnxImportOptions {
  /// Graph inputs whose values are fixed when importing, by name: they are not inputs of
  /// the staged graph but constants, folded as initializers are. For models that take as
  /// inputs what kiln needs to know before run time (a Reshape's shape, a reduction's
  /// axes, a Split's sizes). Each must match the input's dtype and (static) dims.
  std::map<std::string, Tensor> constant_inputs;
  /// Symbolic dims fixed when importing, by name (an input's `dim_param`, or kiln's symbol
  /// for it as `onnx_inputs` shows it): the graph is specialised to these sizes, as ONNX
  /// Runtime's free-dimension overrides do, so that every shape computation over them folds
  /// (including those kiln cannot yet keep symbolic, such as a Range over a symbolic
  /// length). Each must name a symbolic dim of some input; sizes must be >= 0.
  std::map<std::string, std::int64_t> dims;
};

/// One input of an ONNX model's graph (initializers, which are weights, excepted).
struct OnnxInput {
  std::string name;
  /// Its dtype and dims; a `dim_param` (or an unnamed dim) is a symbolic dim.
  TensorLayout layout;
};

/// Reads the ONNX model at \p path. Tensors with external data are read from files beside
/// the model (paths relative to its folder, which they may not leave).
/// \throws UserError naming the file for an unreadable or malformed model, an opset
/// above kOnnxMaxOpset, a dtype kiln has no counterpart for, and, at once for every node
/// that has one, each op kiln does not support (`ONNX op 'X' (opset N) at node 'name' is
/// not supported`) or does not read at the model's opset (below kOnnxMinOpset).
OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options = {});

/// The same, from the bytes of a model (\p base_dir: where external data lives; empty:
/// external data is refused). \p what names the model in errors.
OnnxModel import_onnx_bytes(std::string_view bytes, const std::string& base_dir,
                            const std::string& what = "the ONNX model",
                            const OnnxImportOptions& options = {});

/// The inputs of the ONNX model at \p path, in order, as `import_onnx` would take them
/// (before `OnnxImportOptions`). Reads only the graph's signature: no node is converted.
/// \throws UserError as `import_onnx` does for an unreadable file or an input kiln cannot
/// take.
std::vector<OnnxInput> onnx_inputs(const std::string& path);

/// The ONNX op types (default domain) `import_onnx` converts, sorted.
std::vector<std::string> onnx_supported_ops();
/// The oldest default-domain opset at which `import_onnx` reads \p op_type (kOnnxMinOpset
/// for most ops; earlier for ops unchanged since; later for ops introduced later), or 0
/// when kiln does not convert it.
std::int64_t onnx_op_oldest_opset(std::string_view op_type);

/// A serialized ONNX `TensorProto` (the `.pb` files of ONNX's test data) as a CPU tensor.
/// \throws UserError naming the file for a malformed tensor or one of an unsupported dtype.
Tensor load_onnx_tensor(const std::string& path);

}  // namespace kiln
