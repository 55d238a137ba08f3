// The kiln command, run as a user runs it: on modules, weights and .npy files these tests
// write, checking outputs against the reference interpreter and exit codes and messages
// for bad input.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/str.hpp"
#include "kiln/kiln.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using detail::cat;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Cli : public ::testing::Test {
 protected:
  fs::path dir =
      fs::temp_directory_path() / ("kiln_cli_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::map<std::string, Tensor> weights;
  StagedGraph staged = make_model();

  void SetUp() override {
    fs::create_directories(dir);
    weights = {{"proj.weight", Tensor::random(TensorLayout(DType::f32, {4, 3}), 1, -1, 1)},
               {"proj.bias", Tensor::random(TensorLayout(DType::f32, {3}), 2, -1, 1)}};
    write("m.mlir", staged.str());
    save_safetensors(path("w.safetensors"), weights);
  }
  void TearDown() override { fs::remove_all(dir); }

  /// x [batch, 4] f32, scale [] f32 -> gelu(x @ W + b) * scale, and a row sum.
  static StagedGraph make_model() {
    const auto model = [](Tensor x, Tensor scale) {
      const Tensor y = gelu(nn::Linear{.in = 4, .out = 3, .name = "proj"}(x)) * scale;
      return std::make_tuple(y, sum(y, {1}));
    };
    return stage(model)(TensorLayout(DType::f32, {"batch", 4}), TensorLayout(DType::f32, {}));
  }

  std::string path(const std::string& name) const { return (dir / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name, std::ios::binary) << text;
  }

  /// Runs `kiln ARGS` in the test's directory.
  Result kiln(const std::string& args) const {
    // Under `timeout`: a command that blocks (on a FIFO, say) fails the test with 124.
    const std::string command = "cd '" + dir.string() + "' && timeout 300 '" KILN_CLI "' " + args +
                                " > stdout.txt 2> stderr.txt";
    const int status = std::system(command.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(dir / "stdout.txt");
    r.err = slurp(dir / "stderr.txt");
    return r;
  }

  /// Runs `kiln ARGS` and expects it to fail with exit \p code (1: a usage error, 2: an
  /// error) and \p message in what it prints, worded as every such error is.
  Result expect_failure(const std::string& args, int code, const std::string& message) const {
    const Result r = kiln(args);
    EXPECT_EQ(r.code, code) << args << "\nstderr:\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind(code == 1 ? "kiln: usage error: " : "kiln: error: ", 0), 0u) << r.err;
    return r;
  }

  std::vector<Tensor> inputs(std::int64_t batch) const {
    return {Tensor::random(TensorLayout(DType::f32, {batch, 4}), 10 + batch, -2, 2),
            Tensor::scalar(1.5)};
  }
  void write_inputs(std::int64_t batch) const {
    const std::vector<Tensor> in = inputs(batch);
    save_npy(path("x.npy"), in[0]);
    save_npy(path("s.npy"), in[1]);
  }
};

void expect_close(const Tensor& got, const Tensor& want, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(got.layout(), want.layout()) << what;
  const std::vector<double> a = got.to_doubles(), b = want.to_doubles();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance) << what << " " << i;
}

#define EXPECT_EXIT_CODE(result, expected) \
  EXPECT_EQ((result).code, expected) << "stdout:\n" << (result).out << "stderr:\n" << (result).err

TEST_F(Cli, RunWritesOutputsEqualToTheReferenceForEachBatchSize) {
  for (std::int64_t batch : {1, 5}) {
    write_inputs(batch);
    const Result r =
        kiln("run m.mlir --weights w.safetensors --input arg0=x.npy -i 1=s.npy -o out");
    EXPECT_EXIT_CODE(r, 0);
    EXPECT_NE(r.out.find("out/output1.npy"), std::string::npos) << r.out;
    const std::vector<Tensor> want = reference_run(staged.graph(), inputs(batch), weights);
    expect_close(load_npy(path("out/output0.npy")), want[0], 1e-5, "output0");
    expect_close(load_npy(path("out/output1.npy")), want[1], 1e-5, "output1");
  }
}

