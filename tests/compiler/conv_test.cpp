// conv, conv_transpose, max_pool and avg_pool, compiled (oneDNN for f32, direct loops for
// other dtypes) against the reference interpreter: cases worked out by hand, random cases
// over the geometry (groups, strides, dilations, asymmetric pads, 1-D to 3-D, batches that
// split into tiles on two workers), fixed weights (reordered once) and weights passed per
// call, fused epilogues, NaNs, and geometry refused with a message. ONNX's node tests and
// the zoo (ResNet-18, MobileNetV3) compare with ONNX's references and ONNX Runtime.
// Resize too: every mode and coordinate transform against the reference.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "../error_matchers.hpp"
#include "compiler/cpu/winograd_conv.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/cpu_isa.hpp"
#include "kiln/core/error.hpp"
#include "kiln/runtime/device_context.hpp"
#include "kiln/stage/stage.hpp"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using Ints = std::vector<std::int64_t>;

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_data(v, s); }
Shape shape_of(const Ints& dims) { return Shape(std::vector<Dim>(dims.begin(), dims.end())); }

CompileOptions on_threads(int threads) {
  CompileOptions o;
  o.context = std::make_shared<DeviceContext>(Device::cpu(), DeviceContextOptions{threads});
  return o;
}

/// Runs \p staged compiled on \p threads workers and in the reference; expects every
/// output within \p tol of the reference's (relative to the output's largest magnitude).
std::vector<Tensor> both(const StagedGraph& staged, const std::vector<Tensor>& inputs,
                         double tol = 1e-5, int threads = 2) {
  const std::vector<Tensor> ref = reference_run(staged.graph(), inputs, {});
  CompiledCallable call(staged, {}, on_threads(threads));
  std::vector<Tensor> out = call.run(inputs);
  EXPECT_EQ(out.size(), ref.size());
  for (std::size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    EXPECT_EQ(out[i].shape(), ref[i].shape());
    const std::vector<double> got = out[i].to_doubles(), want = ref[i].to_doubles();
    double scale = 1e-30;
    for (double w : want) scale = std::max(scale, std::abs(w));
    for (std::size_t k = 0; k < got.size() && k < want.size(); ++k) {
      if (std::isnan(want[k])) {
        EXPECT_TRUE(std::isnan(got[k])) << "output " << i << " element " << k;
        continue;
      }
      if (std::abs(got[k] - want[k]) > tol * scale) {
        ADD_FAILURE() << "output " << i << " element " << k << ": " << got[k] << " vs " << want[k]
                      << " (tolerance " << tol * scale << ")";
        break;
      }
    }
  }
  return out;
}

TEST(Conv, OneDimensionalWithPadsWorkedByHand) {
  // Cross-correlation with [1, -1]: out[i] = x[i] - x[i + 1], the pads reading 0.
  const auto out =
      both(stage([](Tensor x, Tensor w) {
             return conv(x, w, Window{.pads = {1, 1}});
           })(TensorLayout(DType::f32, {1, 1, 4}), TensorLayout(DType::f32, {1, 1, 2})),
           {f32({1, 2, 4, 8}, {1, 1, 4}), f32({1, -1}, {1, 1, 2})}, 0);
  EXPECT_EQ(out[0].shape(), Shape({1, 1, 5}));
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(-1, -1, -2, -4, 8));
}

struct ConvCase {
  const char* name;
  Ints x, w;  // shapes
  Window window;
  bool bias = true;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases{
      {"plain 3x3", {2, 3, 9, 9}, {8, 3, 3, 3}, {.pads = {1, 1, 1, 1}}},
      {"strided, asymmetric pads",
       {3, 4, 11, 10},
       {32, 4, 3, 2},
       {.strides = {2, 3}, .pads = {0, 1, 2, 0}}},
      {"dilated", {1, 2, 12, 12}, {4, 2, 3, 3}, {.dilations = {2, 3}}, false},
      {"grouped", {2, 8, 7, 7}, {12, 2, 3, 3}, {.pads = {1, 1, 1, 1}, .groups = 4}},
      {"depthwise, strided",
       {1, 16, 14, 14},
       {16, 1, 3, 3},
       {.strides = {2, 2}, .pads = {1, 1, 1, 1}, .groups = 16}},
      {"1x1, many channels", {1, 64, 6, 6}, {96, 64, 1, 1}, {}},
      // Planes of 128 or more: a GEMM per batch entry on kiln's layout (no reorders).
      {"1x1, large planes", {3, 24, 16, 12}, {40, 24, 1, 1}, {}},
      {"1x1, large planes, 1-D", {2, 8, 300}, {20, 8, 1}, {}},
      {"1-D", {2, 3, 20}, {5, 3, 4}, {.strides = {2}, .pads = {2, 1}}},
      {"3-D", {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, {.pads = {1, 0, 1, 0, 1, 1}}, false},
  };
  return cases;
}

TEST(Conv, RandomGeometriesMatchTheReferenceWithWeightsFixedOrPassed) {
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor x = Tensor::random(TensorLayout(DType::f32, shape_of(c.x)), 1),
                 w = Tensor::random(TensorLayout(DType::f32, shape_of(c.w)), 2),
                 b = Tensor::random(TensorLayout(DType::f32, {c.w[0]}), 3);
    const Window win = c.window;
    const bool bias = c.bias;
    // Weights and bias passed per call: oneDNN reads them as they lie.
    both(stage([&](Tensor xs, Tensor ws, Tensor bs) {
           return bias ? conv(xs, ws, bs, win) : conv(xs, ws, win);
         })(x.layout(), w.layout(), b.layout()),
         {x, w, b});
    // Fixed weights (constants): reordered once for oneDNN's kernel.
    for (int threads : {1, 2})
      both(stage([&](Tensor xs) { return bias ? conv(xs, w, b, win) : conv(xs, w, win); })(
               x.layout()),
           {x}, 1e-5, threads);
  }
}

TEST(Conv, NonF32DtypesRunTheDirectLoops) {
  const Tensor x = Tensor::random(TensorLayout(DType::f64, {2, 4, 6, 5}), 4),
               w = Tensor::random(TensorLayout(DType::f64, {6, 2, 3, 2}), 5);
  both(stage([](Tensor xs, Tensor ws) {
         return conv(xs, ws, Window{.strides = {1, 2}, .pads = {1, 0, 1, 1}, .groups = 2});
       })(x.layout(), w.layout()),
       {x, w}, 1e-12);
  both(stage([](Tensor xs, Tensor ws) {
         return conv(cast(xs, DType::bf16), cast(ws, DType::bf16), Window{.groups = 2});
       })(x.layout(), w.layout()),
       {x, w}, 1e-2);
}

