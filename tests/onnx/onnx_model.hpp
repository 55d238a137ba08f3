#pragma once
// Test helper: ONNX models built with ONNX's protobuf API, imported from their bytes.

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "kiln/onnx/import.hpp"

namespace kiln_test {

using Dims = std::vector<std::variant<std::int64_t, std::string>>;

/// An ONNX model under construction.
struct Model {
  onnx::ModelProto proto;
  explicit Model(std::int64_t opset = 17) {
    proto.set_ir_version(8);
    auto* o = proto.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
  }
  onnx::GraphProto& graph() { return *proto.mutable_graph(); }
  static void set_type(onnx::ValueInfoProto* v, int elem, const Dims& dims) {
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (std::holds_alternative<std::int64_t>(d))
        dim->set_dim_value(std::get<std::int64_t>(d));
      else
        dim->set_dim_param(std::get<std::string>(d));
    }
  }
  void input(const std::string& name, const Dims& dims, int elem = onnx::TensorProto::FLOAT) {
    auto* v = graph().add_input();
    v->set_name(name);
    set_type(v, elem, dims);
  }
  void output(const std::string& name) { graph().add_output()->set_name(name); }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return *n;
  }
  onnx::TensorProto& ints(const std::string& name, std::vector<std::int64_t> values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    for (auto v : values) t->add_int64_data(v);
    return *t;
  }
  onnx::TensorProto& floats(const std::string& name, std::vector<float> values,
                            std::vector<std::int64_t> dims) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_float_data(v);
    return *t;
  }
  kiln::OnnxModel import(const kiln::OnnxImportOptions& options = {}) const {
    return kiln::import_onnx_bytes(proto.SerializeAsString(), "", "model.onnx", options);
  }
};

inline void set_int(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void set_ints(onnx::NodeProto& n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

inline void set_float(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

inline void set_string(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

}  // namespace kiln_test
