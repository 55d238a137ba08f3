// kiln bench: compile once, warm up, time many calls; compare with the reference.

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/ir/type.hpp"
#include "kiln/runtime/profiler.hpp"

namespace kiln::cli {
namespace {

nlohmann::json to_json(const Timing& t) {
  return {{"samples", t.samples}, {"min_ms", t.min}, {"median_ms", t.median},
          {"p90_ms", t.p90},      {"p99_ms", t.p99}, {"mean_ms", t.mean}};
}

/// `--serve`: times calls of \p call on request from standard input (see the option's help)
/// and appends each time to \p calls.
void serve_calls(const std::function<void()>& call, std::vector<double>& calls) {
  std::printf("ready\n");
  std::fflush(stdout);
  for (std::string line; std::getline(std::cin, line);) {
    int n = 0;
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), n);
    if (error != std::errc{} || end != line.data() + line.size() || n < 1)
      throw UsageError(
          "--serve: each input line is a number of calls to time (at least 1), "
          "not '" +
          line + "'");
    std::string reply = "times";
    for (int i = 0; i < n; ++i) {
      calls.push_back(time_ms(call));
      char ms[32];
      std::snprintf(ms, sizeof ms, " %.6f", calls.back());
      reply += ms;
    }
    std::printf("%s\n", reply.c_str());
    std::fflush(stdout);
  }
}

/// The ops of a kernel slice's label ("kiln.matmul + kiln.add layers.0 (m.py:3)" ->
/// "kiln.matmul + kiln.add"): its leading op names and the `+` between them, so that every
/// layer's slices of the same kernel add up together.
std::string kernel_kind(const std::string& label) {
  std::vector<std::string> words;
  for (std::size_t at = 0; at < label.size();) {
    const std::size_t end = std::min(label.find(' ', at), label.size());
    words.push_back(label.substr(at, end - at));
    at = end + 1;
  }
  if (words.empty()) return label;
  std::string kind = words[0];
  for (std::size_t i = 1; i + 1 < words.size() && words[i] == "+"; i += 2)
    kind += " + " + words[i + 1];
  return kind;
}

/// Prints where the profiled calls' kernel time went: per kind of kernel, the time per
/// call (summed over worker threads), its share, and how many slices a call has.
void print_profile_summary(const Profiler& profiler) {
  const std::vector<ProfileEvent> events = profiler.events();
  const std::uint64_t calls = std::max<std::uint64_t>(profiler.replays(), 1);
  struct Row {
    double ns = 0;
    std::uint64_t slices = 0;
  };
  std::map<std::string, Row> rows;
  double total = 0;
  for (const ProfileEvent& e : events) {
    Row& row = rows[kernel_kind(std::string(e.name.data()))];
    const double ns = static_cast<double>(e.end_ns - e.begin_ns);
    row.ns += ns;
    row.slices += 1;
    total += ns;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::printf("kernel time per call, summed over threads: %s\n",
              format_ms(total / 1e6 / static_cast<double>(calls)).c_str());
  constexpr std::size_t kRows = 20;
  double rest = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const auto& [kind, row] = sorted[i];
    if (i >= kRows) {
      rest += row.ns;
      continue;
    }
    std::printf("  %10s %5.1f %%  %6.1f a call  %s\n",
                format_ms(row.ns / 1e6 / static_cast<double>(calls)).c_str(),
                100.0 * row.ns / std::max(total, 1.0),
                static_cast<double>(row.slices) / static_cast<double>(calls), kind.c_str());
  }
  if (sorted.size() > kRows)
    std::printf("  %10s %5.1f %%  (%zu other kinds)\n",
                format_ms(rest / 1e6 / static_cast<double>(calls)).c_str(),
                100.0 * rest / std::max(total, 1.0), sorted.size() - kRows);
}

}  // namespace

