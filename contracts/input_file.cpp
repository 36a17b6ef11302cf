#include "contracts/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kc {

std::string read_regular_file(const std::string& path, std::string* out, int* error) {
  const auto fail = [&](int e, const std::string& why) {
    if (error) *error = e;
    return why;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int e = errno;
    return e == EISDIR ? fail(e, "is a folder, not a file") : fail(e, std::string("cannot open: ") + std::strerror(e));
  }
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_at_exit{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    return fail(e, std::string("cannot open: ") + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) return fail(EISDIR, "is a folder, not a file");
  if (!S_ISREG(st.st_mode)) return fail(ENODEV, "not a regular file");
  std::string text;
  if (st.st_size > 0) text.reserve(size_t(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      return fail(e, std::string("read failed: ") + std::strerror(e));
    }
    if (n == 0) break;
    text.append(buf, size_t(n));
  }
  *out = std::move(text);
  if (error) *error = 0;
  return "";
}

}  // namespace kc
