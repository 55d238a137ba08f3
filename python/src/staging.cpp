// stage, StagedGraph, subgraphs, weights and name scopes, kiln.nn, and sharding: the C++
// staging API driven by Python callables and pytrees.

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <any>
#include <memory>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/stage/nn.hpp"
#include "kiln/stage/sharding.hpp"
#include "kiln/stage/stage.hpp"
#include "staged.hpp"

namespace kiln::python {
namespace {

/// The leaves of a staged function's arguments as tensors: layouts become placeholders,
/// arrays concrete tensors (constants).
std::vector<Tensor> input_tensors(const std::vector<nb::object>& leaves, const TreeDef& tree) {
  std::vector<Tensor> out;
  out.reserve(leaves.size());
  const std::vector<std::string> paths = tree.leaf_paths();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (nb::isinstance<TensorLayout>(leaves[i]))
      out.emplace_back(nb::cast<TensorLayout>(leaves[i]));
    else if (nb::isinstance<Tensor>(leaves[i]))
      out.push_back(nb::cast<Tensor>(leaves[i]));  // a placeholder (or data: a constant input)
    else
      out.push_back(tensor_from_object(leaves[i], "argument " + paths[i]));
  }
  return out;
}

/// A function's result leaves, which must be tensors of the function being traced.
std::vector<Tensor> output_tensors(const std::vector<nb::object>& leaves, const TreeDef& tree,
                                   const char* who) {
  std::vector<Tensor> out;
  out.reserve(leaves.size());
  const std::vector<std::string> paths = tree.leaf_paths();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!nb::isinstance<Tensor>(leaves[i]))
      throw UserError(std::string(who) + ": the result at " +
                      (paths[i].empty() ? "the top" : paths[i]) + " is a " +
                      qualified_name(leaves[i].type()) +
                      "; return kiln.Tensor values computed from the inputs (an array would be "
                      "a constant: wrap it with kiln.asarray and use it in an op)");
    out.push_back(nb::cast<Tensor>(leaves[i]));
  }
  return out;
}

std::vector<nb::object> as_objects(const std::vector<Tensor>& tensors) {
  std::vector<nb::object> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(nb::cast(t));
  return out;
}

/// Garbage-collector support for the types that hold a Python callable (a decorated
/// function's module holds the wrapper, which holds the function, whose globals hold the
/// module: a cycle only the collector can free).
template <class T>
int traverse_fn(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Py_VISIT(nb::inst_ptr<T>(self)->fn.ptr());
  return 0;
}
template <class T>
int clear_fn(PyObject* self) {
  nb::inst_ptr<T>(self)->fn.reset();
  return 0;
}
template <class T>
PyType_Slot* gc_slots() {
  static PyType_Slot slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(&traverse_fn<T>)},
                                {Py_tp_clear, reinterpret_cast<void*>(&clear_fn<T>)},
                                {0, nullptr}};
  return slots;
}

nb::object checked_fn(const nb::object& fn) {
  if (!fn.is_valid()) throw UserError("kiln: the function of this stager or subgraph was cleared");
  return fn;
}

struct Stager {
  nb::object fn;
  StageOptions options;
  nb::object cache;  // keeps a SubgraphCache alive while this stager lives
};

PyStaged stage_call(const Stager& stager, nb::args args) {
  std::vector<nb::object> leaf_objects;
  PyTree in = flatten(args, leaf_objects);
  const std::vector<Tensor> in_leaves = input_tensors(leaf_objects, in.def);
  detail::Session session(stager.options);
  const std::vector<Tensor> traced = session.add_inputs(in_leaves, in.def);
  const nb::object traced_args = unflatten(in, as_objects(traced));
  const nb::object result = checked_fn(stager.fn)(*traced_args);
  std::vector<nb::object> out_objects;
  PyTree out = flatten(result, out_objects);
  const std::vector<Tensor> out_leaves = output_tensors(out_objects, out.def, "kiln.stage");
  StagedGraph staged = session.finish(in.def, in_leaves, out.def, out_leaves);
  return PyStaged{std::move(staged), std::move(in), std::move(out)};
}

struct PySubgraph {
  nb::object fn;
  SubgraphOptions options;
  std::uint64_t instance = detail::next_subgraph_instance();
};

