// kiln demo, the main job: stage a GPT-style transformer stack with kiln::nn and
// subgraphs, compile it, run it, check it against the reference interpreter, and report
// where the time goes.

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/io/npy.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln::cli {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Deterministic weights at sensible scales: matrices ~ U(±1/√fan_in), norm scales near 1,
/// biases near 0, embeddings ~ U(±1).
std::map<std::string, Tensor> random_weights(const std::map<std::string, ir::TensorType>& needed) {
  std::map<std::string, Tensor> out;
  std::uint64_t seed = 1000;
  for (const auto& [name, type] : needed) {
    const TensorLayout layout(type.dtype, type.shape);
    double low = -0.02, high = 0.02;
    if (name.rfind("embed", 0) == 0) {
      low = -1, high = 1;
    } else if (type.shape.rank() == 2) {
      high = 1 / std::sqrt(static_cast<double>(type.shape.dims()[0].size()));
      low = -high;
    } else if (ends_with(name, "weight")) {  // a norm's scale
      low = 0.9, high = 1.1;
    }
    out.emplace(name, Tensor::random(layout, seed++, low, high));
  }
  return out;
}

/// What the module holds, for the summary line.
struct ModuleSummary {
  std::size_t entry_ops = 0, bodies = 0, body_ops = 0, calls = 0, fused = 0;
  std::string body_names;
};

ModuleSummary summarize_module(const ir::Module& m) {
  ModuleSummary s;
  s.entry_ops = m.entry().num_ops();
  for (std::size_t g = 0; g < m.num_graphs(); ++g) {
    const ir::Graph& graph = m.graph(g);
    if (&graph != &m.entry()) {
      ++s.bodies;
      s.body_ops += graph.num_ops();
      s.body_names += (s.body_names.empty() ? "@" : ", @") + graph.name();
    }
    for (std::size_t i = 0; i < graph.num_ops(); ++i) {
      if (graph.op(i).name() == "func.call") ++s.calls;
      if (graph.op(i).name() == "kiln.fused") ++s.fused;
    }
  }
  return s;
}

void check_options(const DemoOptions& o) {
  const auto positive = [](std::int64_t v, const char* flag) {
    if (v < 1)
      throw UsageError(std::string(flag) + " must be at least 1, not " + std::to_string(v));
  };
  positive(o.layers, "--layers");
  positive(o.dim, "--dim");
  positive(o.heads, "--heads");
  positive(o.seq, "--seq");
  positive(o.batch, "--batch");
  positive(o.vocab, "--vocab");
  positive(o.iterations, "--iterations");
  if (o.hidden < 0) throw UsageError("--hidden must be positive (or 0 for 4 x --dim)");
  if (o.dim % o.heads != 0)
    throw UsageError("--dim " + std::to_string(o.dim) + " is not a multiple of --heads " +
                     std::to_string(o.heads));
}

/// `m.mlir` -> `m.<suffix>`.
std::string sibling(const std::string& mlir, const std::string& suffix) {
  std::filesystem::path p(mlir);
  p.replace_extension(suffix);
  return p.string();
}

}  // namespace