TEST_F(Cli, RunWithTheReferenceInterpreterAndPositionalInputs) {
  write_inputs(3);
  const Result r = kiln("run m.mlir -w w.safetensors -i x.npy -i s.npy --reference -o ref");
  EXPECT_EXIT_CODE(r, 0);
  const std::vector<Tensor> want = reference_run(staged.graph(), inputs(3), weights);
  expect_close(load_npy(path("ref/output0.npy")), want[0], 1e-6, "reference output0");
  // Without -o: a summary of each output on stdout.
  const Result printed = kiln("run m.mlir -w w.safetensors -i x.npy -i s.npy");
  EXPECT_EXIT_CODE(printed, 0);
  EXPECT_NE(printed.out.find("output0: f32[3, 3] = ["), std::string::npos) << printed.out;
  EXPECT_NE(printed.out.find("output1: f32[3] = ["), std::string::npos) << printed.out;
}

TEST_F(Cli, RunWritesAChromeTraceWithASlicePerKernel) {
  write_inputs(2);
  const Result r = kiln("run m.mlir -w w.safetensors -i x.npy -i s.npy --profile trace.json");
  EXPECT_EXIT_CODE(r, 0);
  const nlohmann::json trace = nlohmann::json::parse(slurp(dir / "trace.json"));
  std::size_t slices = 0, matmuls = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") {
      ++slices;
      matmuls += e.at("name").get<std::string>().rfind("kiln.matmul", 0) == 0 ? 1 : 0;
    }
  EXPECT_GT(slices, 1u);
  EXPECT_EQ(matmuls, 1u);
}

// Options that take a value, the model's path right after them: the path stays the model
// (a list option used to take it too, and the command said "model is required").
TEST_F(Cli, OptionsBeforeTheModelLeaveItTheModel) {
  write_inputs(2);
  const Result run = kiln("run -w w.safetensors -i x.npy -i s.npy --passes fuse m.mlir");
  EXPECT_EXIT_CODE(run, 0);
  EXPECT_NE(run.out.find("output0: f32[2, 3] = ["), std::string::npos) << run.out;
  const Result bench =
      kiln("bench --dim batch=3 --passes '' m.mlir -w w.safetensors -n 1 --warmup 0");
  EXPECT_EXIT_CODE(bench, 0);
  EXPECT_NE(bench.out.find("arg0: f32[3, 4]"), std::string::npos) << bench.out;
  const Result print = kiln("print --passes fuse m.mlir");
  EXPECT_EXIT_CODE(print, 0);
  EXPECT_NE(print.out.find("kiln.fused"), std::string::npos) << print.out;
  // One value per flag: a second one is not taken as another dim.
  expect_failure("bench m.mlir -w w.safetensors --dim batch=3 4", 1,
                 "The following argument was not expected: 4");
}

TEST_F(Cli, PrintRunsPassesAndRoundTrips) {
  const Result plain = kiln("print m.mlir");
  EXPECT_EXIT_CODE(plain, 0);
  EXPECT_EQ(plain.out, staged.str());
  const Result fused = kiln("print m.mlir --passes canonicalize,cse,fuse -o fused.mlir");
  EXPECT_EXIT_CODE(fused, 0);
  const ir::Module m = ir::parse_module(slurp(dir / "fused.mlir"), "fused.mlir");
  EXPECT_NE(m.str().find("kiln.fused"), std::string::npos);
  EXPECT_EQ(m.str(), passes::run_passes(staged.graph(), {"canonicalize", "cse", "fuse"}).str());
  const Result bad = kiln("print m.mlir --passes fuse,unroll");
  EXPECT_EXIT_CODE(bad, 1);
  EXPECT_NE(bad.err.find("unknown pass 'unroll'; the passes are canonicalize"), std::string::npos)
      << bad.err;
}

