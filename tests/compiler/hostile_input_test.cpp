// What an attacker's module or a very large model brings to the compiler: sizes that
// would wrap once symbolic dims are bound, tensors too big to exist, and a callable
// destroyed while another thread is inside a call. Each ends in a clear error (or waits),
// never in a crash or a wrong result.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "../error_matchers.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

TensorLayout f32(Shape s) { return TensorLayout(DType::f32, std::move(s)); }

// Four symbolic dims of 2^21 each broadcast into one value of 2^84 elements: its byte
// count wrapped in the planner before; now the planner and the interpreter refuse it.
TEST(HostileInput, BoundDimsWhoseProductWrapsAreTooBigForThePlannerAndTheInterpreter) {
  const auto outer = [](Tensor a, Tensor b, Tensor c, Tensor d) { return a + b + c + d; };
  const StagedGraph staged =
      stage(outer)(f32({"a", 1, 1, 1}), f32({"b", 1, 1}), f32({"c", 1}), f32({"d"}));
  const std::int64_t n = std::int64_t{1} << 21;
  const std::vector<Tensor> inputs = {Tensor::zeros(f32({n, 1, 1, 1})),
                                      Tensor::zeros(f32({n, 1, 1})), Tensor::zeros(f32({n, 1})),
                                      Tensor::zeros(f32({n}))};
  CompiledCallable callable(staged, std::map<std::string, Tensor>{});
  KILN_EXPECT_THROW_MSG(callable.run(inputs), UserError, "[2097152, 2097152, 2097152", "too big");
  // The interpreter refuses its first op already: 2^42 elements are more than any memory.
  KILN_EXPECT_THROW_MSG(reference_run(staged.graph(), inputs, {}), UserError, "reference: result 0",
                        "[2097152, 2097152, 1, 1]", "run it on smaller inputs");
  // The same module at a size that fits still runs.
  const std::vector<Tensor> small = {Tensor::full(f32({2, 1, 1, 1}), 1),
                                     Tensor::zeros(f32({3, 1, 1})), Tensor::zeros(f32({1, 1})),
                                     Tensor::zeros(f32({2}))};
  EXPECT_EQ(callable.run(small)[0].shape(), (Shape{2, 3, 1, 2}));
}

TEST(HostileInput, TensorsTooBigToExistAreUserErrors) {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  KILN_EXPECT_THROW_MSG(Tensor::random(f32({max}), 1), UserError, "Tensor::random", "too big");
  KILN_EXPECT_THROW_MSG(Tensor::zeros(f32({std::int64_t{1} << 61})), UserError, "Tensor::full",
                        "too big");
  KILN_EXPECT_THROW_MSG(Shape({max, 2}).num_elements(), UserError, "2^63 elements or more");
  EXPECT_EQ(Shape({0, max, max}).num_elements(), 0);
  KILN_EXPECT_THROW_MSG(Shape({0, max, max}).num_bytes(1), UserError, "too big");
  KILN_EXPECT_THROW_MSG(checked_add(max, 1, "the offset"), UserError,
                        "the offset: 9223372036854775807 + 1 overflows");
  EXPECT_EQ(slice_length(0, max, max), 1);
  EXPECT_EQ(slice_length(3, 2, 1), 0);
  EXPECT_EQ(slice_length(1, 7, 3), 2);
}

// A module of `depth` graphs, each calling the next twice (in sequence), the last a relu:
// 2^depth relus once the calls are expanded, in a few lines per graph.
std::string doubling_calls(int depth, bool leaf_weight = false) {
  const char* t = "tensor<4xf32>";
  std::ostringstream text;
  text << "module {\n";
  for (int g = 0; g < depth; ++g) {
    text << "  func.func ";
    if (g == 0)
      text << "@main";
    else
      text << "private @g" << g;
    text << "(%x: " << t << ") -> " << t << " {\n";
    std::string next = "leaf";
    if (g + 1 < depth) next = std::string("g").append(std::to_string(g + 1));
    text << "    %0 = \"func.call\"(%x) {callee = @" << next << "} : (" << t << ") -> " << t
         << "\n    %1 = \"func.call\"(%0) {callee = @" << next << "} : (" << t << ") -> " << t
         << "\n    return %1 : " << t << "\n  }\n";
  }
  text << "  func.func private @leaf(%x: " << t << ") -> " << t << " {\n";
  if (leaf_weight)  // a weight added to x: one name, reached along 2^depth call paths
    text << "    %w = \"kiln.weight\"() {name = \"w\"} : () -> " << t
         << "\n    %x1 = \"kiln.add\"(%x, %w) : (" << t << ", " << t << ") -> " << t << "\n";
  text << "    %0 = \"kiln.relu\"(" << (leaf_weight ? "%x1" : "%x") << ") : (" << t << ") -> " << t
       << "\n    return %0 : " << t << "\n  }\n}\n";
  return text.str();
}

