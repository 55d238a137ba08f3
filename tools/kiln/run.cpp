// kiln run: one call of a model on .npy inputs, outputs to .npy files or the terminal.

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/io/npy.hpp"
#include "kiln/runtime/profiler.hpp"

namespace kiln::cli {

int run_command(const RunOptions& options) {
  if (options.reference && !options.profile.empty())
    throw UsageError("--profile traces compiled calls; drop it or drop --reference");
  std::vector<CommandFile> files = read_files(options.model);
  if (!options.profile.empty()) files.push_back({"--profile", options.profile, true});
  check_files_distinct(files);  // the model's path too, before it is read
  LoadedModel loaded = load_model_for_call(options.model);
  ModelOptions model_options = options.model;
  if (loaded.dims_fixed) model_options.dims.clear();  // the import used them
  ir::Module& module = loaded.module;
  const auto output_path = [&](std::size_t i) {
    return (std::filesystem::path(options.output_dir) / ("output" + std::to_string(i) + ".npy"))
        .string();
  };
  if (!options.output_dir.empty()) {
    for (std::size_t i = 0; i < module.entry().results().size(); ++i)
      files.push_back({"--output (its output" + std::to_string(i) + ".npy)", output_path(i), true});
    check_files_distinct(files);
  }
  const std::vector<Tensor> inputs = bind_inputs(module, model_options, /*generate=*/false);
  const std::map<std::string, Tensor> weights =
      load_weights(module, options.model, /*fill_missing=*/false, std::move(loaded.weights));

  std::vector<Tensor> outputs;
  if (options.reference) {
    Progress progress("running the reference interpreter");
    outputs = reference_run(module, inputs, weights);
  } else {
    const CompileOptions compile = compile_options(options.model);
    const StagedGraph staged = StagedGraph::from_module(std::move(module));
    Progress compiling("compiling");
    CompiledCallable compiled(staged, weights, compile);
    compiling.done();
    std::shared_ptr<Profiler> profiler;
    if (!options.profile.empty()) {
      profiler = std::make_shared<Profiler>();
      compiled.context()->set_profiler(profiler);
    }
    Progress running("running");
    outputs = compiled.run(inputs);
    running.done();
    if (profiler) {
      profiler->write_chrome_trace(options.profile);
      std::printf("wrote %s: %zu kernel slices (open in https://ui.perfetto.dev)\n",
                  options.profile.c_str(), profiler->events().size());
    }
  }

  if (options.output_dir.empty()) {
    for (std::size_t i = 0; i < outputs.size(); ++i)
      std::cout << "output" << i << ": "
                << (outputs[i].is_constant()
                        ? describe_values(outputs[i])
                        : to_string(outputs[i].layout()) + " (another process)")
                << "\n";
    return 0;
  }
  std::error_code error;
  std::filesystem::create_directories(options.output_dir, error);
  if (error)
    throw UserError(options.output_dir + ": cannot create the output directory (" +
                    error.message() + ")");
  // Every file's bytes first, then each written whole (a temporary file renamed over it).
  std::vector<std::string> bytes(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].is_constant()) bytes[i] = to_npy(outputs[i]);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_constant()) {  // on a device another MPI process drives: it writes it
      std::cout << "output" << i << ": " << outputs[i].layout() << " (written by its process)\n";
      continue;
    }
    write_file_atomically(output_path(i), bytes[i]);
    std::cout << "wrote " << output_path(i) << ": " << outputs[i].layout() << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
