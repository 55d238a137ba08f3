#include "core/str.hpp"
#include "kiln/ir/graph.hpp"

namespace kiln::ir {

std::string Graph::to_dot() const {
  using kiln::detail::cat;
  const auto escape = [](std::string s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  std::string out =
      cat("digraph \"", escape(name_), "\" {\n  node [shape=box, fontname=\"monospace\"];\n");
  for (std::size_t i = 0; i < arguments_.size(); ++i)
    out += cat("  arg", i, " [shape=ellipse, label=\"arg", i, ": ",
               escape(to_string(type(arguments_[i]))), "\"];\n");
  const auto source = [&](Value v) {
    const std::int64_t p = producer(v);
    return p < 0 ? cat("arg", position(v)) : cat("op", p);
  };
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const OpView o = op(i);
    std::string label = escape(o.name());
    for (std::size_t r = 0; r < o.num_results(); ++r)
      label += cat("\\n", escape(to_string(type(o.result(r)))));  // DOT's line break
    out += cat("  op", i, " [label=\"", label, "\"];\n");
    for (Value v : o.operands()) out += cat("  ", source(v), " -> op", i, ";\n");
  }
  out += "  results [shape=ellipse, label=\"return\"];\n";
  for (Value v : results_) out += cat("  ", source(v), " -> results;\n");
  return out + "}\n";
}

}  // namespace kiln::ir
