#pragma once
/// \file
/// `TensorLayout` and `Tensor`: what a staged function computes with.
///
/// A `Tensor` is one of
/// - a *placeholder*: only a layout; what you pass to a staged function for each input
///   (`TensorLayout` converts to it implicitly);
/// - a *traced* tensor: a value of the graph being staged; ops on it add IR ops;
/// - a *constant*: host data (`Tensor::constant`), embedded in the graph when a staged
///   function uses it.
///
/// Ops follow NumPy / PyTorch semantics: broadcasting, and type promotion where operands
/// differ (bool < integers < floating; within a kind the wider type wins, i8 with u8
/// gives i32, f16 with bf16 gives f32; a C++ integer scalar takes the tensor's dtype, a
/// floating scalar makes an integer tensor f32). Every op records the caller's source
/// line, and errors name the op, the operand layouts and that line.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/core/source_location.hpp"

namespace kiln {

/// Layout of a tensor: dtype, shape (static and named symbolic dims) and device.
/// (A `DeviceMesh` with placements will take the device's place for sharded tensors.)
struct TensorLayout {
  DType dtype = DType::f32;
  Shape shape;
  Device device;

  TensorLayout() = default;
  TensorLayout(DType d, Shape s, Device dev = Device::cpu())
      : dtype(d), shape(std::move(s)), device(dev) {}
  friend bool operator==(const TensorLayout&, const TensorLayout&) = default;
};
/// `f32[batch, 4] on cpu:0`.
std::string to_string(const TensorLayout& layout);
std::ostream& operator<<(std::ostream& os, const TensorLayout& layout);

namespace detail {
class Frame;
struct TensorData;
}  // namespace detail

/// A value carrying the caller's source location into an operator (operators cannot
/// take a defaulted `SourceLocation` parameter themselves).
template <class T>
struct Located {
  T value;
  SourceLocation where;
  Located(T v, SourceLocation w = SourceLocation::current())  // NOLINT
      : value(std::move(v)), where(w) {}
};

class Tensor;
using LTensor = Located<const Tensor&>;

/// A tensor: placeholder, traced value, or constant (see the file comment).
class Tensor {
 public:
  /// An empty tensor (no layout); using it in an op throws.
  Tensor() = default;
  /// A placeholder with \p layout: the input of a staged function.
  Tensor(TensorLayout layout);  // NOLINT(google-explicit-constructor)

  /// A constant from host values, converted to \p dtype. \throws UserError when the value
  /// count does not match the (static) shape.
  static Tensor constant(std::span<const double> values, Shape shape, DType dtype = DType::f32,
                         Device device = Device::cpu());
  static Tensor constant(std::initializer_list<double> values, Shape shape,
                         DType dtype = DType::f32, Device device = Device::cpu()) {
    return constant(std::span<const double>(values.begin(), values.size()), std::move(shape), dtype,
                    device);
  }
  /// A rank-0 constant.
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());

  // ---- concrete tensors: data in the device's memory (host memory for the CPU) ----------

  /// A tensor holding a copy of \p values. \throws UserError when the count does not
  /// match the (static) shape.
  template <Element T>
  static Tensor from_data(std::span<const T> values, Shape shape, Device device = Device::cpu()) {
    return from_bytes(dtype_of<T>, std::move(shape), device, values.data(),
                      values.size() * sizeof(T));
  }
  template <Element T>
  static Tensor from_data(const std::vector<T>& values, Shape shape,
                          Device device = Device::cpu()) {
    return from_data(std::span<const T>(values), std::move(shape), device);
  }
  /// A tensor of \p layout holding a copy of \p bytes (little-endian elements).
  static Tensor from_bytes(DType dtype, Shape shape, Device device, const void* bytes,
                           std::size_t size);
  /// A tensor over \p size bytes at \p bytes that someone else owns, without a copy (how
  /// kiln's Python package takes NumPy arrays and DLPack tensors): \p owner is held as
  /// long as the tensor or a copy of it lives, and its deleter releases the memory. The
  /// memory must stay unchanged while kiln reads it (a call reading it as an input, or a
  /// compiled callable given it as a weight, which reads it in place on every call).
  /// \throws UserError for a symbolic shape, a size that does not match it, no owner, or
  /// elements not aligned to their size.
  static Tensor borrow(DType dtype, Shape shape, Device device, const void* bytes, std::size_t size,
                       std::shared_ptr<const void> owner);
  static Tensor zeros(const TensorLayout& layout);
  static Tensor full(const TensorLayout& layout, double value);
  /// Uniform in [low, high), reproducible for a \p seed.
  static Tensor random(const TensorLayout& layout, std::uint64_t seed, double low = -1,
                       double high = 1);

