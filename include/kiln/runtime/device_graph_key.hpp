#pragma once
/// \file
/// `DeviceGraphKey` and the `DeviceGraphInput` concept: what a `DeviceGraphCache` keys a
/// graph by, besides the build callable's identity and the context.
///
/// The build callable's identity is its type for a lambda or function object (each lambda
/// expression has a type of its own; what it captures is not part of the key, so pass what
/// decides the graph as inputs), its address for a function pointer, the type of the
/// callable it holds for a `std::function` (and that function's address when it holds a
/// function pointer), and the dynamic type for a polymorphic object.
///
/// A type is a `DeviceGraphInput` when `write_graph_key(DeviceGraphKey&, const T&)` can be
/// called for it. kiln provides it for integers, floats, bools, enums, strings, `DType`,
/// `Shape`, `Dim3`, `DeviceBuffer<T>`, `HostBuffer<T>` (identity: address, size, dtype),
/// and `std::tuple`/`std::pair` of inputs. For a type of your own, define the function next
/// to the type (it is found by argument-dependent lookup) and add one field per part that
/// decides the graph:
///
/// \code
///   namespace app {
///   struct Tile { int rows, cols; };
///   void write_graph_key(kiln::DeviceGraphKey& key, const Tile& t) {
///     key.add("Tile.rows", std::to_string(t.rows));
///     key.add("Tile.cols", std::to_string(t.cols));
///   }
///   }  // namespace app
/// \endcode

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "kiln/core/dtype.hpp"
#include "kiln/runtime/device_buffer.hpp"

namespace kiln {

class Shape;
struct Dim3;

/// The key of one cached `DeviceGraph::create` call: the build callable's type, the
/// context, and a list of typed fields written by the inputs. Two calls share a graph
/// exactly when their keys are equal.
///
/// A key is a byte string that every field appends to (its type, then its value, each
/// length-prefixed, so no choice of field text makes two different keys equal), kept in
/// the key itself up to 512 bytes: looking a graph up allocates nothing. A key made with
/// the default constructor also keeps each field's name and text (`fields()`), which the
/// cache uses to explain misses; the keys `DeviceGraph::create` makes for a lookup do
/// not, and it makes a named one only after a miss.
class DeviceGraphKey {
 public:
  /// One part of the key: what it is (e.g. "input 1: i32") and its canonical text.
  struct Field {
    std::string name;
    std::string value;
    bool operator==(const Field&) const = default;
  };

  /// A key that keeps its fields' names and texts.
  DeviceGraphKey() = default;
  DeviceGraphKey(const DeviceGraphKey& other) { *this = other; }
  DeviceGraphKey& operator=(const DeviceGraphKey& other);

  /// Adds a field. \p type says what the value is and appears in miss explanations;
  /// \p value must determine the graph (equal values, equal graphs).
  void add(std::string_view type, std::string_view value) {
    append_field(type, value.data(), value.size());
    if (named_) name_field(type, value);
  }

  /// Adds a field whose value is the bytes of \p value (a trivially copyable object with
  /// no padding, e.g. an integer or a pointer): faster than text, and as exact.
  /// \p text() gives the field's text, called only for a key that keeps names.
  template <class T, class Text>
  void add_bits(std::string_view type, const T& value, Text&& text) {
    static_assert(std::is_trivially_copyable_v<T> && std::has_unique_object_representations_v<T>,
                  "add_bits: the value must be trivially copyable with no padding");
    add_bytes(type, std::string_view(reinterpret_cast<const char*>(&value), sizeof(T)),
              std::forward<Text>(text));
  }
  /// Adds a field whose value is \p bytes (any encoding that is equal exactly when the
  /// values are); \p text() gives the field's text, called only for a key that keeps names.
  template <class Text>
  void add_bytes(std::string_view type, std::string_view bytes, Text&& text) {
    append_field(type, bytes.data(), bytes.size());
    if (named_) name_field(type, text());
  }

  /// Appends \p label (and \p index, when given) to the names of the fields added while
  /// the returned object lives: `scope("input ", 2)` then `scope("[", 0, "]")` names fields
  /// "input 2[0]: <type>". Scopes are part of the key: an input that is a tuple of two
  /// values differs from two inputs.
  class [[nodiscard]] Scope {
   public:
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() {
      key_.append_tag(kClose);
      if (key_.named_) key_.prefix_.resize(saved_);
    }

