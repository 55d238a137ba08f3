#include "onnx/fold.hpp"

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::onnx_import {
using detail::cat;

std::optional<std::vector<const HostValue*>> all_known(NodeContext& node) {
  std::vector<const HostValue*> out;
  for (std::size_t i = 0; i < node.num_inputs(); ++i) {
    if (!node.has_input(i)) {
      out.push_back(nullptr);
      continue;
    }
    const HostValue* h = node.host(i);
    if (h == nullptr) return std::nullopt;
    out.push_back(h);
  }
  return out;
}

std::vector<std::int64_t> broadcast_shapes(const NodeContext& node,
                                           const std::vector<std::int64_t>& a,
                                           const std::vector<std::int64_t>& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t x = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const std::int64_t y = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (x != y && x != 1 && y != 1)
      node.fail(cat("operand shapes do not broadcast (", x, " against ", y, " at axis ", i, ")"));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

HostValue like(const HostValue& h, std::vector<std::int64_t> shape) {
  HostValue out;
  out.dtype = h.dtype;
  out.shape = std::move(shape);
  return out;
}

void copy_element(const HostValue& h, std::size_t flat, HostValue& out) {
  if (h.is_float())
    out.floats.push_back(h.floats[flat]);
  else
    out.ints.push_back(h.ints[flat]);
  if (h.symbolic()) {
    out.symbols.resize(out.size() - 1);
    out.symbols.push_back(h.symbols[flat]);
  } else if (!out.symbols.empty()) {
    out.symbols.emplace_back();
  }
}

namespace {
/// Flat index into \p shape (right-aligned, broadcasting) of multi-index \p index.
std::size_t broadcast_index(const std::vector<std::int64_t>& index,
                            const std::vector<std::int64_t>& shape) {
  std::size_t flat = 0;
  const std::size_t offset = index.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i)
    flat = flat * static_cast<std::size_t>(shape[i]) +
           static_cast<std::size_t>(shape[i] == 1 ? 0 : index[i + offset]);
  return flat;
}

/// One element of a host value: \p symbol (an expression over names) when not empty, else
/// \p value (any sign).
struct Element {
  std::int64_t value = 0;
  std::string symbol;
};

/// \p e as a dim (a negative constant has none).
std::optional<Dim> dim_of(const Element& e) {
  if (!e.symbol.empty()) return Dim(e.symbol);
  if (e.value < 0) return std::nullopt;
  return Dim(e.value);
}

/// \p d as an element.
Element element_of(const Dim& d) {
  return d.is_static() ? Element{d.size(), {}} : Element{0, d.symbol()};
}

/// \p a op \p b where one is symbolic (sums, differences and products of dims, exact
/// quotients, comparisons that hold for every value of the names), or nothing when that is
/// not an expression kiln keeps (a negative constant against a symbol, a remainder, a
/// comparison that depends on the sizes).
std::optional<Element> symbol_op(SymbolRule rule, const Element& a, const Element& b) {
  try {
    const std::optional<Dim> da = dim_of(a), db = dim_of(b);
    if (!da || !db) return std::nullopt;
    switch (rule) {
      case SymbolRule::add:
        return element_of(*da + *db);
      case SymbolRule::sub:
        if (const auto k = constant_difference(*da, *db)) return Element{*k, {}};
        return element_of(*da - *db);
      case SymbolRule::mul:
        return element_of(*da * *db);
      case SymbolRule::div:
        if (const auto q = divide_exactly(*da, *db)) return element_of(*q);
        return std::nullopt;
      case SymbolRule::equal: {
        const auto k = constant_difference(*da, *db);
        if (!k) return std::nullopt;
        return Element{*k == 0 ? 1 : 0, {}};
      }
      case SymbolRule::max_min:
        if (*da == *db) return element_of(*da);
        return std::nullopt;
      case SymbolRule::none:
        break;
    }
  } catch (const UserError&) {  // a negative result, or one that leaves int64
  }
  return std::nullopt;
}
}  // namespace

std::optional<HostValue> fold_binary(const NodeContext& node, const HostValue& a,
                                     const HostValue& b,
                                     std::int64_t (*int_op)(std::int64_t, std::int64_t),
                                     double (*float_op)(double, double), SymbolRule rule,
                                     bool compare) {
  if (a.is_float() != b.is_float()) return std::nullopt;
  HostValue out;
  out.dtype = compare ? DType::bool_ : a.dtype;
  out.shape = broadcast_shapes(node, a.shape, b.shape);
  std::int64_t n = 1;
  for (const std::int64_t d : out.shape) n *= d;
  const bool symbolic = a.symbolic() || b.symbolic();
  const auto strides = strides_of(out.shape);
  std::vector<std::int64_t> index(out.shape.size());
  for (std::int64_t flat = 0; flat < n; ++flat) {
    for (std::size_t d = 0; d < out.shape.size(); ++d)
      index[d] = (flat / strides[d]) % out.shape[d];
    const std::size_t i = broadcast_index(index, a.shape), j = broadcast_index(index, b.shape);
    const std::string sa = a.symbolic() ? a.symbols[i] : std::string();
    const std::string sb = b.symbolic() ? b.symbols[j] : std::string();
    std::string symbol;
    if (!sa.empty() || !sb.empty()) {
      if (a.is_float()) return std::nullopt;
      const auto r = symbol_op(rule, {a.ints[i], sa}, {b.ints[j], sb});
      if (!r) return std::nullopt;
      out.ints.push_back(r->symbol.empty() ? r->value : 0);
      symbol = r->symbol;
    } else if (a.is_float()) {
      const double v = float_op(a.floats[i], b.floats[j]);
      if (compare)
        out.ints.push_back(v != 0 ? 1 : 0);
      else
        out.floats.push_back(v);
    } else {  // wrapped to the dtype's width, as kiln's integer ops do at run time
      std::byte element[8];
      store_from_int(out.dtype, int_op(a.ints[i], b.ints[j]), element);
      out.ints.push_back(load_as_int(out.dtype, element));
    }
    if (symbolic) out.symbols.push_back(std::move(symbol));
  }
  if (!out.symbolic()) out.symbols.clear();
  return out;
}

}  // namespace kiln::onnx_import