  /// The elements as \p T. \throws UserError unless this is a concrete tensor of dtype T.
  template <Element T>
  std::vector<T> to_vector() const {
    check_element(dtype_of<T>);
    std::vector<T> out(bytes().size() / sizeof(T));
    std::memcpy(out.data(), bytes().data(), out.size() * sizeof(T));
    return out;
  }
  /// Every element converted to double (any dtype). \throws UserError unless concrete.
  std::vector<double> to_doubles() const;
  /// The raw little-endian elements of a concrete tensor (empty otherwise).
  std::span<const std::byte> bytes() const noexcept;
  std::size_t num_elements() const;

  bool empty() const noexcept { return kind_ == Kind::empty; }
  bool is_placeholder() const noexcept { return kind_ == Kind::placeholder; }
  bool is_traced() const noexcept { return kind_ == Kind::traced; }
  bool is_constant() const noexcept { return kind_ == Kind::constant; }

  const TensorLayout& layout() const noexcept { return layout_; }
  DType dtype() const noexcept { return layout_.dtype; }
  const Shape& shape() const noexcept { return layout_.shape; }
  std::size_t rank() const noexcept { return layout_.shape.rank(); }
  Device device() const noexcept { return layout_.device; }

  // Internal (staging): the frame and IR value of a traced tensor; a constant's data.
  const std::shared_ptr<detail::Frame>& frame() const noexcept { return frame_; }
  std::uint32_t value_id() const noexcept { return value_; }
  const std::shared_ptr<const detail::TensorData>& data() const noexcept { return data_; }
  static Tensor traced(std::shared_ptr<detail::Frame> frame, std::uint32_t value,
                       TensorLayout layout);
  static Tensor constant_data(TensorLayout layout, std::shared_ptr<const detail::TensorData> data);

 private:
  void check_element(DType requested) const;

