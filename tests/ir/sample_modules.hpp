#pragma once
// Hand-built modules that together use every feature of the text form: symbolic dims,
// devices other than the module's, every attribute kind, multi-result ops, subgraph calls
// with weight prefixes, locations, odd symbol names. Shared by the round-trip tests, the
// mlir-opt check and the fuzzer's seed corpus.

#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/graph.hpp"

namespace kiln::ir::testing {

inline TensorType f32(Shape shape, Device device = Device::cpu()) {
  return {DType::f32, std::move(shape), device};
}

/// A transformer-ish layer: weights, matmul, norms, reductions, a subgraph called twice
/// with different weight prefixes.
inline Module layered_module() {
  Module m;
  Graph& main = m.add_graph("main");
  Graph& block = m.add_graph("block");
  {
    Value x = block.add_argument(f32({"batch", 16}));
    Value w = block.add_op_typed(lookup_op("kiln.weight"), {}, {{"name", "w"}}, {f32({16, 16})})
                  .result(0);
    Value y = block.add_op("kiln.matmul", {x, w}, {}, {"model.cpp", 12, 7}).result(0);
    Value r = block.add_op("kiln.gelu", {y}, {{"approximate", "tanh"}}).result(0);
    Value s = block.add_op("kiln.add", {r, x}).result(0);
    block.set_results({s});
  }
  Value x = main.add_argument(f32({"batch", 16}));
  Value h = x;
  for (int layer = 0; layer < 2; ++layer)
    h = main.add_op_typed(lookup_op("func.call"), std::vector<Value>{h},
                          {{"callee", SymbolRef{"block"}},
                           {"kiln.prefix", "layers." + std::to_string(layer) + "."}},
                          {f32({"batch", 16})})
            .result(0);
  Value sm = main.add_op("kiln.softmax", {h}, {{"axis", -1}}).result(0);
  Value sum =
      main.add_op("kiln.reduce_sum", {sm}, {{"axes", Attribute::Array{1}}, {"keepdim", true}})
          .result(0);
  main.set_results({sm, sum});
  return m;
}

/// Every attribute kind and the odd corners of the syntax.
inline Module corner_module() {
  Module m(Device::cpu());
  Graph& g = m.add_graph("corner cases \"quoted\"");
  Value a = g.add_argument({DType::bf16, {2, 3}, Device::cuda(1)});
  Value b = g.add_argument({DType::i64, {}, Device::cpu()});
  (void)b;
  DenseData bools{DType::bool_, {2, 2}, std::string("\1\0\0\1", 4)};
  DenseData floats{DType::f32, {3}, std::string(12, '\0')};
  const float values[3] = {1.5f, -2.0f, 1e-20f};
  std::memcpy(floats.bytes.data(), values, sizeof values);
  Value c = g.add_op_typed(lookup_op("kiln.constant"), {}, {{"value", bools}},
                           {{DType::bool_, {2, 2}, Device::cpu()}})
                .result(0);
  Value f =
      g.add_op_typed(lookup_op("kiln.constant"), {}, {{"value", floats}}, {f32({3})}).result(0);
  (void)c;
  (void)f;
  Value parts = a;
  auto split = g.add_op("kiln.split", {parts}, {{"axis", 1}, {"sizes", Attribute::Array{1, 2}}},
                        {"dir/with \"quotes\".cpp", 3, 9});
  Value cast = g.add_op("kiln.cast", {split.result(1)}, {{"dtype", DType::f32}}).result(0);
  Value t = g.add_op("kiln.transpose", {cast}, {{"perm", Attribute::Array{1, 0}}}).result(0);
  Value r = g.add_op("kiln.reshape", {t}, {{"shape", Shape{4}}}).result(0);
  Value sq = g.add_op("kiln.mul", {r, r}).result(0);
  g.set_results({split.result(0), sq});
  // A weight whose attributes exercise strings, floats and nested arrays.
  Graph& h = m.add_graph("weights.v2");
  Value w = h.add_op_typed(lookup_op("kiln.weight"), {}, {{"name", "emb\n\ttab\\le\x7f"}},
                           {{DType::u8, {"vocab", 8}, Device::cpu()}})
                .result(0);
  h.set_results({w});
  m.set_entry("weights.v2");
  return m;
}

/// A graph of \p n chained ops on a symbolic shape (for scale tests and benchmarks).
inline Module long_module(int n) {
  Module m;
  Graph& g = m.add_graph("main");
  Value x = g.add_argument(f32({"batch", 64}));
  Value y = g.add_argument(f32({64}));
  Value v = x;
  static const char* const kOps[] = {"kiln.add", "kiln.mul", "kiln.sub", "kiln.maximum"};
  for (int i = 0; i < n; ++i) {
    if (i % 8 == 7) {
      v = g.add_op("kiln.tanh", {v}).result(0);
    } else {
      v = g.add_op(kOps[i % 4], {v, y}).result(0);
    }
  }
  g.set_results({v});
  return m;
}

inline std::vector<std::pair<std::string, Module>> sample_modules() {
  std::vector<std::pair<std::string, Module>> out;
  out.emplace_back("layered", layered_module());
  out.emplace_back("corner", corner_module());
  out.emplace_back("long", long_module(200));
  out.emplace_back("empty", Module(Device::cuda(0)));
  return out;
}

}  // namespace kiln::ir::testing
