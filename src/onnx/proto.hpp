#pragma once
// Internal: ONNX protobuf messages as kiln values: dtypes, tensors (raw, typed and
// external data), and the layouts of graph inputs with their symbolic dims.

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "kiln/core/dtype.hpp"
#include "kiln/stage/tensor.hpp"

namespace kiln::onnx_import {

/// The ONNX name of a `TensorProto::DataType` ("FLOAT16", "UINT64"), or its number.
std::string onnx_dtype_name(std::int32_t type);
/// kiln's dtype for ONNX's \p type. \throws UserError naming \p where and the type for a
/// type kiln has none for (strings, complex, u16/u32/u64, float8, 4-bit).
DType to_dtype(std::int32_t type, const std::string& where);

/// Where a tensor's external data may be read from: files inside \p base_dir (empty:
/// external data is refused).
struct TensorSource {
  std::string base_dir;
  std::string what;  // names the model in errors
};

/// \p proto as a CPU tensor (its data copied). \throws UserError naming the tensor for a
/// data size that does not match its dims, negative dims, an unsupported dtype, external
/// data outside \p source's folder, missing, or shorter than the tensor.
Tensor to_tensor(const onnx::TensorProto& proto, const TensorSource& source);

/// The identifier kiln's `Dim` accepts for an ONNX `dim_param` ("batch size" ->
/// "batch_size", "2d" -> "_2d").
std::string dim_symbol(const std::string& dim_param);

/// The layout of graph input \p info (f32 etc., its dims: static, `dim_param` as symbolic
/// dims, unknown dims named `<input>_<axis>`). \throws UserError for a non-tensor type or
/// an unsupported dtype.
TensorLayout to_layout(const onnx::ValueInfoProto& info, const std::string& what);

}  // namespace kiln::onnx_import