TEST(Conv, AnEpilogueRunsOnEachTile) {
  // relu(conv(x) + x): the residual block's tail, fused into the conv's launch.
  const Tensor x = Tensor::random(TensorLayout(DType::f32, {2, 16, 10, 10}), 6),
               w = Tensor::random(TensorLayout(DType::f32, {16, 16, 3, 3}), 7);
  const StagedGraph staged = stage([&](Tensor xs) {
    return relu(conv(xs, w, Window{.pads = {1, 1, 1, 1}}) + xs);
  })(x.layout());
  both(staged, {x});
  CompiledCallable call(staged, {}, on_threads(2));
  call.run({x});
  EXPECT_EQ(call.stats().epilogues, 1U);
}

TEST(Conv, PointwiseGemmsTakeBiasAndEpilogueOnEveryTile) {
  // hardswish-like tail on a 1x1 conv over 16x16 planes (the GEMM path), and over 7x7
  // ones (GEMMs with several batch entries, oneDNN's conv with one), split over 1, 2 and 3
  // workers into tiles of batch entries and output channels.
  for (const Shape& in : {Shape{3, 32, 16, 16}, Shape{2, 32, 7, 7}, Shape{1, 32, 7, 7}}) {
    const Tensor x = Tensor::random(TensorLayout(DType::f32, in), 8),
                 w = Tensor::random(TensorLayout(DType::f32, {48, 32, 1, 1}), 9),
                 b = Tensor::random(TensorLayout(DType::f32, {48}), 10);
    const StagedGraph staged = stage([&](Tensor xs) {
      const Tensor y = conv(xs, w, b, Window{});
      const Tensor six = minimum(relu(y + 3.0), scalar_like(y, 6.0));
      return y * six * (1.0 / 6.0);
    })(x.layout());
    for (int threads : {1, 2, 3}) both(staged, {x}, 1e-5, threads);
  }
}

TEST(ConvTranspose, WorkedByHandAndRandomGeometries) {
  // Stride 2 spreads x = [1, 2] onto [1, 1, 1] taps: [1, 1, 1 + 2, 2, 2].
  const auto out =
      both(stage([](Tensor x, Tensor w) { return conv_transpose(x, w, Window{.strides = {2}}); })(
               TensorLayout(DType::f32, {1, 1, 2}), TensorLayout(DType::f32, {1, 1, 3})),
           {f32({1, 2}, {1, 1, 2}), f32({1, 1, 1}, {1, 1, 3})}, 0);
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(1, 1, 3, 2, 2));
  struct Case {
    Ints x, w;
    Window window;
  };
  const std::vector<Case> cases{
      {{2, 3, 5, 5}, {3, 4, 3, 3}, {.strides = {2, 2}, .pads = {1, 1, 1, 1}}},
      {{1, 4, 4, 6},
       {4, 3, 3, 2},
       {.strides = {3, 2}, .pads = {0, 1, 2, 0}, .groups = 2, .output_padding = {1, 1}}},
      {{1, 2, 7}, {2, 2, 3}, {.strides = {1}, .dilations = {2}}},
      {{2, 8, 3, 3}, {8, 1, 4, 4}, {.strides = {2, 2}, .pads = {1, 1, 1, 1}, .groups = 8}},
  };
  for (const Case& c : cases) {
    const Tensor x = Tensor::random(TensorLayout(DType::f32, shape_of(c.x)), 8),
                 w = Tensor::random(TensorLayout(DType::f32, shape_of(c.w)), 9);
    const Tensor b = Tensor::random(TensorLayout(DType::f32, {c.w[1] * c.window.groups}), 10);
    const Window win = c.window;
    both(stage([&](Tensor xs) { return conv_transpose(xs, w, b, win); })(x.layout()), {x});
    both(stage([&](Tensor xs, Tensor ws) { return conv_transpose(xs, ws, win); })(x.layout(),
                                                                                  w.layout()),
         {x, w});
    const Tensor x64 = Tensor::random(TensorLayout(DType::f64, x.shape()), 8),
                 w64 = Tensor::random(TensorLayout(DType::f64, w.shape()), 9);
    both(stage([&](Tensor xs, Tensor ws) { return conv_transpose(xs, ws, win); })(x64.layout(),
                                                                                  w64.layout()),
         {x64, w64}, 1e-12);
  }
}

TEST(Pool, MaxAndAverageWorkedByHand) {
  // x = 1..16 in a 4 x 4 plane; 2 x 2 windows with stride 2 and one pad at the start.
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i + 1);
  const Window win{.strides = {2, 2}, .pads = {1, 1, 0, 0}};
  const auto out =
      both(stage([&](Tensor x) {
             return std::make_tuple(max_pool(x, {2, 2}, win), avg_pool(x, {2, 2}, win, false),
                                    avg_pool(x, {2, 2}, win, true));
           })(TensorLayout(DType::f32, {1, 1, 4, 4})),
           {f32(v, {1, 1, 4, 4})}, 0);
  // Windows: rows {-1, 0}, {1, 2}; columns {-1, 0}, {1, 2} (row 3 and column 3 unread).
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(1, 3, 9, 11));
  EXPECT_THAT(out[1].to_vector<float>(), ElementsAre(1, 2.5, 7, 8.5));
  EXPECT_THAT(out[2].to_vector<float>(), ElementsAre(0.25, 1.25, 3.5, 8.5));
}