TEST_F(Cli, BenchReportsOrderStatisticsAsJson) {
  write_inputs(4);
  const Result r = kiln(
      "bench m.mlir -w w.safetensors -i x.npy -i s.npy -n 5 --warmup 1 --json b.json "
      "--profile t.json");
  EXPECT_EXIT_CODE(r, 0);
  for (const char* text : {"median", "p90", "p99", "faster than the reference interpreter"})
    EXPECT_NE(r.out.find(text), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(dir / "b.json"));
  EXPECT_EQ(j.at("calls").at("samples"), 5);
  EXPECT_LE(j.at("calls").at("min_ms").get<double>(), j.at("calls").at("median_ms").get<double>());
  EXPECT_LE(j.at("calls").at("median_ms").get<double>(), j.at("calls").at("p99_ms").get<double>());
  EXPECT_GT(j.at("speedup_over_reference").get<double>(), 0.0);
  const nlohmann::json trace = nlohmann::json::parse(slurp(dir / "t.json"));
  EXPECT_EQ(trace.at("otherData").at("replays"), 5);  // the timed calls only
  // Without inputs or weights: random inputs (dims from --dim), zero weights.
  const Result generated = kiln("bench m.mlir --dim batch=7 -n 2 --reference-iterations 0");
  EXPECT_EXIT_CODE(generated, 0);
  EXPECT_NE(generated.out.find("arg0: f32[7, 4] on cpu:0 (random)"), std::string::npos)
      << generated.out;
  EXPECT_NE(generated.out.find("2 zero-filled"), std::string::npos) << generated.out;
}

// kiln bench says which instruction-set level ran and, in bf16, which path: bf16 units or
// f32 GEMMs over rounded operands (forced here with KILN_CPU_ISA=avx512, capped at the
// CPU's level); a KILN_CPU_ISA that names no level is an error naming the choices.
TEST_F(Cli, BenchSaysWhichInstructionSetAndBf16PathRan) {
  write_inputs(8);
  ::setenv("KILN_CPU_ISA", "avx512", 1);
  const Result r = kiln(
      "bench m.mlir -w w.safetensors -i x.npy -i s.npy -n 2 --reference-iterations 0 "
      "--matmul-precision bf16 --json b.json");
  ::setenv("KILN_CPU_ISA", "avx512bf16", 1);
  const Result bad = kiln("bench m.mlir -n 1 --reference-iterations 0");
  ::unsetenv("KILN_CPU_ISA");
  EXPECT_EXIT_CODE(r, 0);
  const CpuIsa level = std::min(CpuIsa::avx512, detected_cpu_isa());
  EXPECT_NE(r.out.find(std::string("cpu ") + std::string(name(level)) +
                       ", bf16 matmuls emulated by f32 GEMMs"),
            std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(slurp(dir / "b.json"));
  EXPECT_EQ(j.at("cpu_isa"), std::string(name(level)));
  EXPECT_EQ(j.at("bf16_matmuls"), "emulated by f32 GEMMs");
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find("KILN_CPU_ISA='avx512bf16' is not an instruction-set level"),
            std::string::npos)
      << bad.err;
}

// 3x3 convs run by Winograd's algorithm (oneDNN's kernels with AVX-512, else kiln's own:
// 36 2x2 tiles here), which kiln bench says; --no-winograd keeps them direct.
TEST_F(Cli, BenchSaysWhichConvsRanByWinogradAndNoWinogradTurnsThemOff) {
  const StagedGraph convs = stage([](Tensor x) {
    const Tensor w = weight("w", TensorLayout(DType::f32, {16, 16, 3, 3}));
    return relu(conv(x, w, Window{.pads = {1, 1, 1, 1}}));
  })(TensorLayout(DType::f32, {1, 16, 12, 12}));
  write("c.mlir", convs.str());
  const Result on = kiln("bench c.mlir -n 2 --reference-iterations 0 --json on.json");
  const Result off =
      kiln("bench c.mlir -n 2 --reference-iterations 0 --no-winograd --json off.json");
  EXPECT_EXIT_CODE(on, 0);
  EXPECT_EXIT_CODE(off, 0);
  // (With AMX, not seen here, oneDNN 2.6 may keep a conv direct: then 0, and no line.)
  const int ran = nlohmann::json::parse(slurp(dir / "on.json")).at("winograd_convs");
  const bool winograd = cpu_isa() != CpuIsa::amx || ran == 1;
  EXPECT_EQ(ran, winograd ? 1 : 0);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "off.json")).at("winograd_convs"), 0);
  EXPECT_EQ(on.out.find("1 by Winograd's algorithm") != std::string::npos, winograd) << on.out;
  EXPECT_EQ(off.out.find("Winograd"), std::string::npos) << off.out;
}

