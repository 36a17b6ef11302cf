#!/usr/bin/env bash
# Session 39, device call 3: the premerge of HEAD (the q4 prologue ahead of q but in the regular
# d256 kernel) against b07ff9e (main's kernels of 441f6e2) on whatever card the call gets: the
# base receipts are made first by the base build on that card (KC_BASE_HERE=1), so premerge
# compares one card's ratios, and rows slower in both runs go to the same-call A/B. Then the cuda
# mutants (skipped: KC_SKIP_MUTANTS=1, the session's device time ran short after failed starts), qwen-pages deep
# and the sanitizers (tools/h200_premerge.sh), while the call's KC_CALL_S (default 380) seconds last.
# Before the call: git apply reports/h100/receipts-s39/kept.patch, commit, KC_BASE=b07ff9e tools/h200_snap.sh
# (carry .deps and .dev). Returns $OUT/s39-call3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
bash tools/h200_git_from_snap.sh || exit 4
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/v
KC_BASE=$(cat .dev/snap/base) KC_BASE_HERE=1 KC_SKIP_MUTANTS=1 KC_PREFIX=$PWD/.deps/usr timeout ${KC_CALL_S:-380} bash tools/h200_premerge.sh /tmp/v > /tmp/v/v.out 2>&1
echo "h200_premerge rc=$?"
tail -14 /tmp/v/v.out
tar czf $OUT/s39-call3.tgz -C /tmp v --exclude='v/base-here/*.log' 2>/dev/null
ls -la $OUT
