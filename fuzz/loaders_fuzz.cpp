// Fuzzes the readers of the files a user hands kiln: the same bytes as a `.npy` file
// (`parse_npy`) and as a safetensors file (`SafetensorsFile::open`, through a memory file).
// Properties checked on every input:
// - reading never crashes, hangs or reads out of bounds (ASan/UBSan watch), and throws
//   only kiln's UserError for bad bytes;
// - what reads writes back and reads again as the same tensors (dtype, shape and bytes).

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "kiln/core/error.hpp"
#include "kiln/io/npy.hpp"
#include "kiln/io/safetensors.hpp"

namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

bool same(const kiln::Tensor& a, const kiln::Tensor& b) {
  const std::span<const std::byte> x = a.bytes(), y = b.bytes();
  return a.layout() == b.layout() && std::equal(x.begin(), x.end(), y.begin(), y.end());
}

void check_npy(std::string_view bytes) {
  kiln::Tensor t;
  try {
    t = kiln::parse_npy(bytes, "fuzz.npy");
  } catch (const kiln::UserError&) {
    return;
  }
  try {
    if (!same(kiln::parse_npy(kiln::to_npy(t), "again.npy"), t))
      bug("a .npy file read, written and read again changed");
  } catch (const kiln::UserError& e) {
    std::fprintf(stderr, "kiln cannot read the .npy file it wrote: %s\n", e.what());
    std::abort();
  }
}

/// \p bytes as a file: a memory file's path under /proc/self/fd, closed with this object.
class MemoryFile {
 public:
  explicit MemoryFile(std::string_view bytes) : fd_(memfd_create("fuzz.safetensors", 0)) {
    if (fd_ < 0 || write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
      bug("cannot make a memory file");
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

void check_safetensors(std::string_view bytes) {
  std::map<std::string, kiln::Tensor> tensors;
  std::map<std::string, std::string> metadata;
  try {
    const MemoryFile file(bytes);
    const kiln::SafetensorsFile st = kiln::SafetensorsFile::open(file.path());
    tensors = st.tensors();
    metadata = st.metadata();
    for (const std::string& name : st.names())
      if (!(st.layout(name) == tensors.at(name).layout())) bug("layout() and tensors() disagree");
  } catch (const kiln::UserError&) {
    return;
  }
  char again[] = "/tmp/kiln_fuzz_XXXXXX";
  const int fd = mkstemp(again);
  if (fd < 0) bug("cannot make a temporary file");
  close(fd);
  try {
    kiln::save_safetensors(again, tensors, metadata);
    const kiln::SafetensorsFile st = kiln::SafetensorsFile::open(again);
    const std::map<std::string, kiln::Tensor> read = st.tensors();
    bool kept = read.size() == tensors.size() && st.metadata() == metadata;
    for (const auto& [name, t] : tensors) kept = kept && read.count(name) && same(read.at(name), t);
    unlink(again);
    if (!kept) bug("a safetensors file read, written and read again changed");
  } catch (const kiln::UserError& e) {
    unlink(again);
    std::fprintf(stderr, "kiln cannot read the safetensors file it wrote: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check_npy(bytes);
  check_safetensors(bytes);
  return 0;
}
