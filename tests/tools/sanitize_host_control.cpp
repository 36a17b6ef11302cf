// The controls of a KC_SANITIZE_HOST build (docs/verification.md): each mode is a defect that
// AddressSanitizer or UndefinedBehaviorSanitizer must report, so a clean host run under them
// is known to come from live sanitizers and not from a build without them.
//   sanitize_host_control heap   : reads one element past a heap array (ASan)
//   sanitize_host_control signed : overflows a signed int (UBSan)
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  volatile int n = 8;  // volatile: the compiler cannot see the defects and fold them away
  if (!std::strcmp(argv[1], "heap")) {
    std::vector<int> v(size_t(n), 1);
    std::printf("%d\n", v.data()[n]);
  } else if (!std::strcmp(argv[1], "signed")) {
    volatile int x = INT_MAX;
    std::printf("%d\n", x + n);
  } else {
    return 2;
  }
  return 0;  // reached only without the sanitizers
}