nb::object subgraph_call(const PySubgraph& s, nb::args args) {
  const Loc where = caller_location();
  if (!detail::subgraphs_enabled()) {
    if (s.options.prefix.empty()) return checked_fn(s.fn)(*args);
    name_scope scope(s.options.prefix);
    return checked_fn(s.fn)(*args);
  }
  std::vector<nb::object> leaf_objects;
  PyTree in = flatten(args, leaf_objects);
  detail::SubgraphCall call{&typeid(PySubgraph), s.instance, &s.options, in.def, {}, where};
  for (std::size_t i = 0; i < leaf_objects.size(); ++i)
    call.in_leaves.push_back(nb::isinstance<Tensor>(leaf_objects[i])
                                 ? nb::cast<Tensor>(leaf_objects[i])
                                 : tensor_from_object(leaf_objects[i], "subgraph argument"));
  const auto trace = [&](const std::vector<Tensor>& body_inputs, std::any& prototype) {
    const nb::object result = checked_fn(s.fn)(*unflatten(in, as_objects(body_inputs)));
    std::vector<nb::object> out_objects;
    auto out = std::make_shared<PyTree>(flatten(result, out_objects));
    std::vector<Tensor> out_leaves = output_tensors(out_objects, out->def, "kiln.as_subgraph");
    TreeDef def = out->def;
    prototype = std::shared_ptr<const PyTree>(std::move(out));
    return std::make_pair(std::move(out_leaves), std::move(def));
  };
  const detail::SubgraphResult called = detail::call_subgraph(std::move(call), trace);
  const auto& tree = std::any_cast<const std::shared_ptr<const PyTree>&>(*called.prototype);
  return unflatten(*tree, as_objects(called.leaves));
}

struct PyNameScope {
  std::string name;
  std::unique_ptr<name_scope> scope;
};

TensorLayout layout_of(nb::handle layout_or_dtype, nb::handle shape, Device device) {
  if (nb::isinstance<TensorLayout>(layout_or_dtype)) return nb::cast<TensorLayout>(layout_or_dtype);
  if (shape.is_none()) throw UserError("kiln.weight: pass a TensorLayout, or a DType and a shape");
  return TensorLayout(nb::cast<DType>(layout_or_dtype), shape_from_python(shape), device);
}

template <class Layer>
void bind_layer_call(nb::class_<Layer>& c) {
  c.def(
      "__call__", [](const Layer& layer, const Tensor& x) { return layer(x, caller_location()); },
      nb::arg("x"));
}

