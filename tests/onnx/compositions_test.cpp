// ONNX ops kiln imports as compositions of its own ops (Einsum, Pad, Tile, Trilu, OneHot,
// DepthToSpace, InstanceNormalization, GroupNormalization): with symbolic dims, several
// operands and broadcast ellipses, against loops written here, compiled and in the
// reference interpreter (ONNX's node tests check the fixed-size cases); and what each
// refuses, with the message. Also the older opsets read for ops unchanged since.

#include <gtest/gtest.h>

#include <cmath>

#include "../error_matchers.hpp"
#include "kiln/compiler/compiled_callable.hpp"
#include "kiln/compiler/reference.hpp"
#include "kiln/core/error.hpp"
#include "onnx_model.hpp"

namespace {

using kiln_test::Model;
using kiln_test::set_int;
using kiln_test::set_string;
using Floats = std::vector<float>;

kiln::Tensor random(kiln::Shape shape, std::uint64_t seed) {
  return kiln::Tensor::random(kiln::TensorLayout(kiln::DType::f32, std::move(shape)), seed);
}

/// The model's first output, compiled; the reference must agree within 1e-5.
kiln::Tensor run(const kiln::OnnxModel& model, const std::vector<kiln::Tensor>& in) {
  kiln::CompiledCallable call(model.graph, model.weights);
  const kiln::Tensor compiled = call.run(in)[0];
  const kiln::Tensor reference = kiln::reference_run(model.graph.graph(), in, model.weights)[0];
  EXPECT_EQ(compiled.shape(), reference.shape());
  const std::vector<double> c = compiled.to_doubles(), r = reference.to_doubles();
  for (std::size_t i = 0; i < c.size() && i < r.size(); ++i)
    EXPECT_NEAR(c[i], r[i], 1e-5 * (1 + std::fabs(r[i]))) << "element " << i;
  return compiled;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "element " << i;
}

Model einsum_model(const std::string& equation, const std::vector<kiln_test::Dims>& inputs) {
  Model m;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    names.emplace_back(1, 'x');
    names.back() += std::to_string(i);
    m.input(names.back(), inputs[i]);
  }
  set_string(m.node("Einsum", names, {"y"}, "e"), "equation", equation);
  m.output("y");
  return m;
}

TEST(OnnxCompositions, EinsumContractsAChainOverASymbolicBatch) {
  const std::string batch = "batch";
  const kiln::OnnxModel model =
      einsum_model("bij, bjk, bkl -> bil", {{batch, 2, 3}, {batch, 3, 4}, {batch, 4, 2}}).import();
  EXPECT_EQ(model.graph.out_layouts()[0].shape, (kiln::Shape{"batch", 2, 2}));
  const kiln::Tensor a = random({3, 2, 3}, 1), b = random({3, 3, 4}, 2), c = random({3, 4, 2}, 3);
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>(),
                           vc = c.to_vector<float>();
  std::vector<double> want(3 * 2 * 2, 0.0);
  for (int n = 0; n < 3; ++n)
    for (int i = 0; i < 2; ++i)
      for (int l = 0; l < 2; ++l)
        for (int j = 0; j < 3; ++j)
          for (int k = 0; k < 4; ++k)
            want[(n * 2 + i) * 2 + l] +=
                double(va[(n * 2 + i) * 3 + j]) * vb[(n * 3 + j) * 4 + k] * vc[(n * 4 + k) * 2 + l];
  expect_near(run(model, {a, b, c}).to_doubles(), want);
}

TEST(OnnxCompositions, EinsumBroadcastsEllipsesAndTakesTracesAndOuterProducts) {
  // "...ij,...jk": the ellipses [2, 1] and [5] broadcast to [2, 5]; the output is implicit.
  const kiln::OnnxModel batched = einsum_model("...ij,...jk", {{2, 1, 3, 4}, {5, 4, 2}}).import();
  EXPECT_EQ(batched.graph.out_layouts()[0].shape, (kiln::Shape{2, 5, 3, 2}));
  const kiln::Tensor a = random({2, 1, 3, 4}, 4), b = random({5, 4, 2}, 5);
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  std::vector<double> want;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 5; ++q)
      for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 2; ++k) {
          double s = 0;
          for (int j = 0; j < 4; ++j)
            s += double(va[(p * 3 + i) * 4 + j]) * vb[(q * 4 + j) * 2 + k];
          want.push_back(s);
        }
  expect_near(run(batched, {a, b}).to_doubles(), want);

  const kiln::Tensor square = random({3, 3}, 6);
  const std::vector<float> v = square.to_vector<float>();
  const kiln::Tensor trace = run(einsum_model("ii", {{3, 3}}).import(), {square});
  EXPECT_EQ(trace.shape(), kiln::Shape{});
  expect_near(trace.to_doubles(), {double(v[0]) + v[4] + v[8]});

  const kiln::Tensor x = kiln::Tensor::from_data(Floats{1, 2}, {2});
  const kiln::Tensor y = kiln::Tensor::from_data(Floats{3, 4, 5}, {3});
  expect_near(run(einsum_model("i,j", {{2}, {3}}).import(), {x, y}).to_doubles(),
              {3, 4, 5, 6, 8, 10});
}