TEST(Pool, CeilModeNaNsIntegersAndRandomGeometries) {
  // Ceil mode: 5 elements, window 2, stride 2 -> 3 outputs (the last window half outside);
  // a window starting past the input is dropped (2 elements, window 1, stride 2 -> 1).
  const auto ceil =
      both(stage([](Tensor x, Tensor y) {
             return std::make_tuple(max_pool(x, {2}, Window{.strides = {2}}, true),
                                    avg_pool(x, {2}, Window{.strides = {2}}, false, true),
                                    max_pool(y, {1}, Window{.strides = {2}}, true));
           })(TensorLayout(DType::f32, {1, 1, 5}), TensorLayout(DType::f32, {1, 1, 2})),
           {f32({1, 5, 2, 4, 3}, {1, 1, 5}), f32({7, 8}, {1, 1, 2})}, 0);
  EXPECT_THAT(ceil[0].to_vector<float>(), ElementsAre(5, 4, 3));
  EXPECT_THAT(ceil[1].to_vector<float>(), ElementsAre(3, 3, 3));
  EXPECT_THAT(ceil[2].to_vector<float>(), ElementsAre(7));
  // A NaN wins its windows, as in PyTorch.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto with_nan =
      both(stage([](Tensor x) { return max_pool(x, {2}); })(TensorLayout(DType::f32, {1, 1, 4})),
           {f32({1, nan, 3, 4}, {1, 1, 4})}, 0);
  const std::vector<float> got = with_nan[0].to_vector<float>();
  EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1]));
  EXPECT_EQ(got[2], 4);
  // uint8 max pooling: exact.
  const auto ints =
      both(stage([](Tensor x) {
             return max_pool(x, {2, 2});
           })(TensorLayout(DType::u8, {1, 1, 2, 3})),
           {Tensor::from_data(std::vector<std::uint8_t>{1, 200, 3, 4, 5, 255}, {1, 1, 2, 3})}, 0);
  EXPECT_THAT(ints[0].to_vector<std::uint8_t>(), ElementsAre(200, 255));
  // Random 2-D and 3-D geometries, f32 and f64, split over planes.
  const Tensor x = Tensor::random(TensorLayout(DType::f32, {2, 8, 13, 12}), 11);
  const Window w2{.strides = {2, 3}, .pads = {1, 0, 1, 2}, .dilations = {1, 2}};
  for (bool ceil_mode : {false, true})
    for (const Tensor& t : {x, Tensor::random(TensorLayout(DType::f64, x.shape()), 11)})
      both(stage([&](Tensor xs) {
             return std::make_tuple(max_pool(xs, {3, 2}, w2, ceil_mode),
                                    avg_pool(xs, {3, 2}, w2, false, ceil_mode),
                                    avg_pool(xs, {3, 2}, w2, true, ceil_mode));
           })(t.layout()),
           {t}, 1e-6);
  const Tensor x3 = Tensor::random(TensorLayout(DType::f32, {1, 3, 6, 7, 5}), 12);
  both(stage([](Tensor xs) {
         const Window w3{.strides = {2, 2, 1}, .pads = {0, 1, 1, 1, 1, 0}};
         return std::make_tuple(avg_pool(xs, {2, 3, 2}, w3), max_pool(xs, {2, 3, 2}, w3));
       })(x3.layout()),
       {x3}, 1e-6);
  // A network's stem pool (3x3, stride 2, padded), max by rows then along them: a NaN
  // wins the windows that reach it, in 2-D too.
  std::vector<float> values =
      Tensor::random(TensorLayout(DType::f32, {1, 2, 9, 10}), 13).to_vector<float>();
  values[1 * 90 + 4 * 10 + 5] = nan;  // channel 1, row 4, column 5
  const auto stem =
      both(stage([](Tensor xs) {
             return max_pool(xs, {3, 3}, Window{.strides = {2, 2}, .pads = {1, 1, 1, 1}});
           })(TensorLayout(DType::f32, {1, 2, 9, 10})),
           {f32(values, {1, 2, 9, 10})}, 0);
  const std::vector<float> pooled = stem[0].to_vector<float>();  // [1, 2, 5, 5]
  for (std::int64_t oy = 0; oy < 5; ++oy)
    for (std::int64_t ox = 0; ox < 5; ++ox) {
      // Row 4 is in the windows of output rows 2 (rows 3-5) and, column 5, of output columns
      // 2 (4-6) and 3 (5-7).
      const bool reaches = oy == 2 && (ox == 2 || ox == 3);
      EXPECT_EQ(std::isnan(pooled[25 + oy * 5 + ox]), reaches) << oy << ", " << ox;
      EXPECT_FALSE(std::isnan(pooled[oy * 5 + ox]));
    }
}

TEST(Conv, BadGeometryIsRefusedWithAMessage) {
  const TensorLayout x(DType::f32, {1, 4, 5, 5}), w(DType::f32, {6, 4, 7, 7}),
      grouped(DType::f32, {6, 2, 3, 3});
  KILN_EXPECT_THROW_MSG(stage([](Tensor a, Tensor b) { return conv(a, b); })(x, w), UserError,
                        "larger than the padded input");
  KILN_EXPECT_THROW_MSG(
      stage([](Tensor a, Tensor b) { return conv(a, b, Window{.groups = 3}); })(x, grouped),
      UserError, "groups 3 must divide the channels");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return max_pool(a, {3, 3}, Window{.strides = {0, 1}});
                        })(x),
                        UserError, "strides [0, 1] must each be in [1, 2^31]");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return max_pool(a, {2, 2}, Window{.pads = {2, 0, 0, 0}});
                        })(x),
                        UserError, "must be smaller than the window");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) { return max_pool(a, {2}); })(x), UserError,
                        "kernel_shape has 1 values; 2 spatial dims need 2");
}

TEST(Conv, HostileGeometryIsRefusedNotOverflowed) {
  // Pads of 2^31 on each side of three spatial dims: 2^96 output elements.
  const std::int64_t huge = std::int64_t{1} << 31;
  const Window pads{.pads = {huge, huge, huge, huge, huge, huge}};
  KILN_EXPECT_THROW_MSG(
      stage([&](Tensor a, Tensor b) { return conv(a, b, pads); })(
          TensorLayout(DType::f32, {1, 1, 1, 1, 1}), TensorLayout(DType::f32, {1, 1, 1, 1, 1})),
      UserError, "too big for one tensor");
  // One window of 2^31 taps over one element (pads just short of the window, a stride
  // that leaves one output): the taps inside are worked out, not scanned, so this is
  // instant. Compiled only: the reference scans every tap.
  const Window wide{.strides = {huge}, .pads = {huge - 1, huge - 1}};
  CompiledCallable call(stage([&](Tensor a) {
                          return std::make_tuple(max_pool(a, {huge}, wide),
                                                 avg_pool(a, {huge}, wide, true));
                        })(TensorLayout(DType::f32, {1, 1, 1})),
                        {}, on_threads(2));
  const std::vector<Tensor> out = call.run({f32({5}, {1, 1, 1})});
  EXPECT_THAT(out[0].to_vector<float>(), ElementsAre(5));
  // Counting the pads: 2^31 taps in the padded input.
  EXPECT_THAT(out[1].to_vector<float>(), ElementsAre(5.0f / static_cast<float>(huge)));
}

// ---- resize ---------------------------------------------------------------------------------

/// \p t with every element rounded to bfloat16 (round to nearest even), as f32.
Tensor rounded_to_bf16(const Tensor& t) {
  std::vector<float> v;
  for (double x : t.to_doubles()) {
    auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(x));
    bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;  // finite values here
    v.push_back(std::bit_cast<float>(bits));
  }
  return Tensor::from_data(std::span<const float>(v), t.shape());
}

/// relu(conv(x, w, b)) with the weights w and b bound by name, random weights and a random
/// input x of shape \p x_dims.
struct WeightedConv {
  StagedGraph staged;
  std::map<std::string, Tensor> weights;
  Tensor x;
};
WeightedConv relu_conv_with_weights(const Ints& x_dims, const Ints& w_dims, const Window& window) {
  const Shape xs = shape_of(x_dims), ws = shape_of(w_dims);
  const Shape bs{w_dims[0]};
  StagedGraph staged = stage([&](Tensor x) {
    const Tensor w = weight("w", TensorLayout(DType::f32, ws));
    const Tensor b = weight("b", TensorLayout(DType::f32, bs));
    return relu(conv(x, w, b, window));
  })(TensorLayout(DType::f32, xs));
  return {std::move(staged),
          {{"w", Tensor::random(TensorLayout(DType::f32, ws), 3, -0.5, 0.5)},
           {"b", Tensor::random(TensorLayout(DType::f32, bs), 4, -0.5, 0.5)}},
          Tensor::random(TensorLayout(DType::f32, xs), 5, -2, 2)};
}

