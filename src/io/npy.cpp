#include "kiln/io/npy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/core/file.hpp"

namespace kiln {
namespace {

using detail::cat;

constexpr std::string_view kMagic = "\x93NUMPY";

struct NpyType {
  char kind;  // NumPy kind letter
  std::size_t size;
  DType dtype;
};
constexpr NpyType kTypes[] = {{'f', 4, DType::f32},
                              {'f', 2, DType::f16},
                              {'f', 8, DType::f64},
                              {'i', 1, DType::i8},
                              {'u', 1, DType::u8},
                              {'i', 4, DType::i32},
                              {'i', 8, DType::i64},
                              {'b', 1, DType::bool_},
                              // A 2-byte opaque element: what NumPy writes for ml_dtypes'
                              // bfloat16 arrays (ml_dtypes' other types are 1 byte).
                              {'V', 2, DType::bf16}};

/// A cursor over the header dict with errors that name the file and the byte offset.
class HeaderReader {
 public:
  HeaderReader(std::string_view text, std::size_t offset, std::string_view file)
      : text_(text), offset_(offset), file_(file) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(cat(file_, ": .npy header at byte ", offset_ + pos_, ": ", what));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(cat("expected '", c, "' but found ", next()));
  }
  std::string next() const {
    if (pos_ >= text_.size()) return "the end of the header";
    return cat("'", text_.substr(pos_, 1), "'");
  }
  std::string string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail(cat("expected a quoted string but found ", next()));
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (text_.substr(pos_, std::strlen(word)) == word) {
        pos_ += std::strlen(word);
        return value;
      }
    fail(cat("expected True or False but found ", next()));
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    while (!accept(')')) {
      skip_space();
      const std::size_t start = pos_;
      std::int64_t value = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (value > (std::numeric_limits<std::int64_t>::max() - 9) / 10)
          fail("a dimension is too large");
        value = value * 10 + (text_[pos_++] - '0');
      }
      if (pos_ == start) fail(cat("expected a non-negative dimension but found ", next()));
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long
      dims.push_back(value);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
  bool at_end() {
    skip_space();
    while (pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
    skip_space();
    return pos_ == text_.size();
  }

 private:
  std::string_view text_;
  std::size_t offset_;
  std::string_view file_;
  std::size_t pos_ = 0;
};

std::uint32_t read_le(std::string_view bytes, std::size_t at, std::size_t size) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < size; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

[[noreturn]] void unsupported(const HeaderReader& where, const std::string& descr,
                              const char* why) {
  where.fail(cat("element type '", descr, "' ", why,
                 "; kiln reads f4 (f32), f2 (f16), f8 (f64), i1, u1, i4, i8, b1 (bool) and V2 "
                 "(bf16: ml_dtypes.bfloat16 arrays)"));
}

/// The dtype of a NumPy type string such as `<f4`, and whether it is big-endian.
std::pair<DType, bool> parse_descr(const std::string& descr, const HeaderReader& where) {
  const auto reject = [&](const char* why) { unsupported(where, descr, why); };
  if (descr.size() < 3) reject("is not a NumPy type string");
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    reject("has no byte order ('<', '>', '|' or '=')");
  std::size_t size = 0;
  for (std::size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9') reject("is not a NumPy type string");
    size = std::min<std::size_t>(size * 10 + static_cast<std::size_t>(descr[i] - '0'), 1000);
  }
  for (const NpyType& t : kTypes)
    if (t.kind == descr[1] && t.size == size) {
      if (order == '|' && size > 1 && t.kind != 'V') reject("is multi-byte but says no byte order");
      return {t.dtype, order == '>' && size > 1};
    }
  unsupported(where, descr, "has no kiln dtype");
}

/// Copies a Fortran-order (column-major) array into C order.
std::vector<char> to_c_order(std::string_view data, const std::vector<std::int64_t>& dims,
                             std::size_t element) {
  std::vector<char> out(data.size());
  const std::size_t rank = dims.size();
  std::vector<std::int64_t> index(rank, 0);
  const std::size_t n = data.size() / element;
  for (std::size_t c = 0; c < n; ++c) {  // c: C-order position; index: its multi-index
    std::size_t f = 0, stride = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      f += static_cast<std::size_t>(index[d]) * stride;
      stride *= static_cast<std::size_t>(dims[d]);
    }
    std::memcpy(out.data() + c * element, data.data() + f * element, element);
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

Tensor parse_npy(std::string_view bytes, std::string_view file) {
  const auto fail = [&](const std::string& what) -> void {
    throw UserError(cat(file, ": ", what));
  };
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic)
    fail("not a .npy file (it does not start with \\x93NUMPY)");
  if (bytes.size() < 10)
    fail(cat("truncated: ", bytes.size(), " bytes, shorter than the preamble"));
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    fail(cat("unsupported .npy format version ", major, ".",
             static_cast<int>(static_cast<unsigned char>(bytes[7])), " (kiln reads 1.0 to 3.0)"));
  const std::size_t length_size = major == 1 ? 2 : 4;
  const std::size_t header_at = 8 + length_size;
  if (bytes.size() < header_at) fail("truncated in the header length");
  const std::size_t header_size = read_le(bytes, 8, length_size);
  if (bytes.size() - header_at < header_size)
    fail(cat("truncated: the header says it is ", header_size, " bytes but only ",
             bytes.size() - header_at, " follow"));
  const std::string_view header = bytes.substr(header_at, header_size);
  HeaderReader h(header, header_at, file);

  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<std::int64_t>> dims;
  h.expect('{');
  while (!h.accept('}')) {
    const std::string key = h.string();
    h.expect(':');
    if (key == "descr" && !descr) {
      descr = h.string();
    } else if (key == "fortran_order" && !fortran) {
      fortran = h.boolean();
    } else if (key == "shape" && !dims) {
      dims = h.tuple();
    } else {
      h.fail(cat("unexpected or repeated key '", key,
                 "' (the header holds descr, fortran_order and shape once each)"));
    }
    if (!h.accept(',')) {
      h.expect('}');
      break;
    }
  }
  if (!h.at_end()) h.fail("unexpected text after the header dict");
  if (!descr || !fortran || !dims)
    h.fail(cat("the header lacks '", !descr ? "descr" : !fortran ? "fortran_order" : "shape", "'"));
  const auto [dtype, big_endian] = parse_descr(*descr, h);

  std::size_t count = 1;
  std::vector<Dim> shape_dims;
  for (std::int64_t d : *dims) {
    if (d != 0 &&
        count > std::numeric_limits<std::size_t>::max() / 16 / static_cast<std::size_t>(d))
      h.fail("the shape's element count overflows");
    count *= static_cast<std::size_t>(d);
    shape_dims.emplace_back(d);
  }
  const std::size_t element = size_of(dtype);
  const std::size_t data_at = header_at + header_size;
  const std::size_t have = bytes.size() - data_at;
  if (have != count * element)
    fail(cat(have < count * element ? "truncated" : "too long", ": shape (",
             detail::join(*dims, ", "), ") of ", *descr, " needs ", count * element,
             " data bytes after byte ", data_at, " but the file has ", have));
  std::string_view data = bytes.substr(data_at);
  std::vector<char> buffer;
  if (big_endian) {
    buffer.assign(data.begin(), data.end());
    for (std::size_t i = 0; i < count; ++i)
      std::reverse(buffer.begin() + static_cast<std::ptrdiff_t>(i * element),
                   buffer.begin() + static_cast<std::ptrdiff_t>((i + 1) * element));
    data = std::string_view(buffer.data(), buffer.size());
  }
  if (*fortran && dims->size() > 1) {
    std::vector<char> c_order = to_c_order(data, *dims, element);
    buffer = std::move(c_order);
    data = std::string_view(buffer.data(), buffer.size());
  }
  if (dtype == DType::bool_)
    for (std::size_t i = 0; i < count; ++i)
      if (static_cast<unsigned char>(data[i]) > 1)
        fail(cat("bool element ", i, " holds ",
                 static_cast<int>(static_cast<unsigned char>(data[i])),
                 " (NumPy bools are 0 or 1)"));
  return Tensor::from_bytes(dtype, Shape(std::move(shape_dims)), Device::cpu(), data.data(),
                            data.size());
}

Tensor load_npy(const std::string& path) {
  // A header (at most 4 GiB in format 2) and one tensor.
  const std::string bytes =
      read_regular_file(path, "a .npy file", std::uint64_t{kMaxTensorBytes} + (1ull << 32));
  return parse_npy(bytes, path);
}

std::string to_npy(const Tensor& tensor) {
  if (!tensor.is_constant())
    throw UserError(cat("to_npy: the tensor holds no data (", tensor, "); pass a concrete tensor"));
  Tensor t = tensor;
  if (t.dtype() == DType::bf16) {  // NumPy has no bfloat16: widen exactly to f32
    const std::vector<double> values = t.to_doubles();
    t = Tensor::constant(values, t.shape(), DType::f32);
  }
  std::string type_string;
  for (const NpyType& nt : kTypes)
    if (nt.dtype == t.dtype()) type_string = cat(nt.size == 1 ? '|' : '<', nt.kind, nt.size);
  std::string shape;  // a Python tuple: (), (3,), (2, 3)
  for (const Dim& d : t.shape().dims()) shape += cat(shape.empty() ? "" : " ", d.size(), ",");
  if (t.rank() > 1) shape.pop_back();
  std::string header =
      cat("{'descr': '", type_string, "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Pad with spaces so that the data starts on a 64-byte boundary; end with a newline.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 0xffff)
    throw UserError(cat("to_npy: a rank-", t.rank(), " header does not fit .npy version 1.0"));
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const std::span<const std::byte> data = t.bytes();
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  return out;
}

void save_npy(const std::string& path, const Tensor& tensor) {
  write_file_atomically(path, to_npy(tensor));
}

}  // namespace kiln
