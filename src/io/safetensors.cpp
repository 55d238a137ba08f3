#include "kiln/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/file.hpp"

namespace kiln {
namespace {

using detail::cat;
using Json = nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100u << 20;  // as the reference implementation

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {{"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16},
                                 {"F64", DType::f64}, {"I8", DType::i8},   {"U8", DType::u8},
                                 {"I32", DType::i32}, {"I64", DType::i64}, {"BOOL", DType::bool_}};

const char* safetensors_name(DType d) {
  for (const DTypeName& n : kDTypes)
    if (n.dtype == d) return n.name;
  return "?";
}

struct Entry {
  TensorLayout layout;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

}  // namespace

struct SafetensorsFile::Impl {
  std::string path;
  const unsigned char* map = nullptr;
  std::size_t size = 0;
  std::uint64_t data_start = 0;
  std::map<std::string, Entry> entries;
  std::map<std::string, std::string> metadata;

  ~Impl() {
    if (map != nullptr) munmap(const_cast<unsigned char*>(map), size);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(cat("safetensors file '", path, "': ", what));
  }
  const Entry& entry(const std::string& name) const {
    auto it = entries.find(name);
    if (it == entries.end())
      fail(cat("has no tensor named ", quote_name(name), " (it has ", entries.size(), " tensors)"));
    return it->second;
  }
};

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  std::uint64_t size = 0;
  std::string problem;
  const int fd = open_regular_file(path, size, problem);  // never waits on a FIFO
  if (fd < 0) impl->fail(problem);
  impl->size = static_cast<std::size_t>(size);
  if (impl->size < 8) {
    ::close(fd);
    impl->fail(cat("is ", impl->size,
                   " bytes long; a safetensors file starts with an 8-byte header length"));
  }
  void* map = mmap(nullptr, impl->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) impl->fail(cat("cannot be mapped: ", std::strerror(errno)));
  impl->map = static_cast<const unsigned char*>(map);

  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | impl->map[i];
  if (header_len > kMaxHeader || header_len > impl->size - 8)
    impl->fail(cat("its header claims ", header_len, " bytes but the file has ", impl->size - 8,
                   " after the length (truncated or not a safetensors file)"));
  impl->data_start = 8 + header_len;
  const std::uint64_t data_size = impl->size - impl->data_start;

  Json header;
  try {
    // Names must be unique: readers disagree on which of two entries wins (nlohmann keeps
    // one, Python's json the last), so a file with a repeated name is refused.
    std::string duplicate;
    std::set<std::string> seen;
    const Json::parser_callback_t unique_names = [&](int depth, Json::parse_event_t event,
                                                     Json& parsed) {
      if (depth == 1 && event == Json::parse_event_t::key &&
          !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    header = Json::parse(impl->map + 8, impl->map + 8 + header_len, unique_names);
    if (!duplicate.empty())
      impl->fail(cat("its header names tensor ", quote_name(duplicate),
                     " twice (readers disagree on which entry wins)"));
  } catch (const Json::exception& e) {
    impl->fail(cat("its header is not valid JSON: ", e.what()));
  }
  if (!header.is_object()) impl->fail("its header is not a JSON object");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& item : header.items()) {
    const std::string& name =
        item.key();  // (not a structured binding: clang 14 cannot capture one)
    const Json& value = item.value();
    if (name == "__metadata__") {
      if (!value.is_object()) impl->fail("__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          impl->fail(cat("__metadata__ entry ", quote_name(k), " is not a string"));
        impl->metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const auto bad = [&](const std::string& why) {
      impl->fail(cat("tensor ", quote_name(name), ": ", why));
    };
    if (!value.is_object()) bad("its entry is not an object");
    const auto dtype_it = value.find("dtype");
    if (dtype_it == value.end() || !dtype_it->is_string()) bad("has no dtype string");
    const std::string dtype_name = dtype_it->get<std::string>();
    const DTypeName* dtype = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                          [&](const DTypeName& d) { return dtype_name == d.name; });
    if (dtype == std::end(kDTypes)) bad(cat("dtype ", quote_name(dtype_name), " is not supported"));
    const auto shape_it = value.find("shape");
    if (shape_it == value.end() || !shape_it->is_array()) bad("has no shape array");
    std::vector<Dim> dims;
    std::uint64_t elements = 1;
    for (const Json& d : *shape_it) {
      if (!d.is_number_unsigned()) bad("has a shape entry that is not a non-negative integer");
      const auto n = d.get<std::uint64_t>();
      if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (n != 0 && elements > std::numeric_limits<std::uint64_t>::max() / n))
        bad("has a shape whose element count overflows");
      elements *= n;
      dims.emplace_back(static_cast<std::int64_t>(n));
    }
    const auto offsets = value.find("data_offsets");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
      bad("has no data_offsets [begin, end]");
    const auto begin = (*offsets)[0].get<std::uint64_t>(), end = (*offsets)[1].get<std::uint64_t>();
    if (begin > end || end > data_size)
      bad(cat("data_offsets [", begin, ", ", end, "] lie outside the ", data_size,
              " bytes of data"));
    const std::uint64_t width = size_of(dtype->dtype);
    if (elements > std::numeric_limits<std::uint64_t>::max() / width ||
        end - begin != elements * width)
      bad(cat("holds ", end - begin, " bytes but ", dtype_name, " of shape ", Shape(dims),
              " needs ", elements * width));
    ranges.emplace_back(begin, end);
    impl->entries[name] = Entry{TensorLayout(dtype->dtype, Shape(std::move(dims))), begin, end};
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      impl->fail(
          cat("two tensors share bytes [", ranges[i].first, ", ", ranges[i - 1].second, ")"));
  return SafetensorsFile(std::move(impl));
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : impl_->entries) out.push_back(name);
  return out;
}
bool SafetensorsFile::contains(const std::string& name) const {
  return impl_->entries.count(name) != 0;
}
TensorLayout SafetensorsFile::layout(const std::string& name) const {
  return impl_->entry(name).layout;
}
Tensor SafetensorsFile::tensor(const std::string& name) const {
  const Entry& e = impl_->entry(name);
  return Tensor::from_bytes(e.layout.dtype, e.layout.shape, Device::cpu(),
                            impl_->map + impl_->data_start + e.begin, e.end - e.begin);
}
std::map<std::string, Tensor> SafetensorsFile::tensors() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, e] : impl_->entries) out.emplace(name, tensor(name));
  return out;
}
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl_->metadata;
}
const std::string& SafetensorsFile::path() const { return impl_->path; }

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.is_constant())
      throw UserError(
          cat("save_safetensors: tensor ", quote_name(name), " holds no data (", t, ")"));
    std::vector<std::int64_t> shape;
    for (const Dim& d : t.shape().dims()) shape.push_back(d.size());
    header[name] = {{"dtype", safetensors_name(t.dtype())},
                    {"shape", shape},
                    {"data_offsets", {offset, offset + t.bytes().size()}}};
    offset += t.bytes().size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data to 8 bytes
  // Streamed into a temporary file beside it (weights may be gigabytes: no second copy in
  // memory), renamed over \p path once complete, as write_file_atomically does.
  const std::string tmp = cat(path, ".kiln-tmp-", ::getpid());
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out)
    throw UserError(
        cat("save_safetensors: cannot write '", path, "' (", std::strerror(errno), ")"));
  unsigned char len[8];
  std::uint64_t n = text.size();
  for (unsigned char& b : len) {
    b = static_cast<unsigned char>(n & 0xff);
    n >>= 8;
  }
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors)
    out.write(reinterpret_cast<const char*>(t.bytes().data()),
              static_cast<std::streamsize>(t.bytes().size()));
  out.close();
  if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    throw UserError(
        cat("save_safetensors: writing '", path, "' failed (", std::strerror(error), ")"));
  }
}

}  // namespace kiln