TEST(Conv, Bf16ConvsRoundInputAndWeightsOnceAndSumInF32) {
  // MatmulPrecision::bf16 makes a conv with fixed weights multiply bf16 operands (bf16
  // units, or f32 kernels over rounded operands where the CPU has none: the same
  // products): the reference on a bf16-rounded input and weights agrees up to summation
  // order; the f32 result differs. Plain, strided and depthwise convs; 1 and 2 workers.
  struct Case {
    const char* name;
    Ints x, w;
    Window window;
  };
  for (const Case& c :
       {Case{"3x3", {2, 16, 10, 10}, {32, 16, 3, 3}, {.pads = {1, 1, 1, 1}}},
        Case{"strided", {1, 8, 15, 15}, {16, 8, 3, 3}, {.strides = {2, 2}}},
        Case{"depthwise", {1, 32, 9, 9}, {32, 1, 5, 5}, {.pads = {2, 2, 2, 2}, .groups = 32}}}) {
    const WeightedConv wc = relu_conv_with_weights(c.x, c.w, c.window);
    const StagedGraph& staged = wc.staged;
    const std::map<std::string, Tensor>& weights = wc.weights;
    const Tensor& x = wc.x;
    std::map<std::string, Tensor> rounded = weights;
    rounded["w"] = rounded_to_bf16(weights.at("w"));
    const std::vector<double> want =
        reference_run(staged.graph(), {rounded_to_bf16(x)}, rounded)[0].to_doubles();
    const std::vector<double> exact = reference_run(staged.graph(), {x}, weights)[0].to_doubles();
    for (const int threads : {1, 2}) {
      CompileOptions options = on_threads(threads);
      options.matmul_precision = MatmulPrecision::bf16;
      CompiledCallable compiled(staged, weights, options);
      const std::vector<double> got = compiled.run({x})[0].to_doubles();
      const std::string what = std::string(c.name) + ", threads " + std::to_string(threads);
      ASSERT_EQ(got.size(), want.size()) << what;
      double off_exact = 0;
      for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_NEAR(got[k], want[k], 1e-4 * (1 + std::fabs(want[k]))) << what << " at " << k;
        off_exact = std::max(off_exact, std::fabs(got[k] - exact[k]));
      }
      EXPECT_GT(off_exact, 1e-4) << what << ": bf16 was not used";
      EXPECT_EQ(compiled.stats().bf16_matmuls, 1u) << what;
    }
  }
}

/// A conv for kiln's own loops: its input and weight dims and window.
struct LoopCase {
  Ints x, w;
  Window window;
};

/// Each case compiled and run against the reference (random values from \p seed): with
/// weights and bias fixed and a hard-swish-like epilogue, and with weights passed per call,
/// on 1 to 3 workers.
void expect_convs_match(const std::vector<LoopCase>& cases, std::uint64_t seed) {
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const LoopCase& c = cases[k];
    const Tensor x = Tensor::random(TensorLayout(DType::f32, shape_of(c.x)), seed + k, -2, 2);
    const Tensor w = Tensor::random(TensorLayout(DType::f32, shape_of(c.w)), seed + 10 + k, -1, 1);
    const Tensor b = Tensor::random(TensorLayout(DType::f32, Shape{c.w[0]}), seed + 20 + k, -1, 1);
    SCOPED_TRACE("case " + std::to_string(k));
    const StagedGraph fixed = stage([&](Tensor xs) {  // weights and bias as constants
      const Tensor y = conv(xs, w, b, c.window);
      return y * minimum(relu(y + 3.0), scalar_like(y, 6.0));
    })(x.layout());
    const StagedGraph passed =
        stage([&](Tensor xs, Tensor ws) { return conv(xs, ws, c.window); })(x.layout(), w.layout());
    for (int threads : {1, 2, 3}) {
      both(fixed, {x}, 1e-5, threads);
      both(passed, {x, w}, 1e-5, threads);
    }
  }
}

TEST(Conv, DepthwiseConvsOnKilnsLoopsMatchTheReference) {
  // Depthwise convs whose output rows are at least 16 wide run kiln's own loops (padded
  // planes, stride-2 rows split into even and odd columns): every stride pair, even, odd
  // and asymmetric pads (some past what the windows reach), 1-D and 2-D, with and without
  // a bias, weights fixed or passed per call, an epilogue, on 1 to 3 workers.
  const std::vector<LoopCase> cases = {
      {{2, 8, 33, 40}, {8, 1, 3, 3}, {.strides = {2, 2}, .pads = {1, 1, 1, 1}, .groups = 8}},
      {{1, 5, 20, 35}, {5, 1, 5, 5}, {.strides = {1, 2}, .pads = {2, 1, 2, 0}, .groups = 5}},
      {{1, 3, 17, 18}, {3, 1, 3, 3}, {.strides = {2, 1}, .pads = {0, 2, 3, 1}, .groups = 3}},
      {{3, 4, 16, 19}, {4, 1, 7, 3}, {.strides = {1, 1}, .pads = {3, 1, 3, 1}, .groups = 4}},
      {{1, 6, 50}, {6, 1, 4}, {.strides = {2}, .pads = {3, 0}, .groups = 6}},
  };
  expect_convs_match(cases, 20);
}

