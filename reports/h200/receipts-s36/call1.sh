#!/usr/bin/env bash
# Session 36, device call 1: main's receipts from HEAD (.dev/snap), and one diagnostic.
#  1. build tf-cuda-test, the four sanitizer plants and the mma-hi-only mutant (KC_DEVICE_MUTANTS=ON);
#  2. kernel-contract --backend cuda: every contract's receipt (and the serve gate's ci fixture);
#  3. diagnostic for issue 20: bench attention, 32K x b8 and b1 x 4K, bf16 / fp8 / q4, main's
#     binary against the mma-hi-only mutant (its products use q's / p's hi part alone: one mma
#     where main runs two (fp8, q4) or three (bf16)), two rounds interleaved. The mutant's bytes
#     are wrong by design; only its time says how much of a row the extra parts cost;
#  4. tools/sanitize.py --jobs 6 until the time left runs out (a partial receipt; call 2 resumes).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; DL=${DL:-570}
L=/tmp/w/logs; mkdir -p $L $OUT/receipts
pack() { tar czf $OUT/logs.tgz -C /tmp/w logs 2>/dev/null; }
# The tree copy comes without git's metadata, and the repository is too large to carry whole:
# .dev/snap holds HEAD's commit and tree objects (made here by tools/h200_snap.sh); a shallow git
# dir from them gives the receipts HEAD's commit, and git status still compares every tracked
# file's content with HEAD's (update-index hashes them).
H=$(cat .dev/snap/head)
rm -rf .git && git init -q && cp .dev/snap/pack-*.pack .dev/snap/pack-*.idx .git/objects/pack/ && echo $H > .git/shallow \
  && git update-ref refs/heads/main $H && git symbolic-ref HEAD refs/heads/main && git read-tree HEAD \
  && { git update-index -q --refresh > /dev/null; true; } || { echo "git snapshot failed"; exit 4; }
git rev-parse HEAD > $L/head.txt; git status --short --untracked-files=no > $L/status.txt
echo "head $(cat $L/head.txt), changed tracked files: $(wc -l < $L/status.txt)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=ON > $L/cmake.log 2>&1 || { tail -20 $L/cmake.log; exit 2; }
P="tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten"
ninja -C build tf-cuda-test $P tf-cuda-test-mutant-mma-hi-only > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
B=build/tools/tf-cuda-test
timeout 200 $B kernel-contract --backend cuda --out-dir $OUT/receipts > $L/kernel-contract.log 2>&1
echo "kernel-contract rc=$? ($((SECONDS-T0)) s)"; grep -E ": (pass|fail)" $L/kernel-contract.log | cut -c1-150
pack
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
flt='(b8/ctx32768|b1/ctx4096)/(bf16|fp8|q4)/(window|p16)'
for round in 1 2; do
  for v in main hi; do
    bin=$B; [ $v = hi ] && bin=build/tf-cuda-test-mutant-mma-hi-only
    [ -x $bin ] || bin=$(find build -name tf-cuda-test-mutant-mma-hi-only -type f | head -1)
    timeout 100 $bin bench attention --reps 20 --script-dir /tmp/nosdpa --filter "$flt" --out $OUT/diag/bench-$v-$round.json > $L/bench-$v-$round.log 2>&1
    echo "bench $v round $round rc=$? ($((SECONDS-T0)) s)"
  done
done
pack
timeout $((DL - (SECONDS-T0) - 15)) python3 tools/sanitize.py --bin $B --plant-bin build --jobs 6 \
  --out $OUT/receipts/sanitize-partial.json --logs $L/sanitize > $L/sanitize.out 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"
pack
grep -E "^(memcheck|racecheck|synccheck|initcheck|control)" $L/sanitize.out | awk '{printf "%s %s %s | ", $1, $2, $NF} END {print ""}'
python3 - $OUT/diag <<'PY'
import json, sys, glob, statistics
d = sys.argv[1]; t = {}
for f in sorted(glob.glob(d + "/bench-*.json")):
    v = f.split("bench-")[1].split("-")[0]
    for r in json.load(open(f))["rows"]:
        t.setdefault(r["config"] + "/" + r["format"] + "/" + r["addressing"], {}).setdefault(v, []).append(r["median_us"])
for c, x in t.items():
    m, h = min(x.get("main", [0])), min(x.get("hi", [0]))
    print(f"{c:48s} main {m:8.2f} hi {h:8.2f} hi/main {h / m if m else 0:.3f}")
PY
echo "total $((SECONDS-T0)) s"
