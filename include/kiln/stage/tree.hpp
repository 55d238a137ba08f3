#pragma once
/// \file
/// Trees (the seed's treedef): the structure of a staged function's inputs and outputs.
///
/// A staged function may take and return nested structures: `std::tuple`, `std::pair`,
/// `std::vector`, `std::array`, `std::map<std::string, ...>`, `std::optional`, and structs
/// made traversable with `KILN_TREE(Type, field, ...)`. Tensors are the *leaves*: they
/// become graph inputs and outputs, in order. Everything else is a *static* value: kept
/// in the `TreeDef` (type and printed value) and part of its equality, so that a later call
/// with another static value is detected. Leaf paths (`1.a`, `layers.3`) name leaves in
/// messages.
///
/// \code
///   struct Block { kiln::Tensor w; kiln::Tensor b; int heads; };
///   KILN_TREE(Block, w, b, heads)   // at namespace scope
/// \endcode

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/stage/tensor.hpp"

namespace kiln {

/// The structure of a value: kinds, keys and static values, with tensors as leaves.
class TreeDef {
 public:
  enum class Kind : std::uint8_t { tensor, static_value, tuple, list, dict, optional, record };

  /// An empty tuple.
  TreeDef() = default;
  static TreeDef tensor() { return TreeDef(Kind::tensor); }
  static TreeDef static_value(std::string type, std::string value);
  /// tuple / list / dict / optional / record; \p keys name the children of dicts and
  /// records (empty otherwise).
  static TreeDef node(Kind kind, std::string type, std::vector<std::string> keys,
                      std::vector<TreeDef> children);

  Kind kind() const noexcept { return kind_; }
  /// For static values and records: the C++ type; for others: the container.
  const std::string& type() const noexcept { return type_; }
  /// A static value's printed form.
  const std::string& value() const noexcept { return value_; }
  const std::vector<std::string>& keys() const noexcept { return keys_; }
  const std::vector<TreeDef>& children() const noexcept { return children_; }

  /// Number of tensor leaves.
  std::size_t num_leaves() const;
  /// The path of every leaf, in leaf order: `0`, `1.a`, `layers.3`.
  std::vector<std::string> leaf_paths() const;
  /// `(Tensor, {a: Tensor, n: 3})`: structure and static values.
  std::string str() const;
  /// Where two trees first differ (`at 1.n: static value 3 vs 4`), or "" when equal.
  std::string difference(const TreeDef& other) const;

  friend bool operator==(const TreeDef&, const TreeDef&) = default;

 private:
  explicit TreeDef(Kind kind) : kind_(kind) {}
  Kind kind_ = Kind::tuple;
  std::string type_ = "tuple";
  std::string value_;
  std::vector<std::string> keys_;
  std::vector<TreeDef> children_;
};

std::ostream& operator<<(std::ostream& os, const TreeDef& tree);

/// How a type is a tree. Specialised for tensors, the standard containers, and (through
/// `KILN_TREE`) user structs; every other type is a static value and must be printable
/// with `operator<<` (its printed form is what equality compares).
template <class T, class = void>
struct TreeTraits {
  static TreeDef flatten(const T& value, std::vector<Tensor>& /*leaves*/);
  template <class F>
  static T map(const T& value, F& /*leaf*/) {
    return value;
  }
};

namespace detail {
std::string demangled_type_name(const char* mangled);

template <class T>
std::string tree_type_name() {
  return demangled_type_name(typeid(T).name());
}

template <class T>
concept Printable = requires(std::ostream& os, const T& v) {
  os << v;
};

/// \p value as the shortest text that reads back as the same value; a NaN as `nan` with
/// its bits in hex (`nan:0x7fc00000`), so equal texts mean equal bits.
template <class T>
std::string exact_text(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (value != value) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, &value, sizeof(T) < sizeof bits ? sizeof(T) : sizeof bits);
      char hex[32];
      const auto [end, ec] = std::to_chars(hex, hex + sizeof hex, bits, 16);
      return "nan:0x" + std::string(hex, ec == std::errc{} ? end : hex);
    }
  }
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  return ec == std::errc{} ? std::string(text, end) : std::string("?");
}
}  // namespace detail