// Calls that double at every level expand exponentially: 64 levels would be 2^64 launches,
// found before by running out of memory (and `module_weights`, which `kiln run` calls
// first, walked the 2^64 call paths for ever). The planner counts them first (each graph once)
// and refuses what this machine cannot hold; a module of 2^10 still runs.
TEST(HostileInput, CallsThatExpandPastMemoryAreRefusedBeforePlanning) {
  const StagedGraph huge = StagedGraph::from_module(ir::parse_module(doubling_calls(64), "d.mlir"));
  KILN_EXPECT_THROW_MSG(CompiledCallable(huge, std::map<std::string, Tensor>{}), UserError,
                        "@main's calls expand to 2^64 or more ops", "memory and swap can plan");
  // The reference interpreter would evaluate them one by one, for ever.
  const Tensor x = Tensor::from_data(std::vector<float>{-1.5f, 0.0f, 2.0f, -0.25f}, Shape{4});
  KILN_EXPECT_THROW_MSG(reference_run(huge.graph(), {x}, {}), UserError,
                        "reference_run: @main's calls expand to 2^64 or more ops", "compile it");
  const StagedGraph big = StagedGraph::from_module(ir::parse_module(doubling_calls(40), "d.mlir"));
  KILN_EXPECT_THROW_MSG(CompiledCallable(big, std::map<std::string, Tensor>{}), UserError,
                        "expand to 1099511627776 ops");  // 2^40 relus
  // The weights the module reads: calls that reach none are not walked (2^64 paths), and
  // 2^64 paths to a weight are refused before the walk.
  EXPECT_TRUE(module_weights(huge.graph()).empty());
  const ir::Module weighted = ir::parse_module(doubling_calls(64, true), "w.mlir");
  KILN_EXPECT_THROW_MSG(module_weights(weighted), UserError,
                        "@main's calls expand to 2^64 or more weights", "more than kiln reads");
  EXPECT_EQ(module_weights(ir::parse_module(doubling_calls(10, true), "w.mlir")).size(), 1u);
  const StagedGraph fits = StagedGraph::from_module(ir::parse_module(doubling_calls(10), "d.mlir"));
  EXPECT_EQ(ir::expanded_op_count(fits.graph()), 1024u);
  CompiledCallable callable(fits, std::map<std::string, Tensor>{});
  EXPECT_EQ(reference_run(fits.graph(), {x}, {})[0].to_vector<float>(),
            (std::vector<float>{0, 0, 2, 0}));
  EXPECT_EQ(callable.run({x})[0].to_vector<float>(), (std::vector<float>{0, 0, 2, 0}));
}

// Destroying a callable while another thread is inside a call used to free the plans
// under that call (a use after free in oneDNN). The destructor now waits for the call.
TEST(HostileInput, DestroyingACallableWaitsForTheCallAnotherThreadIsInside) {
  const auto model = [](Tensor x) {
    for (int i = 0; i < 16; ++i) x = tanh(matmul(x, x));
    return x;
  };
  const StagedGraph staged = stage(model)(f32({512, 512}));
  const Tensor x = Tensor::random(f32({512, 512}), 3, -0.05, 0.05);
  const std::vector<float> want =
      CompiledCallable(staged, std::map<std::string, Tensor>{}).run({x})[0].to_vector<float>();
  for (int round = 0; round < 3; ++round) {
    auto callable = std::make_unique<CompiledCallable>(staged, std::map<std::string, Tensor>{});
    std::atomic<bool> started{false};
    std::vector<Tensor> got;
    CompiledCallable* const inside = callable.get();  // (reset writes the unique_ptr)
    std::thread caller([&] {
      started = true;
      got = inside->run({x});  // the first call plans and records: tens of milliseconds
    });
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    callable.reset();  // waits for the call
    caller.join();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].to_vector<float>(), want) << "round " << round;
  }
}

}  // namespace
}  // namespace kiln
