#pragma once
/// \file
/// `TensorType`: the type of every IR value.

#include <iosfwd>
#include <string>

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"

namespace kiln::ir {

/// A tensor of one dtype and shape (static and named symbolic dims) on one device. The
/// IR's type system is this one type: small and closed on purpose.
struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  Device device;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

/// For messages: `f32[batch, 4] on cpu:0`.
std::string to_string(const TensorType& type);
std::ostream& operator<<(std::ostream& os, const TensorType& type);

}  // namespace kiln::ir
