// Host values (context.hpp): what the importer knows and computes before run time, and
// the table of converters.

#include <algorithm>
#include <map>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "onnx/context.hpp"

namespace kiln::onnx_import {

bool HostValue::symbolic() const noexcept {
  return std::any_of(symbols.begin(), symbols.end(),
                     [](const std::string& s) { return !s.empty(); });
}

Dim HostValue::dim(std::size_t i) const {
  if (!symbols.empty() && !symbols[i].empty()) return Dim(symbols[i]);
  return Dim(is_float() ? static_cast<std::int64_t>(floats[i]) : ints[i]);
}

std::string HostValue::dims_text() const {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < size(); ++i) parts.push_back(detail::cat(dim(i)));
  std::string out = "[";
  out += detail::join(parts, ", ");
  out += ']';
  return out;
}

std::optional<HostValue> to_host(const Tensor& t) {
  if (!t.shape().is_static() || t.num_elements() > kMaxHostElements ||
      (t.bytes().empty() && t.num_elements() > 0))
    return std::nullopt;
  HostValue h;
  h.dtype = t.dtype();
  for (const Dim& d : t.shape().dims()) h.shape.push_back(d.size());
  const std::size_t n = t.num_elements(), element = size_of(t.dtype());
  const std::byte* data = t.bytes().data();
  for (std::size_t i = 0; i < n; ++i) {
    if (h.is_float())
      h.floats.push_back(load_as_double(h.dtype, data + i * element));
    else
      h.ints.push_back(load_as_int(h.dtype, data + i * element));
  }
  return h;
}

Tensor size_value(const Dim& d) {
  const Tensor one = Tensor::from_data(std::vector<std::int64_t>{1}, Shape{1});
  if (d.is_static()) return Tensor::from_data(std::vector<std::int64_t>{d.size()}, Shape{});
  return sum(broadcast_to(one, Shape{d}));
}

Tensor to_tensor(const HostValue& h, const std::string& where) {
  if (h.symbolic()) {  // each element a constant or its dim's size at run time, joined
    std::size_t symbols = 0;
    for (const std::string& s : h.symbols) symbols += s.empty() ? 0 : 1;
    if (symbols > kMaxSymbolicElements || h.is_float())
      throw UserError(detail::cat(where, " holds the symbolic dims ", h.dims_text(),
                                  " and is read as data, which kiln computes for at most ",
                                  kMaxSymbolicElements, " integer elements"));
    std::vector<Tensor> elements;
    for (std::size_t i = 0; i < h.size(); ++i)
      elements.push_back(reshape(size_value(h.symbols[i].empty() ? Dim(0) : h.dim(i)), Shape{1}));
    for (std::size_t i = 0; i < h.size(); ++i)  // the static ones as they are (any sign)
      if (h.symbols[i].empty())
        elements[i] = Tensor::from_data(std::vector<std::int64_t>{h.ints[i]}, Shape{1});
    std::vector<Dim> dims(h.shape.begin(), h.shape.end());
    const Tensor flat = elements.size() == 1 ? elements[0] : concat(elements, 0);
    const Tensor shaped = reshape(flat, Shape(std::move(dims)));
    return h.dtype == DType::i64 ? shaped : cast(shaped, h.dtype);
  }
  const std::size_t element = size_of(h.dtype);
  std::vector<std::byte> bytes(h.size() * element);
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (h.is_float())
      store_from_double(h.dtype, h.floats[i], &bytes[i * element]);
    else
      store_from_int(h.dtype, h.ints[i], &bytes[i * element]);
  }
  std::vector<Dim> dims(h.shape.begin(), h.shape.end());
  return Tensor::from_bytes(h.dtype, Shape(std::move(dims)), Device::cpu(), bytes.data(),
                            bytes.size());
}

namespace {
const std::map<std::string_view, const OpConverter*>& table() {
  static const auto* const converters = [] {
    auto* m = new std::map<std::string_view, const OpConverter*>;
    for (const auto family :
         {elementwise_converters(), shape_converters(), nn_converters(), indexing_converters(),
          window_converters(), layout_converters(), einsum_converters()})
      for (const OpConverter& c : family)
        if (!m->emplace(c.op_type, &c).second)
          throw InternalError(detail::cat("ONNX op ", c.op_type, " has two converters"));
    return m;
  }();
  return *converters;
}
}  // namespace

const OpConverter* find_converter(std::string_view op_type) {
  const auto it = table().find(op_type);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> supported_op_types() {
  std::vector<std::string> out;
  for (const auto& [name, c] : table()) out.emplace_back(name);
  return out;
}

}  // namespace kiln::onnx_import
