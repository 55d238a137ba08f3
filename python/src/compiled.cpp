// CompiledCallable over Python trees and arrays (the GIL released while it runs), weights
// from dicts and safetensors files, ONNX import, and the call-overhead benchmark's C++ side.

#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/core/error.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/onnx/import.hpp"
#include "kiln/runtime/device_context.hpp"
#include "staged.hpp"

namespace kiln::python {
namespace {

std::atomic<int> g_last_call_held_gil{-1};  // see _last_call_held_gil

struct PyCompiled {
  std::unique_ptr<CompiledCallable> compiled;
  PyTree in_tree;
  PyTree out_tree;
};

/// A C++ tree of tensors and containers (an imported model's) as a Python tree.
PyNode node_of(const TreeDef& def) {
  PyNode node;
  node.kind = def.kind();
  node.keys = def.keys();
  if (def.kind() == TreeDef::Kind::static_value || def.kind() == TreeDef::Kind::record)
    throw UserError("kiln: a tree with " + def.str() + " has no Python counterpart");
  for (const TreeDef& child : def.children()) node.children.push_back(node_of(child));
  return node;
}
PyTree tree_of(const TreeDef& def) { return PyTree{node_of(def), def}; }

std::map<std::string, Tensor> weights_from(nb::handle weights) {
  std::map<std::string, Tensor> out;
  if (weights.is_none()) return out;
  if (!PyDict_Check(weights.ptr()))
    throw UserError(
        "kiln.CompiledCallable: weights are a dict of arrays by full name, or the "
        "path of a .safetensors file; got a " +
        qualified_name(weights.type()));
  for (auto [name, value] : nb::borrow<nb::dict>(weights)) {
    const std::string key = nb::cast<std::string>(name);
    out.emplace(key, tensor_from_object(value, "weight '" + key + "'"));
  }
  return out;
}

CompileOptions options_from(std::optional<Device> device, int threads,
                            std::optional<std::vector<std::string>> passes, bool replay_graph,
                            bool prepack_weights, bool fuse_epilogues, const std::string& precision,
                            bool winograd_convs) {
  CompileOptions options;
  if (device || threads != 0)
    options.context = std::make_shared<DeviceContext>(device.value_or(Device::cpu()),
                                                      DeviceContextOptions{threads});
  if (passes) options.passes = *passes;
  options.replay_graph = replay_graph;
  options.prepack_weights = prepack_weights;
  options.fuse_epilogues = fuse_epilogues;
  options.winograd_convs = winograd_convs;
  if (precision == "bf16" || precision == "bfloat16")
    options.matmul_precision = MatmulPrecision::bf16;
  else if (precision != "f32" && precision != "float32")
    throw UserError("kiln.CompiledCallable: matmul_precision '" + precision +
                    "' is neither 'f32' nor 'bf16'");
  return options;
}

/// The call's arguments as the compiled graph's inputs, checked against the staged tree.
std::vector<Tensor> call_inputs(const PyCompiled& c, nb::handle args) {
  std::vector<nb::object> leaves;
  leaves.reserve(c.in_tree.def.num_leaves());
  if (!match_tree(c.in_tree, args, leaves)) {
    const PyTree tree = flatten(args, leaves);
    if (!(tree.def == c.in_tree.def))
      throw UserError("kiln.CompiledCallable: the arguments differ from the staged ones " +
                      c.in_tree.def.difference(tree.def) + " (staged " + c.in_tree.def.str() +
                      ", called with " + tree.def.str() + ")");
  }
  std::vector<Tensor> inputs;
  inputs.reserve(leaves.size());
  const std::vector<TensorLayout>& layouts = c.compiled->staged().in_layouts();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    // An array for a virtual CPU device (a shard) is on that device: they share host memory.
    const Device device =
        i < layouts.size() && layouts[i].device.is_cpu() ? layouts[i].device : Device::cpu();
    try {
      inputs.push_back(tensor_from_object(leaves[i], "argument", device));
    } catch (const UserError& e) {
      throw UserError("kiln.CompiledCallable: argument " + c.in_tree.def.leaf_paths()[i] +
                      std::string(e.what()).substr(8));
    }
  }
  return inputs;
}

nb::object call(PyCompiled& c, nb::args args) {
  const std::vector<Tensor> inputs = call_inputs(c, args);
  std::vector<Tensor> outputs;
  {
    nb::gil_scoped_release release;
    g_last_call_held_gil.store(PyGILState_Check(), std::memory_order_relaxed);
    outputs = c.compiled->run(inputs);
  }
  std::vector<nb::object> arrays;
  arrays.reserve(outputs.size());
  for (const Tensor& t : outputs) arrays.push_back(tensor_to_numpy(t));
  return unflatten(c.out_tree, arrays);
}

}  // namespace

