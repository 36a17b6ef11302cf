#!/usr/bin/env bash
# One entry point for a fresh Debian machine: installs the Debian packages the build
# needs (when missing), configures, builds what the mode needs, then runs it.
#   tools/kc.sh run   [tf-cuda-test kernel-contract options]   builds tf-cuda-test alone, runs every contract
#                                                               (default: --out-dir receipts)
#   tools/kc.sh test  [ctest options]                           builds everything (tests, mutant builds), runs CTest
#   tools/kc.sh build                                           builds everything
# Environment: BUILD_DIR (default build), KC_CUDA (AUTO|ON|OFF), CUDA_ARCHS (default 90),
# KC_DRY_RUN=1 (print the configure, build and run commands instead of running them).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in run|test|build) ;; *) echo "usage: tools/kc.sh run|test|build [args...]" >&2; exit 2;; esac
dry=${KC_DRY_RUN:-0}
do_run() { if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi; }

pkgs="cmake make g++ git libgtest-dev librapidcheck-dev libeigen3-dev nlohmann-json3-dev libcli11-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "kc.sh: installing:$missing" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  do_run $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive do_run $sudo apt-get install -y -q $missing
fi
# The CUDA toolkit is optional: without nvcc the cpu backend is built alone.
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${BUILD_DIR:-build}
if [ "$dry" = 1 ]; then
  echo "+ cmake -S . -B $build -DKC_CUDA=${KC_CUDA:-AUTO} -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90}"
else
  cmake -S . -B "$build" -DKC_CUDA="${KC_CUDA:-AUTO}" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >/dev/null
fi
# run needs the command line alone (about 9 % of the build); test and build need all of it.
target=()
[ "$mode" = run ] && target=(--target tf-cuda-test)
do_run cmake --build "$build" "${target[@]}" -j"$(nproc)"

case "$mode" in
  build) ;;
  run)
    if [ $# -eq 0 ]; then set -- --out-dir receipts; fi
    [ "$dry" = 1 ] && { echo "+ $build/tools/tf-cuda-test kernel-contract $*"; exit 0; }
    exec "$build/tools/tf-cuda-test" kernel-contract "$@" ;;
  test)
    [ "$dry" = 1 ] && { echo "+ (cd $build && ctest --output-on-failure -j$(nproc) $*)"; exit 0; }
    cd "$build" && exec ctest --output-on-failure -j"$(nproc)" "$@" ;;
esac
