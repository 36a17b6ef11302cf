#!/bin/bash
# Round 4 of the device mutation sweep (reports/mutation-sweep/mutants-device-4.json: 30 mutants of the
# kernel code changed since round 3, eb2111e) in one call on one GPU machine: an H100 or an H200 (the
# checks are correctness only, so either card will do). Four sweeps at once (tools/mutation_sweep.py
# --shard i/4), each in its own copy of the tree and its own build folder, every check on cuda; beside
# them, from the unmutated build, qwen-pages in full and each sanitizer check the mutants name (a
# catch by a sanitizer check counts only where that check is clean on the unmutated build).
#   bash tools/h200_snap.sh                              (locally; carry .deps.tgz and .dev)
#   bash reports/h200/mutation-sweep/round4/run.sh       (the device call)
# The file's order is the shards' (mutant k goes to shard k % 4), each shard's predicted survivor
# (or its most expensive mutant) last: if TOTAL cuts a shard, what it did not reach is printed at the
# end with the ONLY regex of a second call, e.g.
#   ONLY='^(q4-vmax-before-third-batch|eng-tree-pass-barrier)$' SHARDS="0 1" BASELINE=0 bash reports/h200/mutation-sweep/round4/run.sh
# (ONLY applies before the sharding: with k ids left, SHARDS="0 .. k-1" gives one a shard; NSHARD
# stays 4 unless SHARDS asks for more).
# Environment: ONLY (regex on ids, default all), SHARDS (default "0 1 2 3"), NSHARD (4), TOTAL (540:
# the sweeps stop that many seconds after the start; then at most 10 s to kill a check and a few to
# pack, inside 560), MAXLIMIT (420: the sweeps' own limit at most), BASELINE (1; 0 skips the unmutated
# runs), THEN (the checks after each mutant's own: "contracts,gtest:kc_device_tests", as round 3).
# Estimate (round 3's H200 call: 4 builds in 182 s, a caught mutant 10-45 s with its rebuild, a
# survivor about 110 s of checks): builds about 200 s, then 300-330 s of sweeps per shard.
# Everything comes back in $OUT/round4.tgz, packed every minute.
T0=$(date +%s)
if [ -e .mutation-sweep-active ]; then echo "refused: .mutation-sweep-active: $(cat .mutation-sweep-active)"; exit 2; fi
W=/tmp/round4; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
pack(){ (cd /tmp && for f in round4/sweep-dev-*.json.part; do [ -f "$f" ] && cp "$f" "${f%.part}.partial"; done
         tar czf $OUT/round4.tgz.tmp round4 && mv $OUT/round4.tgz.tmp $OUT/round4.tgz); }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
ROOT=$PWD; MUT=reports/mutation-sweep/mutants-device-4.json
ONLY=${ONLY:-.}; SHARDS=${SHARDS:-0 1 2 3}; NSHARD=${NSHARD:-4}; THEN=${THEN:-contracts,gtest:kc_device_tests}
# The device's copy has no .git: a shallow one from .dev/snap names the commit (tools/h200_snap.sh).
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1 || echo "(no snapshot: the commit is unknown)" >> $W/head.txt
{ cat $W/head.txt; git rev-parse HEAD 2>/dev/null; git status --short --untracked-files=no 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; } > $W/commit.txt
# The shard's selection as the sweep makes it (--only, then --shard i/n): what it needs built
# (tf-cuda-test and the gtest binaries its checks name) and the sanitizer checks to baseline.
sel(){ python3 - "$MUT" "$ONLY" "$1" "$NSHARD" "$THEN" "$2" <<'PY'
import json, re, sys
mut, only, i, n, then, what = sys.argv[1:7]
ms = [m for m in json.load(open(mut)) if re.search(only, m["id"])]
ms = ms if i == "all" else ms[int(i)::int(n)]
checks = [c for m in ms for c in m.get("expect", []) + then.split(",")]
if what == "targets":
    t = {"tools/tf-cuda-test"} | {"tests/" + c.split(":")[1] for c in checks if c.startswith("gtest:")}
    print(" ".join(sorted(t)) if ms else "")
elif what == "sanitize":
    print("\n".join(dict.fromkeys(c for c in checks if c.startswith("sanitize:"))))
else:
    print("\n".join(m["id"] for m in ms))
PY
}
BUILT=""
for i in $SHARDS; do
  T=$(sel $i targets); [ -n "$T" ] || { echo "shard $i: no mutant selected" | tee -a $W/steps.txt; continue; }
  rm -rf /tmp/s$i /tmp/b$i /tmp/w$i; mkdir -p /tmp/s$i
  tar cf - --exclude=./.git --exclude=./.deps --exclude=./.deps.tgz --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/s$i
  (cmake -S /tmp/s$i -B /tmp/b$i -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr > $W/cfg$i.log 2>&1 &&
   ninja -C /tmp/b$i -j 5 $T > $W/build$i.log 2>&1; echo "shard $i build rc=$? ($T) at $(( $(date +%s) - T0 ))s" >> $W/steps.txt) &
  BUILT="$BUILT $i"
