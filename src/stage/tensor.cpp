#include "kiln/stage/tensor.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <new>
#include <ostream>
#include <stdexcept>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "stage/frame.hpp"

namespace kiln {

std::string to_string(const TensorLayout& layout) {
  return detail::cat(name(layout.dtype), layout.shape, " on ", layout.device);
}
std::ostream& operator<<(std::ostream& os, const TensorLayout& layout) {
  return os << to_string(layout);
}

Tensor::Tensor(TensorLayout layout) : kind_(Kind::placeholder), layout_(std::move(layout)) {}

Tensor Tensor::traced(std::shared_ptr<detail::Frame> frame, std::uint32_t value,
                      TensorLayout layout) {
  Tensor t;
  t.kind_ = Kind::traced;
  t.frame_ = std::move(frame);
  t.value_ = value;
  t.layout_ = std::move(layout);
  return t;
}

namespace {

/// The machine's physical memory in bytes; 0 when it cannot be told.
std::int64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page : 0;
}

/// A constant of \p shape whose element i is \p value(i), written straight into its bytes.
/// \throws UserError naming \p who if the shape is symbolic or too big for memory.
template <class Value>
Tensor dense(const char* who, DType dtype, Shape shape, Device device, Value&& value) {
  if (!shape.is_static())
    throw UserError(
        detail::cat(who, ": shape ", shape, " has symbolic dims; a constant needs a static shape"));
  std::int64_t bytes = 0;
  try {
    bytes = shape.num_bytes(size_of(dtype));
  } catch (const UserError& e) {
    throw UserError(detail::cat(who, ": ", e.what()));
  }
  // Refused before it is tried: more than the machine has cannot succeed, and a sanitizer's
  // operator new ends the process on it rather than throwing.
  if (const std::int64_t ram = physical_memory(); ram > 0 && bytes > ram)
    throw UserError(detail::cat(who, ": out of memory for ", name(dtype), shape, " (", bytes,
                                " bytes, more than this machine's ", ram, ")"));
  auto data = std::make_shared<detail::TensorData>();
  data->dense.dtype = dtype;
  data->dense.shape = shape;
  try {
    data->dense.bytes.resize(static_cast<std::size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw UserError(
        detail::cat(who, ": out of memory for ", name(dtype), shape, " (", bytes, " bytes)"));
  } catch (const std::length_error&) {
    throw UserError(
        detail::cat(who, ": ", name(dtype), shape, " (", bytes, " bytes) is too big for memory"));
  }
  const std::size_t es = size_of(dtype);
  const std::size_t n = static_cast<std::size_t>(bytes) / es;
  for (std::size_t i = 0; i < n; ++i)
    store_from_double(dtype, value(i), data->dense.bytes.data() + i * es);
  return Tensor::constant_data(TensorLayout(dtype, std::move(shape), device), std::move(data));
}

}  // namespace

Tensor Tensor::constant_data(TensorLayout layout, std::shared_ptr<const detail::TensorData> data) {
  Tensor t;
  t.kind_ = Kind::constant;
  t.layout_ = std::move(layout);
  t.data_ = std::move(data);
  return t;
}

Tensor Tensor::constant(std::span<const double> values, Shape shape, DType dtype, Device device) {
  if (shape.is_static() && static_cast<std::int64_t>(values.size()) != shape.num_elements())
    throw UserError(detail::cat("Tensor::constant: ", values.size(), " values for shape ", shape,
                                ", which holds ", shape.num_elements()));
  return dense("Tensor::constant", dtype, std::move(shape), device,
               [&](std::size_t i) { return values[i]; });
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return constant(std::span<const double>(&value, 1), Shape{}, dtype, device);
}

Tensor Tensor::from_bytes(DType dtype, Shape shape, Device device, const void* bytes,
                          std::size_t size) {
  if (!shape.is_static())
    throw UserError(detail::cat("Tensor::from_data: shape ", shape,
                                " has symbolic dims; data needs a static shape"));
  const auto need = static_cast<std::size_t>(shape.num_bytes(size_of(dtype)));
  if (size != need)
    throw UserError(detail::cat("Tensor::from_data: ", size / size_of(dtype), " ", name(dtype),
                                " values for shape ", shape, ", which holds ",
                                need / size_of(dtype)));
  auto data = std::make_shared<detail::TensorData>();
  data->dense = {dtype, shape, std::string(static_cast<const char*>(bytes), size)};
  return Tensor::constant_data(TensorLayout(dtype, std::move(shape), device), std::move(data));
}

Tensor Tensor::borrow(DType dtype, Shape shape, Device device, const void* bytes, std::size_t size,
                      std::shared_ptr<const void> owner) {
  if (!shape.is_static())
    throw UserError(detail::cat("Tensor::borrow: shape ", shape,
                                " has symbolic dims; data needs a static shape"));
  const auto need = static_cast<std::size_t>(shape.num_bytes(size_of(dtype)));
  if (size != need)
    throw UserError(detail::cat("Tensor::borrow: ", size, " bytes for ", name(dtype), shape,
                                ", which holds ", need));
  if (!owner)
    throw UserError(
        "Tensor::borrow: no owner: pass what keeps the memory alive (a "
        "shared_ptr whose deleter releases it), or use Tensor::from_bytes to copy");
  if (size != 0 && bytes == nullptr)
    throw UserError(detail::cat("Tensor::borrow: a null pointer for ", size, " bytes"));
  if (reinterpret_cast<std::uintptr_t>(bytes) % size_of(dtype) != 0)
    throw UserError(detail::cat("Tensor::borrow: the ", name(dtype), " elements at ", bytes,
                                " are not aligned to their size (", size_of(dtype),
                                " bytes); copy them with Tensor::from_bytes"));
  auto data = std::make_shared<detail::TensorData>();
  data->dense.dtype = dtype;
  data->dense.shape = shape;
  data->view = {static_cast<const std::byte*>(bytes), size};
  data->owner = std::move(owner);
  return Tensor::constant_data(TensorLayout(dtype, std::move(shape), device), std::move(data));
}

Tensor Tensor::full(const TensorLayout& layout, double value) {
  return dense("Tensor::full", layout.dtype, layout.shape, layout.device,
               [&](std::size_t) { return value; });
}

Tensor Tensor::zeros(const TensorLayout& layout) { return full(layout, 0); }

Tensor Tensor::random(const TensorLayout& layout, std::uint64_t seed, double low, double high) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;  // splitmix64: same on every platform
  return dense("Tensor::random", layout.dtype, layout.shape, layout.device, [&](std::size_t) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return low + (high - low) * static_cast<double>(z >> 11) * 0x1.0p-53;
  });
}

