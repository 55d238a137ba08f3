// Elementwise bodies written out as CUDA C++: the generated source for every elementwise
// op and for fused chains with broadcast and scalar inputs compiles under NVRTC (where the
// CUDA toolkit is; no GPU needed), and the PTX cache serves repeats from memory and disk.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "../error_matchers.hpp"
#include "../fused_cuda_case.hpp"
#include "compiler/cpu/fused_program.hpp"
#include "compiler/cpu/kernels.hpp"
#include "compiler/cuda/codegen.hpp"
#include "compiler/cuda/launches.hpp"
#include "compiler/ops/elementwise.hpp"
#include "core/str.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/passes.hpp"
#include "kiln/core/error.hpp"
#include "kiln/ir/graph.hpp"
#include "kiln/stage/stage.hpp"
#ifdef KILN_TEST_NVRTC
#include "runtime/cuda/nvrtc.hpp"
#endif

namespace kiln {
namespace {

using compiler::CudaKernelShape;
using compiler::InputAccess;
using detail::cat;

TensorLayout f32(Shape s) { return TensorLayout(DType::f32, std::move(s)); }

/// The fused program of the single elementwise op of \p staged's entry (last op).
std::shared_ptr<const compiler::FusedProgram> last_op_program(const StagedGraph& staged) {
  const ir::Graph& g = staged.graph().entry();
  return compiler::compile_elementwise(g, g.op(g.num_ops() - 1));
}

/// Compiles \p source under NVRTC for the H200 (sm_90), or skips without the toolkit.
void expect_compiles(const std::string& source, const std::string& name) {
#ifdef KILN_TEST_NVRTC
  const std::string ptx = detail::Nvrtc::instance().compile(source, name, "compute_90");
  EXPECT_NE(ptx.find(".entry " + name), std::string::npos) << ptx.substr(0, 400);
#else
  GTEST_SKIP() << "built without the CUDA toolkit (or with sanitizers): NVRTC not tested; "
               << source.size() << " bytes of " << name << " generated";
#endif
}

struct OneOp {
  std::string name;
  std::shared_ptr<const compiler::FusedProgram> program;
  DType result;
};

/// One elementwise op of each definition (both forms of those with two) alone on
/// arguments of dtype \p d. Casts and selects, which take other dtypes, are left out.
std::vector<OneOp> every_elementwise_op(DType d) {
  std::vector<OneOp> programs;
  for (const compiler::ElementwiseDef& def : compiler::elementwise_defs()) {
    if (def.kind != compiler::ElementwiseKind::unary &&
        def.kind != compiler::ElementwiseKind::binary)
      continue;
    const bool binary = def.kind == compiler::ElementwiseKind::binary;
    std::vector<std::vector<ir::NamedAttribute>> forms = {{}};
    if (def.picks_variant != nullptr) forms.push_back({{"approximate", "tanh"}});  // gelu's
    for (const auto& attributes : forms) {
      if (!is_floating(d) && !def.form.has_integer_function(def.kind))
        continue;  // floating-point only
      if (is_floating(d) && !def.form.has_float_function(def.kind)) continue;  // integers only
      ir::Graph g("op");
      const ir::Value a = g.add_argument({d, {8, 16}, Device::cpu()});
      const ir::Value b = g.add_argument({d, {8, 16}, Device::cpu()});
      const ir::OpView op = binary ? g.add_op(def.op->name, {a, b}, attributes)
                                   : g.add_op(def.op->name, {a}, attributes);
      g.set_results({op.result(0)});
      std::string name = def.op->name.substr(5);  // without "kiln."
      if (!attributes.empty()) name += "_variant";
      programs.push_back({name, compiler::compile_elementwise(g, op), g.type(op.result(0)).dtype});
    }
  }
  return programs;
}

TEST(CudaCodegen, EveryElementwiseOpCompilesUnderNvrtc) {
  // Each op of the registry's elementwise definitions, in float (an all-f32 body), in
  // double (f64, the scalar kernel) and, where it takes integers, in long long (i64).
  for (DType d : {DType::f32, DType::f64, DType::i64}) {
    const auto programs = every_elementwise_op(d);
    EXPECT_GE(programs.size(), is_floating(d) ? 24u : 12u) << name(d);
    for (const auto& [op, program, result] : programs) {
      SCOPED_TRACE(cat(op, " on ", name(d)));
      if (d == DType::f32) {  // an f32 result has the array form (else it runs per element)
        EXPECT_TRUE(program->f32 || result == DType::bool_);
      }
      const std::string kernel = cat("kiln_", op);
      CudaKernelShape shape{2, {}};
      shape.inputs.assign(program->args.size(), InputAccess::same_shape);
      const std::string source =  // comparisons give bool: scalar kernels
          program->f32
              ? compiler::cuda_fused_source(*program, shape, kernel)
              : compiler::cuda_scalar_source(
                    *program, shape, std::vector<DType>(program->args.size(), d), result, kernel);
      EXPECT_NE(source.find("extern \"C\" __global__ void " + kernel), std::string::npos);
      expect_compiles(source, kernel);
    }
  }
}

TEST(CudaCodegen, ScalarKernelsOfEveryKindAndTheLibraryCompileUnderNvrtc) {
  // Integer bodies (64-bit integers, wrapping), f16 (through round-to-odd), casts both
  // ways, comparisons: the scalar kernels' helpers; and kiln's CUDA library.
  const auto f = [](Tensor a, Tensor b) {
    return cast(cast(maximum(a * b - a, abs(-b)) / b, DType::f16) + 1.0, DType::i8);
  };
  for (DType d : {DType::i64, DType::i32, DType::u8, DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(name(d)));
    const StagedGraph staged = stage(f)(TensorLayout(d, {8}), TensorLayout(d, {8}));
    const ir::Module fused = passes::run_passes(staged.graph(), {"fuse"});
    const ir::Graph& g = fused.entry();
    const auto program = compiler::compile_fused(
        *fused.find(g.op(g.num_ops() - 1).find("callee")->as_symbol().name));
    CudaKernelShape shape{1, {}};
    shape.inputs.assign(program->args.size(), InputAccess::same_shape);
    const std::string source = compiler::cuda_scalar_source(
        *program, shape, std::vector<DType>(program->args.size(), d), DType::i8, "kiln_scalar");
    expect_compiles(source, "kiln_scalar");
  }
  expect_compiles(compiler::cuda_library_source(), "kiln_argmax");
}

TEST(CudaCodegen, FusedChainsWithBroadcastAndScalarInputsCompile) {
  // gelu(x * w + b) * 0.5 + x over x [4, 8, 32], w [32] (broadcast), b and 0.5 scalars:
  // the fusion pass makes it one body, whose inputs are read three ways.
  const auto f = [](Tensor x, Tensor w, Tensor b) { return gelu(x * w + b, "tanh") * 0.5 + x; };
  const StagedGraph staged = stage(f)(f32({4, 8, 32}), f32({32}), f32({}));
  const ir::Module fused = passes::run_passes(staged.graph(), {"fuse"});
  const ir::Graph& entry = fused.entry();
  const ir::OpView call = entry.op(entry.num_ops() - 1);
  ASSERT_EQ(call.name(), "kiln.fused");
  const auto program = compiler::compile_fused(*fused.find(call.find("callee")->as_symbol().name));
  CudaKernelShape shape{3, {}};
  for (ir::Value v : call.operands()) {
    const Shape& s = entry.type(v).shape;
    shape.inputs.push_back(s == entry.type(call.result(0)).shape ? InputAccess::same_shape
                           : s.rank() == 0                       ? InputAccess::scalar
                                                                 : InputAccess::broadcast);
  }
  ASSERT_EQ(std::count(shape.inputs.begin(), shape.inputs.end(), InputAccess::broadcast), 1);
  const std::string source = compiler::cuda_fused_source(*program, shape, "kiln_chain");
  EXPECT_NE(source.find("+= c * a.strides["), std::string::npos) << source;
  EXPECT_NE(source.find("][0];"), std::string::npos) << source;                // a scalar input
  EXPECT_NE(source.find("1.5957691216057308f"), std::string::npos) << source;  // tanh GELU
  expect_compiles(source, "kiln_chain");
}

/// Runs a generated kernel on the CPU: its source with a prelude that makes it host C++
/// (one block of one thread, so the grid-stride loop visits every element), built by the
/// compiler that built kiln. Returns the output, or nothing when that fails.
std::vector<float> run_on_host(const std::string& source, const std::string& name,
                               const std::vector<std::vector<float>>& inputs,
                               const std::vector<std::vector<long long>>& strides,
                               const std::vector<long long>& shape, long long n) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_host_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream cpp(dir / "kernel.cpp");
  cpp << "#include <cmath>\n#include <cstdio>\n#include <vector>\n"
      << "#define __global__\n"
      << "struct KilnDim { unsigned x; };\n"
      << "static const KilnDim blockIdx{0}, blockDim{1}, gridDim{1}, threadIdx{0};\n"
      << "#include <math.h>\n"  // expf, erff, tanhf, powf, fabsf, sqrtf as in CUDA
      << source << "\nint main() {\n  KilnFusedArgs a{};\n";
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    cpp << "  static const float in" << k << "[] = {";
    for (float v : inputs[k]) cpp << v << "f, ";
    cpp << "0};\n  a.in[" << k << "] = in" << k << ";\n";
    for (std::size_t d = 0; d < shape.size(); ++d)
      cpp << "  a.strides[" << k << "][" << d << "] = " << strides[k][d] << ";\n";
  }
  for (std::size_t d = 0; d < shape.size(); ++d)
    cpp << "  a.shape[" << d << "] = " << shape[d] << ";\n";
  cpp << "  std::vector<float> out(" << n << ");\n  a.out = out.data();\n  a.n = " << n << ";\n  "
      << name << "(a);\n"
      << "  for (float v : out) std::printf(\"%.9g\\n\", v);\n}\n";
  cpp.close();
  const std::string build = std::string(KILN_TEST_HOST_CXX) + " -std=c++17 -O1 -o " +
                            (dir / "kernel").string() + " " + (dir / "kernel.cpp").string() +
                            " 2>" + (dir / "build.log").string();
  std::vector<float> out;
  if (std::system(build.c_str()) != 0) {
    std::ifstream log(dir / "build.log");
    ADD_FAILURE() << "the generated kernel does not build as host C++:\n"
                  << std::string(std::istreambuf_iterator<char>(log), {}) << "\n"
                  << source;
  } else if (std::system(
                 ((dir / "kernel").string() + " > " + (dir / "out.txt").string()).c_str()) == 0) {
    std::ifstream in(dir / "out.txt");
    for (float v; in >> v;) out.push_back(v);
  }
  std::filesystem::remove_all(dir);
  return out;
}

