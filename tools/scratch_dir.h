// A process-private scratch folder under the system's temp folder (NAME-<pid>), emptied when
// made and removed with everything in it when it goes out of scope. The benches pass files to
// the python they run beside them (SDPA, transformers) through one, so two runs at once never
// share a file.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kc {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_, ec_);
    ec_.clear();
    std::filesystem::create_directories(path_, ec_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  bool ok() const { return !ec_; }  // the folder was made

 private:
  std::filesystem::path path_;
  std::error_code ec_;
};

}  // namespace kc