std::span<const std::byte> Tensor::bytes() const noexcept {
  if (!data_) return {};
  return data_->elements();
}

std::size_t Tensor::num_elements() const {
  return static_cast<std::size_t>(layout_.shape.num_elements());
}

void Tensor::check_element(DType requested) const {
  if (!is_constant())
    throw UserError(detail::cat("Tensor::to_vector: the tensor is ",
                                empty()            ? "empty"
                                : is_placeholder() ? "a placeholder"
                                                   : "traced",
                                " and holds no data"));
  if (requested != dtype())
    throw UserError(detail::cat("Tensor::to_vector<", name(requested), ">: the tensor holds ",
                                name(dtype()), " elements"));
}

std::vector<double> Tensor::to_doubles() const {
  if (!is_constant()) check_element(dtype());
  std::vector<double> out(num_elements());
  const auto* p = reinterpret_cast<const char*>(data_->elements().data());
  const std::size_t w = size_of(dtype());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_as_double(dtype(), p + i * w);
  return out;
}

namespace {
// Nested lists of values, like NumPy: [[1, 2], [3, 4]].
void print_values(std::ostream& os, const std::vector<double>& v, const Shape& s, std::size_t axis,
                  std::size_t& next) {
  if (axis == s.rank()) {
    os << v[next++];
    return;
  }
  os << '[';
  for (std::int64_t i = 0; i < s.dims()[axis].size(); ++i) {
    if (i) os << ", ";
    print_values(os, v, s, axis + 1, next);
  }
  os << ']';
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (t.empty()) return os << "Tensor(empty)";
  if (!t.is_constant())
    return os << "Tensor(" << (t.is_placeholder() ? "placeholder" : "traced") << ", " << t.layout()
              << ")";
  os << "Tensor(" << t.layout();
  if (t.num_elements() <= 64) {  // small ones show their values
    std::size_t next = 0;
    os << ": ";
    print_values(os, t.to_doubles(), t.shape(), 0, next);
  }
  return os << ")";
}

}  // namespace kiln
