#pragma once
/// \file
/// Sharded tensors: a logical tensor spread over a mesh of devices, and the ops that
/// propagate shardings and insert the collectives a change of placement needs.
///
/// A `DeviceMesh` arranges devices on named axes (`{{"dp", 2}, {"tp", 2}}` over cpu:0 to
/// cpu:3, row-major). A `ShardedLayout` says, per mesh axis, how a global tensor is placed
/// on it: `Replicated` (every device along the axis holds all of it), `Sharded{a}` (the
/// devices along the axis split tensor axis `a`, as evenly as possible: shard sizes differ
/// by at most one) or `Partial` (each holds a summand: the value is their sum). A staged
/// function takes one graph input per shard, in mesh order (`ShardedLayout::shards`), and
/// wraps them in a `ShardedTensor`; the ops below work on those and add the collectives:
///
/// | from → to | collective over each group of devices along the mesh axis |
/// | --- | --- |
/// | Partial → Replicated | allreduce_sum |
/// | Sharded(a) → Replicated | allgather along a |
/// | Partial → Sharded(a) | reduce_scatter_sum along a |
/// | Replicated → Sharded(a) | none: each device slices its piece |
/// | Sharded(a) → Sharded(b) | all_to_all (split b, join a) |
///
/// \code
///   const kiln::DeviceMesh mesh({{"dp", 2}, {"tp", 2}});
///   const kiln::ShardedLayout x_layout(kiln::DType::f32, {8, 64}, mesh,
///                                      {kiln::Sharded{0}, kiln::Replicated{}});
///   auto model = [&](std::vector<kiln::Tensor> x_shards) {
///     const kiln::ShardedTensor x(x_shards, x_layout);
///     const auto w1 = kiln::sharded_weight("w1", {kiln::DType::f32, {64, 256}, mesh,
///                                                 {kiln::Replicated{}, kiln::Sharded{1}}});
///     ...
///     return kiln::redistribute(y, {kiln::Sharded{0}, kiln::Replicated{}}).shards();
///   };
///   auto staged = kiln::stage(model)(x_layout.shards());
/// \endcode

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/stage/tensor.hpp"

namespace kiln {

/// Devices on named axes, row-major (the last axis varies fastest).
class DeviceMesh {
 public:
  /// \p axes names and sizes; \p devices (default cpu:0 ... cpu:N-1) in mesh order.
  /// \throws UserError for no axes, a size < 1, repeated names, or a device count that is
  /// not the product of the sizes.
  explicit DeviceMesh(std::vector<std::pair<std::string, int>> axes,
                      std::vector<Device> devices = {});

  int size() const noexcept { return static_cast<int>(devices_.size()); }
  std::size_t rank() const noexcept { return axes_.size(); }
  const std::vector<std::pair<std::string, int>>& axes() const noexcept { return axes_; }
  const std::vector<Device>& devices() const noexcept { return devices_; }
  /// The index of the axis named \p name. \throws UserError listing the axes.
  std::size_t axis(std::string_view name) const;
  /// Coordinates of device \p index (mesh order) on every axis.
  std::vector<int> coords(int index) const;
  /// The devices (mesh indices) that differ from \p index only along mesh axis \p axis,
  /// in order along it: the group a collective on that axis runs over.
  std::vector<int> group(int index, std::size_t axis) const;
  std::string str() const;  ///< `mesh[dp=2, tp=2]`

  friend bool operator==(const DeviceMesh&, const DeviceMesh&) = default;

 private:
  std::vector<std::pair<std::string, int>> axes_;
  std::vector<Device> devices_;
};

struct Replicated {
  friend bool operator==(Replicated, Replicated) = default;
};
struct Sharded {
  std::int64_t axis = 0;  ///< the tensor axis split along the mesh axis
  friend bool operator==(Sharded, Sharded) = default;
};
struct Partial {  ///< summands: the value is their sum
  friend bool operator==(Partial, Partial) = default;
};
/// How a tensor is placed along one mesh axis.
using Placement = std::variant<Replicated, Sharded, Partial>;
std::string to_string(const Placement& p);

/// A global tensor (static shape) over a mesh: one placement per mesh axis.
class ShardedLayout {
 public:
  /// \throws UserError for a placement count other than the mesh's rank, a sharded axis
  /// out of range, a tensor axis sharded along two mesh axes, or a symbolic dim.
  ShardedLayout(DType dtype, Shape shape, DeviceMesh mesh, std::vector<Placement> placements);