int bench_command(const BenchOptions& options) {
  if (options.iterations < 1 || options.warmup < 0 || options.reference_iterations < 0)
    throw UsageError(
        "--iterations must be at least 1; --warmup and --reference-iterations at "
        "least 0");
  std::vector<CommandFile> files = read_files(options.model);
  if (!options.json.empty()) files.push_back({"--json", options.json, true});
  if (!options.profile.empty()) files.push_back({"--profile", options.profile, true});
  check_files_distinct(files);
  LoadedModel loaded = load_model_for_call(options.model);
  ModelOptions model_options = options.model;
  if (loaded.dims_fixed) model_options.dims.clear();  // the import used them
  ir::Module& module = loaded.module;
  std::vector<bool> generated;
  const std::vector<Tensor> inputs =
      bind_inputs(module, model_options, /*generate=*/true, &generated);
  const std::size_t from_model = loaded.weights.size();  // an ONNX file's initializers
  const std::map<std::string, Tensor> weights =
      load_weights(module, options.model, /*fill_missing=*/options.model.weights.empty(),
                   std::move(loaded.weights));
  const ir::Module reference_module = module;
  const CompileOptions compile = compile_options(options.model);
  const int threads = compile.context->num_threads();
  const StagedGraph staged = StagedGraph::from_module(std::move(module));

  // Which bf16 path runs: bf16 units, or f32 GEMMs over rounded operands without them.
  const std::string bf16 =
      compile.matmul_precision != MatmulPrecision::bf16 ? ""
      : has_native_bf16()
          ? std::string(", bf16 matmuls on ") + (cpu_isa() == CpuIsa::amx ? "AMX" : "AVX512-BF16")
          : std::string(", bf16 matmuls emulated by f32 GEMMs (no bf16 units at level ") +
                std::string(name(cpu_isa())) + ")";
  std::printf("kiln bench %s on %s, %d thread%s, cpu %s%s\n", options.model.model.c_str(),
              options.model.device.c_str(), threads, threads == 1 ? "" : "s",
              std::string(name(cpu_isa())).c_str(), bf16.c_str());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::printf("  arg%zu: %s%s\n", i,
                ir::to_string(ir::TensorType{inputs[i].dtype(), inputs[i].shape(), {}}).c_str(),
                generated[i] ? " (random)" : "");
  }
  if (from_model > 0) std::printf("  weights: %zu from the model file\n", from_model);
  if (options.model.weights.empty() && weights.size() > from_model)
    std::printf("  weights: none given, %zu zero-filled\n", weights.size() - from_model);

  std::optional<CompiledCallable> compiled;
  const double compile_ms = time_ms([&] {
    Progress progress("compiling");
    compiled.emplace(staged, weights, compile);
  });
  const double first_ms = time_ms([&] { (void)compiled->run(inputs); });
  {
    Progress progress("warming up");
    for (int i = 0; i < options.warmup; ++i) (void)compiled->run(inputs);
  }
  std::shared_ptr<Profiler> profiler;
  if (!options.profile.empty()) {
    profiler = std::make_shared<Profiler>(std::size_t{1} << 18);
    compiled->context()->set_profiler(profiler);
  }
  std::vector<double> calls;
  if (options.serve) {
    serve_calls([&] { (void)compiled->run(inputs); }, calls);
  } else {
    Progress progress("timing " + std::to_string(options.iterations) + " calls");
    for (int i = 0; i < options.iterations; ++i)
      calls.push_back(time_ms([&] { (void)compiled->run(inputs); }));
  }
  compiled->context()->set_profiler(nullptr);
  std::vector<double> reference;
  {
    Progress progress("timing the reference interpreter");
    for (int i = 0; i < options.reference_iterations; ++i)
      reference.push_back(time_ms([&] { (void)reference_run(reference_module, inputs, weights); }));
  }
  const Timing call = summarize(calls), ref = summarize(reference);

  std::printf("  %-22s %s\n", "compile", format_ms(compile_ms).c_str());
  std::printf("  %-22s %s  (plans memory, records the device graph)\n", "first call",
              format_ms(first_ms).c_str());
  const std::size_t winograd = compiled->stats().winograd_convs;
  if (winograd > 0)
    std::printf("  %-22s %zu by Winograd's algorithm (--no-winograd: direct)\n", "3x3 convs",
                winograd);
  if (call.samples > 0) {
    std::printf("  %-22s median %s  p90 %s  p99 %s  min %s\n",
                ("calls (" + std::to_string(call.samples) + ")").c_str(),
                format_ms(call.median).c_str(), format_ms(call.p90).c_str(),
                format_ms(call.p99).c_str(), format_ms(call.min).c_str());
  }
  if (ref.samples > 0 && call.samples > 0) {
    std::printf("  %-22s median %s\n", ("reference (" + std::to_string(ref.samples) + ")").c_str(),
                format_ms(ref.median).c_str());
    std::printf("  %-22s %.1fx faster than the reference interpreter\n", "compiled",
                ref.median / call.median);
  }

  if (profiler) {
    profiler->write_chrome_trace(options.profile);
    std::printf("wrote %s: %zu kernel slices over %llu calls%s\n", options.profile.c_str(),
                profiler->events().size(), static_cast<unsigned long long>(profiler->replays()),
                profiler->dropped() ? " (the first ones; later slices did not fit)" : "");
    print_profile_summary(*profiler);
  }
  if (!options.json.empty()) {
    nlohmann::json j = {{"model", options.model.model}, {"device", options.model.device},
                        {"threads", threads},           {"compile_ms", compile_ms},
                        {"first_call_ms", first_ms},    {"calls", to_json(call)},
                        {"cpu_isa", name(cpu_isa())},   {"winograd_convs", winograd}};
    if (compile.matmul_precision == MatmulPrecision::bf16)
      j["bf16_matmuls"] = has_native_bf16() ? "bf16 units" : "emulated by f32 GEMMs";
    if (ref.samples > 0 && call.samples > 0) {
      j["reference"] = to_json(ref);
      j["speedup_over_reference"] = ref.median / call.median;
    }
    write_file_atomically(options.json, j.dump(2) + "\n");
    std::printf("wrote %s\n", options.json.c_str());
  }
  return 0;
}

}  // namespace kiln::cli