TEST_F(Cli, BenchServeTimesCallsOnRequest) {
  write_inputs(2);
  write("requests.txt", "2\n3\n");
  const Result r = kiln(
      "bench m.mlir -w w.safetensors -i x.npy -i s.npy --warmup 1 --reference-iterations 0 "
      "--serve --json b.json < requests.txt");
  EXPECT_EXIT_CODE(r, 0);
  // "ready", then one "times" line per request with that many positive times.
  std::istringstream out(r.out.substr(r.out.find("ready\n") + 6));
  for (const int want : {2, 3}) {
    std::string line;
    ASSERT_TRUE(std::getline(out, line)) << r.out;
    std::istringstream words(line);
    std::string head;
    words >> head;
    EXPECT_EQ(head, "times") << line;
    int count = 0;
    for (double ms; words >> ms; ++count) EXPECT_GT(ms, 0.0) << line;
    EXPECT_EQ(count, want) << line;
  }
  EXPECT_EQ(nlohmann::json::parse(slurp(dir / "b.json")).at("calls").at("samples"), 5);
  write("bad.txt", "2\nmany\n");
  const Result bad = kiln("bench m.mlir -w w.safetensors -i x.npy -i s.npy --serve < bad.txt");
  EXPECT_EXIT_CODE(bad, 1);
  EXPECT_NE(bad.err.find("not 'many'"), std::string::npos) << bad.err;
}

TEST_F(Cli, DotDrawsTheIrGraphAndTheCompiledPlan) {
  const Result ir = kiln("dot m.mlir");
  EXPECT_EXIT_CODE(ir, 0);
  EXPECT_EQ(ir.out.rfind("digraph", 0), 0u) << ir.out;
  EXPECT_NE(ir.out.find("kiln.matmul"), std::string::npos);
  const Result plan = kiln("dot --plan m.mlir --dim batch=2");
  EXPECT_EXIT_CODE(plan, 0);
  EXPECT_NE(plan.out.find("kiln_device_graph"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("kiln.fused @fused_"), std::string::npos) << plan.out;
  const Result missing = kiln("dot m.mlir --graph nope");
  EXPECT_EXIT_CODE(missing, 1);
  EXPECT_NE(missing.err.find("has no such graph; it has @main"), std::string::npos) << missing.err;
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    const Result svg = kiln("dot m.mlir --svg -o g.svg");
    EXPECT_EXIT_CODE(svg, 0);
    EXPECT_NE(slurp(dir / "g.svg").find("<svg"), std::string::npos);
  }
}

TEST_F(Cli, DemoEmitsAModuleThatKilnRunReproduces) {
  const Result demo = kiln(
      "demo --layers 2 --dim 16 --heads 2 --seq 5 --batch 2 --vocab 11 -n 2 --emit-mlir d.mlir "
      "--json d.json");
  EXPECT_EXIT_CODE(demo, 0);
  for (const char* text : {"module   @main", "1 subgraph body (@block", "called 2 times",
                           "median call", "op-by-op", "check: max |compiled - reference|", ": ok"})
    EXPECT_NE(demo.out.find(text), std::string::npos) << text << "\n" << demo.out;
  EXPECT_TRUE(nlohmann::json::parse(slurp(dir / "d.json")).at("ok").get<bool>());
  const Result again =
      kiln("run d.mlir --weights d.safetensors --input arg0=d.input.npy --output again");
  EXPECT_EXIT_CODE(again, 0);
  expect_close(load_npy(path("again/output0.npy")), load_npy(path("d.output.npy")), 1e-6,
               "kiln run of the demo's module");
}

