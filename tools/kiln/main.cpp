// The kiln command line: subcommands, their options and help, and the exit codes
// (see commands.hpp). The only file that includes CLI11.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "commands.hpp"
#include "common.hpp"
#include "kiln/compiler/passes.hpp"

namespace kiln::cli {
namespace {

constexpr const char* kExitCodes =
    "Exit codes: 0 success, 1 usage error, 2 invalid input (bad file, bad IR, shapes that do "
    "not fit) or a failed run, 3 a bug in kiln.";

/// Prints a usage error as every one reads (see docs/cli.md). \returns its exit code, 1.
int usage_error(const std::string& what) {
  std::fprintf(stderr, "kiln: usage error: %s\nRun 'kiln --help' or 'kiln COMMAND --help'.\n",
               what.c_str());
  return 1;
}

/// Why \p dir (an existing path) cannot take new files, or "" when it can.
std::string unwritable_directory(const std::filesystem::path& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) return dir.string() + " is not a directory";
  if (::access(dir.c_str(), W_OK) != 0) return "the directory " + dir.string() + " is not writable";
  return "";
}

/// Checked when the command line is parsed, so that a long run does not end on a file it
/// cannot write: a file whose directory exists and takes new files (and that is, if it
/// exists, a writable file).
const CLI::Validator kWritableFile(
    [](std::string& value) -> std::string {
      const std::filesystem::path path(value);
      std::error_code error;
      if (std::filesystem::is_directory(path, error)) return value + " is a directory";
      if (std::filesystem::exists(path, error))
        return ::access(path.c_str(), W_OK) == 0 ? "" : value + " is not writable";
      const std::filesystem::path dir =
          path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
      if (!std::filesystem::exists(dir, error))
        return "the directory " + dir.string() + " does not exist";
      return unwritable_directory(dir);
    },
    "", "writable file");

/// A directory to create (with its parents) or write into: its nearest existing ancestor
/// is a writable directory.
const CLI::Validator kWritableDirectory(
    [](std::string& value) -> std::string {
      std::filesystem::path at(value);
      std::error_code error;
      while (!at.empty() && !std::filesystem::exists(at, error)) at = at.parent_path();
      return unwritable_directory(at.empty() ? std::filesystem::path(".") : at);
    },
    "", "writable directory");

/// A thread count: 0 (the default) or more.
const CLI::Validator kThreadCount(
    [](std::string& value) -> std::string {
      if (!value.empty() && value[0] == '-')
        return "a thread count is 0 (every available core) or more, not " + value;
      return "";
    },
    "", "thread count");

/// `-t, --threads` (the same for every command that runs a model).
void add_threads_option(CLI::App& cmd, int& threads) {
  cmd.add_option("-t,--threads", threads,
                 "Worker threads (default: KILN_NUM_THREADS, else every available core)")
      ->check(kThreadCount);
}

/// The names in a comma-separated \p list ('' and empty items: none).
std::vector<std::string> comma_list(const std::string& list) {
  std::vector<std::string> names;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    if (end > start) names.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return names;
}

void add_model_options(CLI::App& cmd, ModelOptions& o, bool with_passes = true) {
  cmd.add_option("model", o.model,
                 "Module in kiln's MLIR text form (as `kiln demo --emit-mlir`, `kiln import` "
                 "or StagedGraph::str() writes it), or an ONNX model (MODEL.onnx, imported; "
                 "its initializers are its weights)")
      ->required();
  cmd.add_option("-i,--input", o.inputs,
                 "Input as NAME=FILE.npy (NAME: the argument's name, e.g. an ONNX input's, or "
                 "argN or N) or "
                 "FILE.npy for the next argument; repeat for each")
      ->type_name("NAME=FILE")
      ->allow_extra_args(false);  // one per flag: the model's path after it stays the model
  cmd.add_option("-w,--weights", o.weights, "Weights as safetensors, by full dotted name")
      ->type_name("FILE");
  cmd.add_flag("--skip-unused-weights", o.skip_unused_weights,
               "Leave out the weights file's tensors that the model does not read (default: "
               "an error, which catches a file for another model)");
  cmd.add_option("--device", o.device,
                 "Device to compile for and run on: cpu:N, or cuda:N (a GPU; modules on one "
                 "device)")
      ->capture_default_str();
  add_threads_option(cmd, o.threads);
  cmd.add_option("--matmul-precision", o.matmul_precision,
                 "f32, or bf16: Linear layers and convolutions multiply in bfloat16 (weights "
                 "rounded once, sums in f32; on AMX / AVX512-BF16), as torch.autocast(bfloat16) "
                 "does")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd.add_flag("--no-winograd", o.no_winograd,
               "Run f32 3x3 stride-1 convolutions directly, not by Winograd's algorithm (the "
               "default: oneDNN's kernels with AVX-512, else kiln's; faster, rounded "
               "differently, relative 1e-6 to 4e-6)");
  if (with_passes) {
    std::string names;
    for (const std::string& p : passes::default_pipeline()) names += (names.empty() ? "" : ",") + p;
    // One argument, split here: a list option would also take the model's path after it.
    cmd.add_option_function<std::string>(
           "--passes", [&o](const std::string& list) { o.passes = comma_list(list); },
           "Comma-separated IR passes to compile with (default: " + names + "; '' for none)")
        ->type_name("LIST");
  }
}

void add_generated_input_options(CLI::App& cmd, ModelOptions& o) {
  cmd.add_option("--dim", o.dims,
                 "Size of a symbolic dim, NAME=SIZE, for generated inputs (inputs not given "
                 "with --input are random; unnamed dims are 1); an ONNX model is imported "
                 "with it fixed, as with the --input files' dims")
      ->type_name("NAME=SIZE")
      ->allow_extra_args(false);  // one per flag, as --input
}

int run(int argc, char** argv) {
  CLI::App app{
      "kiln: compile and run staged tensor graphs (MLIR text) on the CPU, inspect them, and "
      "time them.\nStart with `kiln demo`.",
      "kiln"};
  app.footer(kExitCodes);
  app.require_subcommand(1);

  RunOptions run;
  CLI::App* run_cmd = app.add_subcommand(
      "run", "Compile a module and call it once on .npy inputs; print or write the outputs");
  add_model_options(*run_cmd, run.model);
  run_cmd
      ->add_option("-o,--output", run.output_dir,
                   "Directory to write output0.npy, output1.npy, ... (default: print a summary)")
      ->type_name("DIR")
      ->check(kWritableDirectory);
  run_cmd
      ->add_option("--dim", run.model.dims,
                   "Fix a symbolic dim of an ONNX model's inputs while importing, NAME=SIZE "
                   "(the --input files' shapes fix the others)")
      ->type_name("NAME=SIZE")
      ->allow_extra_args(false);
  run_cmd->add_flag("--reference", run.reference,
                    "Evaluate with the reference interpreter instead (slow, for checking)");
  run_cmd
      ->add_option("--profile", run.profile,
                   "Write a Chrome trace of the call: one slice per kernel, per thread")
      ->type_name("TRACE.json")
      ->check(kWritableFile);

  BenchOptions bench;
  CLI::App* bench_cmd = app.add_subcommand(
      "bench",
      "Time calls of a compiled module: median, p90, p99, and the speed-up over the "
      "reference interpreter");
  add_model_options(*bench_cmd, bench.model);
  add_generated_input_options(*bench_cmd, bench.model);
  bench_cmd->add_option("--warmup", bench.warmup, "Untimed calls first")->capture_default_str();
  bench_cmd->add_option("-n,--iterations", bench.iterations, "Timed calls")->capture_default_str();
  bench_cmd
      ->add_option("--reference-iterations", bench.reference_iterations,
                   "Timed reference-interpreter calls (0: skip)")
      ->capture_default_str();
  bench_cmd->add_option("--json", bench.json, "Also write the results as JSON")
      ->type_name("FILE")
      ->check(kWritableFile);
  bench_cmd
      ->add_option("--profile", bench.profile,
                   "Write a Chrome trace of the timed calls: one slice per kernel per call")
      ->type_name("TRACE.json")
      ->check(kWritableFile);
  bench_cmd->add_flag(
      "--serve", bench.serve,
      "For a harness that interleaves kiln with other systems: after the warm-up print "
      "'ready', then for each line N read from standard input time N calls and print "
      "'times' and their milliseconds on one line; end of input ends, and the calls timed "
      "so far are summarized as usual (-n is not used)");

  PrintOptions print;
  CLI::App* print_cmd = app.add_subcommand(
      "print",
      "Parse and verify a module, run IR passes on it, and print it (see what fusion did)");
  print_cmd->add_option("model", print.model, "Module in kiln's MLIR text form, or MODEL.onnx")
      ->required();
  print_cmd
      ->add_option_function<std::string>(
          "--passes", [&print](const std::string& list) { print.passes = comma_list(list); },
          "Comma-separated passes to run first, in order: canonicalize, fold, cse, dce, fuse "
          "(default: none)")
      ->type_name("LIST");
  print_cmd->add_option("-o,--output", print.output, "Write here instead of stdout")
      ->type_name("FILE")
      ->check(kWritableFile);

  ImportOptions import;
  CLI::App* import_cmd = app.add_subcommand(
      "import",
      "Import an ONNX model: write it as kiln's MLIR text and its initializers as safetensors "
      "(docs/onnx.md lists the ONNX ops kiln reads)");
  import_cmd->add_option("model", import.model, "ONNX model (MODEL.onnx)")->required();
  import_cmd->add_option("-o,--output", import.output, "Write the module here (OUT.mlir)")
      ->required()
      ->type_name("FILE")
      ->check(kWritableFile);
  import_cmd
      ->add_option("--weights-output", import.weights,
                   "Write the weights here (default: OUT.safetensors beside the module)")
      ->type_name("FILE")
      ->check(kWritableFile);
  import_cmd
      ->add_option("--dim", import.dims,
                   "Fix a symbolic input dim to a size, NAME=SIZE (repeat for each): the module "
                   "is specialised to it and its shape computations fold")
      ->type_name("NAME=SIZE")
      ->allow_extra_args(false);

  DotOptions dot;
  CLI::App* dot_cmd = app.add_subcommand(
      "dot", "Graphviz DOT of a module's IR graph, or with --plan of the compiled device graph");
  add_model_options(*dot_cmd, dot.model);
  add_generated_input_options(*dot_cmd, dot.model);
  dot_cmd->add_flag("--plan", dot.plan,
                    "The device graph a call replays (kernels and their dependencies) for the "
                    "inputs' shapes; missing inputs are random, missing weights zeros");
  dot_cmd->add_option("--graph", dot.graph, "IR graph to draw (default: the entry)")
      ->type_name("NAME");
  dot_cmd->add_flag("--svg", dot.svg,
                    "Render to SVG with Graphviz's dot (apt-get install graphviz)");
  dot_cmd->add_option("-o,--output", dot.output, "Write here instead of stdout")
      ->type_name("FILE")
      ->check(kWritableFile);

  DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo",
      "Stage a GPT-style transformer with kiln::nn and subgraphs, compile it, run it, "
      "check it against the reference interpreter, and report the timings");
  demo_cmd->add_option("--layers", demo.layers, "Transformer blocks")->capture_default_str();
  demo_cmd->add_option("--dim", demo.dim, "Model width (d_model)")->capture_default_str();
  demo_cmd->add_option("--heads", demo.heads, "Attention heads (must divide --dim)")
      ->capture_default_str();
  demo_cmd->add_option("--hidden", demo.hidden, "MLP width (default: 4 x --dim)");
  demo_cmd->add_option("--seq", demo.seq, "Sequence length")->capture_default_str();
  demo_cmd->add_option("--batch", demo.batch, "Batch size")->capture_default_str();
  demo_cmd->add_option("--vocab", demo.vocab, "Vocabulary size")->capture_default_str();
  demo_cmd->add_option("-n,--iterations", demo.iterations, "Timed calls")->capture_default_str();
  add_threads_option(*demo_cmd, demo.threads);
  demo_cmd->add_flag("!--no-subgraphs", demo.subgraphs,
                     "Inline every block instead of sharing one subgraph body");
  demo_cmd
      ->add_option("-w,--weights", demo.weights,
                   "Read the weights from safetensors (default: deterministic random ones)")
      ->type_name("FILE");
  demo_cmd
      ->add_option("--emit-mlir", demo.emit_mlir,
                   "Write the module there, with its weights (.safetensors), input "
                   "(.input.npy) and output (.output.npy) beside it, for `kiln run`")
      ->type_name("FILE.mlir")
      ->check(kWritableFile);
  demo_cmd->add_option("--json", demo.json, "Also write the timings as JSON")
      ->type_name("FILE")
      ->check(kWritableFile);