TEST(Conv, ExpansionsRunTheirDepthwiseConvInsideThePointwiseConv) {
  // A 1x1 conv whose output (through its epilogue, if any) only a depthwise conv reads runs
  // that conv inside itself (MobileNet's expansions): by oneDNN's blocked kernels with fixed
  // weights and epilogues of single values (any plane; a batch entry or a slice of channels
  // a tile), else by kiln's loops (rows of 16 or more; a band of channels at a time).
  // Uneven bands and slices, one band, strides 1 and 2, 3x3 and 5x5, with and without
  // biases and epilogues, a batch, weights fixed or passed per call, 1 to 3 workers,
  // against the reference.
  struct Case {
    Ints x;
    std::int64_t m;
    Ints dw;  // the depthwise conv's kernel
    Window window;
    bool bias, epilogues;
  };
  const std::vector<Case> cases = {
      // 24 x 1440 floats: two bands of 12 channels in kiln's loops.
      {{2, 8, 40, 36}, 24, {3, 3}, {.strides = {2, 2}, .pads = {1, 1, 1, 1}}, true, true},
      // 17 x 4096: three bands (6, 6, 5).
      {{1, 5, 64, 64}, 17, {5, 5}, {.pads = {2, 2, 2, 2}}, false, true},
      {{3, 4, 20, 24}, 9, {3, 3}, {.pads = {1, 1, 1, 1}}, true, false},
      {{1, 3, 18, 40}, 6, {3, 5}, {.strides = {1, 2}, .pads = {0, 2, 1, 1}}, false, false},
      // Rows under 16 (oneDNN's blocked kernels only): MobileNetV3's 14x14 and 7x7 layers;
      // on 2 or 3 workers one batch entry splits into slices of 32, 32 and 16 channels.
      // Channels in and out in multiples of 16: whole blocks on AVX2 and AVX-512 alike.
      {{1, 32, 14, 14}, 80, {5, 5}, {.pads = {2, 2, 2, 2}}, true, true},
      {{2, 16, 14, 14}, 48, {5, 5}, {.strides = {2, 2}, .pads = {2, 2, 2, 2}}, true, true},
      {{3, 16, 7, 7}, 32, {3, 3}, {.pads = {1, 1, 1, 1}}, false, true},
  };
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE("case " + std::to_string(k));
    const std::int64_t channels = c.x[1];
    const Tensor x = Tensor::random(TensorLayout(DType::f32, shape_of(c.x)), 300 + k, -2, 2);
    const Tensor w =
        Tensor::random(TensorLayout(DType::f32, Shape{c.m, channels, 1, 1}), 310 + k, -1, 1);
    const Tensor dw =
        Tensor::random(TensorLayout(DType::f32, Shape{c.m, 1, c.dw[0], c.dw[1]}), 320 + k, -1, 1);
    const Tensor b = Tensor::random(TensorLayout(DType::f32, Shape{c.m}), 330 + k, -1, 1);
    const Tensor db = Tensor::random(TensorLayout(DType::f32, Shape{c.m}), 340 + k, -1, 1);
    Window depthwise = c.window;
    depthwise.groups = c.m;
    const auto expansion = [&](const Tensor& xs, const Tensor& ws, const Tensor& dws) {
      Tensor y = c.bias ? conv(xs, ws, b, Window{}) : conv(xs, ws, Window{});
      if (c.epilogues) y = y * minimum(relu(y + 3.0), scalar_like(y, 6.0));
      Tensor z = c.bias ? conv(y, dws, db, depthwise) : conv(y, dws, depthwise);
      return c.epilogues ? relu(z) - 0.5 * z : z;
    };
    const StagedGraph fixed = stage([&](Tensor xs) { return expansion(xs, w, dw); })(x.layout());
    const StagedGraph passed = stage([&](Tensor xs, Tensor ws, Tensor dws) {
      return expansion(xs, ws, dws);
    })(x.layout(), w.layout(), dw.layout());
    // Weights passed per call: kiln's loops only, which take output rows of 16 or more.
    const bool kilns_loops = (c.x[3] + c.window.pads[1] + c.window.pads[3] - c.dw[1]) /
                                     (c.window.strides.empty() ? 1 : c.window.strides[1]) +
                                 1 >=
                             16;
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(threads) + " workers");
      both(fixed, {x}, 1e-5, threads);
      both(passed, {x, w, dw}, 1e-5, threads);
      CompiledCallable call(fixed, {}, on_threads(threads));
      call.run({x});
      EXPECT_EQ(call.stats().expansions, 1u);
      EXPECT_EQ(call.stats().launches, 1u);  // both convs and their epilogues
      CompiledCallable call_passed(passed, {}, on_threads(threads));
      call_passed.run({x, w, dw});
      EXPECT_EQ(call_passed.stats().expansions, kilns_loops ? 1u : 0u);
    }
  }
}

TEST(Conv, APerChannelScaleRunsInsideThe1x1ConvThatReadsIt) {
  // Squeeze-and-excitation: y times a scale per batch entry and channel ([N, C, 1, 1], or
  // [1, C, 1, 1] for all), read only by a 1x1 conv on the GEMM path, runs inside that
  // conv: each batch entry scaled just before its GEMM, into the conv's input (tiles of
  // whole batch entries) or a tile's scratch (tiles of output channels: one entry on 2 or
  // 3 workers). Either operand order, with and without a bias and a residual add; against
  // the reference. Apart: the scaled activation also returned, a 3x3 conv, 7x7 planes at
  // batch 1 (oneDNN's conv).
  struct Case {
    Ints y;
    std::int64_t m;
    bool per_entry, scale_first, bias, residual, apart = false;
    Ints kernel = {1, 1};
    bool also_out = false;
  };
  const std::vector<Case> cases = {
      {{3, 16, 14, 14}, 24, true, false, true, true},
      {{1, 48, 12, 12}, 16, true, true, false, false},
      {{2, 16, 16, 20}, 16, false, false, true, true},
      {{1, 32, 14, 14}, 8, false, true, true, false},
      {{2, 16, 14, 14}, 16, true, false, true, false, true, {3, 3}},
      {{2, 16, 14, 14}, 16, true, false, true, false, true, {1, 1}, true},
      {{1, 32, 7, 7}, 16, true, false, true, false, true},
  };
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    SCOPED_TRACE("case " + std::to_string(k));
    const std::int64_t n = c.y[0], channels = c.y[1];
    const Tensor y = Tensor::random(TensorLayout(DType::f32, shape_of(c.y)), 700 + k, -2, 2);
    const Tensor s = Tensor::random(
        TensorLayout(DType::f32, Shape{c.per_entry ? n : 1, channels, 1, 1}), 710 + k, 0, 1);
    const Tensor w = Tensor::random(
        TensorLayout(DType::f32, Shape{c.m, channels, c.kernel[0], c.kernel[1]}), 720 + k, -1, 1);
    const Tensor b = Tensor::random(TensorLayout(DType::f32, Shape{c.m}), 730 + k, -1, 1);
    const Tensor r =
        Tensor::random(TensorLayout(DType::f32, Shape{n, c.m, c.y[2], c.y[3]}), 740 + k, -1, 1);
    const Window same{.pads = c.kernel[0] == 3 ? Ints{1, 1, 1, 1} : Ints{}};
    const StagedGraph staged = stage([&](Tensor ys, Tensor ss, Tensor rs) -> std::vector<Tensor> {
      const Tensor scaled = c.scale_first ? ss * ys : ys * ss;
      Tensor out = c.bias ? conv(scaled, w, b, same) : conv(scaled, w, same);
      if (c.residual) out = out + rs;
      if (c.also_out) return {out, scaled};
      return {out};
    })(y.layout(), s.layout(), r.layout());
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(threads) + " workers");
      both(staged, {y, s, r}, 1e-5, threads);
      CompiledCallable call(staged, {}, on_threads(threads));
      call.run({y, s, r});
      EXPECT_EQ(call.stats().scaled_inputs, c.apart ? 0u : 1u);
      EXPECT_EQ(call.stats().launches, c.apart ? 2u : 1u);  // the multiply, the conv
    }
  }
}

