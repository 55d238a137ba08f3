// Helpers the plan rewrites share (see rewrites.hpp).

#include <algorithm>
#include <string>

#include "compiler/plan/rewrites.hpp"

namespace kiln::compiler {

bool is_op(const Plan& plan, std::size_t i, std::string_view name) {
  return plan.launches[i].view().name() == name;
}

bool read_only_by(const Plan& plan, std::size_t s, std::size_t reader,
                  const std::vector<bool>& is_output) {
  const Storage& st = plan.storage[s];
  if (is_output[s] || st.base >= 0) return false;
  bool found = false;
  for (std::size_t r : st.readers) {
    if (r == reader) {
      found = true;
      continue;
    }
    const std::span<const std::size_t> in = plan.in(r);
    if (std::any_of(in.begin(), in.end(), [&](std::size_t v) { return plan.root(v) == s; }))
      return false;  // read by another launch (an absorbed one too: it reads what it lists)
  }
  return found;
}

std::string op_label(const Plan& plan, std::size_t i) {
  const ir::OpView op = plan.launches[i].view();
  std::string label(op.name());
  if (const ir::Attribute* callee = op.find("callee")) label += " @" + callee->as_symbol().name;
  return label;
}

bool share_bytes(const Storage& a, const Storage& b) {
  return a.arena_offset >= 0 && b.arena_offset >= 0 && a.bytes > 0 && b.bytes > 0 &&
         a.kept == b.kept && a.device == b.device &&
         a.arena_offset < b.arena_offset + std::int64_t(b.bytes) &&
         b.arena_offset < a.arena_offset + std::int64_t(a.bytes);
}

std::int64_t elements_of(const Index& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace kiln::compiler