TEST_F(Cli, BadInputFilesExitWithCodeTwoAndNameTheProblem) {
  write_inputs(2);
  struct Case {
    std::string setup_name, setup_text, args, message;
  };
  const std::vector<Case> cases = {
      {"bad.npy", "hello", "run m.mlir -w w.safetensors -i bad.npy -i s.npy",
       "bad.npy: not a .npy file"},
      {"cut.npy", to_npy(inputs(2)[0]).substr(0, 100),
       "run m.mlir -w w.safetensors -i cut.npy -i s.npy", "cut.npy: truncated"},
      {"wide.npy", to_npy(Tensor::zeros(TensorLayout(DType::f32, {2, 5}))),
       "run m.mlir -w w.safetensors -i wide.npy -i s.npy",
       "wide.npy (for arg0 of @main, f32[batch, 4] on cpu:0): has 5 at axis 1 where the model "
       "has 4"},
      {"ints.npy", to_npy(Tensor::zeros(TensorLayout(DType::i32, {2, 4}))),
       "run m.mlir -w w.safetensors -i ints.npy -i s.npy", "holds i32[2, 4]; it needs f32"},
      {"", "", "run m.mlir -w w.safetensors -i x.npy",
       "missing input arg1 (f32[] on cpu:0); pass --input NAME=FILE.npy (or argN=FILE.npy)"},
      {"", "", "run m.mlir -i x.npy -i s.npy", "the model reads 2 weights"},
      {"", "", "run nothere.mlir -i x.npy", "nothere.mlir: cannot be opened: No such file"},
      {"", "", "run m.mlir -w nothere.safetensors -i x.npy -i s.npy", "nothere.safetensors"},
      {"syntax.mlir", "module {\n  func.func @main() {\n    %0 = \"kiln.add\"(%9) : oops\n",
       "run syntax.mlir", "syntax.mlir:3:"},
      {"verify.mlir",
       "module {\n  func.func @main(%arg0: tensor<2xf32>) -> tensor<3xf32> {\n"
       "    return %arg0 : tensor<2xf32>\n  }\n}\n",
       "print verify.mlir", "verify.mlir:"},
      // No machine has a hundred GPUs: an error with a GPU (the device tool's) and without.
      {"", "", "run m.mlir -w w.safetensors -i x.npy -i s.npy --device cuda:99",
       "cuda:99 is not available"},
  };
  for (const Case& c : cases) {
    if (!c.setup_name.empty()) write(c.setup_name, c.setup_text);
    expect_failure(c.args, 2, c.message);
  }
}