int demo_command(const DemoOptions& o) {
  check_options(o);
  std::vector<CommandFile> files;
  if (!o.weights.empty()) files.push_back({"--weights", o.weights});
  if (!o.emit_mlir.empty()) {
    files.push_back({"--emit-mlir", o.emit_mlir, true});
    for (const char* suffix : {".safetensors", ".input.npy", ".output.npy"})
      files.push_back(
          {std::string("--emit-mlir (its ") + suffix + ")", sibling(o.emit_mlir, suffix), true});
  }
  if (!o.json.empty()) files.push_back({"--json", o.json, true});
  check_files_distinct(files);
  const std::int64_t hidden = o.hidden != 0 ? o.hidden : 4 * o.dim;
  const auto context = std::make_shared<DeviceContext>(
      Device::cpu(), DeviceContextOptions{.num_threads = o.threads});
  std::printf(
      "kiln demo: GPT-style transformer, %d layers, d_model %lld, %lld heads, MLP %lld, vocab "
      "%lld; batch %lld x seq %lld; cpu:0 with %d thread%s\n\n",
      o.layers, static_cast<long long>(o.dim), static_cast<long long>(o.heads),
      static_cast<long long>(hidden), static_cast<long long>(o.vocab),
      static_cast<long long>(o.batch), static_cast<long long>(o.seq), context->num_threads(),
      context->num_threads() == 1 ? "" : "s");

  // ---- stage ----
  const nn::TransformerBlock block{.dim = o.dim, .heads = o.heads, .hidden = hidden};
  const auto model = [&](Tensor ids) {
    Tensor x = nn::Embedding{.vocab = o.vocab, .dim = o.dim, .name = "embed"}(ids);
    const auto layer = as_subgraph(block, {.name = "block"});
    for (int i = 0; i < o.layers; ++i) {
      name_scope scope(std::string("layers.").append(std::to_string(i)));
      x = layer(x);
    }
    x = nn::RMSNorm{.dim = o.dim, .name = "final_norm"}(x);
    return nn::Linear{.in = o.dim, .out = o.vocab, .bias = false, .name = "lm_head"}(x);
  };
  std::optional<StagedGraph> staged;
  const double staging_ms = time_ms([&] {
    Progress progress("staging");
    staged.emplace(
        stage(model, {.subgraphs = o.subgraphs})(TensorLayout(DType::i64, {"batch", "seq"})));
  });
  const std::map<std::string, ir::TensorType> needed = module_weights(staged->graph());
  double weight_bytes = 0, weight_count = 0;
  for (const auto& [name, type] : needed) {
    double n = 1;
    for (const Dim& d : type.shape.dims()) n *= static_cast<double>(d.size());
    weight_count += n;
    weight_bytes += n * static_cast<double>(size_of(type.dtype));
  }
  const ModuleSummary before = summarize_module(staged->graph());
  std::printf(
      "module   @main: %zu ops; %zu subgraph bod%s (%s, %zu ops) called %zu times; %zu "
      "weights, %.2f M parameters (%s)\n",
      before.entry_ops, before.bodies, before.bodies == 1 ? "y" : "ies",
      before.bodies ? before.body_names.c_str() : "none", before.body_ops, before.calls,
      needed.size(), weight_count / 1e6, format_bytes(weight_bytes).c_str());

  std::map<std::string, Tensor> weights;
  {
    Progress progress(o.weights.empty() ? "making random weights" : "reading weights");
    weights =
        o.weights.empty() ? random_weights(needed) : SafetensorsFile::open(o.weights).tensors();
  }
  const Tensor ids = Tensor::random(TensorLayout(DType::i64, {o.batch, o.seq}), 7, 0,
                                    static_cast<double>(o.vocab));

  // ---- compile and call ----
  std::optional<CompiledCallable> compiled;
  const double compile_ms = time_ms([&] {
    Progress progress("compiling");
    compiled.emplace(*staged, weights, CompileOptions{.context = context});
  });
  const ModuleSummary after = summarize_module(compiled->optimized());
  std::printf("compiled %zu graphs after the passes, %zu fused elementwise kernels\n\n",
              compiled->optimized().num_graphs(), after.fused);
  std::vector<Tensor> output;
  const double first_ms = time_ms([&] { output = compiled->run({ids}); });
  std::vector<double> calls;
  {
    Progress progress("timing " + std::to_string(o.iterations) + " calls");
    for (int i = 0; i < o.iterations; ++i)
      calls.push_back(time_ms([&] { (void)compiled->run({ids}); }));
  }
  CompiledCallable op_by_op(
      *staged, weights,
      {.context = context, .passes = {}, .replay_graph = false, .fuse_epilogues = false});
  (void)op_by_op.run({ids});
  std::vector<double> op_calls;
  {
    Progress progress("timing " + std::to_string(o.iterations) + " op-by-op calls");
    for (int i = 0; i < o.iterations; ++i)
      op_calls.push_back(time_ms([&] { (void)op_by_op.run({ids}); }));
  }
  std::vector<Tensor> expected;
  const double reference_ms = time_ms([&] {
    Progress progress("checking against the reference interpreter");
    expected = reference_run(staged->graph(), {ids}, weights);
  });
  const Timing call = summarize(calls), op = summarize(op_calls);

  const auto row = [](const char* what, const std::string& value, const std::string& note = "") {
    std::printf("  %-40s %12s  %s\n", what, value.c_str(), note.c_str());
  };
  row("staging (trace the C++ into IR)", format_ms(staging_ms));
  row("compile (passes, kernels)", format_ms(compile_ms));
  row("first call (plan memory, record graph)", format_ms(first_ms));
  row(("median call (" + std::to_string(call.samples) + " calls)").c_str(), format_ms(call.median),
      "p90 " + format_ms(call.p90));
  row("op-by-op median (no fusion, no graph)", format_ms(op.median), "p90 " + format_ms(op.p90));
  row("reference interpreter (1 call)", format_ms(reference_ms));
  std::printf(
      "\n  speed-up of the compiled graph: %.2fx over op-by-op, %.1fx over the reference "
      "interpreter\n",
      op.median / call.median, reference_ms / call.median);

  double scale = 1;
  for (double v : expected[0].to_doubles()) scale = std::max(scale, std::fabs(v));
  const double error = max_abs_difference(output, expected), tolerance = 1e-4 * scale;
  const bool ok = error <= tolerance;
  std::printf("  check: max |compiled - reference| = %.2e (tolerance %.1e): %s\n", error, tolerance,
              ok ? "ok" : "MISMATCH");
  std::printf("  output %s\n", describe_values(output[0]).c_str());

  if (!o.emit_mlir.empty()) {
    const std::string weights_path = sibling(o.emit_mlir, ".safetensors");
    const std::string input_path = sibling(o.emit_mlir, ".input.npy");
    const std::string output_path = sibling(o.emit_mlir, ".output.npy");
    write_file_atomically(o.emit_mlir, staged->str());
    save_safetensors(weights_path, weights);
    save_npy(input_path, ids);
    save_npy(output_path, output[0]);
    std::printf("\nwrote %s (the module), %s, %s and %s (the output above)\n", o.emit_mlir.c_str(),
                weights_path.c_str(), input_path.c_str(), output_path.c_str());
    std::printf("run it again: kiln run %s --weights %s --input arg0=%s --output out/\n",
                o.emit_mlir.c_str(), weights_path.c_str(), input_path.c_str());
  }
  if (!o.json.empty()) {
    const nlohmann::json j = {{"layers", o.layers},
                              {"dim", o.dim},
                              {"heads", o.heads},
                              {"hidden", hidden},
                              {"vocab", o.vocab},
                              {"batch", o.batch},
                              {"seq", o.seq},
                              {"threads", context->num_threads()},
                              {"subgraphs", o.subgraphs},
                              {"staging_ms", staging_ms},
                              {"compile_ms", compile_ms},
                              {"first_call_ms", first_ms},
                              {"median_call_ms", call.median},
                              {"p90_call_ms", call.p90},
                              {"op_by_op_median_ms", op.median},
                              {"reference_ms", reference_ms},
                              {"max_abs_error", error},
                              {"ok", ok}};
    write_file_atomically(o.json, j.dump(2) + "\n");
  }
  if (!ok) {
    std::fprintf(stderr,
                 "kiln demo: the compiled output differs from the reference; this is a "
                 "bug in kiln, please report it\n");
    return 3;
  }
  return 0;
}

}  // namespace kiln::cli