template <class T, class E>
TreeDef TreeTraits<T, E>::flatten(const T& value, std::vector<Tensor>&) {
  static_assert(detail::Printable<T> || std::is_enum_v<T>,
                "a staged function's argument or result type is neither a tensor tree nor "
                "printable: make it a tree with KILN_TREE(Type, fields...) or give it "
                "operator<< so that it can be a static value");
  std::ostringstream os;
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    // Exact: the shortest text that reads back as the same value (so 1234567.0 and
    // 1234568.0 differ, and -0.0 is not 0.0); a NaN with its bits.
    return TreeDef::static_value(detail::tree_type_name<T>(), detail::exact_text(value));
  } else if constexpr (std::is_enum_v<T>) {
    os << static_cast<long long>(value);
  } else if constexpr (std::is_same_v<T, std::string>) {
    os << '"' << value << '"';
  } else {
    os << std::boolalpha << value;
  }
  return TreeDef::static_value(detail::tree_type_name<T>(), os.str());
}

/// Flattens \p value: appends its tensors to \p leaves, returns its structure.
template <class T>
TreeDef tree_flatten(const T& value, std::vector<Tensor>& leaves) {
  return TreeTraits<std::decay_t<T>>::flatten(value, leaves);
}

/// A copy of \p value with each tensor leaf replaced by `leaf(old_leaf)`, in leaf order.
template <class T, class F>
T tree_map(const T& value, F& leaf) {
  return TreeTraits<T>::map(value, leaf);
}

/// A copy of \p value whose tensor leaves are \p leaves, in leaf order (one per leaf).
template <class T>
T tree_replace_leaves(const T& value, const std::vector<Tensor>& leaves) {
  std::size_t next = 0;
  auto leaf = [&](const Tensor&) { return leaves[next++]; };
  return tree_map(value, leaf);
}

template <>
struct TreeTraits<Tensor> {
  static TreeDef flatten(const Tensor& t, std::vector<Tensor>& leaves) {
    leaves.push_back(t);
    return TreeDef::tensor();
  }
  template <class F>
  static Tensor map(const Tensor& t, F& leaf) {
    return leaf(t);
  }
};

template <class... T>
struct TreeTraits<std::tuple<T...>> {
  static TreeDef flatten(const std::tuple<T...>& v, std::vector<Tensor>& leaves) {
    std::vector<TreeDef> children;
    std::apply([&](const auto&... e) { (children.push_back(tree_flatten(e, leaves)), ...); }, v);
    return TreeDef::node(TreeDef::Kind::tuple, "tuple", {}, std::move(children));
  }
  template <class F>
  static std::tuple<T...> map(const std::tuple<T...>& v, F& leaf) {
    // Braced initialisation evaluates left to right: leaves are visited in order.
    return std::apply([&](const auto&... e) { return std::tuple<T...>{tree_map(e, leaf)...}; }, v);
  }
};

template <class A, class B>
struct TreeTraits<std::pair<A, B>> {
  static TreeDef flatten(const std::pair<A, B>& v, std::vector<Tensor>& leaves) {
    std::vector<TreeDef> children;
    children.push_back(tree_flatten(v.first, leaves));
    children.push_back(tree_flatten(v.second, leaves));
    return TreeDef::node(TreeDef::Kind::tuple, "pair", {}, std::move(children));
  }
  template <class F>
  static std::pair<A, B> map(const std::pair<A, B>& v, F& leaf) {
    return std::pair<A, B>{tree_map(v.first, leaf), tree_map(v.second, leaf)};
  }
};

template <class T, class Alloc>
struct TreeTraits<std::vector<T, Alloc>> {
  static TreeDef flatten(const std::vector<T, Alloc>& v, std::vector<Tensor>& leaves) {
    std::vector<TreeDef> children;
    for (const T& e : v) children.push_back(tree_flatten(e, leaves));
    return TreeDef::node(TreeDef::Kind::list, "vector", {}, std::move(children));
  }
  template <class F>
  static std::vector<T, Alloc> map(const std::vector<T, Alloc>& v, F& leaf) {
    std::vector<T, Alloc> out;
    out.reserve(v.size());
    for (const T& e : v) out.push_back(tree_map(e, leaf));
    return out;
  }
};

template <class T, std::size_t N>
struct TreeTraits<std::array<T, N>> {
  static TreeDef flatten(const std::array<T, N>& v, std::vector<Tensor>& leaves) {
    std::vector<TreeDef> children;
    for (const T& e : v) children.push_back(tree_flatten(e, leaves));
    return TreeDef::node(TreeDef::Kind::list, "array", {}, std::move(children));
  }
  template <class F>
  static std::array<T, N> map(const std::array<T, N>& v, F& leaf) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::array<T, N>{tree_map(v[I], leaf)...};
    }
    (std::make_index_sequence<N>{});
  }
};

