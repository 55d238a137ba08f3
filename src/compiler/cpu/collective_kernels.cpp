// The kernels of the ops between devices: each participating device runs its rank's part
// of a runtime collective (kiln/runtime/collectives.hpp), packing pieces of non-leading
// axes into contiguous scratch before it and unpacking after it.

#include <cstring>
#include <numeric>

#include "compiler/cpu/kernels.hpp"
#include "compiler/ops/kernel_defs.hpp"
#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln::compiler {

/// One rank's part of a collective op: a collective launch's prepared state.
struct CollectiveLaunch final : PreparedLaunch {
  static constexpr Kind kKind = Kind::collective;
  CollectiveLaunch() : PreparedLaunch(kKind) {}
  std::shared_ptr<Communicator> comm;
  int rank = 0;
  // Set by prepare_collective once the launch's buffers are bound:
  Collective collective;
  // Pieces of an axis moved between the launch's buffers and contiguous scratch: pack
  // before the collective (input → scratch_in), unpack after (scratch_out → output).
  struct Pieces {
    std::int64_t outer = 0, axis = 0, inner_bytes = 0;  // the strided side's layout
    std::vector<std::int64_t> sizes;                    // piece sizes along the axis
    bool needed() const { return outer > 1 && sizes.size() > 1; }
  };
  Pieces pack, unpack;
  std::vector<std::byte> scratch_in, scratch_out;
};

namespace {

using kiln::detail::cat;

std::int64_t product(Dims shape, std::size_t begin, std::size_t end) {
  std::int64_t n = 1;
  for (std::size_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

/// \p shape cut along \p axis into pieces of \p sizes, as `Pieces`.
CollectiveLaunch::Pieces pieces_of(Dims shape, std::size_t axis, DType dtype,
                                   std::vector<std::int64_t> sizes) {
  return {product(shape, 0, axis), shape[axis],
          product(shape, axis + 1, shape.size()) * static_cast<std::int64_t>(size_of(dtype)),
          std::move(sizes)};
}

/// Piece p of every outer row, laid one piece after another (pack), or back (unpack).
void move_pieces(const CollectiveLaunch::Pieces& p, const std::byte* src, std::byte* dst,
                 bool pack) {
  std::int64_t at = 0, contiguous = 0;  // piece offset along the axis; bytes packed so far
  for (std::int64_t size : p.sizes) {
    const std::int64_t run = size * p.inner_bytes;
    for (std::int64_t o = 0; o < p.outer; ++o) {
      const std::int64_t strided = (o * p.axis + at) * p.inner_bytes;
      const std::int64_t packed = contiguous + o * run;
      if (pack) {
        std::memcpy(dst + packed, src + strided, static_cast<std::size_t>(run));
      } else {
        std::memcpy(dst + strided, src + packed, static_cast<std::size_t>(run));
      }
    }
    at += size;
    contiguous += p.outer * run;
  }
}

std::size_t axis_attr(const ir::OpView& op, const char* name, std::size_t rank) {
  const std::int64_t a = op.find(name)->as_int();
  return static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(rank) : a);
}

std::size_t elements_of(Dims shape) {
  return static_cast<std::size_t>(product(shape, 0, shape.size()));
}

}  // namespace

std::unique_ptr<PreparedLaunch> make_collective(std::shared_ptr<Communicator> comm, int rank) {
  auto c = std::make_unique<CollectiveLaunch>();
  c->comm = std::move(comm);
  c->rank = rank;
  return c;
}

void prepare_collective(Launch& l) {
  CollectiveLaunch& c = *l.prepared_as<CollectiveLaunch>();
  const ir::OpView op = l.view();
  const int n = c.comm->size();
  const std::uint8_t kind = find_kernel_def(op.def())->variant;
  if (kind == variant::transfer) {  // rank 0 sends its input, rank 1 receives into its output
    const View& v = c.rank == 0 ? l.in[0] : l.out[0];
    c.collective = Collective::broadcast(v.data, v.data, elements_of(v.shape), 0, v.dtype);
    return;
  }
  const View &in = l.in[0], &out = l.out[0];
  const DType dtype = in.dtype;
  if (kind == variant::allreduce_sum) {
    c.collective = Collective::allreduce_sum(in.data, out.data, elements_of(in.shape), dtype);
  } else if (kind == variant::allgather) {
    const std::size_t axis = axis_attr(op, "axis", out.shape.size());
    std::vector<std::int64_t> sizes;  // every rank's shard along the axis (static: verified)
    for (ir::Value v : op.operands()) sizes.push_back(l.graph->type(v).shape.dims()[axis].size());
    c.unpack = pieces_of(out.shape, axis, dtype, sizes);
    std::vector<std::size_t> counts;
    for (std::int64_t s : sizes)
      counts.push_back(elements_of(out.shape) / static_cast<std::size_t>(out.shape[axis]) *
                       static_cast<std::size_t>(s));
    void* to = out.data;
    if (c.unpack.needed()) {
      c.scratch_out.resize(elements_of(out.shape) * size_of(dtype));
      to = c.scratch_out.data();
    }
    c.collective = Collective::allgather(in.data, to, std::move(counts), dtype);
  } else if (kind == variant::reduce_scatter_sum) {
    const std::size_t axis = axis_attr(op, "axis", in.shape.size());
    c.pack = pieces_of(in.shape, axis, dtype, shard_sizes(in.shape[axis], n));
    std::vector<std::size_t> counts;
    for (std::int64_t s : c.pack.sizes)
      counts.push_back(elements_of(in.shape) / static_cast<std::size_t>(in.shape[axis]) *
                       static_cast<std::size_t>(s));
    const void* from = in.data;
    if (c.pack.needed()) {
      c.scratch_in.resize(elements_of(in.shape) * size_of(dtype));
      from = c.scratch_in.data();
    }
    c.collective = Collective::reduce_scatter_sum(from, out.data, std::move(counts), dtype);
  } else if (kind == variant::all_to_all) {
    const std::size_t split = axis_attr(op, "split_axis", in.shape.size());
    const std::size_t join = axis_attr(op, "concat_axis", in.shape.size());
    c.pack = pieces_of(in.shape, split, dtype, shard_sizes(in.shape[split], n));
    Index piece = to_index(in.shape);
    piece[split] /= n;
    c.unpack = pieces_of(out.shape, join, dtype,
                         std::vector<std::int64_t>(static_cast<std::size_t>(n), piece[join]));
    // Pieces of the split axis are whole when nothing precedes it; the same for the joined
    // axis of the output. Otherwise they go through scratch.
    if (c.pack.needed()) c.scratch_in.resize(elements_of(in.shape) * size_of(dtype));
    if (c.unpack.needed()) c.scratch_out.resize(elements_of(out.shape) * size_of(dtype));
    const void* from = c.pack.needed() ? c.scratch_in.data() : in.data;
    void* to = c.unpack.needed() ? c.scratch_out.data() : out.data;
    c.collective = Collective::all_to_all(from, to, elements_of(piece), dtype);
  } else {
    throw InternalError(cat("prepare_collective: ", op.describe(), " is not a collective"));
  }
}

void run_collective(const Launch& l) {
  CollectiveLaunch& c = *l.prepared_as<CollectiveLaunch>();
  if (c.pack.needed()) move_pieces(c.pack, l.in[0].data, c.scratch_in.data(), true);
  c.comm->run(c.rank, c.collective);
  if (c.unpack.needed()) move_pieces(c.unpack, c.scratch_out.data(), l.out[0].data, false);
}

}  // namespace kiln::compiler
