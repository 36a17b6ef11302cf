#!/bin/bash
# Device mutation round 5 (session 53): the three past-2^31 leads round 4 left (README.md there,
# "Past 2^31, not yet covered"): the embedding table's token * dim, the odd-K product's weight rows,
# the staged product's output offset. One call on one GPU machine (correctness only: any card with
# about 20 GiB free), over a copy of the working tree:
#  (a) kc_device_tests' EngineKernels.* unmutated (the five tests of round 4 and the three new ones):
#      all pass;
#      and kc_engine_tests' EngineBackend.Argmax* (the argmax length refusal on cuda);
#  (b) tools/mutation_sweep.py over reports/mutation-sweep/mutants-device-5.json (three mutants, each
#      expecting its new test red), then (c) EngineKernels.* once more from the restored build.
#   bash tools/h200_snap.sh                                   (locally; carry .deps.tgz and .dev)
#   bash reports/h200/mutation-sweep/round5/run.sh            (the device call)
# Everything comes back in $OUT/round5.tgz; the last lines printed are the steps and the sweep's table.
T0=$(date +%s)
W=/tmp/round5; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
pack(){ (cd /tmp && tar czf $OUT/round5.tgz.tmp round5 && mv $OUT/round5.tgz.tmp $OUT/round5.tgz); }
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1 || echo "(no snapshot: the commit is unknown)" >> $W/head.txt
{ cat $W/head.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader; nproc; } > $W/commit.txt
cat $W/commit.txt
step(){ local n=$1 lim=$2; shift 2; local t0=$(date +%s); timeout $lim "$@" > $W/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(grep -v '^\s*$' $W/$n.log | tail -n 1 | cut -c1-160)" | tee -a $W/steps.txt; return $rc; }
B=/tmp/b5
step configure 120 cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$PWD/.deps/usr || { pack; exit 2; }
step build 300 ninja -C $B -j 16 tests/kc_device_tests tests/kc_engine_tests || { tail -30 $W/build.log; pack; exit 2; }
# The argmax length refusal on cuda (session 53).
step argmax 60 $B/tests/kc_engine_tests --gtest_filter='EngineBackend.Argmax*'
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]" $W/argmax.log | tee -a $W/steps.txt
step unmutated 120 $B/tests/kc_device_tests --gtest_filter='EngineKernels.*'
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]" $W/unmutated.log | tee -a $W/steps.txt
pack
step sweep 300 python3 tools/mutation_sweep.py reports/mutation-sweep/mutants-device-5.json --build $B --backends cuda \
  --timeout 120 --work $W/work --out $W/sweep-dev-5.json
pack
step restored 120 $B/tests/kc_device_tests --gtest_filter='EngineKernels.*'
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]" $W/restored.log | tee -a $W/steps.txt
git status --short 2>/dev/null | tee -a $W/steps.txt
pack
python3 - $W/sweep-dev-5.json <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"no sweep receipt: {e}")
for m in r.get("mutants", r.get("results", [])):
    print("%-36s %-12s %s" % (m.get("id"), m.get("status"), (m.get("caught_by") or m.get("check") or "")))
PY
echo "done $(( $(date +%s) - T0 ))s"