// A kernel that fails on the values it is given (an index out of range) is an error that
// names the op, said once.
// What an attacker or a very large model brings: files that are not files (a FIFO blocked
// in open forever, /dev/zero was read until memory ran out, a directory was an internal
// error), sizes that wrap, a tensor too big to make, and calls nested 3000 deep (which
// overflowed the stack). Each is exit 2 naming the file, and none blocks: the command
// runs under `timeout`.
TEST_F(Cli, HostileFilesEndInExitTwoNamingTheFileWithoutBlocking) {
  write_inputs(2);
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_directories(dir / "folder.mlir");
  const std::string one = "module {\n  func.func @main(%arg0: tensor<1xf32>) -> ";
  write("wrap.mlir",
        one +
            "tensor<4611686018427387904xf32> {\n    %0 = \"kiln.broadcast_to\"(%arg0) {shape = "
            "#kiln.shape<[4611686018427387904]>} : (tensor<1xf32>) -> "
            "tensor<4611686018427387904xf32>\n    return %0 : tensor<4611686018427387904xf32>\n"
            "  }\n}\n");
  write("max.mlir",
        "module {\n  func.func @main(%arg0: tensor<9223372036854775807xf32>) -> "
        "tensor<9223372036854775807xf32> {\n    return %arg0 : tensor<9223372036854775807xf32>\n"
        "  }\n}\n");
  std::string deep = "module {\n";
  for (int i = 0; i < 3000; ++i)
    deep += cat("  func.func @g", i, "(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n    %0 = ",
                i + 1 < 3000 ? cat("\"func.call\"(%arg0) {callee = @g", i + 1, "}")
                             : std::string("\"kiln.tanh\"(%arg0)"),
                " : (tensor<2xf32>) -> tensor<2xf32>\n    return %0 : tensor<2xf32>\n  }\n");
  write("deep.mlir", deep + "}\n");
  save_npy(path("one.npy"), Tensor::zeros(TensorLayout(DType::f32, {1})));
  const std::string m = "m.mlir -w w.safetensors ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run fifo -i x.npy -i s.npy", "fifo: is a FIFO or socket, not a file"},
      {"run " + m + "-i fifo -i s.npy", "fifo: is a FIFO or socket, not a file"},
      {"run m.mlir -w fifo -i x.npy -i s.npy", "fifo': is a FIFO or socket, not a file"},
      {"run /dev/zero", "/dev/zero: is a device, not a file"},
      {"run " + m + "-i /dev/zero -i s.npy", "/dev/zero: is a device, not a file"},
      {"run folder.mlir", "folder.mlir: is a directory, not a file"},
      {"run " + m + "-i . -i s.npy", ".: is a directory, not a file"},
      {"run wrap.mlir -i one.npy", "more than 2^62 bytes, kiln's limit for one tensor"},
      {"run wrap.mlir -i one.npy --reference", "more than 2^62 bytes"},
      {"bench max.mlir -n 1", "max.mlir: the module does not verify"},
      {"print deep.mlir", "calls nest 2999 deep, more than kiln's limit of 256"},
      {"run deep.mlir -i one.npy", "deep.mlir: the module does not verify"},
  };
  for (const auto& [args, message] : cases) expect_failure(args, 2, message);
}

// Every output path is checked against every input and every other output before any
// work (exit 1), through links; a model overwritten by its own trace, or one output by
// another, was silent before.
TEST_F(Cli, OutputsNeverOverwriteInputsOrEachOther) {
  write_inputs(2);
  const std::string model = slurp(dir / "m.mlir");
  fs::create_directory_symlink(dir, dir / "again");
  fs::create_directories(dir / "out" / "output1.npy");  // a directory where an output goes
  fs::create_directories(dir / "o2");
  const std::string run = "run m.mlir -w w.safetensors -i x.npy -i s.npy ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {run + "--profile m.mlir", "--profile writes m.mlir, which is read as the model"},
      {run + "--profile again/x.npy", "which is read as --input x.npy (x.npy)"},
      {run + "-o o2 --profile o2/output0.npy",
       "--profile writes o2/output0.npy, which is also written by --output (its output0.npy)"},
      {run + "-o out", "out/output1.npy is a directory; kiln writes a file there"},
      {"bench m.mlir -w w.safetensors --json X --profile X -n 1",
       "--json writes X, which is also written by --profile"},
      {"bench m.mlir -w w.safetensors --json w.safetensors -n 1", "read as --weights"},
      {"print m.mlir -o again/m.mlir", "--output writes again/m.mlir, which is read as the model"},
      {"demo --layers 1 --dim 8 --heads 2 --seq 2 --emit-mlir d.mlir --json d.safetensors",
       "--emit-mlir (its .safetensors) writes d.safetensors, which is also written by --json"},
  };
  for (const auto& [args, message] : cases) EXPECT_EQ(expect_failure(args, 1, message).out, "");
  EXPECT_EQ(slurp(dir / "m.mlir"), model);  // nothing was written
  EXPECT_FALSE(fs::exists(dir / "out" / "output0.npy"));
  EXPECT_FALSE(fs::exists(dir / "X"));
  EXPECT_FALSE(fs::exists(dir / "d.mlir"));
}

