// Fuzzes the ONNX importer: the bytes as an ONNX model (`kiln::import_onnx_bytes`, no
// folder, so external data is refused). Properties checked on every input:
// - importing never crashes, hangs or reads out of bounds (ASan/UBSan watch), allocates
//   only what the bytes hold (a claimed size is checked first), and throws only kiln's
//   UserError for bad bytes;
// - a model that imports gives a staged graph that verifies and prints.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "kiln/core/error.hpp"
#include "kiln/onnx/import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const kiln::OnnxModel model = kiln::import_onnx_bytes(bytes, "", "fuzz.onnx");
    if (model.graph.str().empty()) {
      std::fprintf(stderr, "an imported model prints as nothing\n");
      std::abort();
    }
  } catch (const kiln::UserError&) {
  }
  return 0;
}