  enum class Kind : std::uint8_t { empty, placeholder, traced, constant };
  Kind kind_ = Kind::empty;
  TensorLayout layout_;
  std::shared_ptr<detail::Frame> frame_;
  std::uint32_t value_ = 0;
  std::shared_ptr<const detail::TensorData> data_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

using Loc = SourceLocation;

// ---- element-wise --------------------------------------------------------------------

Tensor operator+(LTensor a, const Tensor& b);
Tensor operator-(LTensor a, const Tensor& b);
Tensor operator*(LTensor a, const Tensor& b);
Tensor operator/(LTensor a, const Tensor& b);
Tensor operator+(LTensor a, double b);
Tensor operator-(LTensor a, double b);
Tensor operator*(LTensor a, double b);
Tensor operator/(LTensor a, double b);
Tensor operator+(Located<double> a, const Tensor& b);
Tensor operator-(Located<double> a, const Tensor& b);
Tensor operator*(Located<double> a, const Tensor& b);
Tensor operator/(Located<double> a, const Tensor& b);
Tensor operator-(LTensor a);
Tensor operator<(LTensor a, const Tensor& b);
Tensor operator<=(LTensor a, const Tensor& b);
Tensor operator>(LTensor a, const Tensor& b);
Tensor operator>=(LTensor a, const Tensor& b);
Tensor operator<(LTensor a, double b);
Tensor operator>(LTensor a, double b);
/// \p value as the rank-0 operand the scalar operators above (`x * 2`) combine with \p
/// tensor: of \p tensor's dtype when that holds it exactly (an integral value beside an
/// integer tensor; any value beside a float tensor), f32 for a fractional value beside an
/// integer tensor, i64 or f32 beside bool; on \p tensor's device. For the other binary
/// ops with a scalar (`maximum(x, scalar_like(x, 0))`), and for bindings to languages
/// whose numbers are not C++'s. \throws UserError naming \p op and \p where when an
/// integral value does not fit an integer dtype, or is 2^53 or more.
Tensor scalar_like(const Tensor& tensor, double value, std::string_view op = "scalar",
                   Loc where = Loc::current());
/// Element-wise equality (a tensor of bool; not C++ object equality).
Tensor equal(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor not_equal(const Tensor& a, const Tensor& b, Loc where = Loc::current());

Tensor pow(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor pow(const Tensor& a, double b, Loc where = Loc::current());
Tensor maximum(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor minimum(const Tensor& a, const Tensor& b, Loc where = Loc::current());
/// The remainder of a / b truncated toward zero, with a's sign (C's fmod; exact). On
/// integers a fmod 0 is 0.
Tensor fmod(const Tensor& a, const Tensor& b, Loc where = Loc::current());
/// Bitwise and, or, xor and not of integer tensors (not bools: use `where` or comparisons).
Tensor bitwise_and(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor bitwise_or(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor bitwise_xor(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor bitwise_not(const Tensor& x, Loc where = Loc::current());
/// a << b and a >> b of integer tensors, wrapped to the dtype (>> is arithmetic for signed
/// dtypes); a count below 0 or above 63 shifts every bit out.
Tensor shift_left(const Tensor& a, const Tensor& b, Loc where = Loc::current());
Tensor shift_right(const Tensor& a, const Tensor& b, Loc where = Loc::current());
/// cond ? a : b, with broadcasting. \p cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, Loc where = Loc::current());

Tensor neg(const Tensor& x, Loc where = Loc::current());
Tensor abs(const Tensor& x, Loc where = Loc::current());
Tensor exp(const Tensor& x, Loc where = Loc::current());
Tensor log(const Tensor& x, Loc where = Loc::current());
Tensor sqrt(const Tensor& x, Loc where = Loc::current());
Tensor rsqrt(const Tensor& x, Loc where = Loc::current());
Tensor tanh(const Tensor& x, Loc where = Loc::current());
/// The error function, erf(x) = 2/sqrt(pi) times the integral of e^(-t²) from 0 to x.
Tensor erf(const Tensor& x, Loc where = Loc::current());
/// Sine, cosine and tangent of radians (integers compute in f32).
Tensor sin(const Tensor& x, Loc where = Loc::current());
Tensor cos(const Tensor& x, Loc where = Loc::current());
Tensor tan(const Tensor& x, Loc where = Loc::current());
/// -1, 0 or 1 by the sign of x, in x's dtype; NaN stays NaN and a zero keeps its sign.
Tensor sign(const Tensor& x, Loc where = Loc::current());
/// The integer below, above or nearest (halves to even) x; integers are returned as they are.
Tensor floor(const Tensor& x, Loc where = Loc::current());
Tensor ceil(const Tensor& x, Loc where = Loc::current());
Tensor round(const Tensor& x, Loc where = Loc::current());
Tensor sigmoid(const Tensor& x, Loc where = Loc::current());
Tensor relu(const Tensor& x, Loc where = Loc::current());
/// GELU; \p approximate "none" (exact, erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none", Loc where = Loc::current());
Tensor silu(const Tensor& x, Loc where = Loc::current());
Tensor cast(const Tensor& x, DType dtype, Loc where = Loc::current());

// ---- linear algebra, reductions, normalisation ---------------------------------------

/// Matrix product; batch dims broadcast; rank-1 operands act as vectors (NumPy rules).
Tensor matmul(const Tensor& a, const Tensor& b, Loc where = Loc::current());
/// Sum over \p axes (all axes when empty).
Tensor sum(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdim = false,
           Loc where = Loc::current());
Tensor mean(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdim = false,
            Loc where = Loc::current());
Tensor max(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdim = false,
           Loc where = Loc::current());
Tensor min(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdim = false,
           Loc where = Loc::current());
/// Product over \p axes (all when empty): floats in double, integers wrapping; 1 over none.
Tensor prod(const Tensor& x, std::vector<std::int64_t> axes = {}, bool keepdim = false,
            Loc where = Loc::current());
/// Index of the largest element along \p axis (i64).
Tensor argmax(const Tensor& x, std::int64_t axis, bool keepdim = false, Loc where = Loc::current());
Tensor softmax(const Tensor& x, std::int64_t axis = -1, Loc where = Loc::current());
Tensor log_softmax(const Tensor& x, std::int64_t axis = -1, Loc where = Loc::current());
/// Normalises over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5,
                  Loc where = Loc::current());
/// x / sqrt(mean(x^2) + eps) * gamma over the last axis.
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps = 1e-6,
                Loc where = Loc::current());

// ---- shapes --------------------------------------------------------------------------

Tensor reshape(const Tensor& x, Shape shape, Loc where = Loc::current());
/// Reverses the axes (rank 2: the matrix transpose).
Tensor transpose(const Tensor& x, Loc where = Loc::current());
/// Swaps two axes.
Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1,
                 Loc where = Loc::current());
Tensor permute(const Tensor& x, std::vector<std::int64_t> perm, Loc where = Loc::current());
Tensor broadcast_to(const Tensor& x, Shape shape, Loc where = Loc::current());
/// One axis's range [start, stop) with a step; the rest whole. Negative start/stop count
/// from the end; stop beyond the end clamps.
Tensor slice(const Tensor& x, std::int64_t axis, std::int64_t start, std::int64_t stop,
             std::int64_t step = 1, Loc where = Loc::current());
Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis, Loc where = Loc::current());
/// Splits along \p axis into pieces of \p sizes.
std::vector<Tensor> split(const Tensor& x, std::vector<std::int64_t> sizes, std::int64_t axis,
                          Loc where = Loc::current());
/// x indexed along \p axis by integer \p indices (the result has the indices' dims there).
Tensor gather(const Tensor& x, const Tensor& indices, std::int64_t axis,
              Loc where = Loc::current());
/// x at \p indices along \p axis, element by element (NumPy's take_along_axis, ONNX's
/// GatherElements): the result has the indices' shape, which must have x's rank and fit in
/// x off the axis. Indices may be negative (from the end); one outside throws at run time.
Tensor gather_elements(const Tensor& x, const Tensor& indices, std::int64_t axis,
                       Loc where = Loc::current());
/// Slices of x at the index tuples along the last axis of \p indices (ONNX's GatherND):
/// after \p batch_dims shared leading dims, each tuple of k indices picks x[i0, ..., ik-1];
/// the result is indices.shape[:-1] + x.shape[batch_dims + k:]. Negative indices count
/// from the end.
Tensor gather_nd(const Tensor& x, const Tensor& indices, std::int64_t batch_dims = 0,
                 Loc where = Loc::current());
/// x with \p updates (the indices' shape) written at \p indices along \p axis, element by
/// element (ONNX's ScatterElements, PyTorch's scatter): \p reduction "none" (the last of
/// several writes to one element wins), "add", "mul", "max" or "min" combines each update
/// with the element. Indices may be negative; one outside throws at run time.
Tensor scatter_elements(const Tensor& x, const Tensor& indices, const Tensor& updates,
                        std::int64_t axis, const std::string& reduction = "none",
                        Loc where = Loc::current());
/// x with the slices at the index tuples along the last axis (k) of \p indices replaced by
/// (or combined with) \p updates of shape indices.shape[:-1] + x.shape[k:] (ONNX's
/// ScatterND); \p reduction as for scatter_elements.
Tensor scatter_nd(const Tensor& x, const Tensor& indices, const Tensor& updates,
                  const std::string& reduction = "none", Loc where = Loc::current());
/// The \p k largest elements along \p axis (smallest with !\p largest), best first, and
/// their indices (i64): x's shape with k at the axis. Ties keep the lower index first; NaN
/// counts as larger than every number (PyTorch's topk). `auto [values, ids] = top_k(x, 5);`
std::pair<Tensor, Tensor> top_k(const Tensor& x, std::int64_t k, std::int64_t axis = -1,
                                bool largest = true, Loc where = Loc::current());
/// Running sum along \p axis (floats summed in double, each result rounded once; integers
/// wrap). \p exclusive leaves each element out of its own sum; \p reverse sums from the end.
Tensor cumsum(const Tensor& x, std::int64_t axis, bool exclusive = false, bool reverse = false,
              Loc where = Loc::current());
/// The geometry of a sliding window over [N, C, spatial...] (1 to 3 spatial dims): per
/// spatial dim a stride and a dilation, and the pads as all the begins, then all the ends
/// (ONNX's order). Empty: strides and dilations of 1, no pads.
struct Window {
  std::vector<std::int64_t> strides{}, pads{}, dilations{};
  std::int64_t groups = 1;                     ///< convs: channel groups (depthwise: C)
  std::vector<std::int64_t> output_padding{};  ///< conv_transpose: extra end elements
};
/// Convolution of \p x [N, C, S...] by \p w [M, C / groups, K...], plus \p bias [M] if
/// given: [N, M, O...], O = (S + pads - dilation (K - 1) - 1) / stride + 1. f32 runs
/// oneDNN's convolution, other floats direct loops.
Tensor conv(const Tensor& x, const Tensor& w, const Window& window = {},
            Loc where = Loc::current());
Tensor conv(const Tensor& x, const Tensor& w, const Tensor& bias, const Window& window = {},
            Loc where = Loc::current());
/// Transposed convolution (ONNX's ConvTranspose, PyTorch's conv_transpose): \p x
/// [N, C, S...] by \p w [C, M / groups, K...], plus \p bias [M]: [N, M, O...],
/// O = stride (S - 1) + output_padding + dilation (K - 1) + 1 - pads.
Tensor conv_transpose(const Tensor& x, const Tensor& w, const Window& window = {},
                      Loc where = Loc::current());
Tensor conv_transpose(const Tensor& x, const Tensor& w, const Tensor& bias,
                      const Window& window = {}, Loc where = Loc::current());
/// The largest element of each \p kernel window of x [N, C, S...] (pads never win; a NaN
/// does). \p ceil_mode rounds the output size up (a last window starting in the input).
Tensor max_pool(const Tensor& x, std::vector<std::int64_t> kernel, const Window& window = {},
                bool ceil_mode = false, Loc where = Loc::current());
/// The mean of each \p kernel window of x: over the elements inside x or, with \p
/// count_include_pad, over the window's taps inside the padded input.
Tensor avg_pool(const Tensor& x, std::vector<std::int64_t> kernel, const Window& window = {},
                bool count_include_pad = false, bool ceil_mode = false, Loc where = Loc::current());
/// How resize samples (ONNX's Resize attributes; docs/ops.md gives the formulas).
struct Resampling {
  std::string mode = "nearest";  ///< "nearest", "linear" (bi/trilinear...) or "cubic"
  /// Where output coordinate o falls in the input: "half_pixel" ((o + 0.5) / scale - 0.5),
  /// "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"
  /// (o / scale) or "tf_crop_and_resize" (inside \p roi; outside: extrapolation_value).
  std::string coordinates = "half_pixel";
  /// nearest: which input a coordinate between two takes: "round_prefer_floor",
  /// "round_prefer_ceil", "floor" or "ceil".
  std::string nearest_mode = "round_prefer_floor";
  double cubic_coeff_a = -0.75;  ///< cubic: the kernel's coefficient (PyTorch: -0.75)
  bool exclude_outside = false;  ///< taps outside the input get weight 0 (renormalised)
  bool antialias = false;        ///< linear/cubic: widen the filter by 1 / scale when shrinking
  double extrapolation_value = 0;
  std::vector<double> roi{};  ///< tf_crop_and_resize: every axis's start, then every end
};
/// \p x resampled to \p sizes, one per axis (-1 keeps that axis as it is, and may be
/// symbolic). \p scales, one per axis, is the factor the coordinate transform divides by;
/// empty: sizes[d] / x's dim d (ONNX's Resize given sizes). Floats in double, rounded once;
/// nearest copies elements of any dtype exactly.
Tensor resize(const Tensor& x, std::vector<std::int64_t> sizes, const Resampling& how = {},
              std::vector<double> scales = {}, Loc where = Loc::current());
/// Rows of \p table picked by \p ids: gather along axis 0.
Tensor embedding(const Tensor& table, const Tensor& ids, Loc where = Loc::current());

// ---- between devices (one tensor per device: the shards of one value) -------------------

/// Every device gets the sum of the shards (one per device, same shape and dtype).
std::vector<Tensor> allreduce_sum(const std::vector<Tensor>& shards, Loc where = Loc::current());
/// Every device gets the shards joined along \p axis (shards may differ in size there).
std::vector<Tensor> allgather(const std::vector<Tensor>& shards, std::int64_t axis,
                              Loc where = Loc::current());
/// Device i gets shard i along \p axis of the sum of the shards (sizes as `shard_size`).
std::vector<Tensor> reduce_scatter_sum(const std::vector<Tensor>& shards, std::int64_t axis,
                                       Loc where = Loc::current());
/// Device i gets piece i (along \p split_axis, which must split evenly) of every shard,
/// joined along \p concat_axis: how a value sharded on one axis becomes sharded on another.
std::vector<Tensor> all_to_all(const std::vector<Tensor>& shards, std::int64_t split_axis,
                               std::int64_t concat_axis, Loc where = Loc::current());
/// \p x on \p device (itself if it is there already).
Tensor transfer_to(const Tensor& x, Device device, Loc where = Loc::current());
/// \p x on each of \p devices.
std::vector<Tensor> broadcast(const Tensor& x, const std::vector<Device>& devices,
                              Loc where = Loc::current());

// ---- creation (while staging) --------------------------------------------------------

/// start, start + step, ... below stop, as \p dtype.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::i64,
              Loc where = Loc::current());

}  // namespace kiln
