#include "kiln/io/npy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

using ::testing::ElementsAre;

/// A .npy file with the given header dict text and data bytes (version 1.0 unless told).
std::string npy(const std::string& dict, const std::string& data, char major = 1) {
  std::string header = dict + "\n";
  std::string out = "\x93NUMPY";
  out += major;
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  if (major > 1) out += std::string(2, '\0');
  return out + header + data;
}

std::string bytes_of(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

TEST(Npy, RoundTripsEveryDtypeAndRank) {
  for (DType d : kAllDTypes) {
    for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3, 4}, Shape{0, 3}}) {
      const Tensor t = Tensor::random({d, shape}, 7, -5, 5);
      const Tensor back = parse_npy(to_npy(t));
      const DType want = d == DType::bf16 ? DType::f32 : d;  // NumPy has no bfloat16
      EXPECT_EQ(back.dtype(), want) << d;
      EXPECT_EQ(back.shape(), shape) << d;
      EXPECT_EQ(back.to_doubles(), t.to_doubles()) << d << " " << shape;
    }
  }
}

TEST(Npy, WritesTheHeaderNumPyWrites) {
  const std::string bytes =
      to_npy(Tensor::from_data(std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(bytes.find("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
  EXPECT_EQ((bytes.size() - 6 * 8) % 64, 0u);  // data aligned to 64 bytes
  EXPECT_NE(to_npy(Tensor::from_data(std::vector<float>{1}, {1})).find("'shape': (1,)"),
            std::string::npos);
  EXPECT_NE(to_npy(Tensor::scalar(2)).find("'shape': ()"), std::string::npos);
  EXPECT_NE(to_npy(Tensor::from_data(std::vector<std::uint8_t>{1}, {1})).find("'|u1'"),
            std::string::npos);
}

TEST(Npy, ReadsVersionsTwoAndThreeBigEndianAndFortranOrder) {
  const std::string data = bytes_of({1, 2, 3, 4, 5, 6});
  for (char major : {'\x02', '\x03'}) {
    const Tensor t =
        parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", data, major));
    EXPECT_THAT(t.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  }
  std::string big = data;
  for (std::size_t i = 0; i < big.size(); i += 4)
    std::reverse(big.begin() + i, big.begin() + i + 4);
  EXPECT_THAT(parse_npy(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (6,)}", big))
                  .to_vector<float>(),
              ElementsAre(1, 2, 3, 4, 5, 6));
  // Column-major [2, 3]: memory 1 2 3 4 5 6 holds columns (1 2) (3 4) (5 6).
  const Tensor f =
      parse_npy(npy("{\"shape\": (2, 3), \"fortran_order\": True, \"descr\": \"<f4\"}", data));
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_THAT(f.to_vector<float>(), ElementsAre(1, 3, 5, 2, 4, 6));
}

TEST(Npy, ReadsMlDtypesBfloat16ArraysAsBf16) {
  // numpy.save of an ml_dtypes.bfloat16 array writes '<V2': bf16 bits (1.5, -2, 0.1015625).
  const std::string data("\xc0\x3f\x00\xc0\xd0\x3d", 6);
  for (const char* descr : {"<V2", "|V2"}) {
    const Tensor t = parse_npy(npy(
        std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (3,), }", data));
    EXPECT_EQ(t.dtype(), DType::bf16) << descr;
    EXPECT_THAT(t.to_doubles(), ElementsAre(1.5, -2, 0.1015625)) << descr;
  }
  KILN_EXPECT_THROW_MSG(parse_npy(npy("{'descr': '<V4', 'fortran_order': False, 'shape': (1,), }",
                                      std::string(4, '\0'))),
                        UserError, "'<V4' has no kiln dtype",
                        "V2 (bf16: ml_dtypes.bfloat16 arrays)");
}

TEST(Npy, RejectsMalformedFilesNamingTheProblem) {
  const std::string four = bytes_of({1, 2, 3, 4});
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  KILN_EXPECT_THROW_MSG(parse_npy("hello", "x.npy"), UserError, "x.npy", "not a .npy file");
  KILN_EXPECT_THROW_MSG(parse_npy(npy(ok, four, '\x07'), "x.npy"), UserError, "format version 7.0");
  KILN_EXPECT_THROW_MSG(parse_npy(npy(ok, four).substr(0, 30), "x.npy"), UserError,
                        "truncated: the header says");
  KILN_EXPECT_THROW_MSG(parse_npy(npy(ok, four.substr(0, 12)), "x.npy"), UserError,
                        "truncated: shape (4) of <f4 needs 16 data bytes", "has 12");
  KILN_EXPECT_THROW_MSG(parse_npy(npy(ok, four + "xx"), "x.npy"), UserError, "too long");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (4,), }", four), "x.npy"),
      UserError, "x.npy: .npy header at byte", "element type '<c8' has no kiln dtype", "i8");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '<u4', 'fortran_order': False, 'shape': (4,), }", four), "x.npy"),
      UserError, "'<u4' has no kiln dtype");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '|f4', 'fortran_order': False, 'shape': (4,), }", four), "x.npy"),
      UserError, "multi-byte but says no byte order");
  KILN_EXPECT_THROW_MSG(parse_npy(npy("{'descr': '<f4', 'shape': (4,), }", four), "x.npy"),
                        UserError, "lacks 'fortran_order'");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", four), "x.npy"),
      UserError, "expected a non-negative dimension but found '-'");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,), }", four), "x.npy"),
      UserError, "expected True or False");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '<f4', 'descr': '<f4', 'shape': (4,), }", four), "x.npy"), UserError,
      "unexpected or repeated key 'descr'");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } x", four), "x.npy"),
      UserError, "unexpected text after the header");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, "
                    "4000000000, 4000000000), }",
                    four),
                "x.npy"),
      UserError, "overflows");
  KILN_EXPECT_THROW_MSG(
      parse_npy(npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", "\x01\x02"),
                "x.npy"),
      UserError, "bool element 1 holds 2");
}

TEST(Npy, EveryTruncationOfAValidFileIsAnErrorNotACrash) {
  const std::string full = to_npy(Tensor::random({DType::f32, {3, 5}}, 1));
  for (std::size_t n = 0; n < full.size(); ++n)
    EXPECT_THROW(parse_npy(full.substr(0, n), "cut.npy"), UserError) << n;
}

TEST(Npy, FilesRoundTripAndMissingFilesAreNamed) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kiln_npy_" + std::to_string(::getpid()) + ".npy"))
          .string();
  const Tensor t = Tensor::from_data(std::vector<std::int32_t>{-1, 0, 7}, {3});
  save_npy(path, t);
  EXPECT_THAT(load_npy(path).to_vector<std::int32_t>(), ElementsAre(-1, 0, 7));
  std::filesystem::remove(path);
  KILN_EXPECT_THROW_MSG(load_npy(path), UserError, path.c_str(), "cannot be opened");
  KILN_EXPECT_THROW_MSG(save_npy("/nonexistent-dir/x.npy", t), UserError, "/nonexistent-dir/x.npy",
                        "cannot write");
  KILN_EXPECT_THROW_MSG(to_npy(Tensor(TensorLayout(DType::f32, {2}))), UserError, "no data");
}

}  // namespace
}  // namespace kiln