template <class V, class C, class Alloc>
struct TreeTraits<std::map<std::string, V, C, Alloc>> {
  using Map = std::map<std::string, V, C, Alloc>;
  static TreeDef flatten(const Map& m, std::vector<Tensor>& leaves) {
    std::vector<std::string> keys;
    std::vector<TreeDef> children;
    for (const auto& [k, v] : m) {
      keys.push_back(k);
      children.push_back(tree_flatten(v, leaves));
    }
    return TreeDef::node(TreeDef::Kind::dict, "map", std::move(keys), std::move(children));
  }
  template <class F>
  static Map map(const Map& m, F& leaf) {
    Map out;
    for (const auto& [k, v] : m) out.emplace(k, tree_map(v, leaf));
    return out;
  }
};

template <class T>
struct TreeTraits<std::optional<T>> {
  static TreeDef flatten(const std::optional<T>& v, std::vector<Tensor>& leaves) {
    std::vector<TreeDef> children;
    if (v) children.push_back(tree_flatten(*v, leaves));
    return TreeDef::node(TreeDef::Kind::optional, "optional", {}, std::move(children));
  }
  template <class F>
  static std::optional<T> map(const std::optional<T>& v, F& leaf) {
    if (!v) return std::nullopt;
    return tree_map(*v, leaf);
  }
};

namespace detail {
std::vector<std::string> split_field_names(std::string_view names);

/// The traits `KILN_TREE` generates: a record whose fields are given as member pointers.
template <class T, auto... Fields>
struct RecordTraits {
  static TreeDef flatten(const T& v, std::vector<Tensor>& leaves, std::string_view names) {
    std::vector<TreeDef> children;
    (children.push_back(tree_flatten(v.*Fields, leaves)), ...);
    return TreeDef::node(TreeDef::Kind::record, tree_type_name<T>(), split_field_names(names),
                         std::move(children));
  }
  template <class F>
  static T map(const T& v, F& leaf) {
    T out = v;
    ((out.*Fields = tree_map(v.*Fields, leaf)), ...);
    return out;
  }
};
}  // namespace detail

}  // namespace kiln

#define KILN_TREE_FIELD_PTR_(T, f) &T::f
#define KILN_TREE_EXPAND_(x) x
#define KILN_TREE_PTRS_1_(T, a) &T::a
#define KILN_TREE_PTRS_2_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_1_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_3_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_2_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_4_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_3_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_5_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_4_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_6_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_5_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_7_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_6_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_8_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_7_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_9_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_8_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_10_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_9_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_11_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_10_(T, __VA_ARGS__))
#define KILN_TREE_PTRS_12_(T, a, ...) &T::a, KILN_TREE_EXPAND_(KILN_TREE_PTRS_11_(T, __VA_ARGS__))
#define KILN_TREE_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, N, ...) N
#define KILN_TREE_PTRS_N_(N) KILN_TREE_PTRS_##N##_
#define KILN_TREE_PTRS_SELECT_(N) KILN_TREE_PTRS_N_(N)
#define KILN_TREE_PTRS_(T, ...)                               \
  KILN_TREE_EXPAND_(KILN_TREE_PTRS_SELECT_(KILN_TREE_EXPAND_( \
      KILN_TREE_COUNT_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)))(T, __VA_ARGS__))

/// Makes struct \p T a tree whose children are the listed fields (up to 12), in order.
/// Use at global namespace scope, with the fully qualified type name.
#define KILN_TREE(T, ...)                                                             \
  template <>                                                                         \
  struct kiln::TreeTraits<T> {                                                        \
    using Record = ::kiln::detail::RecordTraits<T, KILN_TREE_PTRS_(T, __VA_ARGS__)>;  \
    static ::kiln::TreeDef flatten(const T& v, std::vector<::kiln::Tensor>& leaves) { \
      return Record::flatten(v, leaves, #__VA_ARGS__);                                \
    }                                                                                 \
    template <class F>                                                                \
    static T map(const T& v, F& leaf) {                                               \
      return Record::template map<F>(v, leaf);                                        \
    }                                                                                 \
  };
