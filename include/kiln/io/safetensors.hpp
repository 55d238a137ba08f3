#pragma once
/// \file
/// Reading and writing weights in the safetensors format (the Hugging Face one: an 8-byte
/// little-endian header length, a JSON header naming each tensor's dtype, shape and byte
/// range, then the raw little-endian data).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/stage/tensor.hpp"

namespace kiln {

/// A safetensors file, memory-mapped. Every header field is checked against the file
/// (dtypes, shapes, byte ranges inside the data and not overlapping, sizes matching) when
/// it is opened, so reading a tensor afterwards cannot go out of bounds.
class SafetensorsFile {
 public:
  /// \throws UserError naming the file and the problem: missing or unreadable, too short,
  /// a header length beyond the file, bad JSON, an unknown dtype, a negative or overflowing
  /// shape, a byte range outside the data or overlapping another, a size that does not
  /// match the shape.
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  /// Tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// \throws UserError naming a missing tensor (and the file).
  TensorLayout layout(const std::string& name) const;
  /// A tensor holding a copy of the named tensor's data (on the CPU).
  Tensor tensor(const std::string& name) const;
  /// Every tensor, by name.
  std::map<std::string, Tensor> tensors() const;
  /// The optional `__metadata__` strings.
  const std::map<std::string, std::string>& metadata() const;
  const std::string& path() const;

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Writes \p tensors (concrete tensors) to \p path. \throws UserError for a tensor without
/// data or an unwritable path.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace kiln
