#include "kiln/io/safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

using ::testing::ElementsAre;

class Safetensors : public ::testing::Test {
 protected:
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_safetensors_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }

  // A file with the given header JSON and \p data bytes.
  std::string write_raw(const std::string& name, const std::string& header, std::size_t data,
                        std::uint64_t claimed_length = 0) const {
    const std::string path = file(name);
    std::ofstream out(path, std::ios::binary);
    std::uint64_t n = claimed_length ? claimed_length : header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << std::string(data, '\0');
    return path;
  }
};

TEST_F(Safetensors, RoundTripKeepsNamesDtypesShapesValuesAndMetadata) {
  const std::map<std::string, Tensor> tensors{
      {"layers.0.w", Tensor::from_data(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})},
      {"emb", Tensor::from_data(std::vector<std::int64_t>{7, -8}, {2})},
      {"half", Tensor::constant({0.5, 1.5}, {2}, DType::f16)},
      {"scalar", Tensor::scalar(3, DType::bf16)},
      {"empty", Tensor::zeros(TensorLayout(DType::f32, {0, 4}))}};
  save_safetensors(file("w.safetensors"), tensors, {{"format", "pt"}});
  const SafetensorsFile f = SafetensorsFile::open(file("w.safetensors"));
  EXPECT_EQ(f.names(), (std::vector<std::string>{"emb", "empty", "half", "layers.0.w", "scalar"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.layout("layers.0.w"), (TensorLayout{DType::f32, {2, 3}}));
  EXPECT_THAT(f.tensor("layers.0.w").to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(f.tensor("emb").to_vector<std::int64_t>(), ElementsAre(7, -8));
  EXPECT_THAT(f.tensor("half").to_doubles(), ElementsAre(0.5, 1.5));
  EXPECT_THAT(f.tensor("scalar").to_doubles(), ElementsAre(3));
  EXPECT_EQ(f.tensor("empty").shape(), (Shape{0, 4}));
  EXPECT_EQ(f.tensors().size(), 5u);
  KILN_EXPECT_THROW_MSG(f.tensor("nope"), UserError, "has no tensor named 'nope'");
}

TEST_F(Safetensors, BrokenFilesAreRejectedWithTheProblemNamed) {
  const auto rejects = [&](const std::string& path, const char* fragment) {
    KILN_EXPECT_THROW_MSG(SafetensorsFile::open(path), UserError, path.c_str(), fragment);
  };
  rejects(file("missing.safetensors"), "cannot be opened");
  { std::ofstream(file("short")) << "abc"; }
  rejects(file("short"), "is 3 bytes long");
  rejects(write_raw("truncated", "{}", 0, 1000), "its header claims 1000 bytes but the file has 2");
  rejects(write_raw("badjson", "{\"a\": [", 0), "its header is not valid JSON");
  rejects(write_raw("notobject", "[1, 2]", 0), "its header is not a JSON object");
  rejects(write_raw("dtype", R"({"w": {"dtype": "F8", "shape": [1], "data_offsets": [0, 1]}})", 1),
          "tensor 'w': dtype 'F8' is not supported");
  rejects(
      write_raw("negative", R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
      "shape entry that is not a non-negative integer");
  rejects(
      write_raw("outside", R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8),
      "data_offsets [0, 16] lie outside the 8 bytes of data");
  rejects(write_raw("size", R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
          "holds 8 bytes but F32 of shape [3] needs 12");
  rejects(write_raw("overlap",
                    R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                    R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                    12),
          "two tensors share bytes [4, 8)");
  rejects(
      write_raw(
          "overflow",
          R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}})",
          8),
      "overflows");
  KILN_EXPECT_THROW_MSG(save_safetensors(file("x"), {{"t", Tensor(TensorLayout(DType::f32, {2}))}}),
                        UserError, "tensor 't' holds no data");
}

// Readers disagree on which of two entries with one name wins (kiln kept the first,
// Python's reader the last): refused. A NUL in a name cut messages short: escaped.
TEST_F(Safetensors, RepeatedNamesAreRefusedAndNamesAreEscapedInMessages) {
  const std::string entry = R"({"dtype": "F32", "shape": [1], "data_offsets": )";
  const std::string twice =
      write_raw("twice", "{\"w\": " + entry + "[0, 4]}, \"w\": " + entry + "[4, 8]}}", 8);
  KILN_EXPECT_THROW_MSG(SafetensorsFile::open(twice), UserError, "twice",
                        "its header names tensor 'w' twice");
  const std::string nul = write_raw(
      "nul",
      std::string("{\"a\\u0000b\": {\"dtype\": \"F8\", \"shape\": [1], \"data_offsets\": [0, 1]}}"),
      1);
  KILN_EXPECT_THROW_MSG(SafetensorsFile::open(nul), UserError, "tensor 'a\\x00b': dtype 'F8'");
}

}  // namespace
}  // namespace kiln