TEST(CudaCodegen, AGeneratedKernelComputesWhatTheCpuKernelComputes) {
  // A test program run on another machine than it was built on (scripts/isa-check.sh)
  // may not find the compiler it was configured with.
  if (!std::filesystem::exists(KILN_TEST_HOST_CXX))
    GTEST_SKIP() << "the C++ compiler this test was built with (" << KILN_TEST_HOST_CXX
                 << ") is not on this machine";
  const testing::FusedCudaCase c = testing::fused_cuda_case(3, 8);
  const std::string source = compiler::cuda_fused_source(*c.program, c.shape, "kiln_host");
  const std::vector<float> got =
      run_on_host(source, "kiln_host", c.values, c.strides, c.out_shape, 24);
  ASSERT_FALSE(got.empty());
  ASSERT_EQ(got.size(), c.expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], c.expected[i], 1e-5) << i;
}

TEST(CudaCodegen, OtherDtypesAreRefused) {
  const auto f = [](Tensor a, Tensor b) { return a + b; };
  const StagedGraph staged = stage(f)(TensorLayout(DType::i32, {4}), TensorLayout(DType::i32, {4}));
  const auto program = last_op_program(staged);
  KILN_EXPECT_THROW_MSG(
      compiler::cuda_fused_source(*program, {1, {InputAccess::same_shape, InputAccess::same_shape}},
                                  "kiln_i32"),
      UserError, "kiln_i32 is not an all-f32 elementwise body");
}

