// The structural ops by OpDef (see structural.hpp).

#include "compiler/ops/structural.hpp"

#include "kiln/ir/op_registry.hpp"

namespace kiln::compiler {

const ir::OpDef& weight_op() {
  static const ir::OpDef& def = ir::lookup_op("kiln.weight");
  return def;
}

const ir::OpDef& constant_op() {
  static const ir::OpDef& def = ir::lookup_op("kiln.constant");
  return def;
}

const ir::OpDef& fused_op() {
  static const ir::OpDef& def = ir::lookup_op("kiln.fused");
  return def;
}

}  // namespace kiln::compiler