void register_nn(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("nn",
                                       "kiln.nn: layers that declare their weights by "
                                       "dotted name while staging.");
  nb::class_<nn::Linear> linear(m, "Linear",
                                "y = x @ weight + bias; weight [in, out] (layout='kiln') or "
                                "[out, in] as PyTorch stores it (layout='torch').");
  linear
      .def(
          "__init__",
          [](nn::Linear* self, std::int64_t in, std::int64_t out, bool bias, std::string name,
             DType dtype, const std::string& layout) {
            if (layout != "kiln" && layout != "torch")
              throw UserError("kiln.nn.Linear: layout '" + layout +
                              "' is neither 'kiln' (weight [in, out]) nor 'torch' (weight "
                              "[out, in], PyTorch's nn.Linear)");
            new (self) nn::Linear{in, out, bias, std::move(name), dtype, layout == "torch"};
          },
          nb::arg("in_features"), nb::arg("out_features"), nb::arg("bias") = true,
          nb::arg("name") = "", nb::arg("dtype") = DType::f32, nb::arg("layout") = "kiln")
      .def_rw("in_features", &nn::Linear::in)
      .def_rw("out_features", &nn::Linear::out)
      .def_rw("bias", &nn::Linear::bias)
      .def_rw("name", &nn::Linear::name)
      .def_rw("dtype", &nn::Linear::dtype)
      .def_prop_ro("layout", [](const nn::Linear& l) { return l.torch_layout ? "torch" : "kiln"; });
  bind_layer_call(linear);

  nb::class_<nn::Embedding> embedding(m, "Embedding", "Rows of weight [vocab, dim] by ids.");
  embedding
      .def(
          "__init__",
          [](nn::Embedding* self, std::int64_t vocab, std::int64_t dim, std::string name, DType d) {
            new (self) nn::Embedding{vocab, dim, std::move(name), d};
          },
          nb::arg("vocab"), nb::arg("dim"), nb::arg("name") = "", nb::arg("dtype") = DType::f32)
      .def_rw("vocab", &nn::Embedding::vocab)
      .def_rw("dim", &nn::Embedding::dim)
      .def_rw("name", &nn::Embedding::name);
  bind_layer_call(embedding);

  nb::class_<nn::LayerNorm> layer_norm(m, "LayerNorm", "Layer norm over the last axis.");
  layer_norm
      .def(
          "__init__",
          [](nn::LayerNorm* self, std::int64_t dim, double eps, std::string name, DType d) {
            new (self) nn::LayerNorm{dim, eps, std::move(name), d};
          },
          nb::arg("dim"), nb::arg("eps") = 1e-5, nb::arg("name") = "",
          nb::arg("dtype") = DType::f32)
      .def_rw("dim", &nn::LayerNorm::dim)
      .def_rw("eps", &nn::LayerNorm::eps)
      .def_rw("name", &nn::LayerNorm::name);
  bind_layer_call(layer_norm);

  nb::class_<nn::RMSNorm> rms_norm(m, "RMSNorm", "RMS norm over the last axis.");
  rms_norm
      .def(
          "__init__",
          [](nn::RMSNorm* self, std::int64_t dim, double eps, std::string name, DType d) {
            new (self) nn::RMSNorm{dim, eps, std::move(name), d};
          },
          nb::arg("dim"), nb::arg("eps") = 1e-6, nb::arg("name") = "",
          nb::arg("dtype") = DType::f32)
      .def_rw("dim", &nn::RMSNorm::dim)
      .def_rw("eps", &nn::RMSNorm::eps)
      .def_rw("name", &nn::RMSNorm::name);
  bind_layer_call(rms_norm);

  nb::class_<nn::MLP> mlp(m, "MLP", "w2(gelu(w1(x))): dim -> hidden -> dim.");
  mlp.def(
         "__init__",
         [](nn::MLP* self, std::int64_t dim, std::int64_t hidden, std::string name, DType d,
            std::string approximate) {
           new (self) nn::MLP{dim, hidden, std::move(name), d, std::move(approximate)};
         },
         nb::arg("dim"), nb::arg("hidden"), nb::arg("name") = "mlp", nb::arg("dtype") = DType::f32,
         nb::arg("approximate") = "none")
      .def_rw("dim", &nn::MLP::dim)
      .def_rw("hidden", &nn::MLP::hidden)
      .def_rw("name", &nn::MLP::name);
  bind_layer_call(mlp);

  nb::class_<nn::MultiHeadAttention> mha(m, "MultiHeadAttention",
                                         "Self-attention over x [batch, seq, dim].");
  mha.def(
         "__init__",
         [](nn::MultiHeadAttention* self, std::int64_t dim, std::int64_t heads, std::string name,
            DType d) {
           new (self) nn::MultiHeadAttention{dim, heads, std::move(name), d};
         },
         nb::arg("dim"), nb::arg("heads"), nb::arg("name") = "attn", nb::arg("dtype") = DType::f32)
      .def_rw("dim", &nn::MultiHeadAttention::dim)
      .def_rw("heads", &nn::MultiHeadAttention::heads)
      .def_rw("name", &nn::MultiHeadAttention::name);
  bind_layer_call(mha);

  nb::class_<nn::TransformerBlock> block(m, "TransformerBlock",
                                         "Pre-norm transformer block (GPT-2 style).");
  block
      .def(
          "__init__",
          [](nn::TransformerBlock* self, std::int64_t dim, std::int64_t heads, std::int64_t hidden,
             std::string name, DType d, std::string gelu_approximate) {
            new (self) nn::TransformerBlock{
                dim, heads, hidden, std::move(name), d, std::move(gelu_approximate)};
          },
          nb::arg("dim"), nb::arg("heads"), nb::arg("hidden"), nb::arg("name") = "",
          nb::arg("dtype") = DType::f32, nb::arg("gelu_approximate") = "tanh")
      .def_rw("dim", &nn::TransformerBlock::dim)
      .def_rw("heads", &nn::TransformerBlock::heads)
      .def_rw("hidden", &nn::TransformerBlock::hidden)
      .def_rw("name", &nn::TransformerBlock::name);
  bind_layer_call(block);
}