TEST(OnnxCompositions, EinsumRefusesMalformedEquationsNamingTheProblem) {
  const auto refused = [](const std::string& equation, const std::vector<kiln_test::Dims>& inputs,
                          const char* fragment) {
    SCOPED_TRACE(equation);
    KILN_EXPECT_THROW_MSG(einsum_model(equation, inputs).import(), kiln::UserError,
                          "node 'e' (Einsum)", fragment);
  };
  refused("ij,jk->ik", {{2, 2}}, "2 terms for 1 inputs");
  refused("i$j->ij", {{2, 2}}, "holds '$'");
  refused("ij->ik", {{2, 2}}, "label k is in no input");
  refused("ijk->i", {{2, 2}}, "has 3 labels for an operand of rank 2");
  refused("ii->i", {{2, 3}}, "repeated over the dims 2 and 3");
  refused("ij->ii", {{2, 2}}, "repeats the label i");
  refused("ij,jk->ik", {{2, 3}, {4, 2}}, "contracted label j has the dims 3 and 4");
  refused("...i...->i", {{2, 2}}, "two ellipses");
  refused("ijk,kl->ijl", {{std::string("m"), 2, 3}, {3, 4}}, "--dim m=N");  // rows m x 2
}

TEST(OnnxCompositions, TileKeepsSymbolicDimsItDoesNotRepeat) {
  Model m;
  m.input("x", {std::string("batch"), 2});
  m.ints("reps", {1, 3});
  m.node("Tile", {"x", "reps"}, {"y"}, "t");
  m.output("y");
  const kiln::OnnxModel model = m.import();
  EXPECT_EQ(model.graph.out_layouts()[0].shape, (kiln::Shape{"batch", 6}));
  const kiln::Tensor x = kiln::Tensor::from_data(Floats{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(run(model, {x}).to_vector<float>(), (Floats{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));

  for (const auto& [reps, fragment] :
       std::vector<std::pair<std::vector<std::int64_t>, const char*>>{
           {{2, 1}, "symbolic dim batch"},
           {{1, -1}, "cannot be negative"},
           {{1}, "one per axis"}}) {
    Model bad;
    bad.input("x", {std::string("batch"), 2});
    bad.ints("reps", reps);
    bad.node("Tile", {"x", "reps"}, {"y"}, "t");
    bad.output("y");
    KILN_EXPECT_THROW_MSG(bad.import(), kiln::UserError, "node 't' (Tile)", fragment);
  }
}

TEST(OnnxCompositions, TriluOneHotAndDepthToSpaceRefuseWhatTheyCannotDo) {
  {
    Model m;
    m.input("x", {std::string("rows"), 4});
    m.node("Trilu", {"x"}, {"y"}, "tri");
    m.output("y");
    KILN_EXPECT_THROW_MSG(m.import(), kiln::UserError, "node 'tri' (Trilu)", "symbolic dim rows",
                          "--dim rows=N");
  }
  const auto one_hot = [](std::int64_t depth, std::vector<float> values) {
    Model m;
    m.input("i", {3}, onnx::TensorProto::INT64);
    m.ints("depth", {depth}).clear_dims();
    m.floats("values", values, {static_cast<std::int64_t>(values.size())});
    m.node("OneHot", {"i", "depth", "values"}, {"y"}, "oh");
    m.output("y");
    return m;
  };
  KILN_EXPECT_THROW_MSG(one_hot(std::int64_t{1} << 40, {0, 1}).import(), kiln::UserError,
                        "node 'oh' (OneHot)", "out of range");
  KILN_EXPECT_THROW_MSG(one_hot(0, {0, 1}).import(), kiln::UserError, "out of range");
  KILN_EXPECT_THROW_MSG(one_hot(4, {0, 1, 2}).import(), kiln::UserError, "[off, on]");
  const kiln::OnnxModel hot = one_hot(4, {-1, 5}).import();
  const kiln::Tensor i = kiln::Tensor::from_data(std::vector<std::int64_t>{1, -1, 7}, {3});
  EXPECT_EQ(run(hot, {i}).to_vector<float>(),
            (Floats{-1, 5, -1, -1, -1, -1, -1, 5, -1, -1, -1, -1}));  // 7: out of range, all off

  const auto blocks = [](std::int64_t channels, std::int64_t block, const std::string& mode) {
    Model m;
    m.input("x", {1, channels, 2, 2});
    auto& n = m.node("DepthToSpace", {"x"}, {"y"}, "d2s");
    set_int(n, "blocksize", block);
    set_string(n, "mode", mode);
    m.output("y");
    return m;
  };
  KILN_EXPECT_THROW_MSG(blocks(4, 0, "DCR").import(), kiln::UserError, "node 'd2s'",
                        "blocksize 0 is out of range");
  KILN_EXPECT_THROW_MSG(blocks(3, 2, "DCR").import(), kiln::UserError, "3 channels do not divide");
  KILN_EXPECT_THROW_MSG(blocks(4, 2, "XYZ").import(), kiln::UserError, "\"XYZ\" is not DCR or CRD");
}

Model pad_model(const std::string& mode, std::vector<std::int64_t> pads, bool value_input) {
  Model m;
  m.input("x", {std::string("batch"), 4});
  m.ints("pads", std::move(pads));
  std::vector<std::string> in = {"x", "pads"};
  if (value_input) {
    m.input("value", {});
    in.push_back("value");
  }
  kiln_test::set_string(m.node("Pad", in, {"y"}, "p"), "mode", mode);
  m.output("y");
  return m;
}

TEST(OnnxCompositions, PadCropsAndPadsEachModeBesideASymbolicBatch) {
  const kiln::Tensor x = kiln::Tensor::from_data(Floats{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  // Axis 1 only ([0, 2, 0, -1]): two before, the last one cropped; the constant an input.
  const kiln::OnnxModel constant = pad_model("constant", {0, 2, 0, -1}, true).import();
  EXPECT_EQ(constant.graph.out_layouts()[0].shape, (kiln::Shape{"batch", 5}));
  EXPECT_EQ(run(constant, {x, kiln::Tensor::scalar(9)}).to_vector<float>(),
            (Floats{9, 9, 1, 2, 3, 9, 9, 5, 6, 7}));
  EXPECT_EQ(run(pad_model("reflect", {0, 2, 0, 1}, false).import(), {x}).to_vector<float>(),
            (Floats{3, 2, 1, 2, 3, 4, 3, 7, 6, 5, 6, 7, 8, 7}));
  EXPECT_EQ(run(pad_model("edge", {0, 1, 0, 2}, false).import(), {x}).to_vector<float>(),
            (Floats{1, 1, 2, 3, 4, 4, 4, 5, 5, 6, 7, 8, 8, 8}));
  EXPECT_EQ(run(pad_model("wrap", {0, 1, 0, 2}, false).import(), {x}).to_vector<float>(),
            (Floats{4, 1, 2, 3, 4, 1, 2, 8, 5, 6, 7, 8, 5, 6}));

  KILN_EXPECT_THROW_MSG(pad_model("reflect", {0, 4, 0, 0}, false).import(), kiln::UserError,
                        "node 'p' (Pad)", "each must be below 4");
  KILN_EXPECT_THROW_MSG(pad_model("constant", {0, -3, 0, -2}, false).import(), kiln::UserError,
                        "remove more than its 4 elements");
  KILN_EXPECT_THROW_MSG(pad_model("constant", {1, 0, 0, 0}, false).import(), kiln::UserError,
                        "symbolic dim batch");
  KILN_EXPECT_THROW_MSG(pad_model("mirror", {0, 1, 0, 1}, false).import(), kiln::UserError,
                        "\"mirror\" is not constant, reflect, edge or wrap");
  KILN_EXPECT_THROW_MSG(pad_model("constant", {0, 1}, false).import(), kiln::UserError,
                        "hold 2 values for 2 axes");
}

/// GroupNormalization of [2, 4, spatial] in 2 groups, in double.
std::vector<double> group_norm(const std::vector<float>& x, std::size_t spatial,
                               const std::vector<float>& scale, const std::vector<float>& bias,
                               bool per_channel) {
  std::vector<double> y(x.size());
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t g = 0; g < 2; ++g) {
      const std::size_t begin = (n * 4 + g * 2) * spatial, count = 2 * spatial;
      double mean = 0, var = 0;
      for (std::size_t i = 0; i < count; ++i) mean += x[begin + i];
      mean /= double(count);
      for (std::size_t i = 0; i < count; ++i) var += (x[begin + i] - mean) * (x[begin + i] - mean);
      var /= double(count);
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t c = g * 2 + i / spatial, k = per_channel ? c : g;
        y[begin + i] = (x[begin + i] - mean) / std::sqrt(var + 1e-5) * scale[k] + bias[k];
      }
    }
  return y;
}

TEST(OnnxCompositions, GroupNormalizationOverSymbolicSpatialDimsMatchesLoops) {
  for (const std::int64_t opset : {18, 21}) {
    SCOPED_TRACE(opset);
    const bool per_channel = opset >= 21;
    const std::vector<float> scale = per_channel ? Floats{1, 2, -1, 0.5f} : Floats{1.5f, -2};
    const std::vector<float> bias = per_channel ? Floats{0, 1, 2, 3} : Floats{0.25f, -1};
    const auto groups = static_cast<std::int64_t>(scale.size());
    Model m(opset);
    m.input("x", {2, 4, std::string("length")});
    m.floats("scale", scale, {groups});
    m.floats("bias", bias, {groups});
    set_int(m.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn"), "num_groups", 2);
    m.output("y");
    const kiln::OnnxModel model = m.import();
    EXPECT_EQ(model.graph.out_layouts()[0].shape, (kiln::Shape{2, 4, "length"}));
    const kiln::Tensor x = random({2, 4, 5}, 7);
    expect_near(run(model, {x}).to_doubles(),
                group_norm(x.to_vector<float>(), 5, scale, bias, per_channel));
  }
  Model bad(21);
  bad.input("x", {2, 4, 3});
  bad.floats("scale", {1, 1, 1, 1}, {4});
  bad.floats("bias", {0, 0, 0, 0}, {4});
  set_int(bad.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn"), "num_groups", 3);
  bad.output("y");
  KILN_EXPECT_THROW_MSG(bad.import(), kiln::UserError, "node 'gn'",
                        "num_groups 3 does not divide the 4 channels");
}

/// MaxPool's Indices as ONNX defines them, by loops: the first maximum of each window in
/// tap order (pads never win), its offset counted over [N, C, S...] with the spatial dims
/// row-major or, for \p column_major, column-major.
std::vector<std::int64_t> max_pool_indices(
    const std::vector<float>& x, std::int64_t planes, const std::vector<std::int64_t>& in,
    const std::vector<std::int64_t>& out, const std::vector<std::int64_t>& kernel,
    const std::vector<std::int64_t>& stride, const std::vector<std::int64_t>& pad,
    const std::vector<std::int64_t>& dilation, bool column_major) {
  const std::size_t s = in.size();
  std::int64_t plane = 1, positions = 1, taps = 1;
  for (std::size_t d = 0; d < s; ++d) plane *= in[d], positions *= out[d], taps *= kernel[d];
  std::vector<std::int64_t> got;
  for (std::int64_t c = 0; c < planes; ++c)
    for (std::int64_t p = 0; p < positions; ++p) {
      float best = 0;
      std::int64_t where = -1;
      for (std::int64_t k = 0; k < taps; ++k) {
        std::vector<std::int64_t> at(s);
        bool inside = true;
        for (std::int64_t d = static_cast<std::int64_t>(s) - 1, rp = p, rk = k; d >= 0; --d) {
          const auto u = static_cast<std::size_t>(d);
          at[u] = rp % out[u] * stride[u] - pad[u] + rk % kernel[u] * dilation[u];
          rp /= out[u];
          rk /= kernel[u];
          inside = inside && at[u] >= 0 && at[u] < in[u];
        }
        if (!inside) continue;
        std::int64_t row = 0, column = 0;
        for (std::size_t d = 0; d < s; ++d) row = row * in[d] + at[d];
        for (std::size_t d = s; d-- > 0;) column = column * in[d] + at[d];
        const float v = x[static_cast<std::size_t>(c * plane + row)];
        if (where < 0 || v > best) {
          best = v;
          where = c * plane + (column_major ? column : row);
        }
      }
      got.push_back(where);
    }
  return got;
}

TEST(OnnxCompositions, MaxPoolIndicesMatchLoopsWithPadsDilationsTiesAndEitherOrder) {
  struct Case {
    std::vector<std::int64_t> in, kernel, stride, pads, dilation, out;
    std::int64_t order;
  };
  const std::vector<Case> cases = {
      {{9, 7}, {3, 2}, {2, 1}, {2, 1, 1, 0}, {1, 2}, {5, 6}, 0},
      {{9, 7}, {3, 2}, {2, 1}, {2, 1, 1, 0}, {1, 2}, {5, 6}, 1},
      {{11}, {4}, {3}, {3, 2}, {1}, {5}, 0},
      {{4, 3, 5}, {2, 2, 3}, {1, 2, 2}, {1, 0, 2, 0, 1, 1}, {1, 1, 1}, {4, 2, 3}, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in.size());
    Model m;
    kiln_test::Dims dims{std::string("batch"), std::int64_t{3}};
    for (std::int64_t d : c.in) dims.emplace_back(d);
    m.input("x", dims);
    onnx::NodeProto& pool = m.node("MaxPool", {"x"}, {"y", "at"}, "pool");
    kiln_test::set_ints(pool, "kernel_shape", c.kernel);
    kiln_test::set_ints(pool, "strides", c.stride);
    kiln_test::set_ints(pool, "pads", c.pads);
    kiln_test::set_ints(pool, "dilations", c.dilation);
    set_int(pool, "storage_order", c.order);
    m.output("y");
    m.output("at");
    const kiln::OnnxModel model = m.import();
    // Values in a few levels (ties) and below zero (so a pad read as 0 would win).
    std::int64_t n = 2 * 3;
    for (std::int64_t d : c.in) n *= d;
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = -1.0f - static_cast<float>((i * 7919) % 5);
    std::vector<kiln::Dim> xs{2, 3};
    for (std::int64_t d : c.in) xs.emplace_back(d);
    const kiln::Tensor input = kiln::Tensor::from_data(x, kiln::Shape(xs));
    const std::vector<std::int64_t> want = max_pool_indices(
        x, 6, c.in, c.out, c.kernel, c.stride,
        std::vector<std::int64_t>(c.pads.begin(), c.pads.begin() + static_cast<long>(c.in.size())),
        c.dilation, c.order == 1);
    kiln::CompiledCallable call(model.graph, model.weights);
    const std::vector<kiln::Tensor> got = call.run({input});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[1].to_vector<std::int64_t>(), want);
    EXPECT_EQ(kiln::reference_run(model.graph.graph(), {input}, model.weights)[1]
                  .to_vector<std::int64_t>(),
              want);
    // The values are the elements the indices name (storage order 0: x's own order).
    if (c.order == 0) {
      const std::vector<float> y = got[0].to_vector<float>();
      for (std::size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(y[i], x[static_cast<std::size_t>(want[i])]) << "element " << i;
    }
  }
  Model bad;
  bad.input("x", {1, 1, 4});
  onnx::NodeProto& pool = bad.node("MaxPool", {"x"}, {"y", "at"}, "pool");
  kiln_test::set_ints(pool, "kernel_shape", {2});
  set_int(pool, "storage_order", 2);
  bad.output("y");
  bad.output("at");
  KILN_EXPECT_THROW_MSG(bad.import(), kiln::UserError, "node 'pool'", "storage_order 2");
}

TEST(OnnxImport, OlderOpsetsAreReadForOpsUnchangedSinceThen) {
  Model einsum(12);
  einsum.input("x", {2, 3});
  set_string(einsum.node("Einsum", {"x"}, {"y"}), "equation", "ij->ji");
  einsum.output("y");
  const kiln::OnnxModel model = einsum.import();
  EXPECT_EQ(model.opset, 12);
  EXPECT_EQ(model.graph.out_layouts()[0].shape, (kiln::Shape{3, 2}));
  EXPECT_EQ(kiln::onnx_op_oldest_opset("Einsum"), 12);
  EXPECT_EQ(kiln::onnx_op_oldest_opset("Relu"), kiln::kOnnxMinOpset);
  EXPECT_EQ(kiln::onnx_op_oldest_opset("NoSuchOp"), 0);

  Model mixed(12);
  mixed.input("x", {2, 3});
  set_string(mixed.node("Einsum", {"x"}, {"t"}, "fine"), "equation", "ij->ji");
  mixed.node("Relu", {"t"}, {"y"}, "old");
  mixed.output("y");
  try {
    mixed.import();
    ADD_FAILURE() << "an opset-12 Relu was read";
  } catch (const kiln::UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("ONNX op 'Relu' (opset 12) at node 'old' is read from opset 13 on"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("'fine'"), std::string::npos) << message;
  }
}

}  // namespace
