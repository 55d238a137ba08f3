#include "onnx/proto.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/file.hpp"
#include "kiln/core/shape.hpp"

namespace kiln::onnx_import {
using detail::cat;
using TP = onnx::TensorProto;

std::string onnx_dtype_name(std::int32_t type) {
  if (TP::DataType_IsValid(type)) return TP::DataType_Name(static_cast<TP::DataType>(type));
  return cat("type ", type);
}

DType to_dtype(std::int32_t type, const std::string& where) {
  switch (type) {
    case TP::FLOAT:
      return DType::f32;
    case TP::FLOAT16:
      return DType::f16;
    case TP::BFLOAT16:
      return DType::bf16;
    case TP::DOUBLE:
      return DType::f64;
    case TP::INT8:
      return DType::i8;
    case TP::UINT8:
      return DType::u8;
    case TP::INT32:
      return DType::i32;
    case TP::INT64:
      return DType::i64;
    case TP::BOOL:
      return DType::bool_;
    default:
      break;
  }
  throw UserError(cat(where, " has dtype ", onnx_dtype_name(type),
                      ", which kiln has no counterpart for (kiln has FLOAT, FLOAT16, BFLOAT16, "
                      "DOUBLE, INT8, UINT8, INT32, INT64 and BOOL)"));
}

namespace {

std::string tensor_name(const TP& proto) {
  return proto.name().empty() ? std::string("a tensor without a name")
                              : cat("tensor ", quote_name(proto.name()));
}

/// The bytes of \p proto's external data: `location` inside the model's folder, at
/// `offset`, `length` bytes (the tensor's size when absent).
std::string external_bytes(const TP& proto, const TensorSource& source, std::uint64_t expected) {
  const std::string name = tensor_name(proto);
  std::string location;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> length;
  for (const auto& entry : proto.external_data()) {
    const auto number = [&](const std::string& text) {
      std::uint64_t v = 0;
      if (text.empty() || text.size() > 19 ||
          !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        throw UserError(cat(source.what, ": ", name, ": external data ", entry.key(), " '", text,
                            "' is not a non-negative integer"));
      for (const char c : text) v = v * 10 + static_cast<std::uint64_t>(c - '0');
      return v;
    };
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = number(entry.value());
    else if (entry.key() == "length")
      length = number(entry.value());
  }
  if (source.base_dir.empty())
    throw UserError(cat(source.what, ": ", name, " keeps its data in an external file ",
                        quote_name(location),
                        ", and this model was given as bytes, without a folder to read it from"));
  const std::filesystem::path relative(location);
  if (location.empty() || relative.is_absolute() ||
      std::any_of(relative.begin(), relative.end(), [](const auto& p) { return p == ".."; }) ||
      location.find('\0') != std::string::npos)
    throw UserError(cat(source.what, ": ", name, ": external data location ", quote_name(location),
                        " must be a relative path inside the model's folder (no '..', not "
                        "absolute)"));
  if (length && *length != expected)
    throw UserError(cat(source.what, ": ", name, ": external data length ", *length,
                        " does not match the ", expected, " bytes its dims and dtype take"));
  const std::string path = (std::filesystem::path(source.base_dir) / relative).string();
  std::uint64_t size = 0;
  std::string problem;
  const int fd = open_regular_file(path, size, problem);
  if (fd < 0)
    throw UserError(cat(source.what, ": ", name, ": external data file ", path, " ", problem));
  if (offset > size || expected > size - offset) {
    ::close(fd);
    throw UserError(cat(source.what, ": ", name, ": external data file ", path, " holds ", size,
                        " bytes, too few for ", expected, " bytes at offset ", offset));
  }
  std::string bytes(expected, '\0');
  std::uint64_t done = 0;
  while (done < expected) {
    const ssize_t got =
        ::pread(fd, bytes.data() + done, expected - done, static_cast<off_t>(offset + done));
    if (got <= 0) {
      ::close(fd);
      throw UserError(cat(source.what, ": ", name, ": cannot read external data file ", path));
    }
    done += static_cast<std::uint64_t>(got);
  }
  ::close(fd);
  return bytes;
}

}  // namespace

Tensor to_tensor(const TP& proto, const TensorSource& source) {
  const std::string name = tensor_name(proto);
  const DType dtype = to_dtype(proto.data_type(), cat(source.what, ": ", name));
  std::vector<Dim> dims;
  std::vector<std::int64_t> sizes;
  for (const std::int64_t d : proto.dims()) {
    if (d < 0) throw UserError(cat(source.what, ": ", name, " has a negative dim (", d, ")"));
    dims.emplace_back(d);
    sizes.push_back(d);
  }
  const std::size_t element = size_of(dtype);
  const auto bytes = static_cast<std::uint64_t>(checked_tensor_bytes(sizes, element));
  const std::uint64_t count = bytes / element;
  Shape shape(std::move(dims));
  const auto mismatch = [&](std::uint64_t got, const char* field) {
    return UserError(cat(source.what, ": ", name, " has dims ", shape.str(), " (", count,
                         " elements) but its ", field, " holds ", got));
  };
  if (proto.data_location() == TP::EXTERNAL) {
    const std::string data = external_bytes(proto, source, bytes);
    return Tensor::from_bytes(dtype, shape, Device::cpu(), data.data(), data.size());
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes) throw mismatch(proto.raw_data().size(), "raw_data bytes");
    return Tensor::from_bytes(dtype, shape, Device::cpu(), proto.raw_data().data(), bytes);
  }
  // Checked before allocating: the dims of a hostile file may claim far more than it holds.
  std::vector<std::byte> out;
  const auto fill = [&](const auto& field, const char* field_name, auto store) {
    if (static_cast<std::uint64_t>(field.size()) != count)
      throw mismatch(static_cast<std::uint64_t>(field.size()), field_name);
    out.resize(bytes);
    for (std::uint64_t i = 0; i < count; ++i)
      store(field.Get(static_cast<int>(i)), &out[i * element]);
  };
  const auto as_int = [&](auto v, void* at) {
    store_from_int(dtype, static_cast<std::int64_t>(v), at);
  };
  const auto bits16 = [&](auto v, void* at) {
    const auto b = static_cast<std::uint16_t>(v);
    std::memcpy(at, &b, 2);
  };
  switch (dtype) {
    case DType::f32:
      fill(proto.float_data(), "float_data", [](float v, void* at) { std::memcpy(at, &v, 4); });
      break;
    case DType::f64:
      fill(proto.double_data(), "double_data", [](double v, void* at) { std::memcpy(at, &v, 8); });
      break;
    case DType::i64:
      fill(proto.int64_data(), "int64_data", as_int);
      break;
    case DType::f16:
    case DType::bf16:
      fill(proto.int32_data(), "int32_data", bits16);
      break;
    default:
      fill(proto.int32_data(), "int32_data", as_int);
      break;
  }
  return Tensor::from_bytes(dtype, shape, Device::cpu(), out.data(), out.size());
}

std::string dim_symbol(const std::string& dim_param) {
  std::string out;
  for (const char c : dim_param)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) return "_" + out;
  return out;
}

TensorLayout to_layout(const onnx::ValueInfoProto& info, const std::string& what) {
  const std::string where = cat(what, ": input ", quote_name(info.name()));
  if (!info.type().has_tensor_type())
    throw UserError(cat(where,
                        " is not a tensor (sequences, maps and optionals are not "
                        "supported)"));
  const auto& t = info.type().tensor_type();
  const DType dtype = to_dtype(t.elem_type(), where);
  if (!t.has_shape())
    throw UserError(cat(where,
                        " has no shape; kiln needs each input's rank (give the "
                        "model input shapes, e.g. with onnx.tools.update_model_dims)"));
  std::vector<Dim> dims;
  for (int i = 0; i < t.shape().dim_size(); ++i) {
    const auto& d = t.shape().dim(i);
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        throw UserError(cat(where, " has a negative dim (", d.dim_value(), ") at axis ", i));
      dims.emplace_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      dims.emplace_back(dim_symbol(d.dim_param()));
    } else {
      dims.emplace_back(dim_symbol(cat(info.name(), "_", i)));
    }
  }
  return TensorLayout(dtype, Shape(std::move(dims)));
}

}  // namespace kiln::onnx_import
