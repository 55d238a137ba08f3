#include "kiln/stage/tensor.hpp"

#include <cmath>
#include <cstring>
#include <ostream>

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
void store(DType dtype, double v, char* out) {
  const auto put = [&](auto x) { std::memcpy(out, &x, sizeof x); };
  switch (dtype) {
    case DType::f32:
      return put(static_cast<float>(v));
    case DType::f64:
      return put(v);
    case DType::f16:
      return put(Half(static_cast<float>(v)));
    case DType::bf16:
      return put(BFloat16(static_cast<float>(v)));
    case DType::i8:
      return put(static_cast<std::int8_t>(v));
    case DType::u8:
      return put(static_cast<std::uint8_t>(v));
    case DType::i32:
      return put(static_cast<std::int32_t>(v));
    case DType::i64:
      return put(static_cast<std::int64_t>(v));
    case DType::bool_:
      return put(static_cast<std::uint8_t>(v != 0));
  }
}
}  // namespace

Tensor Tensor::constant(std::span<const double> values, Shape shape, DType dtype, Device device) {
  if (!shape.is_static())
    throw UserError(detail::cat("Tensor::constant: shape ", shape,
                                " has symbolic dims; a constant needs a static shape"));
  const std::int64_t n = shape.num_elements();
  if (static_cast<std::int64_t>(values.size()) != n)
    throw UserError(detail::cat("Tensor::constant: ", values.size(), " values for shape ", shape,
                                ", which holds ", n));
  auto data = std::make_shared<detail::TensorData>();
  data->dense.dtype = dtype;
  data->dense.shape = shape;
  data->dense.bytes.resize(values.size() * size_of(dtype));
  for (std::size_t i = 0; i < values.size(); ++i)
    store(dtype, values[i], data->dense.bytes.data() + i * size_of(dtype));
  Tensor t;
  t.kind_ = Kind::constant;
  t.layout_ = TensorLayout(dtype, std::move(shape), device);
  t.data_ = std::move(data);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  return constant(std::span<const double>(&value, 1), Shape{}, dtype, device);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (t.empty()) return os << "Tensor(empty)";
  const char* kind = t.is_placeholder() ? "placeholder" : t.is_traced() ? "traced" : "constant";
  return os << "Tensor(" << kind << ", " << t.layout() << ")";
}

}  // namespace kiln