   private:
    friend class DeviceGraphKey;
    Scope(DeviceGraphKey& key, std::string_view label, std::size_t index, std::string_view tail,
          bool indexed);
    DeviceGraphKey& key_;
    std::size_t saved_;
  };
  Scope scope(std::string_view label) { return Scope(*this, label, 0, {}, false); }
  Scope scope(std::string_view label, std::size_t index, std::string_view tail = {}) {
    return Scope(*this, label, index, tail, true);
  }

  /// The named fields (empty for a key that keeps no names).
  const std::vector<Field>& fields() const noexcept { return fields_; }
  /// True when the key keeps its fields' names and texts.
  bool named() const noexcept { return named_; }
  /// The key's bytes: equal keys (same build callable and context) have equal bytes.
  std::string_view bytes() const noexcept {
    return {reinterpret_cast<const char*>(heap_.empty() ? inline_bytes_ : heap_.data()), size_};
  }
  /// A hash of the bytes, the build callable and the context.
  std::uint64_t hash() const noexcept;
  /// The type of the build callable (set by `DeviceGraph::create`).
  const std::type_info* build_type() const noexcept { return build_; }
  /// The build function's address when the callable is (or holds) a function pointer, else
  /// null (set by `DeviceGraph::create`).
  const void* build_address() const noexcept { return build_address_; }
  /// The context's stream identity (set by `DeviceGraph::create`).
  const void* context() const noexcept { return context_; }

 private:
  friend class DeviceGraph;
  struct Unnamed {};
  explicit DeviceGraphKey(Unnamed) : named_(false) {}
  static constexpr unsigned char kField = 1, kOpen = 2, kClose = 3;
  static constexpr std::size_t kInline = 512;

  void append(const void* data, std::size_t n) {
    if (n == 0) return;  // an empty text's data may be null, which memcpy must not get
    if (heap_.empty() && size_ + n <= kInline) {
      std::memcpy(inline_bytes_ + size_, data, n);
    } else {
      if (heap_.size() < size_ + n) grow(n);
      std::memcpy(heap_.data() + size_, data, n);
    }
    size_ += n;
  }
  void append_tag(unsigned char tag) { append(&tag, 1); }
  /// \p value in 7-bit groups, low first, the high bit marking that more follow: one
  /// byte for the lengths and indices keys are made of.
  void append_count(std::uint64_t value) {
    unsigned char bytes[10];
    std::size_t n = 0;
    do {
      bytes[n++] = static_cast<unsigned char>((value & 0x7f) | (value > 0x7f ? 0x80 : 0));
      value >>= 7;
    } while (value != 0);
    append(bytes, n);
  }
  void append_text(std::string_view text) {
    append_count(text.size());
    append(text.data(), text.size());
  }
  void append_field(std::string_view type, const void* value, std::size_t n) {
    append_tag(kField);
    append_text(type);
    append_text(std::string_view(static_cast<const char*>(value), n));
  }
  void grow(std::size_t n);  // moves the bytes to heap_, with room for n more
  void name_field(std::string_view type, std::string_view value);

  unsigned char inline_bytes_[kInline];
  std::size_t size_ = 0;
  std::vector<unsigned char> heap_;  // the bytes once they outgrow inline_bytes_
  bool named_ = true;
  std::vector<Field> fields_;
  std::string prefix_;
  const std::type_info* build_ = nullptr;
  const void* build_address_ = nullptr;
  const void* context_ = nullptr;
};

namespace detail {
template <class T>
struct IsStdFunction : std::false_type {};
template <class R, class... A>
struct IsStdFunction<std::function<R(A...)>> : std::true_type {
  using Pointer = R (*)(A...);
};

/// What identifies the code of a build callable: see the file comment.
struct BuildIdentity {
  const std::type_info* type;
  const void* address;
};
template <class F>
BuildIdentity build_identity(const F& build) {
  if constexpr (std::is_pointer_v<F> && std::is_function_v<std::remove_pointer_t<F>>) {
    return {&typeid(F), reinterpret_cast<const void*>(build)};
  } else if constexpr (IsStdFunction<F>::value) {
    using Pointer = typename IsStdFunction<F>::Pointer;
    const Pointer* fn = build.template target<Pointer>();
    return {&build.target_type(), fn != nullptr ? reinterpret_cast<const void*>(*fn) : nullptr};
  } else if constexpr (std::is_polymorphic_v<F>) {
    return {&typeid(build), nullptr};  // the dynamic type
  } else {
    return {&typeid(F), nullptr};
  }
}
}  // namespace detail

namespace detail {
std::string buffer_key(const void* data, std::size_t count, DType dtype);

template <class T>
std::string number_key(T value) {
  char text[64];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value);  // shortest round-trip
  return ec == std::errc{} ? std::string(text, end) : std::string("?");
}

template <class T>
constexpr std::string_view integer_type_name() {
  constexpr bool s = std::is_signed_v<T>;
  switch (sizeof(T)) {
    case 1:
      return s ? "i8" : "u8";
    case 2:
      return s ? "i16" : "u16";
    case 4:
      return s ? "i32" : "u32";
    default:
      return s ? "i64" : "u64";
  }
}
}  // namespace detail

