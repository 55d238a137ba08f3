#pragma once
// The kiln command's subcommands. main.cpp owns the command line (CLI11, the only file
// that includes it); each subcommand is a function of its options, in its own file.
//
// Exit codes: 0 success; 1 usage error (`UsageError`, bad options); 2 invalid input
// (`kiln::UserError`: a bad file, bad IR, a shape that does not fit) or a failed run;
// 3 a bug in kiln (an internal error, a demo whose check fails).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/error.hpp"

namespace kiln::cli {

/// A command line that parsed but does not make sense (exit code 1).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What every command that compiles a model reads.
struct ModelOptions {
  std::string model;                 ///< MODEL.mlir
  std::vector<std::string> inputs;   ///< NAME=FILE.npy or FILE.npy (next argument)
  std::vector<std::string> dims;     ///< NAME=SIZE for symbolic dims of generated inputs
  std::string weights;               ///< FILE.safetensors, or empty
  bool skip_unused_weights = false;  ///< leave out the file's weights the model does not read
  std::string device = "cpu:0";
  int threads = 0;                                 ///< 0: the context's default
  std::optional<std::vector<std::string>> passes;  ///< unset: the compiler's default
  std::string matmul_precision = "f32";            ///< f32 or bf16
  bool no_winograd = false;  ///< direct convolutions only (CompileOptions::winograd_convs off)
};

struct RunOptions {
  ModelOptions model;
  std::string output_dir;  ///< write outputN.npy here; empty: print a summary
  bool reference = false;  ///< the reference interpreter instead of the compiler
  std::string profile;     ///< Chrome trace path, or empty
};
int run_command(const RunOptions& options);

struct BenchOptions {
  ModelOptions model;
  int warmup = 3;
  int iterations = 50;
  int reference_iterations = 1;  ///< 0: skip the reference
  std::string json;              ///< write the results here as JSON
  std::string profile;
  /// Time calls on request instead of `iterations` at once (see `kiln bench --help`).
  bool serve = false;
};
int bench_command(const BenchOptions& options);

struct PrintOptions {
  std::string model;
  std::vector<std::string> passes;  ///< run in order before printing
  std::string output;               ///< file, or empty for stdout
};
int print_command(const PrintOptions& options);

struct ImportOptions {
  std::string model;              ///< MODEL.onnx
  std::string output;             ///< the module, OUT.mlir
  std::string weights;            ///< the weights; empty: OUT.safetensors beside the module
  std::vector<std::string> dims;  ///< NAME=SIZE: symbolic input dims fixed while importing
};
/// Writes an ONNX model as kiln's MLIR text and its initializers as safetensors.
int import_command(const ImportOptions& options);

struct DotOptions {
  ModelOptions model;
  bool plan = false;   ///< the compiled device graph instead of the IR graph
  bool svg = false;    ///< render through Graphviz's `dot`
  std::string graph;   ///< which IR graph (default: the entry)
  std::string output;  ///< file, or empty for stdout
};
int dot_command(const DotOptions& options);

struct DemoOptions {
  int layers = 4;
  std::int64_t dim = 256;
  std::int64_t heads = 8;
  std::int64_t hidden = 0;  ///< 0: 4 * dim
  std::int64_t seq = 64;
  std::int64_t batch = 1;
  std::int64_t vocab = 1000;
  int iterations = 10;
  int threads = 0;
  bool subgraphs = true;
  std::string weights;    ///< read weights from here instead of making random ones
  std::string emit_mlir;  ///< write the module (and weights, input, output) for `kiln run`
  std::string json;
};
int demo_command(const DemoOptions& options);

}  // namespace kiln::cli
