#include "engine/files.h"

#include <filesystem>

namespace kc::engine {

namespace fs = std::filesystem;

Status read_input_file(const std::string& path, std::string* out) {
  const std::string why = read_regular_file(path, out);
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
