#include "kiln/core/file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../error_matchers.hpp"
#include "kiln/core/error.hpp"

namespace kiln {
namespace {

namespace fs = std::filesystem;

class Files : public ::testing::Test {
 protected:
  fs::path dir =
      fs::temp_directory_path() / ("kiln_file_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const char* name) const { return (dir / name).string(); }
  /// Names in the directory: no temporary file may be left behind.
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
  }
};

// A FIFO blocked the readers in open forever and /dev/zero was read until memory ran
// out: both are refused at once, naming the file, as are directories.
TEST_F(Files, ReadsRefuseWhatIsNotARegularFileWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  KILN_EXPECT_THROW_MSG(read_regular_file(path("fifo"), "a model", 1 << 20), UserError,
                        "fifo: ", "is a FIFO or socket, not a file");
  KILN_EXPECT_THROW_MSG(read_regular_file("/dev/zero", "a model", 1 << 20), UserError,
                        "/dev/zero: is a device, not a file");
  KILN_EXPECT_THROW_MSG(read_regular_file(dir.string(), "a model", 1 << 20), UserError,
                        "is a directory, not a file");
  KILN_EXPECT_THROW_MSG(read_regular_file(path("missing"), "a model", 1 << 20), UserError,
                        "missing: cannot be opened: No such file or directory");
  std::ofstream(path("ten")) << "0123456789";
  EXPECT_EQ(read_regular_file(path("ten"), "a model", 10), "0123456789");
  KILN_EXPECT_THROW_MSG(read_regular_file(path("ten"), "a model", 9), UserError,
                        "is 10 bytes, more than a model can be (9 bytes)");
}

TEST_F(Files, WritesAreWholeOrNotAtAllAndLeaveNoTemporaryFile) {
  const std::string out = path("out.npy");
  write_file_atomically(out, "first");
  write_file_atomically(out, "second, longer");
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "second, longer");
  EXPECT_EQ(entries(), 1u);
  // A directory in the way: an error naming the path; the directory and its contents stay.
  fs::create_directories(dir / "taken" / "inside");
  KILN_EXPECT_THROW_MSG(write_file_atomically(path("taken"), "x"), UserError,
                        "taken: cannot write");
  EXPECT_TRUE(fs::is_directory(dir / "taken" / "inside"));
  KILN_EXPECT_THROW_MSG(write_file_atomically(path("no/such/dir/f"), "x"), UserError,
                        "cannot write (No such file or directory)");
  EXPECT_EQ(entries(), 2u);  // out.npy and taken: no temporary left
}

}  // namespace
}  // namespace kiln
