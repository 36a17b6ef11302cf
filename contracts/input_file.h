// Reading a file the user named (a receipt, a fixture, a token, prompt or config file): the whole
// of a regular file, or the reason it cannot be had, never an exception or a read that blocks.
#pragma once

#include <string>

namespace kc {

// "" when *out holds the whole file; else the reason, and *error (when given) its errno:
//   "cannot open: <the system's reason>"  a missing file (ENOENT), a name too long, a loop of
//                                         symbolic links, no permission;
//   "is a folder, not a file"             EISDIR;
//   "not a regular file"                  a FIFO, a device, a socket (ENODEV);
//   "read failed: <reason>"               the read's own error.
// The name is opened without blocking (O_NONBLOCK: a FIFO opens at once, where a plain open
// waits for a writer) and judged by the opened descriptor (fstat), so a name swapped for a FIFO
// or a folder between a look and the open is refused too.
std::string read_regular_file(const std::string& path, std::string* out, int* error = nullptr);

}  // namespace kc