  for (CLI::App* cmd : {run_cmd, bench_cmd, print_cmd, import_cmd, dot_cmd, demo_cmd})
    cmd->footer(kExitCodes);
  if (argc > 1 && argv[1][0] != '-') {  // CLI11 would only say that one is required
    std::vector<std::string> names;
    for (const CLI::App* cmd : app.get_subcommands({})) names.push_back(cmd->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end())
      return usage_error(std::string("no subcommand '") + argv[1] + "'; the subcommands are " +
                         join(names));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help prints and succeeds
    return usage_error(e.what());
  }
  const auto subcommand = [&](const CLI::App* cmd) { return cmd->parsed(); };
  if (subcommand(run_cmd)) return run_command(run);
  if (subcommand(bench_cmd)) return bench_command(bench);
  if (subcommand(print_cmd)) return print_command(print);
  if (subcommand(import_cmd)) return import_command(import);
  if (subcommand(dot_cmd)) return dot_command(dot);
  return demo_command(demo);
}

/// The message of \p e and of the exceptions nested in it.
std::string full_message(const std::exception& e) {
  std::string out = e.what();
  try {
    std::rethrow_if_nested(e);
  } catch (const std::exception& inner) {
    const std::string nested = full_message(inner);
    if (out.find(nested) == std::string::npos) out += ": " + nested;  // unless said already
  } catch (...) {
  }
  return out;
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    return usage_error(e.what());
  } catch (const kiln::InternalError& e) {
    std::fprintf(stderr, "kiln: %s\n", full_message(e).c_str());
    return 3;
  } catch (const kiln::Error& e) {  // UserError, ParseError, DeviceError
    std::fprintf(stderr, "kiln: error: %s\n", full_message(e).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kiln: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: internal error (a bug in kiln, please report it): %s\n",
                 full_message(e).c_str());
    return 3;
  }
}