void register_compiled(nb::module_& m) {
  nb::class_<PyCompiled>(m, "CompiledCallable", nb::type_slots(tree_gc_slots<PyCompiled>()),
                         "A StagedGraph compiled for a device with its weights bound, called "
                         "like the staged function (arrays in, NumPy arrays out).")
      .def(
          "__init__",
          [](PyCompiled* self, const PyStaged& staged, nb::handle weights,
             std::optional<Device> device, int threads,
             std::optional<std::vector<std::string>> passes, bool replay_graph,
             bool prepack_weights, bool fuse_epilogues, const std::string& matmul_precision,
             bool winograd_convs) {
            CompileOptions options =
                options_from(device, threads, std::move(passes), replay_graph, prepack_weights,
                             fuse_epilogues, matmul_precision, winograd_convs);
            std::unique_ptr<CompiledCallable> compiled;
            if (PyUnicode_Check(weights.ptr()) || nb::hasattr(weights, "__fspath__")) {
              const std::string path =
                  nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(weights));
              nb::gil_scoped_release release;
              compiled = std::make_unique<CompiledCallable>(
                  staged.staged, SafetensorsFile::open(path), std::move(options));
            } else {
              std::map<std::string, Tensor> bound = weights_from(weights);
              nb::gil_scoped_release release;
              compiled = std::make_unique<CompiledCallable>(staged.staged, std::move(bound),
                                                            std::move(options));
            }
            new (self) PyCompiled{std::move(compiled), staged.in_tree, staged.out_tree};
          },
          nb::arg("staged"), nb::arg("weights") = nb::none(), nb::kw_only(),
          nb::arg("device") = nb::none(), nb::arg("threads") = 0, nb::arg("passes") = nb::none(),
          nb::arg("replay_graph") = true, nb::arg("prepack_weights") = true,
          nb::arg("fuse_epilogues") = true, nb::arg("matmul_precision") = "f32",
          nb::arg("winograd_convs") = true,
          "weights: a dict of arrays by full name (borrowed, read in place) or a .safetensors "
          "path; device/threads: where it runs (default: every core of cpu:0); "
          "matmul_precision: 'f32' or 'bf16'; winograd_convs: f32 3x3 stride-1 convolutions "
          "by Winograd's algorithm where the CPU has a kernel for it (False: directly).")
      .def("__call__", &call,
           "Calls with the staged function's arguments: arrays (or "
           "kiln.Tensor) at the tensor leaves, the staged static values "
           "elsewhere. Returns NumPy arrays in the staged output's tree.")
      .def_prop_ro("in_tree", [](const PyCompiled& c) { return c.in_tree; })
      .def_prop_ro("out_tree", [](const PyCompiled& c) { return c.out_tree; })
      .def(
          "optimized", [](const PyCompiled& c) { return c.compiled->optimized().str(); },
          "The MLIR of the module after the passes.")
      .def(
          "plan_dot",
          [](PyCompiled& c, nb::args args) { return c.compiled->plan_dot(call_inputs(c, args)); },
          "Graphviz DOT of the device graph a call with these arguments replays.")
      .def(
          "stats",
          [](const PyCompiled& c) {
            using Stats = CompiledCallable::Stats;
            static constexpr std::pair<const char*, std::size_t Stats::*> kCounts[] = {
                {"bodies_compiled", &Stats::bodies_compiled},
                {"plans", &Stats::plans},
                {"graph_builds", &Stats::graph_builds},
                {"replays", &Stats::replays},
                {"peak_arena_bytes", &Stats::peak_arena_bytes},
                {"arena_bytes", &Stats::arena_bytes},
                {"launches", &Stats::launches},
                {"epilogues", &Stats::epilogues},
                {"attentions", &Stats::attentions},
                {"expansions", &Stats::expansions},
                {"scaled_inputs", &Stats::scaled_inputs},
                {"views", &Stats::views},
                {"hoisted", &Stats::hoisted},
                {"packed_matmuls", &Stats::packed_matmuls},
                {"packed_weight_bytes", &Stats::packed_weight_bytes},
                {"skinny_matmuls", &Stats::skinny_matmuls},
                {"epilogues_in_gemm", &Stats::epilogues_in_gemm},
                {"winograd_convs", &Stats::winograd_convs},
                {"bf16_matmuls", &Stats::bf16_matmuls},
                {"bf16_handoffs", &Stats::bf16_handoffs}};
            const Stats s = c.compiled->stats();
            nb::dict d;
            for (const auto& [key, field] : kCounts) d[key] = s.*field;
            d["isa"] = std::string(name(s.isa));
            return d;
          },
          "What compiling and calling did so far (CompiledCallable::Stats).");

  m.def(
      "_last_call_held_gil", [] { return g_last_call_held_gil.load(); },
      "Internal (tests): 1 if the last compiled call ran its kernels holding the GIL, 0 if "
      "not, -1 before any call.");
  m.def(
      "_bench_cpp_call",
      [](PyCompiled& c, nb::tuple args, double gap_ns) {
        // The same checked call from C++ (CompiledCallable::run on the same inputs), timed
        // here: the reference the Python call's overhead is measured against. \p gap_ns of
        // busy waiting between calls (not timed) reproduces the pace of a Python caller,
        // so that both see the runtime's threads in the same state.
        const std::vector<Tensor> inputs = call_inputs(c, args);
        const int n = 20000;
        using Clock = std::chrono::steady_clock;
        nb::gil_scoped_release release;
        const auto pause = [&] {
          const auto until = Clock::now() + std::chrono::duration<double, std::nano>(gap_ns);
          while (gap_ns > 0 && Clock::now() < until) {
          }
        };
        for (int i = 0; i < 1000; ++i) (void)c.compiled->run(inputs);
        std::chrono::duration<double, std::nano> took{0};
        for (int i = 0; i < n; ++i) {
          pause();
          const auto start = Clock::now();
          (void)c.compiled->run(inputs);
          took += Clock::now() - start;
        }
        return took.count() / n;
      },
      nb::arg("compiled"), nb::arg("args"), nb::arg("gap_ns") = 0.0,
      "Internal (benchmark): ns per C++ checked call of the callable with these arguments.");

  nb::class_<OnnxModel>(m, "OnnxModel", "An ONNX model imported as a staged graph and weights.")
      .def_prop_ro(
          "graph",
          [](const OnnxModel& model) {
            // Called as ONNX Runtime's sessions are: the inputs positionally, in the order
            // of input_names; the outputs a list in the order of output_names.
            const auto flat = [](TreeDef::Kind kind, std::size_t n) {
              return TreeDef::node(kind, kind == TreeDef::Kind::tuple ? "tuple" : "list", {},
                                   std::vector<TreeDef>(n, TreeDef::tensor()));
            };
            return PyStaged{model.graph,
                            tree_of(flat(TreeDef::Kind::tuple, model.input_names.size())),
                            tree_of(flat(TreeDef::Kind::list, model.output_names.size()))};
          },
          "The staged graph: call its CompiledCallable with the inputs positionally (in the "
          "order of input_names); it returns a list of the outputs (output_names).")
      .def_ro("weights", &OnnxModel::weights)
      .def_ro("input_names", &OnnxModel::input_names)
      .def_ro("output_names", &OnnxModel::output_names)
      .def_ro("opset", &OnnxModel::opset);
  m.def(
      "import_onnx",
      [](const std::string& path, std::map<std::string, std::int64_t> dims,
         const std::map<std::string, nb::object>& constant_inputs) {
        OnnxImportOptions options;
        options.dims = std::move(dims);
        for (const auto& [name, value] : constant_inputs)
          options.constant_inputs.emplace(
              name, tensor_from_object(value, "constant input '" + name + "'"));
        nb::gil_scoped_release release;
        return import_onnx(path, options);
      },
      nb::arg("path"), nb::arg("dims") = std::map<std::string, std::int64_t>{},
      nb::arg("constant_inputs") = std::map<std::string, nb::object>{},
      "Reads an ONNX model: kiln.CompiledCallable(model.graph, model.weights) runs it, taking "
      "the inputs in the order of model.input_names.");
  m.def(
      "onnx_inputs",
      [](const std::string& path) {
        nb::list out;
        for (const OnnxInput& in : onnx_inputs(path))
          out.append(nb::make_tuple(in.name, in.layout));
        return out;
      },
      nb::arg("path"), "The (name, TensorLayout) of each input of an ONNX model.");
  m.def("onnx_supported_ops", &onnx_supported_ops);
}

}  // namespace kiln::python
