#include "engine/files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kc::engine {

namespace fs = std::filesystem;

std::string read_input_file_why(const std::string& path, std::string* out) {
  std::error_code ec;
  const fs::file_type t = fs::status(path, ec).type();
  if (t == fs::file_type::directory) return "is a folder, not a file";
  if (t == fs::file_type::none) return ec.message();
  if (t != fs::file_type::regular && t != fs::file_type::not_found) return "not a regular file";
  std::ifstream is(path, std::ios::binary);  // a missing file: the open says so
  if (!is) return std::string("cannot open: ") + std::strerror(errno);
  std::ostringstream s;
  s << is.rdbuf();
  if (is.bad()) return "read failed";
  *out = s.str();
  return "";
}

Status read_input_file(const std::string& path, std::string* out) {
  const std::string why = read_input_file_why(path, out);
  return why.empty() ? Status::Ok() : Status::Error(path + ": (file): " + why);
}

std::string folder_problem(const std::string& path) {
  std::error_code ec;
  const fs::file_type t = fs::status(path, ec).type();
  if (t == fs::file_type::directory) return "";
  if (t == fs::file_type::none) return "is not a folder (" + ec.message() + ")";
  return "is not a folder";
}

}  // namespace kc::engine