TEST_F(Cli, AKernelFailureIsNamedOnce) {
  const StagedGraph lookup = stage([](Tensor ids) {
    return embedding(weight("table", TensorLayout(DType::f32, {2, 3})), ids);
  })(TensorLayout(DType::i64, {"n"}));
  write("lookup.mlir", lookup.str());
  save_safetensors(path("table.safetensors"),
                   {{"table", Tensor::random(TensorLayout(DType::f32, {2, 3}), 1)}});
  save_npy(path("ids.npy"), Tensor::from_data(std::vector<std::int64_t>{1, 5}, {2}));
  const Result r =
      expect_failure("run lookup.mlir -w table.safetensors -i ids.npy", 2, "index 5 is outside");
  EXPECT_EQ(r.err.find("index 5 is outside"), r.err.rfind("index 5 is outside")) << r.err;
  EXPECT_NE(r.err.find("kiln.gather"), std::string::npos) << r.err;
}

TEST_F(Cli, WeightsTheModelDoesNotReadAreAnErrorUnlessSkipped) {
  write_inputs(2);
  std::map<std::string, Tensor> more = weights;
  more.emplace("other.weight", Tensor::zeros(TensorLayout(DType::f32, {5})));
  save_safetensors(path("more.safetensors"), more);
  expect_failure("run m.mlir -w more.safetensors -i x.npy -i s.npy -o strict", 2,
                 "more.safetensors: 1 tensor the model does not read (first: 'other.weight'); "
                 "pass --skip-unused-weights to leave it out");
  const Result skipped =
      kiln("run m.mlir -w more.safetensors --skip-unused-weights -i x.npy -i s.npy -o skipped");
  EXPECT_EXIT_CODE(skipped, 0);
  EXPECT_NE(skipped.err.find("skipped 1 weight of"), std::string::npos) << skipped.err;
  const std::vector<Tensor> want = reference_run(staged.graph(), inputs(2), weights);
  expect_close(load_npy(path("skipped/output0.npy")), want[0], 1e-5,
               "output0, extra weight left out");
  // A missing weight, one of the wrong dtype and an extra tensor: all three reported (only
  // the extra one was before), naming the file.
  std::map<std::string, Tensor> wrong = {
      {"proj.weight", Tensor::zeros(TensorLayout(DType::f16, {4, 3}))},
      {"other.weight", Tensor::zeros(TensorLayout(DType::f32, {5}))}};
  save_safetensors(path("wrong.safetensors"), wrong);
  const Result r = expect_failure("run m.mlir -w wrong.safetensors -i x.npy -i s.npy", 2,
                                  "wrong.safetensors: the model reads 'proj.bias' (f32[3] on "
                                  "cpu:0), which the file lacks");
  EXPECT_NE(r.err.find("'proj.weight' is f16[4, 3] in the file but the model reads f32[4, 3]"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 tensor the model does not read (first: 'other.weight')"),
            std::string::npos)
      << r.err;
}

// A module placed on cpu:3 ran on a one-device process, where the docs promise an error.
TEST_F(Cli, AModuleOnADeviceThisProcessLacksIsAnError) {
  write_inputs(2);
  std::string text = slurp(dir / "m.mlir");
  const std::string device = "kiln.device = \"cpu:0\"";
  const std::size_t at = text.find(device);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, device.size(), "kiln.device = \"cpu:3\"");
  write("m3.mlir", text);
  expect_failure("run m3.mlir -w w.safetensors -i x.npy -i s.npy", 2,
                 "the module computes on cpu:3, but this process has 1 CPU device");
  EXPECT_EQ(::setenv("KILN_CPU_DEVICES", "4", 1), 0);
  const Result four = kiln("run m3.mlir -w w.safetensors -i x.npy -i s.npy");
  ::unsetenv("KILN_CPU_DEVICES");
  EXPECT_EXIT_CODE(four, 0);
}

