#!/usr/bin/env bash
# Round 3's command lines (reports/unusual-inputs-3/) on cpu and on cuda from one binary, compared line
# by line (replay.py beside this script; README.md says what is compared and what counts as a finding).
# One device call, from the repository root, carrying .deps.tgz and .dev (tools/h200_snap.sh first):
#   bash reports/unusual-inputs-3/cuda/run.sh
# Builds tf-cuda-test (-DKC_CUDA=ON, sm_90) in /tmp, then runs replay.py with side a --backend cpu and
# side b --backend cuda until TOTAL seconds after the start (default 540) less a margin for the packing.
# $OUT gets u3cuda.tgz (the work folder but for checkpoints and made models; written every minute and
# at the end, so a cut-short run returns what it did), summary.txt, table.txt, results.jsonl, replay.log
# and head.txt.
# The table of lines, equal, by-design, findings and not run is printed last.
# Environment:
#   TOTAL=540          the wall-clock limit of the whole script, build included
#   BACKEND_B=cuda     side b's backend; BACKEND_B=cpu is the dry run (cpu on both sides)
#   TF=PATH            use this tf-cuda-test, build nothing (a local dry run: TF=build-cpu/tools/tf-cuda-test)
#   JOBS_A=6 JOBS_B=8  processes at a time on side a (cpu) and side b (cuda: processes sharing the GPU)
#   REPLAY_ARGS=...    more arguments for replay.py (e.g. "--every 10" or "--only '^serve:'")
#   W=/tmp/u3cuda      the work folder (emptied first)
set -uo pipefail
T0=$(date +%s)
TOTAL=${TOTAL:-540}
BACKEND_B=${BACKEND_B:-cuda}
W=${W:-/tmp/u3cuda}
OUT=${OUT:-$W-out}
rm -rf "$W" && mkdir -p "$W" "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
pack() {
  tar czf "$OUT/u3cuda.tgz.part" -C "$W" --exclude=./in/ck --exclude='./in/mm *' --exclude='./in/draft *' \
    --exclude='./*/kvcache' . 2>/dev/null
  mv -f "$OUT/u3cuda.tgz.part" "$OUT/u3cuda.tgz"
  for f in summary.txt table.txt results.jsonl replay.log head.txt; do [ -f "$W/$f" ] && cp "$W/$f" "$OUT/"; done
  return 0
}
# every minute a pack, in the background; stopped (with its sleep) before the last pack and on exit
( trap 'kill $s 2>/dev/null; exit 0' TERM; while :; do sleep 60 & s=$!; wait $s; pack; done ) > /dev/null 2>&1 &
PACKER=$!
stop_packer() { kill $PACKER 2>/dev/null; wait $PACKER 2>/dev/null; }
trap stop_packer EXIT
left() { echo $((TOTAL - ($(date +%s) - T0))); }

if [ -n "${TF:-}" ]; then
  H=$(realpath "$TF")
  echo "dry run: $H, side b --backend $BACKEND_B" | tee "$W/head.txt"
  git log -1 --format='head %H' 2>/dev/null | tee -a "$W/head.txt"
else
  [ -d .deps ] || tar xzf .deps.tgz
  bash tools/h200_git_from_snap.sh | tee "$W/head.txt" || exit 4
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$W/head.txt"
  B=/tmp/u3cuda-build
  CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
  timeout $(($(left) - 200)) cmake -S . -B $B $CFG -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" > "$W/cmake.log" 2>&1 ||
    { tail -20 "$W/cmake.log"; stop_packer; pack; exit 2; }
  timeout $(($(left) - 180)) ninja -C $B -j 16 tf-cuda-test > "$W/build.log" 2>&1 || { tail -30 "$W/build.log"; stop_packer; pack; exit 2; }
  H=$B/tools/tf-cuda-test
  echo "built in $(($(date +%s) - T0)) s" | tee -a "$W/head.txt"
fi

# replay.py stops starting lines (and stops a running one) at the deadline: TOTAL less 30 s for the
# comparisons of the last lines, the table and the last pack (and it is killed 10 s before TOTAL: then
# results.jsonl holds the lines compared so far, without the table)
DEADLINE=$((T0 + TOTAL - 30))
eval "extra=(${REPLAY_ARGS:-})"
timeout $(($(left) - 10)) python3 reports/unusual-inputs-3/cuda/replay.py "$H" "$W" --a cpu --b "$BACKEND_B" --jobs-a "${JOBS_A:-6}" \
  --jobs-b "${JOBS_B:-8}" --deadline "$DEADLINE" "${extra[@]}" > "$W/replay.log" 2>&1
rc=$?
stop_packer
pack
[ $rc -eq 0 ] || { echo "replay.py exit $rc:"; tail -20 "$W/replay.log"; }
if [ -f "$W/table.txt" ]; then
  tail -n +$(($(wc -l < "$W/table.txt") + 1)) "$W/summary.txt" | head -80
  echo "done in $(($(date +%s) - T0)) s (limit $TOTAL s); all of it: summary.txt, results.jsonl"
  cat "$W/table.txt"
fi
exit $rc
