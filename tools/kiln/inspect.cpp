// kiln print and kiln dot: show a module as MLIR (after chosen passes) or as a graph.

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "kiln/compiler/passes.hpp"

extern char** environ;

namespace kiln::cli {
namespace {

void write_text(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text << std::flush;
    return;
  }
  write_file_atomically(path, text);
}

/// Renders DOT text to SVG with Graphviz's `dot` (to \p path, or stdout when empty).
void render_svg(const std::string& dot_text, const std::string& path) {
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("kiln-dot-" + std::to_string(::getpid()) + ".dot");
  write_text(tmp.string(), dot_text);
  std::vector<std::string> args = {"dot", "-Tsvg", tmp.string()};
  if (!path.empty()) args.insert(args.end(), {"-o", path});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ);
  int status = 0;
  if (spawn_error == 0) waitpid(pid, &status, 0);
  std::filesystem::remove(tmp);
  if (spawn_error == ENOENT)
    throw UserError(
        "--svg needs Graphviz's 'dot', which is not installed (apt-get install "
        "graphviz); without --svg kiln writes the DOT text");
  if (spawn_error != 0)
    throw UserError(std::string("--svg: cannot run 'dot': ") + std::strerror(spawn_error));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw UserError("--svg: Graphviz's 'dot' failed (exit status " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
}

}  // namespace

int print_command(const PrintOptions& options) {
  const std::vector<std::string> known = passes::default_pipeline();
  for (const std::string& p : options.passes)
    if (std::find(known.begin(), known.end(), p) == known.end())
      throw UsageError("--passes: unknown pass '" + p + "'; the passes are " + join(known));
  if (!options.output.empty())
    check_files_distinct({{"the model", options.model}, {"--output", options.output, true}});
  ir::Module module = load_model(options.model).module;
  if (!options.passes.empty()) module = passes::run_passes(module, options.passes);
  write_text(options.output, module.str());
  return 0;
}

int dot_command(const DotOptions& options) {
  std::vector<CommandFile> files = read_files(options.model);
  if (!options.output.empty()) files.push_back({"--output", options.output, true});
  check_files_distinct(files);
  LoadedModel loaded = load_model(options.model.model);
  ir::Module& module = loaded.module;
  std::string text;
  if (options.plan) {
    if (!options.graph.empty())
      throw UsageError("--graph picks an IR graph; the plan (--plan) is always the whole call");
    const std::vector<Tensor> inputs = bind_inputs(module, options.model, /*generate=*/true);
    const std::map<std::string, Tensor> weights =
        load_weights(module, options.model, /*fill_missing=*/true, std::move(loaded.weights));
    const CompileOptions compile = compile_options(options.model);
    CompiledCallable compiled(StagedGraph::from_module(std::move(module)), weights, compile);
    text = compiled.plan_dot(inputs);
  } else {
    const std::string name =
        options.graph.rfind('@', 0) == 0 ? options.graph.substr(1) : options.graph;
    const ir::Graph* graph = name.empty() ? &module.entry() : module.find(name);
    if (graph == nullptr) {
      std::string names;
      for (std::size_t i = 0; i < module.num_graphs(); ++i)
        names += (i ? ", @" : "@") + module.graph(i).name();
      throw UsageError("--graph '" + options.graph + "': " + options.model.model +
                       " has no such graph; it has " + names);
    }
    text = graph->to_dot();
  }
  if (options.svg) {
    render_svg(text, options.output);
  } else {
    write_text(options.output, text);
  }
  return 0;
}

}  // namespace kiln::cli
