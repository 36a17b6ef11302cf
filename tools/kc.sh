#!/usr/bin/env bash
# One entry point for a fresh Debian machine: installs the Debian packages the build
# needs (when missing), configures, builds, then runs the main job or the tests.
#   tools/kc.sh run   [tf-cuda-test kernel-contract options]   (default: --out-dir receipts)
#   tools/kc.sh test  [ctest options]
#   tools/kc.sh build
# Environment: BUILD_DIR (default build), KC_CUDA (AUTO|ON|OFF), CUDA_ARCHS (default 90).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in run|test|build) ;; *) echo "usage: tools/kc.sh run|test|build [args...]" >&2; exit 2;; esac

pkgs="cmake make g++ git libgtest-dev librapidcheck-dev libeigen3-dev nlohmann-json3-dev libcli11-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "kc.sh: installing:$missing" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q $missing
fi
# The CUDA toolkit is optional: without nvcc the cpu backend is built alone.
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DKC_CUDA="${KC_CUDA:-AUTO}" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >/dev/null
cmake --build "$build" -j"$(nproc)"

case "$mode" in
  build) ;;
  run)
    if [ $# -eq 0 ]; then set -- --out-dir receipts; fi
    exec "$build/tools/tf-cuda-test" kernel-contract "$@" ;;
  test)
    cd "$build" && exec ctest --output-on-failure -j"$(nproc)" "$@" ;;
esac
