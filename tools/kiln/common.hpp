#pragma once
// What the kiln subcommands share: loading models, inputs and weights with messages that
// name the file, a progress line for slow steps, and timing statistics.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/core/file.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/stage/tensor.hpp"

namespace kiln::cli {

/// \p items joined with ", " (names in messages).
template <class Range>
std::string join(const Range& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + std::string(item);
  return out;
}

/// A file a command reads or writes, and what names it ("the model", "--profile").
struct CommandFile {
  std::string what;
  std::string path;
  bool written = false;
};
/// The files \p options reads: the model, the weights, each `--input`.
std::vector<CommandFile> read_files(const ModelOptions& options);
/// Checked before any work: every written file differs from every other file listed, read
/// or written (by path, through symbolic and hard links), and is not a directory.
/// \throws UsageError naming both, so that no output overwrites an input or another output.
void check_files_distinct(const std::vector<CommandFile>& files);

/// A model as a command reads it: the module, and the weights an ONNX model carries.
struct LoadedModel {
  ir::Module module;
  std::map<std::string, Tensor> weights;  ///< an ONNX model's initializers; else empty
  /// An ONNX model specialised to its inputs' dims (`--dim` and the `--input` files'
  /// shapes were used up by the import; the module's arguments have those sizes).
  bool dims_fixed = false;
};
/// Reads, parses and verifies \p path: kiln's MLIR text, or an ONNX model (`.onnx`,
/// imported by `kiln::import_onnx`). \throws UserError naming the file (and, for syntax
/// errors, `file:line:col`).
LoadedModel load_model(const std::string& path);
/// The same for commands that call the model (run, bench): an ONNX model is imported with
/// its symbolic input dims fixed to the sizes that `--dim` and the `--input` files give, so
/// that every shape computation over them folds (`OnnxImportOptions::dims`).
LoadedModel load_model_for_call(const ModelOptions& options);
/// `--dim NAME=SIZE` options, parsed. \throws UsageError for a malformed one.
std::map<std::string, std::int64_t> parse_dims(const std::vector<std::string>& specs);
/// The same for kiln's MLIR text only.
ir::Module load_module(const std::string& path);
/// True when \p path names an ONNX model (by its `.onnx` extension).
bool is_onnx_path(const std::string& path);

/// One tensor per entry argument of \p module, from `--input` files (`NAME=FILE`, NAME an
/// argument's name (`kiln.name`), `argN` or `N`; or files in order). With \p generate,
/// arguments without a file get random values (floats in [-1, 1), integers 0 or 1) with
/// symbolic dims from `--dim`, else from the files, else 1; without it a missing input is
/// an error. \throws UserError naming the file for a bad or mis-shaped input, UsageError
/// for a malformed `--input` / `--dim` or an unknown argument name.
/// \p generated, when given, tells which inputs were generated.
std::vector<Tensor> bind_inputs(const ir::Module& module, const ModelOptions& options,
                                bool generate, std::vector<bool>* generated = nullptr);

/// The weights \p module reads, from `--weights`. With \p fill_missing, weights the file
/// lacks (or all, without a file) are zeros, for commands that only look at structure.
/// \throws UserError for a weight in the file that the model does not read (a file for
/// another model), unless `--skip-unused-weights` leaves such weights out.
/// \p embedded: the weights the model file carries (an ONNX model's), used instead of a
/// `--weights` file (\throws UsageError when both are given).
std::map<std::string, Tensor> load_weights(const ir::Module& module, const ModelOptions& options,
                                           bool fill_missing,
                                           std::map<std::string, Tensor> embedded = {});

/// The compile options `--device`, `--threads`, `--passes` and `--matmul-precision` ask for.
CompileOptions compile_options(const ModelOptions& options);

/// Prints `kiln: WHAT...` on stderr once a step has taken a second, then the elapsed time
/// every second (in place on a terminal), and `done` when it ends. Silent for quick steps.
class Progress {
 public:
  explicit Progress(std::string what);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Ends the step (the destructor does too).
  void done();

 private:
  void watch();
  std::string what_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool finished_ = false;
  bool shown_ = false;
  std::thread thread_;
};

/// Wall time of \p f in milliseconds.
template <class F>
double time_ms(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Order statistics of call times (milliseconds).
struct Timing {
  double min = 0, median = 0, p90 = 0, p99 = 0, mean = 0;
  std::size_t samples = 0;
};
Timing summarize(std::vector<double> ms);

/// `12.3 ms`, `1.23 s`, `45.6 µs`.
std::string format_ms(double ms);
/// `1.5 MB`.
std::string format_bytes(double bytes);
/// Largest |a - b| over two lists of tensors of equal layouts.
double max_abs_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b);
/// `f32[2, 3] = [0.1, 0.2, ...] (min -1, max 1, mean 0)`.
std::string describe_values(const Tensor& t);

}  // namespace kiln::cli
