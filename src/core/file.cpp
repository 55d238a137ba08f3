#include "kiln/core/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "core/str.hpp"
#include "kiln/core/error.hpp"

namespace kiln {

int open_regular_file(const std::string& path, std::uint64_t& size, std::string& problem) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    problem = detail::cat("cannot be opened: ", std::strerror(errno));
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    problem = detail::cat("cannot be examined: ", std::strerror(errno));
  } else if (S_ISDIR(st.st_mode)) {
    problem = "is a directory, not a file";
  } else if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    problem = "is a FIFO or socket, not a file (kiln reads files whose length it knows)";
  } else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    problem = "is a device, not a file (kiln reads files whose length it knows)";
  } else if (!S_ISREG(st.st_mode)) {
    problem = "is not a regular file";
  } else {
    size = static_cast<std::uint64_t>(st.st_size);
    return fd;
  }
  ::close(fd);
  return -1;
}

std::string read_regular_file(const std::string& path, std::string_view what,
                              std::uint64_t max_bytes) {
  std::uint64_t size = 0;
  std::string problem;
  const int fd = open_regular_file(path, size, problem);
  if (fd < 0) throw UserError(detail::cat(path, ": ", problem));
  if (size > max_bytes) {
    ::close(fd);
    throw UserError(detail::cat(path, ": is ", size, " bytes, more than ", what, " can be (",
                                max_bytes, " bytes)"));
  }
  std::string out;
  try {
    out.resize(static_cast<std::size_t>(size));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    throw UserError(detail::cat(path, ": out of memory reading its ", size, " bytes"));
  }
  std::size_t done = 0;
  while (done < out.size()) {  // a file that shrinks meanwhile ends the loop early
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw UserError(detail::cat(path, ": read failed: ", std::strerror(error)));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = detail::cat(path, ".kiln-tmp-", ::getpid());
  const auto fail = [&](const char* what, int error) {
    ::unlink(tmp.c_str());
    throw UserError(detail::cat(path, ": cannot write (", what, std::strerror(error), ")"));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw UserError(detail::cat(path, ": cannot write (", std::strerror(errno), ")"));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail("", error);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) fail("", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming the finished file: ", errno);
}

}  // namespace kiln
