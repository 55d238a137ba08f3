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

bool is_conv(const Plan& plan, std::size_t i) { return is_op(plan, i, "kiln.conv"); }

std::int64_t epilogue_of(const Plan& plan, std::size_t i) {
  const std::size_t j = i + 1;
  if (j >= plan.launches.size() || !plan.absorbed[j] || plan.in_kernel[j] || plan.is_view[j])
    return -1;
  const std::span<const std::size_t> in = plan.in(j);
  return std::find(in.begin(), in.end(), plan.out(i)[0]) != in.end() ? std::int64_t(j) : -1;
}

ShapeViews::ShapeViews(const Plan& plan, std::size_t i) {
  const auto of = [](const Storage& st) { return View{nullptr, st.dtype, st.shape, st.strides}; };
  for (std::size_t s : plan.in(i)) views.push_back(of(plan.storage[s]));
  for (std::size_t s : plan.out(i)) views.push_back(of(plan.storage[s]));
  launch.graph = plan.launches[i].graph;
  launch.op = plan.launches[i].op;
  launch.in = std::span<const View>(views).first(plan.in(i).size());
  launch.out = std::span<const View>(views).subspan(plan.in(i).size());
}

}  // namespace kiln::compiler
