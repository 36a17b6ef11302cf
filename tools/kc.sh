#!/usr/bin/env bash
# One entry point for a fresh Debian machine: installs the Debian packages the build
# needs (when missing), configures, builds what the mode needs, then runs it.
#   tools/kc.sh run   [tf-cuda-test kernel-contract options]   builds tf-cuda-test alone, runs every contract
#                                                               (default: --out-dir receipts)
#   tools/kc.sh test  [ctest options]                           builds everything (tests, mutant builds), runs CTest
#   tools/kc.sh build                                           builds everything
# Environment: BUILD_DIR (default build), KC_CUDA (AUTO|ON|OFF), CUDA_ARCHS (default 90),
# KC_DEBUG_INFO (1: -g, the default; 0: none, the default when CI=true),
# KC_DRY_RUN=1 (print the configure, build and run commands instead of running them),
# KC_TEST_TOOLS=0 (test: do not install chromium, libxml2-utils, python3-jsonschema).
# The switches take 0 or 1 and KC_CUDA one of AUTO, ON, OFF; any other value exits 2 (KC_DRY_RUN=yes
# used to install and build for real). run's arguments are read from the folder it is called from
# (tf-cuda-test runs there; the default --out-dir is the repository's receipts/), and the script
# may be called through a symbolic link.
set -euo pipefail
caller=$PWD
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$root"
mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in run|test|build) ;; *) echo "usage: tools/kc.sh run|test|build [args...]" >&2; exit 2;; esac
for v in KC_DRY_RUN KC_DEBUG_INFO KC_TEST_TOOLS; do
  case "${!v-0}" in 0 | 1) ;; *) echo "kc.sh: $v='${!v}': expected 0 or 1" >&2; exit 2 ;; esac
done
case "${KC_CUDA:-AUTO}" in AUTO | ON | OFF) ;; *) echo "kc.sh: KC_CUDA='$KC_CUDA': expected AUTO, ON or OFF" >&2; exit 2 ;; esac
dry=${KC_DRY_RUN:-0}
# A dry run prints each command quoted so that it can be pasted back.
show() { printf '+'; printf ' %q' "$@"; printf '\n'; }
do_run() { if [ "$dry" = 1 ]; then show "$@"; else "$@"; fi; }

pkgs="cmake make g++ git libgtest-dev librapidcheck-dev libeigen3-dev nlohmann-json3-dev libcli11-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
# sudo drops DEBIAN_FRONTEND from the environment (env_reset): env passes it on.
apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
[ "$(id -u)" -ne 0 ] && apt=(sudo "${apt[@]}")
updated=0
if [ -n "$missing" ]; then
  echo "kc.sh: installing:$missing" >&2
  do_run "${apt[@]}" update -q
  updated=1
  # shellcheck disable=SC2086  # one word per package
  do_run "${apt[@]}" install -y -q $missing
fi
# The tests of the reviewer's tools (issue 21) need a browser (report --format html rendered
# by headless Chromium), an XML Schema validator (JUnit files) and a JSON Schema validator
# (receipts); each of those tests reports itself skipped where its package is missing, and a
# failed install here only warns. KC_TEST_TOOLS=0 leaves them out. Chromium took about 90 s to
# install on a fresh 2-core machine (137 MB; with its recommended packages).
if [ "$mode" = test ] && [ "${KC_TEST_TOOLS:-1}" = 1 ]; then
  extra=""
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || extra="$extra chromium"
  command -v xmllint >/dev/null 2>&1 || extra="$extra libxml2-utils"
  python3 -c 'import jsonschema' >/dev/null 2>&1 || extra="$extra python3-jsonschema"
  if [ -n "$extra" ]; then
    echo "kc.sh: installing the test tools:$extra (KC_TEST_TOOLS=0 skips them)" >&2
    [ "$updated" = 1 ] || do_run "${apt[@]}" update -q || true
    # shellcheck disable=SC2086  # one word per package
    do_run "${apt[@]}" install -y -q --no-install-recommends $extra ||
      echo "kc.sh: could not install$extra: their tests will report skipped" >&2
  fi
fi
# The CUDA toolkit is optional: without nvcc the cpu backend is built alone.
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${BUILD_DIR:-build}
# Debug information (-g) costs about a third of the compile time of this project's
# template-heavy sources; KC_DEBUG_INFO=0 leaves it out (same -O2, same code). CI
# (CI=true) builds without it unless KC_DEBUG_INFO=1.
debug_info=${KC_DEBUG_INFO:-$([ "${CI:-}" = true ] && echo 0 || echo 1)}
flags=(-DKC_CUDA="${KC_CUDA:-AUTO}" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}")
# Both values are passed every time: the flags live in the build folder's cache, so KC_DEBUG_INFO=1
# on a folder configured with 0 left -g out.
g=$([ "$debug_info" = 0 ] || echo " -g")
flags+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2$g -DNDEBUG" "-DCMAKE_CUDA_FLAGS_RELWITHDEBINFO=-O2$g -DNDEBUG")
if [ "$dry" = 1 ]; then
  show cmake -S . -B "$build" "${flags[@]}"
else
  cmake -S . -B "$build" "${flags[@]}" >/dev/null
fi
# run needs the command line alone (about 9 % of the build); test and build need all of it.
target=()
[ "$mode" = run ] && target=(--target tf-cuda-test)
do_run cmake --build "$build" "${target[@]}" -j"$(nproc)"

case "$mode" in
  build) ;;
  run)
    if [ $# -eq 0 ]; then set -- --out-dir "$root/receipts"; fi
    case "$build" in /*) tool=$build/tools/tf-cuda-test ;; *) tool=$root/$build/tools/tf-cuda-test ;; esac
    cd "$caller"
    [ "$dry" = 1 ] && { show cd "$caller"; show "$tool" kernel-contract "$@"; exit 0; }
    exec "$tool" kernel-contract "$@" ;;
  test)
    [ "$dry" = 1 ] && { show cd "$build"; show ctest --output-on-failure -j"$(nproc)" "$@"; exit 0; }
    cd "$build" && exec ctest --output-on-failure -j"$(nproc)" "$@" ;;
esac
