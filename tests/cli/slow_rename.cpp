// A test shim for cli_cases.sh (LD_PRELOAD): rename() of a write's temp file (a name holding
// ".tmp": a receipt's NAME.tmp.PID, make-model's config.json.tmp) waits before it renames, so that a test can reach the moment between a receipt's
// temp file and its rename, which is otherwise a few microseconds wide.
//   KC_SLOW_RENAME=fixed:MS    every such rename waits MS milliseconds;
//   KC_SLOW_RENAME=random:MS   each waits a random 0 to MS milliseconds (seeded by the pid);
//   KC_SLOW_RENAME_MARK=FILE   created before the first wait (the test waits for it, then signals).
// And open() of a lock: KC_SLOW_LOCK (below).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" int rename(const char* from, const char* to) {
  using Fn = int (*)(const char*, const char*);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "rename"));
  const char* how = std::getenv("KC_SLOW_RENAME");
  if (how && std::strstr(from, ".tmp")) {
    const char* colon = std::strchr(how, ':');
    const long most = colon ? std::strtol(colon + 1, nullptr, 10) : 0;
    static unsigned state = unsigned(getpid()) * 2654435761u + unsigned(time(nullptr));
    long ms = most;
    if (std::strncmp(how, "random", 6) == 0) {
      state = state * 1103515245u + 12345u;
      ms = most > 0 ? long((state >> 8) % unsigned(most + 1)) : 0;
    }
    if (const char* mark = std::getenv("KC_SLOW_RENAME_MARK")) {
      const int fd = ::open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) ::close(fd);
    }
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
  }
  return real(from, to);
}

// KC_SLOW_LOCK=MS: open() of a make-model / make-draft lock (a name holding ".kc-writing") waits
// MS milliseconds first, so that another run can claim, write and release the folder between this
// run's look at it and its lock.
extern "C" int open(const char* path, int flags, ...) {
  using Fn = int (*)(const char*, int, ...);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "open"));
  unsigned mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, unsigned);
    va_end(ap);
  }
  const char* wait = std::getenv("KC_SLOW_LOCK");
  if (wait && path && std::strstr(path, ".kc-writing")) {
    const long ms = std::strtol(wait, nullptr, 10);
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
  }
  return real(path, flags, mode);
}
