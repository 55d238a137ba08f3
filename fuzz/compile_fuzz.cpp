// Fuzzes the compiler with modules a user could write by hand. Text that parses, verifies
// and whose values are small (see kMaxElements) is compiled for a 2-thread CPU context and
// called once on generated inputs and weights (symbolic dims 2), and the reference
// interpreter runs the same call. Properties checked on every input:
// - nothing crashes, hangs or reads out of bounds (ASan/UBSan watch);
// - what fails throws kiln's UserError or DeviceError: an InternalError, or any other
//   exception, is a bug in kiln;
// - the compiler refuses (UserError) no call that the reference interpreter runs;
// - a call that succeeds returns one tensor per result of the entry graph, each with the
//   dtype and rank the module declares;
// - a module whose calls expand to 2^48 ops or more is refused by both, without expanding.
//
// The same function runs in the test suite over fuzz/regressions/ (tests/CMakeLists.txt),
// so that each input that once found a bug stays fixed.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/stage/stage.hpp"

namespace {

/// Symbolic dims of generated inputs.
constexpr std::int64_t kSymbolicSize = 2;
/// Modules with a bigger value are skipped: they would test the machine's memory, not kiln.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 16;
/// Modules whose calls expand to more ops are skipped (they would take long to run) ...
constexpr std::uint64_t kMaxExpandedOps = std::uint64_t{1} << 16;
/// ... unless they expand to so many that the compiler and the interpreter must refuse them.
constexpr std::uint64_t kRefusedOps = std::uint64_t{1} << 48;

std::int64_t elements(const kiln::ir::TensorType& type) {
  std::int64_t n = 1;
  for (const kiln::Dim& d : type.shape.dims()) {
    const std::int64_t size = d.is_static() ? d.size() : kSymbolicSize;
    if (size > kMaxElements) return kMaxElements + 1;
    n *= std::max<std::int64_t>(size, 1);
    if (n > kMaxElements) return n;
  }
  return n;
}

bool small(const kiln::ir::Module& module) {
  for (std::size_t g = 0; g < module.num_graphs(); ++g) {
    const kiln::ir::Graph& graph = module.graph(g);
    for (std::uint32_t v = 0; v < graph.num_values(); ++v)
      if (elements(graph.type(kiln::ir::Value{v})) > kMaxElements) return false;
  }
  return true;
}

kiln::Tensor generated(const kiln::ir::TensorType& type, std::uint64_t seed) {
  std::vector<kiln::Dim> dims;
  for (const kiln::Dim& d : type.shape.dims())
    dims.emplace_back(d.is_static() ? d.size() : kSymbolicSize);
  const kiln::TensorLayout layout(type.dtype, kiln::Shape(std::move(dims)), type.device);
  return kiln::is_floating(type.dtype) ? kiln::Tensor::random(layout, seed, -1, 1)
                                       : kiln::Tensor::random(layout, seed, 0, 2);
}

[[noreturn]] void bug(const char* where, const std::exception& e) {
  std::fprintf(stderr, "%s threw what kiln must not throw: %s\n", where, e.what());
  std::abort();
}

/// Runs \p call; kiln's user and device errors are answers (a UserError's message goes to
/// \p refused when given), anything else is a bug.
template <class F>
bool answered(const char* where, std::string* refused, F&& call) {
  try {
    call();
    return true;
  } catch (const kiln::UserError& e) {
    if (refused != nullptr) *refused = e.what();
  } catch (const kiln::DeviceError&) {
  } catch (const kiln::InternalError& e) {
    bug(where, e);
  } catch (const std::exception& e) {
    bug(where, e);
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::ir::Module module;
  try {
    module = kiln::ir::parse_module(text, "fuzz");
    kiln::ir::verify_or_throw(module);
  } catch (const kiln::UserError&) {
    return 0;  // rejected with a message: the parser fuzzer's business
  }
  if (!small(module)) return 0;
  // Calls that expand past what any machine can plan (2^64 ops in a few kilobytes) are
  // refused by both, before either expands them; between that and a quick call, skipped.
  const std::uint64_t ops = kiln::ir::expanded_op_count(module);
  if (ops > kMaxExpandedOps) {
    if (ops < kRefusedOps) return 0;
    std::string refused;
    const bool compiled = answered("compiling", &refused, [&] {
      (void)kiln::CompiledCallable(kiln::StagedGraph::from_module(module),
                                   std::map<std::string, kiln::Tensor>{});
    });
    const bool interpreted = answered("the reference interpreter", nullptr,
                                      [&] { (void)kiln::reference_run(module, {}, {}); });
    if (compiled || interpreted || refused.find("calls expand to") == std::string::npos) {
      std::fprintf(stderr, "a module of %llu ops with its calls expanded was not refused\n",
                   static_cast<unsigned long long>(ops));
      std::abort();
    }
    return 0;
  }

  std::vector<kiln::Tensor> inputs;
  std::map<std::string, kiln::Tensor> weights;
  if (!answered("generating inputs", nullptr, [&] {
        std::uint64_t seed = 1;
        for (const kiln::ir::Value v : module.entry().arguments())
          inputs.push_back(generated(module.entry().type(v), seed++));
        for (const auto& [name, type] : kiln::module_weights(module))
          weights.emplace(name, generated(type, seed++));
      }))
    return 0;

  static const auto context = [] {
    kiln::set_cpu_device_count(4);  // cpu:0 ... cpu:3, for modules over several devices
    return std::make_shared<kiln::DeviceContext>(kiln::Device::cpu(),
                                                 kiln::DeviceContextOptions{2});
  }();
  std::vector<kiln::Tensor> outputs;
  std::string refused;
  const bool compiled = answered("compiling and calling", &refused, [&] {
    kiln::CompileOptions options;
    options.context = context;
    kiln::CompiledCallable callable(kiln::StagedGraph::from_module(module), weights, options);
    outputs = callable.run(inputs);
  });
  const bool interpreted = answered("the reference interpreter", nullptr,
                                    [&] { (void)kiln::reference_run(module, inputs, weights); });
  if (interpreted && !refused.empty()) {
    std::fprintf(stderr, "the compiler refused what the reference interpreter ran: %s\n",
                 refused.c_str());
    std::abort();
  }
  if (!compiled) return 0;

  const kiln::ir::Graph& entry = module.entry();
  if (outputs.size() != entry.results().size()) {
    std::fprintf(stderr, "the call returned %zu tensors for %zu results\n", outputs.size(),
                 entry.results().size());
    std::abort();
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const kiln::ir::TensorType& want = entry.type(entry.results()[i]);
    if (outputs[i].dtype() != want.dtype || outputs[i].rank() != want.shape.rank()) {
      std::fprintf(stderr, "output %zu is %s, the module declares %s\n", i,
                   kiln::to_string(outputs[i].layout()).c_str(), kiln::ir::to_string(want).c_str());
      std::abort();
    }
  }
  return 0;
}
