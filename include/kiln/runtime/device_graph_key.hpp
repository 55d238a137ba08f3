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
/// context, and a list of named fields written by the inputs. Two calls share a graph
/// exactly when their keys are equal.
class DeviceGraphKey {
 public:
  /// One part of the key: what it is (e.g. "input 1: i32") and its canonical text.
  struct Field {
    std::string name;
    std::string value;
    bool operator==(const Field&) const = default;
  };

  /// Adds a field. \p type says what the value is and appears in miss explanations;
  /// \p value must determine the graph (equal values, equal graphs).
  void add(std::string_view type, std::string_view value) {
    fields_.push_back({prefix_.empty() ? std::string(type) : prefix_ + ": " + std::string(type),
                       std::string(value)});
  }

  /// Appends \p label to the names of the fields added while the returned object lives:
  /// `scope("input 2")` then `scope("[0]")` names fields "input 2[0]: <type>".
  class [[nodiscard]] Scope {
   public:
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { key_.prefix_.resize(saved_); }

   private:
    friend class DeviceGraphKey;
    Scope(DeviceGraphKey& key, std::string_view label) : key_(key), saved_(key.prefix_.size()) {
      key_.prefix_ += label;
    }
    DeviceGraphKey& key_;
    std::size_t saved_;
  };
  Scope scope(std::string_view label) { return Scope(*this, label); }

  const std::vector<Field>& fields() const noexcept { return fields_; }
  /// The type of the build callable (set by `DeviceGraph::create`).
  const std::type_info* build_type() const noexcept { return build_; }
  /// The build function's address when the callable is (or holds) a function pointer, else
  /// null (set by `DeviceGraph::create`).
  const void* build_address() const noexcept { return build_address_; }
  /// The context's stream identity (set by `DeviceGraph::create`).
  const void* context() const noexcept { return context_; }

 private:
  friend class DeviceGraph;
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
  key.add(detail::integer_type_name<T>(), detail::number_key(value));
}

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
  key.add("enum", detail::number_key(static_cast<std::underlying_type_t<T>>(value)));
}

inline void write_graph_key(DeviceGraphKey& key, std::string_view value) {
  key.add("string", value);
}

void write_graph_key(DeviceGraphKey& key, DType value);
void write_graph_key(DeviceGraphKey& key, const Shape& value);
void write_graph_key(DeviceGraphKey& key, const Dim3& value);

template <Element T>
void write_graph_key(DeviceGraphKey& key, const DeviceBuffer<T>& buffer) {
  key.add("DeviceBuffer", detail::buffer_key(buffer.data(), buffer.size(), dtype_of<T>));
}

template <Element T>
void write_graph_key(DeviceGraphKey& key, const HostBuffer<T>& buffer) {
  key.add("HostBuffer", detail::buffer_key(buffer.data(), buffer.size(), dtype_of<T>));
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
    auto scope = key.scope("[" + std::to_string(index) + "]");
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
