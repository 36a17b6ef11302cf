#!/usr/bin/env bash
# Session 59, device call 2: the sanitizers over the new merge (0d1dd92's kernels). A build with the
# device plants; tools/sanitize.py with memcheck, synccheck and initcheck over qwen-pages (8 drawn
# cases: case 2's 281 chunks of 32 take the two-batch kernel and the second tile) and
# qwen-pages-probes (the chunks and far-max probes: batches of 16, 32, 64 and the kept two-batch
# kernel), racecheck over qwen-pages, and the four merge controls (each tool's planted defect, in
# the new kernel, must be found). Then memcheck and racecheck over the many-chunk cases with
# KC_MERGE_PIPE=0 (the one-batch kernels over every chunk count), while KC_CALL_S lasts.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c2.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c2; L=${KC_CALL_S:-570}; mkdir -p $W
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c2.tgz -C /tmp c2 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee -a $W/head.txt
B=/tmp/build-san
{ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=ON \
    -DCMAKE_PREFIX_PATH=$PWD/.deps/usr && ninja -C $B tools/tf-cuda-test tf-cuda-test-plant-merge-no-barrier \
    tf-cuda-test-plant-merge-read-past-end tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten; } \
  > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
echo "build $((SECONDS-T0)) s"
san_py() {  # san_py NAME TOOLS RUNS
  local t=$(( $(left) - 150 )); [ $t -gt 60 ] || { echo "$1: not run (time)"; return; }
  timeout $t python3 tools/sanitize.py --bin $B/tools/tf-cuda-test --plant-bin $B --jobs 2 --tools $2 --runs $3 \
    --out $W/sanitize-$1.json --logs $W/logs-$1 > $W/sanitize-$1.out 2>&1
  echo "sanitize $1 rc=$? ($((SECONDS-T0)) s)"; tail -4 $W/sanitize-$1.out
  pack
}
san_py a memcheck,synccheck,initcheck qwen-pages,qwen-pages-probes
san_py b racecheck qwen-pages
san() {  # san TOOL LIMIT_S  (KC_MERGE_PIPE=0)
  local t=$(( $2 < $(left) - 5 ? $2 : $(left) - 5 ))
  [ "$t" -ge 20 ] || { echo "$1 pipe0: not run (time)"; return; }
  KC_MERGE_PIPE=0 timeout $t compute-sanitizer --tool $1 --error-exitcode 9 $B/tools/tf-cuda-test qwen-pages --backend cuda \
    --cases 3 --filter 'probe=(chunks|far-max)|chunk=32,' --gates-only --out $W/san-$1-pipe0.json > $W/san-$1-pipe0.log 2>&1
  echo "$1 pipe0 (limit $t s) rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$1-pipe0.log | tail -1)"
  grep -E '^qwen-pages:' $W/san-$1-pipe0.log | tail -1
  pack
}
san memcheck 60; san racecheck 120
python3 - $W <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/sanitize-*.json")):
    r = json.load(open(f))
    print(f.rsplit("/", 1)[1], r["verdict"], "gates:", [(g["name"], g.get("status")) for g in r["gates"]],
          "controls:", [(c["name"], c.get("red")) for c in r["controls"]], "findings", r["numbers"].get("findings"))
PY
echo "total $((SECONDS-T0)) s"