done
wait
echo "builds done at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
pack
# The unmutated build, beside the sweeps: qwen-pages in full on cuda (probes and controls), then each
# sanitizer check the selected mutants name, run as the sweep runs it (BASELINE=0 skips them). Every
# step's timeout ends by the sweeps' deadline, so the job is over when they are.
left(){ local l=$(( T0 + ${TOTAL:-540} - $(date +%s) )); [ $l -lt $1 ] && echo $l || echo $1; }
B0=${BUILT# }; B0=${B0%% *}; BASEJOB=""
if [ "${BASELINE:-1}" = 1 ] && [ -n "$B0" ] && [ -x /tmp/b$B0/tools/tf-cuda-test ]; then
  cp /tmp/b$B0/tools/tf-cuda-test /tmp/tf-base
  sel all sanitize > $W/sanitize-checks.txt
  (t=$(left 200); [ $t -gt 0 ] && timeout $t /tmp/tf-base qwen-pages --backend cuda --out $W/baseline-qwen-pages-cuda.json > $W/baseline-qwen-pages.log 2>&1
   echo "baseline qwen-pages/cuda rc=$? at $(( $(date +%s) - T0 ))s: $(grep -E '^qwen-pages: ' $W/baseline-qwen-pages.log | tail -1)" >> $W/steps.txt
   while IFS=: read -r _ tool contract filter; do
     [ -n "$tool" ] || continue
     n=$tool-$contract; [ -n "$filter" ] && n=$n-$(echo "$filter" | tr -c 'A-Za-z0-9=\n' '_')
     t=$(left 150); [ $t -gt 0 ] || break
     timeout $t compute-sanitizer --tool $tool --error-exitcode 99 /tmp/tf-base $contract --backend cuda --gates-only --quiet \
       ${filter:+--filter "$filter"} --out $W/baseline-$n.json > $W/baseline-$n.log 2>&1
     echo "baseline sanitize:$tool:$contract:$filter rc=$? (99: a finding; 1: --gates-only, clean) at $(( $(date +%s) - T0 ))s: $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/baseline-$n.log | tail -1)" >> $W/steps.txt
   done < $W/sanitize-checks.txt) &
  BASEJOB=$!
fi
# The sweeps stop TOTAL seconds after the start (the device's 600 s less the kill margin and packing).
LIMIT=$(( ${TOTAL:-540} - ($(date +%s) - T0) )); [ $LIMIT -gt ${MAXLIMIT:-420} ] && LIMIT=${MAXLIMIT:-420}
echo "sweep limit ${LIMIT}s" | tee -a $W/steps.txt
( while sleep 60; do pack; done ) & PACKER=$!
PIDS=""
for i in $BUILT; do
  (cd /tmp/s$i && timeout -k 10 $LIMIT python3 tools/mutation_sweep.py $MUT --only "$ONLY" --shard $i/$NSHARD --build /tmp/b$i \
     --backends cuda --then "$THEN" --timeout 150 --no-final-build --work /tmp/w$i --out $W/sweep-dev-$i.json \
     > $W/sweep-dev-$i.log 2>&1) & PIDS="$PIDS $!"
done
[ -n "$PIDS" ] && wait $PIDS  # not the packer
[ -n "$BASEJOB" ] && wait $BASEJOB  # its timeouts end by the same deadline
kill $PACKER 2>/dev/null
echo "sweeps done at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
grep -h -E "^\[|summary|survived" $W/sweep-dev-*.log > $W/summary.txt 2>/dev/null
# The table: every selected mutant, its shard, what became of it, the check that caught it, its
# rebuild and checks' seconds; then the ids no shard reached, as the ONLY of a second call.
python3 - "$MUT" "$ONLY" "$NSHARD" "$W" $BUILT <<'PY' | tee -a $W/summary.txt
import json, os, re, sys
mut, only, n, w = sys.argv[1:5]
shards = [int(s) for s in sys.argv[5:]]
ms = [m for m in json.load(open(mut)) if re.search(only, m["id"])]
got = {}
for s in shards:
    for f in (f"{w}/sweep-dev-{s}.json", f"{w}/sweep-dev-{s}.json.part"):
        if os.path.exists(f):
            for r in json.load(open(f))["mutants"]:
                got[r["id"]] = r
            break
print(f"{'mutant':<36} {'sh':>2}  {'status':<11} {'caught by':<58} {'build':>6} {'checks':>7}")
left = []
for k, m in enumerate(ms):
    s = k % int(n)
    if s not in shards:
        continue
    r = got.get(m["id"])
    if not r:
        left.append(m["id"])
        print(f"{m['id']:<36} {s:>2}  {'not reached':<11}")
        continue
    cs = sum(c["seconds"] for c in r.get("checks", []))
    print(f"{m['id']:<36} {s:>2}  {r['status']:<11} {r.get('caught_by', r.get('detail', ''))[:58]:<58} "
          f"{r.get('build_s', 0):>5}s {cs:>6.1f}s")
st = {}
for r in got.values():
    st[r["status"]] = st.get(r["status"], 0) + 1
print("totals:", ", ".join(f"{k} {v}" for k, v in sorted(st.items())), f"; not reached {len(left)}")
if left:
    print("second call: ONLY='^(" + "|".join(left) + ")$' SHARDS=\"" + " ".join(str(i) for i in range(min(len(left), 4))) +
          "\" BASELINE=0 bash reports/h200/mutation-sweep/round4/run.sh")
PY
pack
cat $W/steps.txt
echo; tail -40 $W/summary.txt
