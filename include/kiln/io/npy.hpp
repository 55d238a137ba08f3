#pragma once
/// \file
/// Reading and writing NumPy `.npy` files (format versions 1.0, 2.0 and 3.0): the magic
/// `\x93NUMPY`, a version, a header length, a Python dict literal
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces, then
/// the raw elements.
///
/// Element types map to kiln dtypes: `f4` f32, `f2` f16, `f8` f64, `i1` i8, `u1` u8,
/// `i4` i32, `i8` i64, `b1` bool, and `V2` bf16: a 2-byte opaque element is what NumPy
/// writes for an `ml_dtypes.bfloat16` array (ml_dtypes' other types are 1 byte). Big-endian files
/// (`>f4`) are byte-swapped and Fortran-order files transposed on reading, so the tensor is always
/// little-endian and row-major. NumPy has no bfloat16: bf16 tensors are written as f32 (exactly).
///
/// \code
///   kiln::save_npy("ids.npy", kiln::Tensor::from_data(std::vector<std::int64_t>{1, 2}, {2}));
///   kiln::Tensor ids = kiln::load_npy("ids.npy");
/// \endcode

#include <string>
#include <string_view>

#include "kiln/stage/tensor.hpp"

namespace kiln {

/// Parses the bytes of a `.npy` file; \p file names it in messages.
/// \throws UserError naming the file and the byte offset of the problem: a bad magic or
/// version, a header that is cut short or is not a dict with exactly `descr`,
/// `fortran_order` and `shape`, an element type kiln has no dtype for, a negative or
/// overflowing shape, data shorter or longer than the shape needs.
Tensor parse_npy(std::string_view bytes, std::string_view file = "<npy>");

/// Reads a `.npy` file. \throws UserError as `parse_npy`, or when it cannot be read.
Tensor load_npy(const std::string& path);

/// The bytes of \p tensor (concrete) as a version 1.0 `.npy` file (little-endian, C order).
/// \throws UserError for a tensor without data.
std::string to_npy(const Tensor& tensor);

/// Writes \p tensor to \p path (see `to_npy`). \throws UserError when it cannot be written.
void save_npy(const std::string& path, const Tensor& tensor);

}  // namespace kiln
