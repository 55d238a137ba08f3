// Fuzzes the IR text parser. Properties checked on every input:
// - parsing never crashes, hangs or reads out of bounds (ASan/UBSan watch), and throws
//   only kiln's UserError (ParseError) for bad text;
// - whatever parses prints, and the print parses back and prints the same bytes;
// - the verifier never crashes on a parsed module.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kiln/core/error.hpp"
#include "kiln/ir/text.hpp"
#include "kiln/ir/verifier.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::ir::Module module;
  try {
    module = kiln::ir::parse_module(text, "fuzz");
  } catch (const kiln::UserError&) {
    return 0;  // rejected with a message: fine
  }
  const std::string printed = kiln::ir::print(module);
  try {
    const std::string again = kiln::ir::print(kiln::ir::parse_module(printed, "reprint"));
    if (again != printed) {
      std::fprintf(stderr, "round trip changed the text:\n%s\n---\n%s\n", printed.c_str(),
                   again.c_str());
      std::abort();
    }
  } catch (const kiln::UserError& e) {
    std::fprintf(stderr, "kiln cannot parse its own print: %s\n%s\n", e.what(), printed.c_str());
    std::abort();
  }
  (void)kiln::ir::verify(module);
  return 0;
}
