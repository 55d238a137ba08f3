#pragma once
/// \file
/// Reading files a user names (models, inputs, weights) without blocking or running out
/// of memory on what is not a file: a FIFO, a directory, `/dev/zero`.

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// Opens the regular file at \p path for reading, without blocking (a FIFO is refused,
/// not waited on). Returns the descriptor and sets \p size to the file's length; on
/// failure returns -1 and sets \p problem to what is wrong, worded to follow the path:
/// "cannot be opened: No such file or directory", "is a directory, not a file", "is a
/// FIFO or socket, not a file", "is a device, not a file".
int open_regular_file(const std::string& path, std::uint64_t& size, std::string& problem);

/// The whole of the regular file at \p path, which may hold at most \p max_bytes.
/// \throws UserError "<path>: <problem>" for whatever `open_regular_file` refuses, a file
/// longer than \p max_bytes (naming \p what it was read as, "a model", and the limit), or
/// a failed read.
std::string read_regular_file(const std::string& path, std::string_view what,
                              std::uint64_t max_bytes);

}  // namespace kiln
