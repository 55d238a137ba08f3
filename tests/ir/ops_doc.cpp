// Writes the op reference (docs/ops.md) from the op registry, so the document cannot drift
// from the code: ctest compares the committed file with this program's output.
//
//   ir_ops_doc > docs/ops.md

#include <cstdio>
#include <iostream>
#include <string>

#include "kiln/ir/op_registry.hpp"

int main() {
  const kiln::ir::OpRegistry& registry = kiln::ir::OpRegistry::global();
  std::cout << "# kiln IR ops\n\n"
               "Generated from the op registry by `build/release/tests/ir_ops_doc` (a test checks\n"
               "that this file is current). Every op prints in MLIR's generic form,\n"
               "`\"kiln.add\"(%a, %b) : (...) -> ...`; see `include/kiln/ir/text.hpp`.\n\n"
               "| op | operands | attributes | result types | what it does |\n"
               "| --- | --- | --- | --- | --- |\n";
  for (const std::string& name : registry.names()) {
    if (name.rfind("test.", 0) == 0) continue;  // ops tests register for themselves
    const kiln::ir::OpDef& def = *registry.find(name);
    std::string operands =
        def.max_operands < 0 ? std::to_string(def.min_operands) + "+"
        : def.min_operands == def.max_operands
            ? std::to_string(def.min_operands)
            : std::to_string(def.min_operands) + "–" + std::to_string(def.max_operands);
    std::string attributes;
    for (const kiln::ir::AttrSpec& a : def.attributes) {
      if (!attributes.empty()) attributes += ", ";
      attributes += "`" + a.name + "`: " + std::string(kiln::ir::kind_name(a.kind)) +
                    (a.required ? "" : " (optional)");
    }
    std::cout << "| `" << name << "` | " << operands << " | "
              << (attributes.empty() ? "—" : attributes) << " | "
              << (def.infer != nullptr ? "inferred" : "given") << " | " << def.summary << " |\n";
  }
  return 0;
}
