#include "kiln/ir/op_registry.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "core/str.hpp"
#include "ir/ops/ops.hpp"
#include "kiln/core/error.hpp"

namespace kiln::ir {

const Attribute* InferContext::find(std::string_view name) const {
  for (const NamedAttribute& a : attributes_)
    if (a.name == name) return &a.value;
  return nullptr;
}

const Attribute& InferContext::attr(std::string_view name) const {
  if (const Attribute* a = find(name)) return *a;
  throw InternalError(
      detail::cat(op_, ": rule asked for attribute '", name, "' that its spec does not require"));
}

std::string OpDef::check(std::size_t operands, std::span<const NamedAttribute> attrs) const {
  const auto n = static_cast<long long>(operands);
  if (n < min_operands || (max_operands >= 0 && n > max_operands)) {
    const std::string expected = max_operands < 0 ? detail::cat("at least ", min_operands)
                                 : min_operands == max_operands
                                     ? detail::cat(min_operands)
                                     : detail::cat(min_operands, " to ", max_operands);
    return detail::cat("takes ", expected, " operand", (max_operands == 1 ? "" : "s"), ", got ",
                       operands);
  }
  for (const NamedAttribute& a : attrs) {
    auto spec = std::find_if(attributes.begin(), attributes.end(),
                             [&](const AttrSpec& s) { return s.name == a.name; });
    if (spec == attributes.end()) {
      std::vector<std::string> known;
      for (const AttrSpec& s : attributes) known.push_back(s.name);
      return detail::cat("has no attribute '", a.name, "'",
                         known.empty()
                             ? std::string(" (it takes none)")
                             : detail::cat(" (it takes: ", detail::join(known, ", "), ")"));
    }
    const bool int_as_float =
        spec->kind == Attribute::Kind::floating && a.value.kind() == Attribute::Kind::integer;
    if (a.value.kind() != spec->kind && !int_as_float)
      return detail::cat("attribute '", a.name, "' must be a ", kind_name(spec->kind), ", got a ",
                         kind_name(a.value.kind()));
  }
  for (const AttrSpec& s : attributes) {
    if (!s.required) continue;
    const bool present = std::any_of(attrs.begin(), attrs.end(),
                                     [&](const NamedAttribute& a) { return a.name == s.name; });
    if (!present) return detail::cat("requires attribute '", s.name, "' (", kind_name(s.kind), ")");
  }
  return {};
}

struct OpRegistry::Impl {
  mutable std::shared_mutex mutex;
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> ops;  // stable addresses
};

OpRegistry::OpRegistry() : impl_(std::make_unique<Impl>()) {}
OpRegistry::~OpRegistry() = default;

OpRegistry& OpRegistry::global() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry();  // never destroyed: ops outlive every module
    detail::register_builtin_ops(*r);
    return r;
  }();
  return *registry;
}

void OpRegistry::add(OpDef def) {
  std::unique_lock lock(impl_->mutex);
  if (impl_->ops.count(def.name) != 0)
    throw UserError(detail::cat("OpRegistry::add: op '", def.name, "' is registered already"));
  std::string name = def.name;
  impl_->ops.emplace(std::move(name), std::make_unique<OpDef>(std::move(def)));
}

const OpDef* OpRegistry::find(std::string_view name) const {
  std::shared_lock lock(impl_->mutex);
  auto it = impl_->ops.find(name);
  return it == impl_->ops.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::names() const {
  std::shared_lock lock(impl_->mutex);
  std::vector<std::string> out;
  for (const auto& [name, def] : impl_->ops) out.push_back(name);
  return out;
}

namespace {
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}
}  // namespace

const OpDef& lookup_op(std::string_view name) {
  const OpRegistry& registry = OpRegistry::global();
  if (const OpDef* def = registry.find(name)) return *def;
  std::string best;
  std::size_t best_distance = 4;  // suggest only near misses
  for (const std::string& candidate : registry.names())
    if (const std::size_t d = edit_distance(name, candidate); d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  throw UserError(detail::cat("unknown op '", name, "'",
                              best.empty() ? std::string("; no registered op has a similar name")
                                           : detail::cat("; did you mean '", best, "'?")));
}

}  // namespace kiln::ir
