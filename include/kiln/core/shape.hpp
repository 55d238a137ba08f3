#pragma once
/// \file
/// `Dim` and `Shape`: tensor dimensions, each either a static size or a named symbol.

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One dimension: a static size (>= 0) or a named symbolic size such as "batch", whose
/// value is only known when real data arrives.
///
/// Implicit from integers and from names, so shapes read naturally: `Shape{"batch", 512}`.
class Dim {
 public:
  /// A static dimension. \throws UserError if \p size is negative.
  Dim(std::int64_t size);  // NOLINT(google-explicit-constructor): shapes read `{2, 3}`
  Dim(int size) : Dim(static_cast<std::int64_t>(size)) {}  // NOLINT
  /// A symbolic dimension. \throws UserError unless \p symbol is an identifier
  /// (`[A-Za-z_][A-Za-z0-9_]*`).
  Dim(std::string_view symbol);                               // NOLINT
  Dim(const char* symbol) : Dim(std::string_view(symbol)) {}  // NOLINT

  /// True for a static size.
  bool is_static() const noexcept { return symbol_.empty(); }
  /// The static size. \throws UserError for a symbolic dim.
  std::int64_t size() const;
  /// The symbol's name; empty for a static dim.
  const std::string& symbol() const noexcept { return symbol_; }

  friend bool operator==(const Dim&, const Dim&) = default;

 private:
  std::int64_t size_ = 0;
  std::string symbol_;
};

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
  /// Product of the dimensions (1 for a scalar).
  /// \throws UserError if a dim is symbolic or the product overflows int64.
  std::int64_t num_elements() const;
  /// `[2, batch, 4]`.
  std::string str() const;

  friend bool operator==(const Shape&, const Shape&) = default;

 private:
  std::vector<Dim> dims_;
};

/// Parses `[2, batch, 4]` (brackets optional, `[]` is a scalar).
/// \throws UserError naming the bad piece (a negative or non-numeric dim, a bad name).
Shape parse_shape(std::string_view text);

std::ostream& operator<<(std::ostream& os, const Dim& dim);
std::ostream& operator<<(std::ostream& os, const Shape& shape);

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
