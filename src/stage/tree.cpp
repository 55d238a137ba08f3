#include "kiln/stage/tree.hpp"

#include "core/str.hpp"

namespace kiln {

TreeDef TreeDef::static_value(std::string type, std::string value) {
  TreeDef t(Kind::static_value);
  t.type_ = std::move(type);
  t.value_ = std::move(value);
  return t;
}

TreeDef TreeDef::node(Kind kind, std::string type, std::vector<std::string> keys,
                      std::vector<TreeDef> children) {
  TreeDef t(kind);
  t.type_ = std::move(type);
  t.keys_ = std::move(keys);
  t.children_ = std::move(children);
  return t;
}

std::size_t TreeDef::num_leaves() const {
  if (kind_ == Kind::tensor) return 1;
  std::size_t n = 0;
  for (const TreeDef& c : children_) n += c.num_leaves();
  return n;
}

namespace {

std::string child_name(const TreeDef& t, std::size_t i) {
  return t.keys().size() > i ? t.keys()[i] : std::to_string(i);
}

void collect_paths(const TreeDef& t, const std::string& path, std::vector<std::string>& out) {
  if (t.kind() == TreeDef::Kind::tensor) {
    out.push_back(path.empty() ? "<root>" : path);
    return;
  }
  for (std::size_t i = 0; i < t.children().size(); ++i) {
    // An optional adds no path segment: its value stands where it is.
    const std::string segment = t.kind() == TreeDef::Kind::optional ? "" : child_name(t, i);
    const std::string sub = segment.empty() ? path
                            : path.empty()  ? segment
                                            : detail::cat(path, ".", segment);
    collect_paths(t.children()[i], sub, out);
  }
}

std::string difference_at(const TreeDef& a, const TreeDef& b, const std::string& path) {
  const std::string at = path.empty() ? "the root" : path;
  if (a.kind() == TreeDef::Kind::static_value && b.kind() == a.kind() && a.type() != b.type())
    return detail::cat("at ", at, ": static ", a.type(), " ", a.value(), " vs ", b.type(), " ",
                       b.value());
  if (a.kind() != b.kind() || a.type() != b.type())
    return detail::cat("at ", at, ": ", a.str(), " vs ", b.str());
  if (a.kind() == TreeDef::Kind::static_value && a.value() != b.value())
    return detail::cat("at ", at, ": static value ", a.value(), " vs ", b.value());
  if (a.keys() != b.keys())
    return detail::cat("at ", at, ": keys {", detail::join(a.keys(), ", "), "} vs {",
                       detail::join(b.keys(), ", "), "}");
  if (a.children().size() != b.children().size())
    return a.kind() == TreeDef::Kind::optional
               ? detail::cat("at ", at, ": ", a.str(), " vs ", b.str())
               : detail::cat("at ", at, ": ", a.children().size(), " vs ", b.children().size(),
                             " elements");
  for (std::size_t i = 0; i < a.children().size(); ++i) {
    const std::string sub =
        path.empty() ? child_name(a, i) : detail::cat(path, ".", child_name(a, i));
    if (std::string d = difference_at(a.children()[i], b.children()[i], sub); !d.empty()) return d;
  }
  return {};
}

}  // namespace

std::vector<std::string> TreeDef::leaf_paths() const {
  std::vector<std::string> out;
  collect_paths(*this, "", out);
  return out;
}

std::string TreeDef::difference(const TreeDef& other) const {
  return difference_at(*this, other, "");
}

std::string TreeDef::str() const {
  switch (kind_) {
    case Kind::tensor:
      return "Tensor";
    case Kind::static_value:
      return value_;
    default:
      break;
  }
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < children_.size(); ++i)
    parts.push_back(keys_.size() > i ? detail::cat(keys_[i], ": ", children_[i].str())
                                     : children_[i].str());
  const std::string inner = detail::join(parts, ", ");
  switch (kind_) {
    case Kind::tuple:
      return "(" + inner + ")";
    case Kind::list:
      return "[" + inner + "]";
    case Kind::dict:
      return "{" + inner + "}";
    case Kind::optional:
      return children_.empty() ? std::string("none") : "some(" + inner + ")";
    default:
      return type_ + "{" + inner + "}";
  }
}

std::ostream& operator<<(std::ostream& os, const TreeDef& tree) { return os << tree.str(); }

namespace detail {
std::vector<std::string> split_field_names(std::string_view names) {
  std::vector<std::string> out;
  std::string current;
  for (char c : names) {
    if (c == ',') {
      out.push_back(current);
      current.clear();
    } else if (c != ' ' && c != '\t' && c != '\n') {
      current += c;
    }
  }
  out.push_back(current);
  return out;
}
}  // namespace detail

}  // namespace kiln
