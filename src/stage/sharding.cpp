// Sharded tensors over device meshes: layouts, propagation through ops, and the
// collectives a change of placement needs (see kiln/stage/sharding.hpp).

#include "kiln/stage/sharding.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "core/str.hpp"
#include "kiln/core/error.hpp"
#include "kiln/stage/stage.hpp"
#include "stage/frame.hpp"

namespace kiln {
namespace {

using detail::cat;

bool is_sharded(const Placement& p) { return std::holds_alternative<Sharded>(p); }
bool is_partial(const Placement& p) { return std::holds_alternative<Partial>(p); }
std::int64_t sharded_axis(const Placement& p) { return std::get<Sharded>(p).axis; }

std::int64_t normalize(std::int64_t axis, std::size_t rank, const std::string& what) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    throw UserError(cat(what, ": axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + r : axis;
}

/// Every group of devices along mesh axis \p axis (each in order along it).
std::vector<std::vector<int>> groups(const DeviceMesh& mesh, std::size_t axis) {
  std::set<std::vector<int>> out;
  for (int i = 0; i < mesh.size(); ++i) out.insert(mesh.group(i, axis));
  return {out.begin(), out.end()};
}

/// Runs \p f over the shards of every group along \p axis, putting results back in place.
template <class F>
std::vector<Tensor> per_group(const ShardedTensor& x, std::size_t axis, F&& f) {
  std::vector<Tensor> out = x.shards();
  for (const std::vector<int>& g : groups(x.layout().mesh(), axis)) {
    std::vector<Tensor> in;
    for (int i : g) in.push_back(x.shards()[static_cast<std::size_t>(i)]);
    std::vector<Tensor> result = f(in);
    for (std::size_t k = 0; k < g.size(); ++k)
      out[static_cast<std::size_t>(g[k])] = std::move(result[k]);
  }
  return out;
}

/// One mesh axis from its current placement to \p to.
ShardedTensor change_axis(const ShardedTensor& x, std::size_t m, const Placement& to, Loc where) {
  const detail::UserCallSite site(where);  // the ops below are the user's call's
  const Placement& from = x.layout().placements()[m];
  if (from == to) return x;
  const ShardedLayout target = x.layout().with(m, to);
  const int n = x.layout().mesh().axes()[m].second;
  std::vector<Tensor> shards;
  if (is_partial(from) && std::holds_alternative<Replicated>(to)) {
    shards = per_group(x, m, [&](const std::vector<Tensor>& g) { return allreduce_sum(g, where); });
  } else if (is_sharded(from) && std::holds_alternative<Replicated>(to)) {
    shards = per_group(x, m, [&](const std::vector<Tensor>& g) {
      return allgather(g, sharded_axis(from), where);
    });
  } else if (is_partial(from) && is_sharded(to)) {
    shards = per_group(x, m, [&](const std::vector<Tensor>& g) {
      return reduce_scatter_sum(g, sharded_axis(to), where);
    });
  } else if (std::holds_alternative<Replicated>(from) && is_sharded(to)) {
    const std::int64_t a = sharded_axis(to);
    shards = x.shards();
    for (int i = 0; i < x.layout().mesh().size(); ++i) {
      const std::int64_t size = target.shard(i).shape.dims()[static_cast<std::size_t>(a)].size();
      const std::int64_t at =
          shard_offset(x.layout().shape().dims()[static_cast<std::size_t>(a)].size(), n,
                       x.layout().mesh().coords(i)[m]);
      // Offsets from other mesh axes are already applied to this device's piece.
      shards[static_cast<std::size_t>(i)] =
          slice(x.shards()[static_cast<std::size_t>(i)], a, at, at + size, 1, where);
    }
  } else if (std::holds_alternative<Replicated>(from) && is_partial(to)) {
    shards = per_group(x, m, [&](const std::vector<Tensor>& g) {
      std::vector<Tensor> out{g[0]};
      for (std::size_t k = 1; k < g.size(); ++k) out.push_back(g[k] * 0.0);
      return out;
    });
  } else if (is_sharded(from) && is_sharded(to)) {
    const std::int64_t a = sharded_axis(from), b = sharded_axis(to);
    const Shape& shape = x.layout().shape();
    const bool even = shape.dims()[static_cast<std::size_t>(a)].size() % n == 0 &&
                      x.shards()[0].shape().dims()[static_cast<std::size_t>(b)].size() % n == 0;
    if (!even)  // all_to_all needs equal pieces: gather, then slice
      return change_axis(change_axis(x, m, Replicated{}, where), m, to, where);
    shards =
        per_group(x, m, [&](const std::vector<Tensor>& g) { return all_to_all(g, b, a, where); });
  } else {  // Sharded -> Partial: through Replicated
    return change_axis(change_axis(x, m, Replicated{}, where), m, to, where);
  }
  return ShardedTensor(std::move(shards), target);
}

/// \p x with Partial placements made Replicated (for ops that are not linear).
ShardedTensor without_partial(const ShardedTensor& x, Loc where) {
  ShardedTensor out = x;
  for (std::size_t m = 0; m < x.layout().placements().size(); ++m)
    if (is_partial(out.layout().placements()[m])) out = change_axis(out, m, Replicated{}, where);
  return out;
}

template <class F>
ShardedTensor each_shard(const ShardedTensor& x, const ShardedLayout& layout, F&& f) {
  std::vector<Tensor> out;
  for (const Tensor& t : x.shards()) out.push_back(f(t));
  return ShardedTensor(std::move(out), layout);
}

/// Elementwise a op b: Partial allowed on an axis only where \p partial_ok and both are.
template <class F>
ShardedTensor elementwise(ShardedTensor a, ShardedTensor b, bool partial_ok, F&& f, Loc where) {
  const detail::UserCallSite site(where);  // f's ops are the user's call's
  if (a.layout().shape() != b.layout().shape() || a.layout().mesh() != b.layout().mesh())
    throw UserError(
        cat("sharded elementwise op: ", a.layout().str(), " and ", b.layout().str(),
            " differ in shape or mesh (broadcasting sharded tensors is not supported)"));
  for (std::size_t m = 0; m < a.layout().placements().size(); ++m) {
    const bool both =
        is_partial(a.layout().placements()[m]) && is_partial(b.layout().placements()[m]);
    if (is_partial(a.layout().placements()[m]) && !(partial_ok && both))
      a = change_axis(a, m, Replicated{}, where);
  }
  b = redistribute(b, a.layout().placements(), where);
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < a.shards().size(); ++i)
    out.push_back(f(a.shards()[i], b.shards()[i]));
  return ShardedTensor(std::move(out), a.layout());
}

/// Flat values of \p t at global positions: the element at \p index (per axis).
std::int64_t flat(const std::vector<std::int64_t>& index, const std::vector<std::int64_t>& dims) {
  std::int64_t f = 0;
  for (std::size_t d = 0; d < dims.size(); ++d) f = f * dims[d] + index[d];
  return f;
}

std::vector<std::int64_t> sizes_of(const Shape& s) {
  std::vector<std::int64_t> out;
  for (const Dim& d : s.dims()) out.push_back(d.size());
  return out;
}

/// Calls f(local_index, global_flat, local_flat) over every element of a piece.
template <class F>
void for_each_in_piece(const std::vector<std::int64_t>& piece,
                       const std::vector<std::int64_t>& offsets,
                       const std::vector<std::int64_t>& global, F&& f) {
  std::int64_t count = 1;
  for (std::int64_t d : piece) count *= d;
  std::vector<std::int64_t> idx(piece.size(), 0), at(piece.size());
  for (std::int64_t k = 0; k < count; ++k) {
    for (std::size_t d = 0; d < piece.size(); ++d) at[d] = offsets[d] + idx[d];
    f(flat(at, global), k);
    for (std::size_t d = piece.size(); d-- > 0;) {
      if (++idx[d] < piece[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

// ---- DeviceMesh ---------------------------------------------------------------------------

DeviceMesh::DeviceMesh(std::vector<std::pair<std::string, int>> axes, std::vector<Device> devices)
    : axes_(std::move(axes)), devices_(std::move(devices)) {
  if (axes_.empty()) throw UserError("DeviceMesh: give at least one axis, e.g. {{\"tp\", 2}}");
  int size = 1;
  std::set<std::string> names;
  for (const auto& [name, n] : axes_) {
    if (n < 1)
      throw UserError(cat("DeviceMesh: axis '", name, "' has size ", n, "; sizes are >= 1"));
    if (!names.insert(name).second)
      throw UserError(cat("DeviceMesh: axis '", name, "' appears twice"));
    size *= n;
  }
  if (devices_.empty())
    for (int i = 0; i < size; ++i) devices_.push_back(Device::cpu(i));
  if (static_cast<int>(devices_.size()) != size)
    throw UserError(cat("DeviceMesh: ", str(), " has ", size, " positions but ", devices_.size(),
                        " devices were given"));
}

std::size_t DeviceMesh::axis(std::string_view name) const {
  for (std::size_t a = 0; a < axes_.size(); ++a)
    if (axes_[a].first == name) return a;
  throw UserError(cat("DeviceMesh: no axis '", name, "' in ", str()));
}

std::vector<int> DeviceMesh::coords(int index) const {
  std::vector<int> out(axes_.size());
  for (std::size_t a = axes_.size(); a-- > 0;) {
    out[a] = index % axes_[a].second;
    index /= axes_[a].second;
  }
  return out;
}

std::vector<int> DeviceMesh::group(int index, std::size_t axis) const {
  std::vector<int> c = coords(index), out;
  for (int k = 0; k < axes_[axis].second; ++k) {
    c[axis] = k;
    int flat_index = 0;
    for (std::size_t a = 0; a < axes_.size(); ++a) flat_index = flat_index * axes_[a].second + c[a];
    out.push_back(flat_index);
  }
  return out;
}

std::string DeviceMesh::str() const {
  std::vector<std::string> parts;
  for (const auto& [name, n] : axes_) parts.push_back(cat(name, "=", n));
  return "mesh[" + detail::join(parts, ", ") + "]";
}

std::string to_string(const Placement& p) {
  if (is_sharded(p)) return cat("Sharded(", sharded_axis(p), ")");
  return is_partial(p) ? "Partial" : "Replicated";
}

// ---- ShardedLayout ------------------------------------------------------------------------

ShardedLayout::ShardedLayout(DType dtype, Shape shape, DeviceMesh mesh,
                             std::vector<Placement> placements)
    : dtype_(dtype),
      shape_(std::move(shape)),
      mesh_(std::move(mesh)),
      placements_(std::move(placements)) {
  const std::string what = cat("ShardedLayout ", name(dtype_), shape_, " on ", mesh_.str());
  if (placements_.size() != mesh_.rank())
    throw UserError(cat(what, ": ", placements_.size(), " placements for ", mesh_.rank(),
                        " mesh axes; give one per axis"));
  for (const Dim& d : shape_.dims())
    if (!d.is_static())
      throw UserError(cat(what, ": dim '", d.symbol(), "' is symbolic; sharded shapes are static"));
  std::set<std::int64_t> used;
  for (Placement& p : placements_) {
    if (!is_sharded(p)) continue;
    const std::int64_t a = normalize(sharded_axis(p), shape_.rank(), what);
    if (!used.insert(a).second)
      throw UserError(cat(what, ": tensor axis ", a, " is sharded along two mesh axes"));
    p = Sharded{a};
  }
}

TensorLayout ShardedLayout::shard(int index) const {
  std::vector<Dim> dims = shape_.dims();
  const std::vector<int> c = mesh_.coords(index);
  for (std::size_t m = 0; m < placements_.size(); ++m)
    if (is_sharded(placements_[m])) {
      const auto a = static_cast<std::size_t>(sharded_axis(placements_[m]));
      dims[a] = Dim(shard_size(shape_.dims()[a].size(), mesh_.axes()[m].second, c[m]));
    }
  return TensorLayout(dtype_, Shape(std::move(dims)),
                      mesh_.devices()[static_cast<std::size_t>(index)]);
}

std::vector<std::int64_t> ShardedLayout::offsets(int index) const {
  std::vector<std::int64_t> out(shape_.rank(), 0);
  const std::vector<int> c = mesh_.coords(index);
  for (std::size_t m = 0; m < placements_.size(); ++m)
    if (is_sharded(placements_[m])) {
      const auto a = static_cast<std::size_t>(sharded_axis(placements_[m]));
      out[a] = shard_offset(shape_.dims()[a].size(), mesh_.axes()[m].second, c[m]);
    }
  return out;
}

std::vector<Tensor> ShardedLayout::shards() const {
  std::vector<Tensor> out;
  for (int i = 0; i < mesh_.size(); ++i) out.emplace_back(shard(i));
  return out;
}

ShardedLayout ShardedLayout::with(std::size_t mesh_axis, Placement p) const {
  std::vector<Placement> ps = placements_;
  ps[mesh_axis] = p;
  return ShardedLayout(dtype_, shape_, mesh_, std::move(ps));
}

std::string ShardedLayout::str() const {
  std::vector<std::string> ps;
  for (const Placement& p : placements_) ps.push_back(to_string(p));
  return cat(name(dtype_), shape_, " on ", mesh_.str(), " as (", detail::join(ps, ", "), ")");
}

ShardedTensor::ShardedTensor(std::vector<Tensor> shards, ShardedLayout layout)
    : shards_(std::move(shards)), layout_(std::move(layout)) {
  if (static_cast<int>(shards_.size()) != layout_.mesh().size())
    throw UserError(cat("ShardedTensor: ", shards_.size(), " shards for ", layout_.str(), " (",
                        layout_.mesh().size(), " devices)"));
  for (int i = 0; i < layout_.mesh().size(); ++i) {
    const TensorLayout want = layout_.shard(i);
    const Tensor& t = shards_[static_cast<std::size_t>(i)];
    if (t.dtype() != want.dtype || t.shape() != want.shape || t.device() != want.device)
      throw UserError(cat("ShardedTensor: shard ", i, " is ", t.layout(), " but ", layout_.str(),
                          " puts ", want, " there"));
  }
}

// ---- ops ----------------------------------------------------------------------------------

ShardedTensor sharded_weight(const std::string& name, const ShardedLayout& layout, Loc where) {
  std::vector<Tensor> shards;
  for (int i = 0; i < layout.mesh().size(); ++i)
    shards.push_back(weight(cat(name, ".shard", i), layout.shard(i), where));
  return ShardedTensor(std::move(shards), layout);
}

ShardedTensor redistribute(const ShardedTensor& x, const std::vector<Placement>& placements,
                           Loc where) {
  if (placements.size() != x.layout().placements().size())
    throw UserError(cat("redistribute: ", placements.size(), " placements for ", x.layout().str()));
  // Placements off first, then on: a tensor axis is never sharded along two mesh axes.
  ShardedTensor out = x;
  for (std::size_t m = 0; m < placements.size(); ++m)
    if (!is_sharded(placements[m])) out = change_axis(out, m, placements[m], where);
  for (std::size_t m = 0; m < placements.size(); ++m) {
    if (!is_sharded(placements[m]) || out.layout().placements()[m] == placements[m]) continue;
    // Another mesh axis that still shards this tensor axis (it is to move elsewhere)
    // gathers it first.
    for (std::size_t other = 0; other < placements.size(); ++other)
      if (other != m && out.layout().placements()[other] == placements[m])
        out = change_axis(out, other, Replicated{}, where);
    out = change_axis(out, m, placements[m], where);
  }
  return out;
}

ShardedTensor operator+(Located<const ShardedTensor&> a, const ShardedTensor& b) {
  return elementwise(
      a.value, b, true, [](const Tensor& x, const Tensor& y) { return x + y; }, a.where);
}
ShardedTensor operator-(Located<const ShardedTensor&> a, const ShardedTensor& b) {
  return elementwise(
      a.value, b, true, [](const Tensor& x, const Tensor& y) { return x - y; }, a.where);
}
ShardedTensor operator*(Located<const ShardedTensor&> a, const ShardedTensor& b) {
  return elementwise(
      a.value, b, false, [](const Tensor& x, const Tensor& y) { return x * y; }, a.where);
}
ShardedTensor operator*(Located<const ShardedTensor&> a, double b) {  // linear: Partial stays
  const detail::UserCallSite site(a.where);
  return each_shard(a.value, a.value.layout(), [&](const Tensor& t) { return t * b; });
}
ShardedTensor relu(const ShardedTensor& x, Loc where) {
  const ShardedTensor r = without_partial(x, where);
  return each_shard(r, r.layout(), [&](const Tensor& t) { return relu(t, where); });
}
ShardedTensor gelu(const ShardedTensor& x, Loc where) {
  const ShardedTensor r = without_partial(x, where);
  return each_shard(r, r.layout(), [&](const Tensor& t) { return gelu(t, "none", where); });
}

ShardedTensor matmul(const ShardedTensor& x0, const ShardedTensor& w0, Loc where) {
  ShardedTensor x = x0, w = w0;
  const std::size_t r = x.layout().shape().rank();
  if (r < 2 || w.layout().shape().rank() != 2 || x.layout().mesh() != w.layout().mesh())
    throw UserError(cat("sharded matmul: x ", x.layout().str(), " @ w ", w.layout().str(),
                        ": x must have rank >= 2, w rank 2, both on one mesh"));
  const auto last = static_cast<std::int64_t>(r - 1);
  std::vector<Placement> out;
  for (std::size_t m = 0; m < x.layout().placements().size(); ++m) {
    Placement xp = x.layout().placements()[m], wp = w.layout().placements()[m];
    if (xp == Placement{Sharded{last}} ||
        (std::holds_alternative<Replicated>(xp) && wp == Placement{Sharded{0}})) {
      x = change_axis(x, m, Sharded{last}, where);  // row-parallel: partial sums
      w = change_axis(w, m, Sharded{0}, where);
      out.emplace_back(Partial{});
    } else if (std::holds_alternative<Replicated>(xp) && wp == Placement{Sharded{1}}) {
      out.emplace_back(Sharded{last});  // column-parallel
    } else {
      w = change_axis(w, m, Replicated{}, where);  // x's own placement carries over
      out.push_back(xp);
    }
  }
  std::vector<Dim> dims = x.layout().shape().dims();
  dims.back() = w.layout().shape().dims()[1];
  const ShardedLayout layout(x.layout().dtype(), Shape(std::move(dims)), x.layout().mesh(), out);
  std::vector<Tensor> shards;
  for (std::size_t i = 0; i < x.shards().size(); ++i)
    shards.push_back(matmul(x.shards()[i], w.shards()[i], where));
  return ShardedTensor(std::move(shards), layout);
}

ShardedTensor reshape(const ShardedTensor& x0, Shape shape, Loc where) {
  const std::vector<std::int64_t> in = sizes_of(x0.layout().shape());
  if (!std::all_of(shape.dims().begin(), shape.dims().end(),
                   [](const Dim& d) { return d.is_static(); }))
    throw UserError(cat("sharded reshape to ", shape, ": sharded shapes are static"));
  const std::vector<std::int64_t> out = sizes_of(shape);
  const auto before = [](const std::vector<std::int64_t>& dims, std::size_t axis) {
    return std::accumulate(dims.begin(), dims.begin() + static_cast<long>(axis), std::int64_t{1},
                           std::multiplies<>());
  };
  // Where each sharded axis goes, if it survives the reshape whole.
  ShardedTensor x = x0;
  std::vector<Placement> placements;
  for (std::size_t m = 0; m < x0.layout().placements().size(); ++m) {
    const Placement& p = x0.layout().placements()[m];
    if (!is_sharded(p)) {
      placements.push_back(p);
      continue;
    }
    const auto a = static_cast<std::size_t>(sharded_axis(p));
    std::optional<std::size_t> to;
    for (std::size_t b = 0; b < out.size() && !to; ++b)
      if (out[b] == in[a] && before(out, b) == before(in, a)) to = b;
    if (to) {
      placements.emplace_back(Sharded{static_cast<std::int64_t>(*to)});
    } else {
      x = change_axis(x, m, Replicated{}, where);
      placements.emplace_back(Replicated{});
    }
  }
  const ShardedLayout layout(x.layout().dtype(), shape, x.layout().mesh(), placements);
  std::vector<Tensor> shards;
  for (int i = 0; i < layout.mesh().size(); ++i)
    shards.push_back(
        reshape(x.shards()[static_cast<std::size_t>(i)], layout.shard(i).shape, where));
  return ShardedTensor(std::move(shards), layout);
}

ShardedTensor sum(const ShardedTensor& x, std::int64_t axis, Loc where) {
  const std::size_t rank = x.layout().shape().rank();
  const std::int64_t a = normalize(axis, rank, "sharded sum");
  std::vector<Placement> out;
  for (const Placement& p : x.layout().placements()) {
    if (is_sharded(p) && sharded_axis(p) == a) {
      out.emplace_back(Partial{});
    } else if (is_sharded(p) && sharded_axis(p) > a) {
      out.emplace_back(Sharded{sharded_axis(p) - 1});
    } else {
      out.push_back(p);
    }
  }
  std::vector<Dim> dims = x.layout().shape().dims();
  dims.erase(dims.begin() + a);
  const ShardedLayout layout(x.layout().dtype(), Shape(std::move(dims)), x.layout().mesh(), out);
  std::vector<Tensor> shards;
  for (const Tensor& t : x.shards()) shards.push_back(sum(t, {a}, false, where));
  return ShardedTensor(std::move(shards), layout);
}

// ---- concrete tensors ---------------------------------------------------------------------

std::vector<Tensor> shard_tensor(const Tensor& global, const ShardedLayout& layout) {
  if (global.dtype() != layout.dtype() || global.shape() != layout.shape())
    throw UserError(
        cat("shard_tensor: ", global.layout(), " does not have the shape of ", layout.str()));
  // Bytes, not doubles: every value exactly (an i64 above 2^53 included).
  const std::span<const std::byte> values = global.bytes();
  const std::size_t es = size_of(global.dtype());
  const std::vector<std::int64_t> dims = sizes_of(layout.shape());
  std::vector<Tensor> out;
  for (int i = 0; i < layout.mesh().size(); ++i) {
    const TensorLayout piece = layout.shard(i);
    const std::vector<int> c = layout.mesh().coords(i);
    bool zero = false;  // Partial: the first device along the axis holds the value
    for (std::size_t m = 0; m < c.size(); ++m)
      zero = zero || (is_partial(layout.placements()[m]) && c[m] != 0);
    std::vector<std::byte> part;
    for_each_in_piece(sizes_of(piece.shape), layout.offsets(i), dims,
                      [&](std::int64_t g, std::int64_t) {
                        const std::byte* at = values.data() + static_cast<std::size_t>(g) * es;
                        if (zero) {
                          part.resize(part.size() + es, std::byte{0});  // 0 in every dtype
                        } else {
                          part.insert(part.end(), at, at + es);
                        }
                      });
    out.push_back(
        Tensor::from_bytes(piece.dtype, piece.shape, piece.device, part.data(), part.size()));
  }
  return out;
}

Tensor unshard(const std::vector<Tensor>& shards, const ShardedLayout& layout) {
  if (static_cast<int>(shards.size()) != layout.mesh().size())
    throw UserError(cat("unshard: ", shards.size(), " pieces for ", layout.str()));
  const std::vector<std::int64_t> dims = sizes_of(layout.shape());
  const DType dtype = layout.dtype();
  const std::size_t es = size_of(dtype);
  const auto count = static_cast<std::size_t>(
      std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>()));
  // Partial pieces add up: floats in double, integers exactly (wrapping), rounded once.
  std::vector<double> global(is_floating(dtype) ? count : 0, 0.0);
  std::vector<std::uint64_t> global_ints(is_floating(dtype) ? 0 : count, 0);
  for (int i = 0; i < layout.mesh().size(); ++i) {
    const TensorLayout want = layout.shard(i);
    const Tensor& t = shards[static_cast<std::size_t>(i)];
    if (t.dtype() != want.dtype || t.shape() != want.shape)
      throw UserError(cat("unshard: piece ", i, " is ", t.layout(), " but ", layout.str(), " has ",
                          want, " there"));
    const std::vector<int> c = layout.mesh().coords(i);
    bool copy = true;  // one device per Replicated group contributes
    for (std::size_t m = 0; m < c.size(); ++m)
      copy = copy && !(std::holds_alternative<Replicated>(layout.placements()[m]) && c[m] != 0);
    if (!copy) continue;
    const std::span<const std::byte> v = t.bytes();
    for_each_in_piece(sizes_of(want.shape), layout.offsets(i), dims,
                      [&](std::int64_t g, std::int64_t k) {
                        const std::byte* at = v.data() + static_cast<std::size_t>(k) * es;
                        if (is_floating(dtype)) {
                          global[static_cast<std::size_t>(g)] += load_as_double(dtype, at);
                        } else {
                          global_ints[static_cast<std::size_t>(g)] +=
                              static_cast<std::uint64_t>(load_as_int(dtype, at));
                        }
                      });
  }
  std::vector<std::byte> bytes(count * es);
  for (std::size_t g = 0; g < count; ++g) {
    if (is_floating(dtype)) {
      store_from_double(dtype, global[g], bytes.data() + g * es);
    } else {
      store_from_int(dtype, static_cast<std::int64_t>(global_ints[g]), bytes.data() + g * es);
    }
  }
  return Tensor::from_bytes(dtype, layout.shape(), layout.mesh().devices()[0], bytes.data(),
                            bytes.size());
}

std::map<std::string, Tensor> shard_weights(const std::string& name, const Tensor& global,
                                            const ShardedLayout& layout) {
  std::map<std::string, Tensor> out;
  const std::vector<Tensor> pieces = shard_tensor(global, layout);
  for (std::size_t i = 0; i < pieces.size(); ++i) out.emplace(cat(name, ".shard", i), pieces[i]);
  return out;
}

}  // namespace kiln
