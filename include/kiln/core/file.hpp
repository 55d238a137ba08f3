#pragma once
/// \file
/// Reading files a user names (models, inputs, weights) without blocking or running out
/// of memory on what is not a file: a FIFO, a directory, `/dev/zero`; and writing them
/// whole or not at all.

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

/// Writes \p bytes as the file \p path, whole or not at all: into a temporary file beside
/// it (`<path>.kiln-tmp-<pid>`), renamed over \p path once complete, so that a failed
/// write (a full disk, a directory in the way) leaves what was there, and a reader never
/// sees half a file. \throws UserError "<path>: cannot write (<reason>)".
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace kiln