#ifdef KILN_TEST_NVRTC
TEST(PtxCache, ServesRepeatsFromMemoryThenDiskAndRecompilesBadEntries) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_ptx_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string source =
      "extern \"C\" __global__ void kiln_twice(float* x) { x[threadIdx.x] *= 2.0f; }\n";
  {
    detail::PtxCache cache(dir);
    const std::string first = cache.get(source, "kiln_twice", "compute_90");
    EXPECT_EQ(cache.get(source, "kiln_twice", "compute_90"), first);
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_EQ(cache.stats().memory_hits, 1u);
  }
  {
    detail::PtxCache cache(dir);  // a new process, in effect: the disk entry serves
    (void)cache.get(source, "kiln_twice", "compute_90");
    EXPECT_EQ(cache.stats().disk_hits, 1u);
    EXPECT_EQ(cache.stats().compiles, 0u);
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    std::ofstream(entry.path()) << "not ptx";  // damaged entries are compiled again
  {
    detail::PtxCache cache(dir);
    EXPECT_NE(cache.get(source, "kiln_twice", "compute_90").find(".entry kiln_twice"),
              std::string::npos);
    EXPECT_EQ(cache.stats().compiles, 1u);
  }
  KILN_EXPECT_THROW_MSG(detail::PtxCache(dir).get("this is not CUDA", "kiln_bad", "compute_90"),
                        UserError, "NVRTC could not compile kiln_bad for compute_90");
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace kiln