void register_sharding(nb::module_& m) {
  m.def("set_cpu_device_count", &set_cpu_device_count, nb::arg("count"),
        "Exposes count virtual CPU devices, cpu:0 ... cpu:count-1, sharing this machine's "
        "cores (for sharded callables on one machine).");
  m.def("cpu_device_count", &cpu_device_count);

  nb::class_<DeviceMesh>(m, "DeviceMesh", "Devices on named axes, row-major.")
      .def(
          "__init__",
          [](DeviceMesh* self, nb::handle axes, std::vector<Device> devices) {
            std::vector<std::pair<std::string, int>> list;
            if (PyDict_Check(axes.ptr())) {
              for (auto [k, v] : nb::borrow<nb::dict>(axes))
                list.emplace_back(nb::cast<std::string>(k), nb::cast<int>(v));
            } else {
              list = nb::cast<std::vector<std::pair<std::string, int>>>(axes);
            }
            new (self) DeviceMesh(std::move(list), std::move(devices));
          },
          nb::arg("axes"), nb::arg("devices") = std::vector<Device>{},
          "axes: {'dp': 2, 'tp': 2} or [('dp', 2), ('tp', 2)]; devices: cpu:0... by default.")
      .def_prop_ro("size", &DeviceMesh::size)
      .def_prop_ro("axes", &DeviceMesh::axes)
      .def_prop_ro("devices", &DeviceMesh::devices)
      .def("axis", &DeviceMesh::axis, nb::arg("name"))
      .def("coords", &DeviceMesh::coords, nb::arg("index"))
      .def("group", &DeviceMesh::group, nb::arg("index"), nb::arg("axis"))
      .def("__eq__", [](const DeviceMesh& a, const DeviceMesh& b) { return a == b; })
      .def("__str__", &DeviceMesh::str)
      .def("__repr__", &DeviceMesh::str);
  nb::class_<Replicated>(m, "Replicated", "Every device along the mesh axis holds all of it.")
      .def(nb::init<>())
      .def("__eq__", [](const Replicated&, const Replicated&) { return true; })
      .def("__repr__", [](const Replicated& p) { return to_string(Placement(p)); });
  nb::class_<Sharded>(m, "Sharded", "The devices along the mesh axis split tensor axis `axis`.")
      .def(nb::init<std::int64_t>(), nb::arg("axis"))
      .def_rw("axis", &Sharded::axis)
      .def("__eq__", [](const Sharded& a, const Sharded& b) { return a == b; })
      .def("__repr__", [](const Sharded& p) { return to_string(Placement(p)); });
  nb::class_<Partial>(m, "Partial", "Each device holds a summand: the value is their sum.")
      .def(nb::init<>())
      .def("__eq__", [](const Partial&, const Partial&) { return true; })
      .def("__repr__", [](const Partial& p) { return to_string(Placement(p)); });

  nb::class_<ShardedLayout>(m, "ShardedLayout",
                            "A global tensor over a mesh: one placement "
                            "per mesh axis.")
      .def(
          "__init__",
          [](ShardedLayout* self, DType dtype, nb::handle shape, DeviceMesh mesh,
             std::vector<Placement> placements) {
            new (self) ShardedLayout(dtype, shape_from_python(shape), std::move(mesh),
                                     std::move(placements));
          },
          nb::arg("dtype"), nb::arg("shape"), nb::arg("mesh"), nb::arg("placements"))
      .def_prop_ro("dtype", &ShardedLayout::dtype)
      .def_prop_ro("shape", [](const ShardedLayout& l) { return shape_to_python(l.shape()); })
      .def_prop_ro("mesh", &ShardedLayout::mesh)
      .def_prop_ro("placements", &ShardedLayout::placements)
      .def("shard", &ShardedLayout::shard, nb::arg("index"), "Device index's piece's layout.")
      .def("offsets", &ShardedLayout::offsets, nb::arg("index"))
      .def("shards", &ShardedLayout::shards,
           "Every device's piece as a placeholder: what a staged function takes for it.")
      .def("with_placement", &ShardedLayout::with, nb::arg("mesh_axis"), nb::arg("placement"))
      .def("__eq__", [](const ShardedLayout& a, const ShardedLayout& b) { return a == b; })
      .def("__str__", &ShardedLayout::str)
      .def("__repr__", &ShardedLayout::str);

  nb::class_<ShardedTensor>(m, "ShardedTensor", "The shards of one global tensor, while staging.")
      .def(nb::init<std::vector<Tensor>, ShardedLayout>(), nb::arg("shards"), nb::arg("layout"))
      .def_prop_ro("shards", &ShardedTensor::shards)
      .def_prop_ro("layout", &ShardedTensor::layout)
      .def("__add__",
           [](const ShardedTensor& a, const ShardedTensor& b) {
             return Located<const ShardedTensor&>(a, caller_location()) + b;
           })
      .def("__sub__",
           [](const ShardedTensor& a, const ShardedTensor& b) {
             return Located<const ShardedTensor&>(a, caller_location()) - b;
           })
      .def("__mul__",
           [](const ShardedTensor& a, const ShardedTensor& b) {
             return Located<const ShardedTensor&>(a, caller_location()) * b;
           })
      .def("__mul__",
           [](const ShardedTensor& a, double b) {
             return Located<const ShardedTensor&>(a, caller_location()) * b;
           })
      .def("__matmul__",
           [](const ShardedTensor& x, const ShardedTensor& w) {
             return kiln::matmul(x, w, caller_location());
           })
      .def("relu", [](const ShardedTensor& x) { return kiln::relu(x, caller_location()); })
      .def("gelu", [](const ShardedTensor& x) { return kiln::gelu(x, caller_location()); })
      .def(
          "reshape",
          [](const ShardedTensor& x, nb::handle shape) {
            return kiln::reshape(x, shape_from_python(shape), caller_location());
          },
          nb::arg("shape"))
      .def(
          "sum",
          [](const ShardedTensor& x, std::int64_t axis) {
            return kiln::sum(x, axis, caller_location());
          },
          nb::arg("axis"));
  m.def(
      "sharded_weight",
      [](const std::string& name, const ShardedLayout& layout) {
        return kiln::sharded_weight(name, layout, caller_location());
      },
      nb::arg("name"), nb::arg("layout"), "A weight read as shards: device i reads name.shard<i>.");
  m.def(
      "redistribute",
      [](const ShardedTensor& x, const std::vector<Placement>& placements) {
        return kiln::redistribute(x, placements, caller_location());
      },
      nb::arg("x"), nb::arg("placements"), "x with new placements (the collectives it needs).");
  m.def(
      "shard_tensor",
      [](nb::handle global, const ShardedLayout& layout) {
        return kiln::shard_tensor(tensor_from_object(global, "kiln.shard_tensor"), layout);
      },
      nb::arg("array"), nb::arg("layout"), "An array cut into the layout's pieces, in mesh order.");
  m.def(
      "unshard",
      [](const std::vector<nb::object>& shards, const ShardedLayout& layout) {
        std::vector<Tensor> pieces;
        for (const nb::object& s : shards) pieces.push_back(tensor_from_object(s, "kiln.unshard"));
        return tensor_to_numpy(kiln::unshard(pieces, layout));
      },
      nb::arg("shards"), nb::arg("layout"), "The global array from its pieces.");
  m.def(
      "shard_weights",
      [](const std::string& name, nb::handle global, const ShardedLayout& layout) {
        return kiln::shard_weights(name, tensor_from_object(global, "kiln.shard_weights"), layout);
      },
      nb::arg("name"), nb::arg("array"), nb::arg("layout"),
      "{name.shard<i>: piece i}: the weights for sharded_weight.");
}

}  // namespace