TEST(Conv, AStemAndTheDepthwiseConvAfterItRunAsOneKernel) {
  // Any ungrouped conv before a depthwise one (MobileNetV3's stem: 3 -> 16 channels, 3x3,
  // stride 2, hard-swish) runs with it on oneDNN's blocked kernels when its weights are
  // fixed; passed per call, the two run apart (kiln's band kernel takes only 1x1 convs).
  const Tensor x = Tensor::random(TensorLayout(DType::f32, {2, 3, 40, 36}), 360, -2, 2);
  const Tensor w = Tensor::random(TensorLayout(DType::f32, {16, 3, 3, 3}), 361, -1, 1);
  const Tensor b = Tensor::random(TensorLayout(DType::f32, {16}), 362, -1, 1);
  const Tensor dw = Tensor::random(TensorLayout(DType::f32, {16, 1, 3, 3}), 363, -1, 1);
  const Window stem{.strides = {2, 2}, .pads = {1, 1, 1, 1}};
  const Window depthwise{.strides = {2, 2}, .pads = {1, 1, 1, 1}, .groups = 16};
  const auto network = [&](const Tensor& xs, const Tensor& ws) {
    const Tensor y = conv(xs, ws, b, stem);
    return relu(conv(y * minimum(relu(y + 3.0), scalar_like(y, 6.0)), dw, depthwise));
  };
  const StagedGraph fixed = stage([&](Tensor xs) { return network(xs, w); })(x.layout());
  const StagedGraph passed =
      stage([&](Tensor xs, Tensor ws) { return network(xs, ws); })(x.layout(), w.layout());
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " workers");
    both(fixed, {x}, 1e-5, threads);
    both(passed, {x, w}, 1e-5, threads);
    CompiledCallable call(fixed, {}, on_threads(threads));
    call.run({x});
    EXPECT_EQ(call.stats().expansions, 1u);
    CompiledCallable call_passed(passed, {}, on_threads(threads));
    call_passed.run({x, w});
    EXPECT_EQ(call_passed.stats().expansions, 0u);
  }
}

TEST(Conv, ExpansionsStayApartWhereAnythingElseReadsTheExpandedActivation) {
  // The expanded activation returned too, or read by another op as well; rows under 16
  // with an epilogue whose operand is per channel (oneDNN's blocked order is not kiln's)
  // or with weights passed per call: two convs, each as it runs alone, same results.
  const Tensor x = Tensor::random(TensorLayout(DType::f32, {2, 4, 20, 24}), 350, -2, 2);
  const Tensor w = Tensor::random(TensorLayout(DType::f32, {16, 4, 1, 1}), 351, -1, 1);
  const Tensor dw = Tensor::random(TensorLayout(DType::f32, {16, 1, 3, 3}), 352, -1, 1);
  const Tensor scale = Tensor::random(TensorLayout(DType::f32, {1, 16, 1, 1}), 353, -1, 1);
  const Window depthwise{.pads = {1, 1, 1, 1}, .groups = 16};
  const Tensor narrow = Tensor::random(TensorLayout(DType::f32, {2, 4, 12, 12}), 354, -2, 2);
  const auto graph = [&](const Tensor& in, auto f) { return stage(f)(in.layout()); };
  const std::vector<std::tuple<const char*, StagedGraph, std::vector<Tensor>>> graphs = {
      {"returned",
       graph(x,
             [&](Tensor xs) {
               const Tensor y = relu(conv(xs, w, Window{}));
               return std::vector<Tensor>{conv(y, dw, depthwise), y};
             }),
       {x}},
      {"read twice",
       graph(x,
             [&](Tensor xs) {
               const Tensor y = relu(conv(xs, w, Window{}));
               return conv(y, dw, depthwise) + y;
             }),
       {x}},
      {"rows under 16, a per-channel epilogue",
       graph(narrow, [&](Tensor xs) { return conv(conv(xs, w, Window{}) * scale, dw, depthwise); }),
       {narrow}},
      {"rows under 16, weights passed",
       stage([&](Tensor xs, Tensor ws) {
         return conv(relu(conv(xs, ws, Window{})), dw, depthwise);
       })(narrow.layout(), w.layout()),
       {narrow, w}},
  };
  for (const auto& [what, staged, inputs] : graphs) {
    SCOPED_TRACE(what);
    both(staged, inputs, 1e-5, 2);
    CompiledCallable call(staged, {}, on_threads(2));
    call.run(inputs);
    EXPECT_EQ(call.stats().expansions, 0u);
  }
}

TEST(Conv, FewChannelConvsOnKilnsLoopsMatchTheReference) {
  // Convs of at most 4 input channels whose output rows are at least 16 wide (a network's
  // stem) run kiln's own loops: eight output channels at a time (and a tail of fewer), in
  // bands of padded rows split among the workers when the batch is smaller than they are.
  // MobileNet's and ResNet's stems, stride pairs, odd and asymmetric pads, 1-D and 2-D,
  // with and without a bias, weights fixed or passed per call, an epilogue, 1 to 3 workers.
  const std::vector<LoopCase> cases = {
      {{1, 3, 48, 40}, {16, 3, 3, 3}, {.strides = {2, 2}, .pads = {1, 1, 1, 1}}},
      {{2, 3, 37, 45}, {13, 3, 7, 7}, {.strides = {2, 2}, .pads = {3, 3, 3, 3}}},
      {{1, 1, 19, 33}, {5, 1, 3, 5}, {.strides = {1, 2}, .pads = {0, 2, 1, 0}}},
      {{3, 4, 21, 17}, {8, 4, 2, 2}, {.strides = {2, 1}, .pads = {1, 0, 0, 1}}},
      {{1, 2, 70}, {9, 2, 5}, {.strides = {2}, .pads = {2, 1}}},
  };
  expect_convs_match(cases, 50);
}

TEST(Conv, BandsOfOutputRowsMatchTheReference) {
  // A 2-D conv with fixed weights, fewer batch entries than workers and output planes of
  // 1024 or more splits into bands of output rows, each reading its input rows and padding
  // only at the plane's edges: Winograd's 3x3 (where the CPU has it) and direct kernels,
  // strides, dilation and asymmetric pads, an epilogue on each band's rows, 2 and 3 workers.
  const std::vector<LoopCase> cases = {
      {{1, 16, 40, 36}, {32, 16, 3, 3}, {.pads = {1, 1, 1, 1}}},
      {{2, 8, 70, 66}, {12, 8, 5, 3}, {.strides = {2, 2}, .pads = {2, 0, 1, 1}}},
      {{1, 4, 48, 40},
       {8, 4, 3, 3},
       {.strides = {1, 1}, .pads = {0, 3, 2, 1}, .dilations = {2, 1}}},
  };
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const LoopCase& c = cases[k];
    const Tensor x = Tensor::random(TensorLayout(DType::f32, shape_of(c.x)), 80 + k, -2, 2);
    const Tensor w = Tensor::random(TensorLayout(DType::f32, shape_of(c.w)), 90 + k, -1, 1);
    const Tensor b = Tensor::random(TensorLayout(DType::f32, Shape{c.w[0]}), 95 + k, -1, 1);
    SCOPED_TRACE("case " + std::to_string(k));
    const StagedGraph fixed = stage([&](Tensor xs) {
      const Tensor y = conv(xs, w, b, c.window);
      return relu(y) + 0.5 * y;
    })(x.layout());
    for (int threads : {2, 3}) both(fixed, {x}, 1e-5, threads);
  }
}