TEST_F(Cli, OutputPathsAndDimNamesAreCheckedBeforeAnyWork) {
  // Each is a usage error at once (a demo or a long bench does not run first and then fail
  // to write), worded as every usage error is.
  write_inputs(2);
  write("plain", "a file, not a directory");
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"bench m.mlir -w w.safetensors --json nothere/b.json",
       "--json: the directory nothere does not exist"},
      {"bench m.mlir -w w.safetensors --profile " + dir.string(), " is a directory"},
      {"run m.mlir -w w.safetensors -i x.npy -i s.npy -o plain/out", "plain is not a directory"},
      {"run m.mlir -w w.safetensors -i x.npy -i s.npy --profile nothere/t.json",
       "--profile: the directory nothere does not exist"},
      {"demo --layers 1 --emit-mlir nothere/m.mlir", "--emit-mlir: the directory nothere"},
      {"print m.mlir -o nothere/m.mlir", "--output: the directory nothere does not exist"},
      {"bench m.mlir -w w.safetensors --dim batchx=4",
       "--dim batchx=4: @main has no dim named 'batchx'; its symbolic dims are batch"},
  };
  // (Refused before it is tried: the sanitizers' operator new would end the process.)
  expect_failure("bench m.mlir -w w.safetensors --dim batch=100000000000 -n 1", 2,
                 "kiln: error: arg0 of @main: a random f32[100000000000, 4] on cpu:0 does not "
                 "fit in memory (Tensor::random: out of memory for f32[100000000000, 4] "
                 "(1600000000000 bytes");
  for (const Case& c : cases)
    EXPECT_EQ(expect_failure(c.args, 1, c.message).out, "") << c.args;  // nothing ran
  // A directory to create, below one that exists: made, and the outputs written there.
  const Result made = kiln("run m.mlir -w w.safetensors -i x.npy -i s.npy -o new/deeper");
  EXPECT_EXIT_CODE(made, 0);
  EXPECT_TRUE(fs::exists(dir / "new" / "deeper" / "output0.npy")) << made.err;
}

TEST_F(Cli, UsageErrorsExitWithCodeOneAndHelpWithZero) {
  write_inputs(2);
  EXPECT_EXIT_CODE(kiln(""), 1);
  expect_failure("frobnicate m.mlir", 1,
                 "kiln: usage error: no subcommand 'frobnicate'; the subcommands are run, bench, "
                 "print, import, dot, demo");
  EXPECT_EXIT_CODE(kiln("run"), 1);  // the model is required
  EXPECT_EXIT_CODE(kiln("run m.mlir --no-such-flag"), 1);
  const Result name = kiln("run m.mlir -w w.safetensors -i x=x.npy");
  EXPECT_EXIT_CODE(name, 1);
  EXPECT_NE(name.err.find("no argument named 'x'; @main takes arg0 (f32[batch, 4] on cpu:0), arg1"),
            std::string::npos)
      << name.err;
  const Result twice = kiln("run m.mlir -w w.safetensors -i 0=x.npy -i arg0=x.npy");
  EXPECT_EXIT_CODE(twice, 1);
  EXPECT_NE(twice.err.find("arg0 is already given"), std::string::npos) << twice.err;
  EXPECT_EXIT_CODE(kiln("demo --dim 10 --heads 3"), 1);
  EXPECT_EXIT_CODE(kiln("bench m.mlir --dim batch"), 1);
  expect_failure("bench m.mlir -w w.safetensors -t -1", 1, "--threads");
  expect_failure("demo -t -2", 1, "--threads");
  for (const char* cmd :
       {"--help", "run --help", "bench --help", "print --help", "dot --help", "demo --help"}) {
    const Result help = kiln(cmd);
    EXPECT_EXIT_CODE(help, 0);
    EXPECT_NE(help.out.find("Usage: kiln"), std::string::npos) << cmd;
    EXPECT_NE(help.out.find("Exit codes"), std::string::npos) << cmd;
  }
}

}  // namespace
}  // namespace kiln