void register_staging(nb::module_& m) {
  nb::class_<SubgraphCache>(m, "SubgraphCache",
                            "Traced subgraph bodies shared across stage calls (the seed's "
                            "subgraph_cache).")
      .def(nb::init<>())
      .def("__len__", &SubgraphCache::size)
      .def("clear", &SubgraphCache::clear);

  nb::class_<ir::Module>(m, "Module", "A staged module: the entry graph and its subgraphs.")
      .def_prop_ro("entry", [](const ir::Module& mod) { return mod.entry().name(); })
      .def_prop_ro("graph_names",
                   [](const ir::Module& mod) {
                     std::vector<std::string> names;
                     for (std::size_t i = 0; i < mod.num_graphs(); ++i)
                       names.push_back(mod.graph(i).name());
                     return names;
                   })
      .def("num_ops",
           [](const ir::Module& mod, const std::string& graph) {
             const ir::Graph* g = mod.find(graph);
             if (g == nullptr) throw UserError("kiln.Module: no graph named '" + graph + "'");
             return g->num_ops();
           })
      .def("__str__", &ir::Module::str);

  nb::class_<PyStaged>(m, "StagedGraph", nb::type_slots(tree_gc_slots<PyStaged>()),
                       "A traced graph ready to print or compile.")
      .def_prop_ro(
          "graph", [](const PyStaged& s) { return &s.staged.graph(); },
          nb::rv_policy::reference_internal)
      .def_prop_ro("in_layouts", [](const PyStaged& s) { return s.staged.in_layouts(); })
      .def_prop_ro("out_layouts", [](const PyStaged& s) { return s.staged.out_layouts(); })
      .def_prop_ro("in_tree", [](const PyStaged& s) { return s.in_tree; })
      .def_prop_ro("out_tree", [](const PyStaged& s) { return s.out_tree; })
      .def_prop_ro("signal_device_ids",
                   [](const PyStaged& s) {
                     nb::list ids;
                     for (int id : s.staged.signal_device_ids()) ids.append(id);
                     return nb::tuple(ids);
                   })
      .def_prop_ro(
          "signal_buffer_index", [](const PyStaged&) { return nb::none(); },
          "Always None: kiln's compiled callables own their signal buffers.")
      .def("__str__", [](const PyStaged& s) { return s.staged.str(); })
      .def("__repr__", [](const PyStaged& s) {
        return "StagedGraph(" + s.in_tree.def.str() + " -> " + s.out_tree.def.str() + ")";
      });

  nb::class_<Stager>(m, "Stager", "What kiln.stage(fn) returns: call it with the inputs' layouts.",
                     nb::type_slots(gc_slots<Stager>()))
      .def("__call__", &stage_call);
  m.def(
      "stage",
      [](nb::object fn, const std::string& name, const std::string& prefix, bool subgraphs,
         nb::object subgraph_cache) {
        StageOptions options;
        options.name = name;
        options.prefix = prefix;
        options.subgraphs = subgraphs;
        if (!subgraph_cache.is_none())
          options.subgraph_cache = nb::cast<SubgraphCache*>(subgraph_cache);
        return Stager{std::move(fn), std::move(options), std::move(subgraph_cache)};
      },
      nb::arg("fn"), nb::kw_only(), nb::arg("name") = "main", nb::arg("prefix") = "",
      nb::arg("subgraphs") = true, nb::arg("subgraph_cache") = nb::none(),
      "A stager of fn: call it with one value per parameter, tensors as TensorLayout "
      "(placeholders), other values static.");

  nb::class_<PySubgraph>(m, "Subgraph",
                         "A callable traced once per distinct key into a "
                         "shared subgraph body, called at every call site.",
                         nb::type_slots(gc_slots<PySubgraph>()))
      .def(
          "__init__",
          [](PySubgraph* self, nb::object fn, std::string name, std::string prefix) {
            new (self)
                PySubgraph{std::move(fn), SubgraphOptions{std::move(name), std::move(prefix)}};
          },
          nb::arg("fn"), nb::arg("name") = "", nb::arg("prefix") = "")
      .def_prop_ro("name", [](const PySubgraph& s) { return s.options.name; })
      .def_prop_ro("prefix", [](const PySubgraph& s) { return s.options.prefix; })
      .def_prop_ro("fn", [](const PySubgraph& s) { return s.fn; })
      .def("__call__", &subgraph_call);

  m.def(
      "weight",
      [](const std::string& name, nb::handle layout, nb::handle shape, Device device) {
        return kiln::weight(name, layout_of(layout, shape, device), caller_location());
      },
      nb::arg("name"), nb::arg("layout"), nb::arg("shape") = nb::none(),
      nb::arg("device") = Device::cpu(),
      "A named external weight (relative to the current name scope): weight('w', layout) or "
      "weight('w', DType.float32, [4, 4]).");

  nb::class_<PyNameScope>(m, "name_scope", "Prefixes the names of weights declared inside it.")
      .def(nb::init<std::string>(), nb::arg("name"))
      .def(
          "__enter__",
          [](PyNameScope& s) -> PyNameScope& {
            s.scope = std::make_unique<name_scope>(s.name);
            return s;
          },
          nb::rv_policy::reference)
      .def("__exit__", [](PyNameScope& s, nb::args) { s.scope.reset(); });

  register_nn(m);
  register_sharding(m);
}

}  // namespace kiln::python