TEST(Conv, WinogradConvsMatchTheReferenceAndCanBeTurnedOff) {
  // CompileOptions::winograd_convs: 3x3 stride-1 f32 convs with fixed weights over whole
  // vectors of 16 channels run Winograd's algorithm: oneDNN's kernels where the CPU has them
  // (AVX-512), else kiln's own F(4x4, 3x3) with 32 or more 4x4 tiles over the batch, or
  // F(2x2, 3x3) with 16 or more 2x2 tiles. The results stay within a few f32 roundings of the
  // reference (kiln's F(4x4): its larger transform entries, 5 and 8, round a little more),
  // differ from the direct kernels' (the sums are rounded differently), and every other
  // conv, or the option off, runs directly. 1 and 2 workers (kiln's: by tile rows, or by
  // output channels when there are fewer tiles than channels).
  struct Case {
    const char* name;
    Ints x, w;
    Window window;
    bool winograd;  // a candidate
    int kiln_tile;  // the tile kiln's Winograd takes it with (0: direct)
  };
  // oneDNN 2.6 has its Winograd kernels at the AVX-512 levels (seen on Ice Lake-class and
  // Zen 4 CPUs); with AMX (not seen here) a conv may stay direct, which is right too.
  const bool avx512 = cpu_isa() >= CpuIsa::avx512, amx = cpu_isa() == CpuIsa::amx;
  const Window pad1{.pads = {1, 1, 1, 1}};
  for (const Case& c :
       {Case{"resnet-like", {1, 64, 14, 14}, {64, 64, 3, 3}, pad1, true, 2},
        Case{"resnet-like, batch 4", {4, 32, 14, 14}, {48, 32, 3, 3}, pad1, true, 4},
        Case{"ragged 4x4 tiles", {4, 16, 11, 9}, {32, 16, 3, 3}, pad1, true, 4},
        Case{"chunks across images", {2, 16, 40, 40}, {16, 16, 3, 3}, pad1, true, 4},
        Case{"unpadded, batch 2", {2, 32, 9, 11}, {48, 32, 3, 3}, {}, true, 2},
        Case{"uneven pads", {1, 16, 10, 12}, {16, 16, 3, 3}, {.pads = {2, 0, 1, 3}}, true, 2},
        Case{"too few tiles", {1, 16, 5, 5}, {16, 16, 3, 3}, pad1, true, 0},
        Case{"wider than a chunk's buffers", {1, 16, 2, 4100}, {16, 16, 3, 3}, pad1, true, 0},
        Case{"strided", {1, 32, 12, 12}, {32, 32, 3, 3}, {.strides = {2, 2}}, false, 0},
        Case{"3 channels in", {1, 3, 12, 12}, {16, 3, 3, 3}, pad1, false, 0}}) {
    const WeightedConv wc = relu_conv_with_weights(c.x, c.w, c.window);
    const StagedGraph& staged = wc.staged;
    const std::map<std::string, Tensor>& weights = wc.weights;
    const Tensor& x = wc.x;
    const std::vector<double> want = reference_run(staged.graph(), {x}, weights)[0].to_doubles();
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (const int threads : {1, 2}) {
      std::vector<double> results[2];
      for (const bool winograd : {false, true}) {
        CompileOptions options = on_threads(threads);
        options.winograd_convs = winograd;
        CompiledCallable compiled(staged, weights, options);
        results[winograd] = compiled.run({x})[0].to_doubles();
        const std::string what = std::string(c.name) + ", threads " + std::to_string(threads) +
                                 (winograd ? ", winograd" : ", direct");
        // With AVX-512, the first two cases by oneDNN's kernels; the others by whichever of
        // oneDNN's (where it has one for the shape) and kiln's (elsewhere) takes them.
        const bool kiln = winograd && !avx512 && c.kiln_tile != 0;
        const bool sure =
            c.name == std::string("resnet-like") || c.name == std::string("unpadded, batch 2");
        const bool ran = kiln || (winograd && c.winograd && avx512 &&
                                  ((sure && !amx) || compiled.stats().winograd_convs == 1));
        EXPECT_EQ(compiled.stats().winograd_convs, ran ? 1u : 0u) << what;
        ASSERT_EQ(results[winograd].size(), want.size()) << what;
        double worst = 0;
        for (std::size_t k = 0; k < want.size(); ++k)
          worst = std::max(worst, std::fabs(results[winograd][k] - want[k]));
        // Measured: direct and oneDNN's 2.5e-7 to 1e-6, kiln's F(2x2) 3e-7 to 6e-7, its
        // F(4x4) up to 3.6e-6 (of the output's largest value).
        EXPECT_LT(worst, (winograd && c.kiln_tile == 4 ? 1e-5 : 2e-6) * scale) << what;
        if (!ran) continue;
        double apart = 0;  // from the direct kernels' result
        for (std::size_t k = 0; k < want.size(); ++k)
          apart = std::max(apart, std::fabs(results[1][k] - results[0][k]));
        EXPECT_GT(apart, 0.0) << what << ": the same sums as the direct kernels";
      }
    }
  }
}

TEST(Conv, KilnsWinogradPicksItsTileByTilesWidthAndBytes) {
  // F(4x4) with 32 or more 4x4 tiles over the batch, else F(2x2) with 16 or more 2x2 tiles,
  // each while its transformed weights take at most 128 MiB; output rows of at most 4096,
  // 3x3 stride-1 undilated ungrouped convs over whole vectors of 16 channels only.
  const auto geometry = [](std::int64_t n, std::int64_t c, std::int64_t m, std::int64_t hw,
                           std::int64_t width = 0) {
    compiler::kernel::WindowGeometry g;
    g.n = n, g.c = c, g.m = m, g.spatial = 2;
    g.in = {1, hw, width != 0 ? width : hw};
    g.out = g.in;
    g.kernel = {1, 3, 3};
    g.pad_begin = g.pad_end = {0, 1, 1};
    return g;
  };
  using compiler::kernel::winograd_tile;
  EXPECT_EQ(winograd_tile(geometry(1, 64, 64, 56)), 4);       // 196 tiles of 4x4
  EXPECT_EQ(winograd_tile(geometry(1, 128, 128, 28)), 4);     // 49
  EXPECT_EQ(winograd_tile(geometry(1, 256, 256, 14)), 2);     // 16 of 4x4, 49 of 2x2
  EXPECT_EQ(winograd_tile(geometry(1, 512, 512, 7)), 2);      // 4 and 16
  EXPECT_EQ(winograd_tile(geometry(8, 512, 512, 7)), 4);      // 32
  EXPECT_EQ(winograd_tile(geometry(1, 512, 512, 5)), 0);      // 4 and 9
  EXPECT_EQ(winograd_tile(geometry(1, 16, 16, 2, 4100)), 0);  // rows wider than 4096
  // 36 x 1024 x 1040 floats (146 MiB) by F(4x4); 16 x ... (65 MiB) by F(2x2).
  EXPECT_EQ(winograd_tile(geometry(8, 1024, 1024, 8)), 2);
  EXPECT_EQ(winograd_tile(geometry(8, 2048, 2048, 8)), 0);  // 258 MiB by F(2x2)
  compiler::kernel::WindowGeometry odd = geometry(1, 64, 64, 56);
  odd.c = 24;  // not whole vectors of 16 channels
  EXPECT_EQ(winograd_tile(odd), 0);
  odd = geometry(1, 64, 64, 56);
  odd.stride = {1, 2, 2};
  EXPECT_EQ(winograd_tile(odd), 0);
  odd = geometry(1, 64, 64, 56);
  odd.groups = 2;
  EXPECT_EQ(winograd_tile(odd), 0);
}

