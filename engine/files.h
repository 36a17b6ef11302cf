// Input files and folders named by the user (fixtures, token files, model folders): each
// problem comes back as a reason to print, never as an exception or a blocked read.
#pragma once

#include <string>

#include "contracts/input_file.h"  // read_regular_file: the reason alone
#include "kernels/layout/status.h"

namespace kc::engine {

// The whole of the regular file `path` (contracts/input_file.h's read_regular_file). A folder,
// a FIFO or another special file (a FIFO would block the read), a name the system refuses (too
// long, a loop of symbolic links) and a failed read are errors "path: (file): reason".
Status read_input_file(const std::string& path, std::string* out);

// Empty when `path` is a folder (through symbolic links); else why not: "is not a folder",
// with the system's reason in brackets where the name could not be examined at all.
std::string folder_problem(const std::string& path);

}  // namespace kc::engine
