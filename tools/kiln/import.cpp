// kiln import: an ONNX model as kiln's MLIR text (OUT.mlir) and its weights (safetensors),
// for `kiln run OUT.mlir --weights OUT.safetensors` and for reading what the import made.

#include "kiln/onnx/import.hpp"

#include <cstdio>
#include <filesystem>

#include "common.hpp"
#include "kiln/io/safetensors.hpp"

namespace kiln::cli {

int import_command(const ImportOptions& options) {
  if (!is_onnx_path(options.model))
    throw UsageError("kiln import reads an ONNX model (MODEL.onnx); " + options.model +
                     " is not one");
  const std::string weights_path =
      options.weights.empty()
          ? std::filesystem::path(options.output).replace_extension(".safetensors").string()
          : options.weights;
  check_files_distinct({{"the model", options.model},
                        {"--output", options.output, true},
                        {"--weights-output", weights_path, true}});
  Progress progress("importing " + options.model);
  OnnxImportOptions import;
  import.dims = parse_dims(options.dims);
  const OnnxModel model = import_onnx(options.model, import);
  progress.done();
  // The weights first: a module on disk always has the weights it names beside it.
  if (!model.weights.empty()) save_safetensors(weights_path, model.weights);
  write_file_atomically(options.output, model.graph.str());
  double bytes = 0;
  for (const auto& [name, t] : model.weights) bytes += static_cast<double>(t.bytes().size());
  std::printf("wrote %s: @%s, %zu ops, %zu inputs (%s), %zu outputs (opset %lld)\n",
              options.output.c_str(), model.graph.graph().entry().name().c_str(),
              model.graph.graph().entry().num_ops(), model.input_names.size(),
              join(model.input_names).c_str(), model.output_names.size(),
              static_cast<long long>(model.opset));
  if (model.weights.empty())
    std::printf("the model has no weights: %s not written\n", weights_path.c_str());
  else
    std::printf("wrote %s: %zu weights, %s\n", weights_path.c_str(), model.weights.size(),
                format_bytes(bytes).c_str());
  return 0;
}

}  // namespace kiln::cli