// ---- the inputs kiln knows ------------------------------------------------------------

/// `bool` only: a pointer never converts to a key silently.
template <class T>
requires std::same_as<T, bool>
void write_graph_key(DeviceGraphKey& key, const T& value) {
  key.add("bool", value ? "true" : "false");
}

template <std::integral T>
requires(!std::same_as<T, bool>) void write_graph_key(DeviceGraphKey& key, const T& value) {
  key.add_bits(detail::integer_type_name<T>(), value, [&] { return detail::number_key(value); });
}

/// Floats key by their exact value: 0.1f and the next float differ, as do 0.0 and -0.0.
template <std::floating_point T>
void write_graph_key(DeviceGraphKey& key, const T& value) {
  key.add(sizeof(T) == 4   ? "f32"
          : sizeof(T) == 8 ? "f64"
                           : "long double",
          detail::number_key(value));
}

template <class T>
requires std::is_enum_v<T>
void write_graph_key(DeviceGraphKey& key, const T& value) {
  const auto number = static_cast<std::underlying_type_t<T>>(value);
  key.add_bits("enum", number, [&] { return detail::number_key(number); });
}

inline void write_graph_key(DeviceGraphKey& key, std::string_view value) {
  key.add("string", value);
}

void write_graph_key(DeviceGraphKey& key, DType value);
void write_graph_key(DeviceGraphKey& key, const Shape& value);
void write_graph_key(DeviceGraphKey& key, const Dim3& value);

namespace detail {
/// A buffer's identity as key bits: address, element count and dtype.
struct BufferIdentity {
  const void* data;
  std::size_t count;
  std::uint64_t dtype;
};
}  // namespace detail

template <Element T>
void write_graph_key(DeviceGraphKey& key, const DeviceBuffer<T>& buffer) {
  const detail::BufferIdentity id{buffer.data(), buffer.size(),
                                  static_cast<std::uint64_t>(dtype_of<T>)};
  key.add_bits("DeviceBuffer", id,
               [&] { return detail::buffer_key(id.data, id.count, dtype_of<T>); });
}

template <Element T>
void write_graph_key(DeviceGraphKey& key, const HostBuffer<T>& buffer) {
  const detail::BufferIdentity id{buffer.data(), buffer.size(),
                                  static_cast<std::uint64_t>(dtype_of<T>)};
  key.add_bits("HostBuffer", id,
               [&] { return detail::buffer_key(id.data, id.count, dtype_of<T>); });
}

/// A type whose values can be part of a `DeviceGraphCache` key.
template <class T>
concept DeviceGraphInput = requires(DeviceGraphKey& key, const T& value) {
  write_graph_key(key, value);
};

template <DeviceGraphInput A, DeviceGraphInput B>
void write_graph_key(DeviceGraphKey& key, const std::pair<A, B>& values);

template <DeviceGraphInput... T>
void write_graph_key(DeviceGraphKey& key, const std::tuple<T...>& values) {
  const auto element = [&key](std::size_t index, const auto& value) {
    auto scope = key.scope("[", index, "]");
    write_graph_key(key, value);
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) { (element(I, std::get<I>(values)), ...); }
  (std::index_sequence_for<T...>{});
}

template <DeviceGraphInput A, DeviceGraphInput B>
void write_graph_key(DeviceGraphKey& key, const std::pair<A, B>& values) {
  write_graph_key(key, std::tie(values.first, values.second));
}

}  // namespace kiln
