// kiln run: one call of a model on .npy inputs, outputs to .npy files or the terminal.

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "kiln/compiler/npy.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/runtime/profiler.hpp"

namespace kiln::cli {

int run_command(const RunOptions& options) {
  if (options.reference && !options.profile.empty())
    throw UsageError("--profile traces compiled calls; drop it or drop --reference");
  ir::Module module = load_module(options.model.model);
  const std::vector<Tensor> inputs = bind_inputs(module, options.model, /*generate=*/false);
  const std::map<std::string, Tensor> weights =
      load_weights(module, options.model, /*fill_missing=*/false);

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
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_constant()) {  // on a device another MPI process drives: it writes it
      std::cout << "output" << i << ": " << outputs[i].layout() << " (written by its process)\n";
      continue;
    }
    const std::string path =
        (std::filesystem::path(options.output_dir) / ("output" + std::to_string(i) + ".npy"))
            .string();
    save_npy(path, outputs[i]);
    std::cout << "wrote " << path << ": " << outputs[i].layout() << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
