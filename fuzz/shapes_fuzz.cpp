// Fuzzes the shape rules, the verifier and the planner with graphs built through the IR
// API (structure-aware: the input bytes choose ops, operands and extreme attribute values
// rather than text). Dims, sizes, starts, stops and steps come from a palette of edges:
// 0, 1, small sizes, 2^31, 2^32, 2^53 + 1, 2^61, 2^62, 2^63 - 1 and negatives.
// Properties checked on every input:
// - building an op either infers its result types or throws UserError (never another
//   exception, never a crash or signed overflow: UBSan watches);
// - a graph that verifies is planned: the planner either plans it or refuses with a
//   UserError (too big), and when every value is small it is run and its results are
//   compared in shape with the reference interpreter's.
//
// The same function runs in the test suite over the seeds in fuzz/seeds/shapes.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/ir/verifier.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/stage/stage.hpp"

namespace {

using kiln::ir::NamedAttribute;
using kiln::ir::Value;

/// Reads the input byte by byte; past the end every read is 0.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t next() { return at_ < size_ ? data_[at_++] : 0; }
  bool done() const { return at_ >= size_; }
  /// An integer from the palette of edges.
  std::int64_t edge() {
    static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    static constexpr std::int64_t kPalette[] = {0,
                                                1,
                                                2,
                                                3,
                                                4,
                                                -1,
                                                std::int64_t{1} << 31,
                                                std::int64_t{1} << 32,
                                                (std::int64_t{1} << 53) + 1,
                                                std::int64_t{1} << 61,
                                                std::int64_t{1} << 62,
                                                kMax,
                                                kMax - 1,
                                                std::numeric_limits<std::int64_t>::min(),
                                                3037000500,
                                                5};
    return kPalette[next() % (sizeof kPalette / sizeof kPalette[0])];
  }
  std::vector<std::int64_t> edges(std::size_t n) {
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(edge());
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

kiln::ir::Attribute array(const std::vector<std::int64_t>& values) {
  kiln::ir::Attribute::Array out;
  for (std::int64_t v : values) out.emplace_back(v);
  return out;
}

/// A shape of rank 0 to 3 from the palette (negatives, which Dim refuses, become 1).
kiln::Shape shape(Bytes& in) {
  std::vector<kiln::Dim> dims;
  const std::size_t rank = in.next() % 4;
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t d = in.edge();
    dims.emplace_back(d < 0 ? 1 : d);
  }
  return kiln::Shape(std::move(dims));
}

/// Elements of \p type, saturated past 2^40 (what counts here is only "small or not").
std::int64_t elements(const kiln::ir::TensorType& type) {
  // At run time every name is 2 (the inputs' symbolic dims), so `n + 2^32` is 2^32 + 2.
  const auto size = [](const kiln::Dim& d) -> std::int64_t {
    if (d.is_static()) return d.size();
    try {
      return kiln::evaluate_dim(d, [](const std::string&) { return std::int64_t{2}; });
    } catch (const kiln::UserError&) {  // negative, or out of int64: no real allocation
      return std::int64_t{1} << 40;
    }
  };
  for (const kiln::Dim& d : type.shape.dims())
    if (size(d) == 0) return 0;
  std::int64_t n = 1;
  for (const kiln::Dim& d : type.shape.dims()) {
    const std::int64_t s = size(d);
    if (s > (std::int64_t{1} << 40) || n > (std::int64_t{1} << 40) / s)
      return std::int64_t{1} << 40;
    n *= s;
  }
  return n;
}

[[noreturn]] void bug(const char* where, const char* what) {
  std::fprintf(stderr, "%s threw what kiln must not throw: %s\n", where, what);
  std::abort();
}

/// Adds one op chosen by the input over the values so far; refusals are fine.
void add_op(Bytes& in, kiln::ir::Graph& g, std::vector<Value>& values) {
  const Value x = values[in.next() % values.size()];
  const Value y = values[in.next() % values.size()];
  const std::size_t rank = g.type(x).shape.rank();
  std::vector<Value> one{x}, two{x, y};
  std::vector<NamedAttribute> attrs;
  const char* op = nullptr;
  std::vector<Value>* operands = &one;
  switch (in.next() % 10) {
    case 0:
      op = "kiln.broadcast_to";
      attrs = {{"shape", shape(in)}};
      break;
    case 1:
      op = "kiln.reshape";
      attrs = {{"shape", shape(in)}};
      break;
    case 2:
      op = "kiln.slice";
      attrs = {{"starts", array(in.edges(rank))},
               {"stops", array(in.edges(rank))},
               {"steps", array(in.edges(rank))}};
      break;
    case 3:
      op = "kiln.split";
      attrs = {{"axis", in.edge() % 4}, {"sizes", array(in.edges(1 + in.next() % 3))}};
      break;
    case 4:
      op = "kiln.concat";
      attrs = {{"axis", in.edge() % 4}};
      operands = &two;
      break;
    case 5:
      op = "kiln.add";
      operands = &two;
      break;
    case 6:
      op = "kiln.matmul";
      operands = &two;
      break;
    case 7:
      op = "kiln.reduce_sum";
      attrs = {{"axes", array(in.edges(in.next() % 3))}};
      break;
    case 8:
      op = "kiln.transpose";
      attrs = {{"perm", array(in.edges(rank))}};
      break;
    default:
      op = "kiln.tanh";
      break;
  }
  try {
    const kiln::ir::OpView added = g.add_op(op, *operands, std::move(attrs));
    for (std::size_t r = 0; r < added.num_results(); ++r) values.push_back(added.result(r));
  } catch (const kiln::UserError&) {  // refused with a message: the rule did its job
  } catch (const std::exception& e) {
    bug(op, e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  kiln::ir::Module module;
  kiln::ir::Graph& g = module.add_graph("main");
  std::vector<Value> values;
  const std::size_t arguments = 1 + in.next() % 2;
  for (std::size_t a = 0; a < arguments; ++a) {
    std::vector<kiln::Dim> dims;  // small static dims or a symbol: inputs must exist
    const std::size_t rank = in.next() % 4;
    for (std::size_t i = 0; i < rank; ++i) {
      const std::uint8_t b = in.next();
      if (b % 5 == 4) {
        dims.emplace_back("n");
      } else {
        dims.emplace_back(b % 4);
      }
    }
    values.push_back(
        g.add_argument({kiln::DType::f32, kiln::Shape(std::move(dims)), kiln::Device::cpu()}));
  }
  for (int i = 0; i < 12 && !in.done(); ++i) add_op(in, g, values);
  g.set_results({values.back()});
  if (!kiln::ir::verify(module).empty()) return 0;

  bool small = true, huge = false;
  for (std::uint32_t v = 0; v < g.num_values(); ++v) {
    const std::int64_t n = elements(g.type(Value{v}));
    small = small && n <= (std::int64_t{1} << 16);
    huge = huge || n >= (std::int64_t{1} << 40);
  }
  if (!small && !huge) return 0;  // a real allocation of up to a terabyte: not the point
  if (std::getenv("KILN_FUZZ_PRINT") != nullptr)  // to see what an input built
    std::fprintf(stderr, "%s", module.str().c_str());

  std::vector<kiln::Tensor> inputs;
  for (Value v : g.arguments()) {
    std::vector<kiln::Dim> dims;
    for (const kiln::Dim& d : g.type(v).shape.dims())
      dims.emplace_back(d.is_static() ? d.size() : 2);
    inputs.push_back(kiln::Tensor::random(
        kiln::TensorLayout(kiln::DType::f32, kiln::Shape(std::move(dims))), 1, -1, 1));
  }
  static const auto context =
      std::make_shared<kiln::DeviceContext>(kiln::Device::cpu(), kiln::DeviceContextOptions{2});
  std::vector<kiln::Tensor> got;
  try {
    kiln::CompileOptions options;
    options.context = context;
    options.passes = {};  // every value planned (dce would drop an unused huge one)
    kiln::CompiledCallable callable(kiln::StagedGraph::from_module(module),
                                    std::map<std::string, kiln::Tensor>{}, options);
    if (huge) {
      (void)callable.output_bytes(inputs);  // must refuse: more than any memory
      std::fprintf(stderr, "a plan with a value of 2^40 or more elements was not refused:\n%s",
                   module.str().c_str());
      std::abort();
    }
    got = callable.run(inputs);
  } catch (const kiln::UserError&) {
    return 0;
  } catch (const kiln::DeviceError&) {
    return 0;
  } catch (const std::exception& e) {
    bug("compiling, planning or calling", e.what());
  }
  std::vector<kiln::Tensor> want;
  try {
    want = kiln::reference_run(module, inputs, {});
  } catch (const kiln::UserError&) {
    std::fprintf(stderr, "the reference interpreter refused what the compiler ran\n");
    std::abort();
  } catch (const std::exception& e) {
    bug("the reference interpreter", e.what());
  }
  if (got.size() != want.size() || got[0].layout() != want[0].layout()) {
    std::fprintf(stderr, "compiled and reference results differ in layout\n");
    std::abort();
  }
  return 0;
}