TEST(Resize, NearestAndLinearWorkedByHand) {
  const Tensor x = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  // Twice the size, half_pixel: nearest repeats, linear blends (edges clamp).
  const std::vector<Tensor> out =
      both(stage([](Tensor a) {
             return std::make_tuple(resize(a, {1, 1, 4, 4}),
                                    resize(a, {1, 1, 4, 4}, {.mode = "linear"}));
           })(x.layout()),
           {x}, 1e-7);
  EXPECT_THAT(out[0].to_vector<float>(),
              ElementsAre(1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4));
  EXPECT_THAT(out[1].to_vector<float>(), ElementsAre(1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5,
                                                     2.75, 3.25, 3.5, 3, 3.25, 3.75, 4));
  // align_corners maps the corners onto each other: 1, 1.5, 2 along a row.
  const Tensor row = f32({1, 2}, {1, 2});
  EXPECT_THAT(both(stage([](Tensor a) {
                     return resize(a, {1, 3}, {.mode = "linear", .coordinates = "align_corners"});
                   })(row.layout()),
                   {row})[0]
                  .to_vector<float>(),
              ElementsAre(1, 1.5, 2));
}

TEST(Resize, EveryModeAndTransformMatchesTheReference) {
  // Up and down, by sizes and by scales, one axis and two, on two workers: the kernel's
  // tap tables against the reference's spec-by-spec evaluation.
  const Tensor x = Tensor::random(TensorLayout(DType::f32, {2, 3, 7, 5}), 31, -2, 2);
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* coords : {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                               "align_corners", "asymmetric"})
      for (const Ints& sizes : {Ints{2, 3, 13, 9}, Ints{2, 3, 3, 2}, Ints{2, 3, 7, 11}}) {
        Resampling how{.mode = mode, .coordinates = coords};
        how.nearest_mode = sizes[2] > 7 ? "round_prefer_ceil" : "floor";
        how.exclude_outside = std::string(mode) == "cubic" && sizes[3] == 2;
        how.antialias = std::string(mode) != "nearest" && sizes[2] < 7;
        SCOPED_TRACE(std::string(mode) + " " + coords + " " + std::to_string(sizes[2]));
        both(stage([&](Tensor a) { return resize(a, sizes, how); })(x.layout()), {x}, 1e-6);
        // Scales that do not divide evenly: the transform uses the scale, not size / dim.
        both(stage([&](Tensor a) {
               return resize(a, {2, 3, 9, 6}, how, {1, 1, 1.37, 1.29});
             })(x.layout()),
             {x}, 1e-6);
      }
  // A crop, with an extrapolation value outside it.
  const Resampling crop{.mode = "linear",
                        .coordinates = "tf_crop_and_resize",
                        .extrapolation_value = 10,
                        .roi = {0, 0, -0.2, 0.3, 1, 1, 0.8, 1.4}};
  const std::vector<Tensor> cropped = both(stage([&](Tensor a) {
                                             return resize(a, {2, 3, 4, 6}, crop);
                                           })(x.layout()),
                                           {x}, 1e-6);
  const std::vector<float> c = cropped[0].to_vector<float>();
  EXPECT_EQ(std::count(c.begin(), c.end(), 10.0f), 2 * 3 * (1 * 6 + 3 * 2));
}

TEST(Resize, NearestCopiesAnyDtypeExactlyAndKeepsSymbolicAxes) {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max() - 1;
  const Tensor x = Tensor::from_data(std::vector<std::int64_t>{big, -big, 3, 4}, Shape{2, 2});
  const StagedGraph staged = stage([](Tensor a) {
    return resize(a, {-1, 5}, {.nearest_mode = "round_prefer_ceil"});
  })(TensorLayout(DType::i64, {"batch", 2}));
  EXPECT_EQ(staged.out_layouts()[0].shape, (Shape{"batch", 5}));
  const std::vector<Tensor> out = both(staged, {x}, 0);
  EXPECT_THAT(out[0].to_vector<std::int64_t>(),
              ElementsAre(big, big, -big, -big, -big, 3, 3, 4, 4, 4));
  // A NaN beside an output does not leak into it through a weight of 0.
  const Tensor nan = f32({std::nanf(""), 1, 2}, {3});
  const std::vector<float> lin =
      both(stage([](Tensor a) {
             return resize(a, {3}, {.mode = "linear", .coordinates = "asymmetric"});
           })(nan.layout()),
           {nan})[0]
          .to_vector<float>();
  EXPECT_TRUE(std::isnan(lin[0]));
  EXPECT_THAT(std::vector<float>(lin.begin() + 1, lin.end()), ElementsAre(1, 2));
}

TEST(Resize, WhatItCannotDoIsRefusedWithAMessage) {
  const TensorLayout x(DType::f32, {1, 2, 4, 4}), ints(DType::i32, {4, 4}),
      symbolic(DType::f32, {"n", 4});
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return resize(a, {4, 8}, {.mode = "linear"});
                        })(ints),
                        UserError, "linear resizing needs a floating-point tensor, got i32");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return resize(a, {1, 2, 8});
                        })(x),
                        UserError, "one value per axis");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return resize(a, {1, 2, 8, 8}, {.mode = "area"});
                        })(x),
                        UserError, "mode must be one of \"nearest\", \"linear\", \"cubic\"");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return resize(a, {1, 2, 8, 8}, {.antialias = true});
                        })(x),
                        UserError, "antialias applies to linear and cubic");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return resize(a, {8, 8});
                        })(symbolic),
                        UserError, "axis 0 of x [n, 4] is symbolic");
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return resize(a, {1, 2, 4, 4}, {}, {1, 1, 0, 1});
                        })(x),
                        UserError, "scale 0 of axis 2 must be finite and above 0");
  KILN_EXPECT_THROW_MSG(
      stage([](Tensor a) {
        return resize(a, {1, 2, 4, 4}, {.coordinates = "tf_crop_and_resize", .roi = {0, 1}});
      })(x),
      UserError, "tf_crop_and_resize needs roi: 8 values");
  // Antialiasing at a tiny scale widens the filter to millions of taps: refused before
  // any table is made.
  KILN_EXPECT_THROW_MSG(stage([](Tensor a) {
                          return resize(a, {1, 2, 4, 1000000},
                                        {.mode = "linear", .antialias = true}, {1, 1, 1, 1e-6});
                        })(x),
                        UserError, "2e+06 taps each", "more than kiln resizes");
  KILN_EXPECT_THROW_MSG(
      stage([](Tensor a) {
        return resize(a, {1, 2, 4, 4}, {.mode = "cubic", .antialias = true}, {1, 1, 1e-3, 1e-3});
      })(x),
      UserError, "each output would sum 1.6e+07 taps");
}

}  // namespace
}  // namespace kiln
