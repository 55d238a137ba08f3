#pragma once
/// \file
/// `Dim` and `Shape`: tensor dimensions, each either a static size or a symbolic one (a
/// name, or an expression over names).

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One dimension: a static size (>= 0) or a symbolic size, known only when real data
/// arrives: a name such as "batch", or an expression over names with integer
/// coefficients, sums and products ("batch*seq", "seq + 1", "4*heads"), which exported
/// models' shape computations make (a [batch, seq, 8] reshaped to [batch*seq, 8]).
/// Expressions are kept expanded in one canonical text, so that dims equal for every
/// value of the names compare equal; one that is a constant is a static dim.
///
/// Implicit from integers and from names, so shapes read naturally: `Shape{"batch", 512}`.
class Dim {
 public:
  /// A static dimension. \throws UserError if \p size is negative.
  Dim(std::int64_t size);  // NOLINT(google-explicit-constructor): shapes read `{2, 3}`
  Dim(int size) : Dim(static_cast<std::int64_t>(size)) {}  // NOLINT
  /// A symbolic dimension: a name (`[A-Za-z_][A-Za-z0-9_]*`) or an expression over names
  /// and integers with `*`, and ` + ` and ` - ` (spaced, so that a name is never read as
  /// a difference). \throws UserError for other text, or a negative constant.
  Dim(std::string_view symbol);                               // NOLINT
  Dim(const char* symbol) : Dim(std::string_view(symbol)) {}  // NOLINT

  /// True for a static size.
  bool is_static() const noexcept { return symbol_.empty(); }
  /// True for a single name ("batch"), which an input's shape binds.
  bool is_name() const noexcept;
  /// The static size. \throws UserError for a symbolic dim.
  std::int64_t size() const;
  /// The symbolic dim's canonical text ("batch", "batch*seq + 1"); empty for a static dim.
  const std::string& symbol() const noexcept { return symbol_; }

  friend bool operator==(const Dim&, const Dim&) = default;

 private:
  std::int64_t size_ = 0;
  std::string symbol_;
};

/// Sums, differences and products of dims, static or symbolic (`Dim("batch") * 8`).
/// \throws UserError when a static result is negative or leaves int64.
Dim operator+(const Dim& a, const Dim& b);
Dim operator-(const Dim& a, const Dim& b);
Dim operator*(const Dim& a, const Dim& b);
/// \p a / \p b when that is exact for every value of the names (\p b a nonzero size, or
/// one term such as `4*batch`); empty otherwise.
std::optional<Dim> divide_exactly(const Dim& a, const Dim& b);
/// \p a - \p b when that is a constant for every value of the names (`seq + 1` - `seq`
/// is 1); empty otherwise.
std::optional<std::int64_t> constant_difference(const Dim& a, const Dim& b);
/// The names \p d's expression uses, sorted, each once.
std::vector<std::string> dim_names(const Dim& d);
/// \p d's size, given each name's by \p size_of (which returns empty for a name it does
/// not know). \throws UserError naming the dim for an unknown name, a negative size or
/// one that leaves int64.
std::int64_t evaluate_dim(
    const Dim& d, const std::function<std::optional<std::int64_t>(const std::string&)>& size_of);

/// An ordered list of dimensions. A rank-0 shape (`Shape{}`) is a scalar.
/// Prints as `[2, batch, 4]`; `parse_shape` reads that form back.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<Dim> dims) : dims_(dims) {}
  explicit Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {}

  std::size_t rank() const noexcept { return dims_.size(); }
  /// Dimension \p axis. \throws UserError if \p axis >= rank().
  const Dim& operator[](std::size_t axis) const;
  const std::vector<Dim>& dims() const noexcept { return dims_; }
  /// True when every dimension is static.
  bool is_static() const noexcept;
  /// Product of the dimensions (1 for a scalar; 0 when any dim is 0).
  /// \throws UserError if a dim is symbolic or the product overflows int64.
  std::int64_t num_elements() const;
  /// Bytes of a tensor of this shape with \p element_size-byte elements.
  /// \throws UserError if a dim is symbolic or that is more than kMaxTensorBytes.
  std::int64_t num_bytes(std::size_t element_size) const;
  /// `[2, batch, 4]`.
  std::string str() const;

  friend bool operator==(const Shape&, const Shape&) = default;

 private:
  std::vector<Dim> dims_;
};

/// The largest tensor kiln makes, reads or plans, in bytes: 2^62. Every tensor's size is
/// checked against it where the size first becomes known (the verifier for static shapes,
/// the planner and the reference interpreter for bound ones, `Tensor` and the file readers),
/// so that an offset into a tensor plus a tensor's size never overflows int64 downstream.
inline constexpr std::int64_t kMaxTensorBytes = std::int64_t{1} << 62;

/// Product of \p dims (1 for none; 0 when any is 0).
/// \throws UserError ("too big") if the product overflows int64.
std::int64_t checked_volume(std::span<const std::int64_t> dims);
/// Bytes of a tensor of \p dims with \p element_size-byte elements.
/// \throws UserError naming the dims if that is more than kMaxTensorBytes.
std::int64_t checked_tensor_bytes(std::span<const std::int64_t> dims, std::size_t element_size);
/// \p a + \p b. \throws UserError "<what> ... overflows" if the sum leaves int64.
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what);
/// \p a * \p b. \throws UserError "<what> ... overflows" if the product leaves int64.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what);

/// Parses `[2, batch, 4]` (brackets optional, `[]` is a scalar).
/// \throws UserError naming the bad piece (a negative or non-numeric dim, a bad name).
Shape parse_shape(std::string_view text);

std::ostream& operator<<(std::ostream& os, const Dim& dim);
std::ostream& operator<<(std::ostream& os, const Shape& shape);

/// Elements of `start:stop:step` (\p step >= 1, 0 <= start): no overflow for any stop.
constexpr std::int64_t slice_length(std::int64_t start, std::int64_t stop,
                                    std::int64_t step) noexcept {
  return stop <= start ? 0 : (stop - start - 1) / step + 1;
}

/// Elements of shard \p index when \p size elements are split over \p shards as evenly as
/// possible: the first `size % shards` shards get one more (sizes differ by at most one).
constexpr std::int64_t shard_size(std::int64_t size, std::int64_t shards,
                                  std::int64_t index) noexcept {
  return size / shards + (index < size % shards ? 1 : 0);
}
/// The size of every shard of that split, in order.
inline std::vector<std::int64_t> shard_sizes(std::int64_t size, std::int64_t shards) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < shards; ++i) out.push_back(shard_size(size, shards, i));
  return out;
}
/// Elements before shard \p index in that split.
constexpr std::int64_t shard_offset(std::int64_t size, std::int64_t shards,
                                    std::int64_t index) noexcept {
  return index * (size / shards) + (index < size % shards ? index : size % shards);
}

}  // namespace kiln