  DType dtype() const noexcept { return dtype_; }
  const Shape& shape() const noexcept { return shape_; }
  const DeviceMesh& mesh() const noexcept { return mesh_; }
  const std::vector<Placement>& placements() const noexcept { return placements_; }
  /// Device \p index's piece: its layout (on that device).
  TensorLayout shard(int index) const;
  /// Where device \p index's piece starts in the global tensor, per tensor axis.
  std::vector<std::int64_t> offsets(int index) const;
  /// Every device's piece, in mesh order: the inputs a staged function takes for it.
  std::vector<Tensor> shards() const;
  /// Same placements with one changed.
  ShardedLayout with(std::size_t mesh_axis, Placement p) const;
  std::string str() const;  ///< `f32[8, 64] on mesh[dp=2, tp=2] as (Sharded(0), Replicated)`

  friend bool operator==(const ShardedLayout&, const ShardedLayout&) = default;

 private:
  DType dtype_;
  Shape shape_;
  DeviceMesh mesh_;
  std::vector<Placement> placements_;
};

/// The shards of one global tensor, one per mesh device, while staging.
class ShardedTensor {
 public:
  /// \throws UserError if the shards do not have the layout's shard layouts.
  ShardedTensor(std::vector<Tensor> shards, ShardedLayout layout);
  const std::vector<Tensor>& shards() const noexcept { return shards_; }
  const ShardedLayout& layout() const noexcept { return layout_; }

 private:
  std::vector<Tensor> shards_;
  ShardedLayout layout_;
};

/// A weight read as shards: device i reads `name.shard<i>` (see `shard_tensor` for the
/// values to bind).
ShardedTensor sharded_weight(const std::string& name, const ShardedLayout& layout,
                             Loc where = Loc::current());

/// \p x with new placements: the collectives of the table above, one mesh axis at a time.
ShardedTensor redistribute(const ShardedTensor& x, const std::vector<Placement>& placements,
                           Loc where = Loc::current());

/// Elementwise ops on sharded tensors: the second operand is redistributed to the first's
/// placements; Partial operands become Replicated first, except for add and sub of two
/// Partial operands (a sum of sums).
ShardedTensor operator+(Located<const ShardedTensor&> a, const ShardedTensor& b);
ShardedTensor operator-(Located<const ShardedTensor&> a, const ShardedTensor& b);
ShardedTensor operator*(Located<const ShardedTensor&> a, const ShardedTensor& b);
ShardedTensor operator*(Located<const ShardedTensor&> a, double b);
ShardedTensor relu(const ShardedTensor& x, Loc where = Loc::current());
ShardedTensor gelu(const ShardedTensor& x, Loc where = Loc::current());
/// x [..., m, k] @ w [k, n], sharding propagated: w Sharded(1) gives the output
/// Sharded(last) (column-parallel); x Sharded(last) with w Sharded(0) gives Partial
/// (row-parallel); x sharded on a batch or row axis with w Replicated keeps it. Other
/// combinations are redistributed to one of these first (w gathered).
ShardedTensor matmul(const ShardedTensor& x, const ShardedTensor& w, Loc where = Loc::current());
/// \p x with a new global \p shape: a sharded axis that keeps its size and the number of
/// elements before it moves to its new position; any other sharded axis is gathered first.
ShardedTensor reshape(const ShardedTensor& x, Shape shape, Loc where = Loc::current());
/// Sum over \p axis (dropped): a summed Sharded axis becomes Partial.
ShardedTensor sum(const ShardedTensor& x, std::int64_t axis, Loc where = Loc::current());

// ---- concrete tensors (outside staging) -------------------------------------------------

/// \p global cut into the pieces of \p layout (Partial: device 0 along the axis gets the
/// value, the others zeros), each on its device, in mesh order.
std::vector<Tensor> shard_tensor(const Tensor& global, const ShardedLayout& layout);
/// The global tensor from its pieces (Partial pieces summed), on the first mesh device.
/// \throws UserError if the pieces do not have the layout's shapes.
Tensor unshard(const std::vector<Tensor>& shards, const ShardedLayout& layout);
/// `name.shard<i>` -> piece i of \p global: the weights map for `sharded_weight`.
std::map<std::string, Tensor> shard_weights(const std::string& name, const Tensor& global,
                                            const ShardedLayout& layout);

}  // namespace kiln
