#!/usr/bin/env bash
# PTX of every kernel source of a tree, as CMake compiles it for sm_90 less the debug
# flags (-g, -lineinfo: line tables only):
#   reports/layout/ptx.sh TREE OUT_DIR [FILE.cu...]     (default: kernels/*/*.cu bench/*.cu)
# (KC_PTX_DEFINES="-DKC_PLANT_..." compiles a planted variant.)
# then `python3 reports/layout/ptx_entries.py BEFORE_DIR AFTER_DIR` compares each kernel.
set -euo pipefail
tree=$(cd "$1" && pwd) out=$2
shift 2
mkdir -p "$out" "$out/generated"
# kc_git_info.h: the receipts' provenance; no kernel reads it, any content will do.
printf '#pragma once\n#define KC_GIT_COMMIT "ptx"\n#define KC_GIT_DIRTY false\n' > "$out/generated/kc_git_info.h"
files=("$@")
[ ${#files[@]} -gt 0 ] || files=$(cd "$tree" && ls kernels/*/*.cu bench/*.cu)
for f in ${files[@]}; do
  nvcc ${KC_PTX_DEFINES:-} -DKC_HAVE_CUDA=1 -I"$tree" -I"$out/generated" -O2 -DNDEBUG -arch=sm_90 --expt-relaxed-constexpr -std=c++20 \
    -ptx "$tree/$f" -o "$out/$(echo "$f" | tr / _).ptx"
done
