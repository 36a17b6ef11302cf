#!/bin/bash
# Round 4's proofs (README.md, "Closing the blind spots"), in one call on one GPU machine (an H100 or
# an H200: the checks are correctness only), modelled on run.sh and ../round3/run-proofs.sh:
#  (a) the unmutated tree: qwen-pages in full on cuda with the seven new probes (145-151) must
#      pass with every control red; QwenPagesContract.CudaDefaultRunReachesEveryKernelPath,
#      CudaProbesAloneReachEveryTensorCoreKernel and CudaRound4ProbesTakeTheirKernels pass; the
#      kernels each new probe kind and the non-finite cases took (numbers.coverage.kernel_path,
#      .non_finite_kernel_path) are printed;
#  (b) beside it, tools/mutation_sweep.py over the four survivors of run 1, one a shard, each in its
#      own copy of the tree and build (--shard i/4 of ONLY, the file's order): rope-q4-amax-no-nan
#      (0), eng-addnorm-row-offset-32bit (1), rope-plan-ignores-rot (2), q4-vmax-before-third-batch
#      (3). Their checks are the mutants file's `expect` (qwen-pages for the three qwen-pages
#      mutants: the new probes run inside it), then THEN: empty for those three (their new check is
#      the probe, inside qwen-pages), `gtest:kc_device_tests:$FILTER_ADDNORM` for the add + norm
#      mutant (the cuda test of add_rms_norm past 2^31 floats, written elsewhere).
#   bash tools/h200_snap.sh                                   (locally; carry .deps.tgz and .dev)
#   bash reports/h200/mutation-sweep/round4/proofs.sh         (the device call)
# Environment: FILTER_ADDNORM (below), TOTAL (540: the sweeps and baselines stop that many seconds
# after the start), MAXLIMIT (420), SHARDS (default "0 1 2 3"), THEN_QP (the three qwen-pages
# mutants' THEN, default empty; "contracts,gtest:kc_device_tests" is run 1's), BASELINE (1; 0 skips (a)).
# Estimate (run 1 on an H100: four builds of three targets in 120 s, qwen-pages on cuda 22 s, a
# rope_store.cu rebuild 14 s, partial_mma_q4.cu 8 s, kernels.cu 11 s): builds 130-150 s, then
# each shard 40-100 s (the add + norm shard: its expect, about 60 s, then the new gtest), the
# baseline about 100 s beside them: about 300 s in all.
# Everything comes back in $OUT/proofs4.tgz (packed every minute); the last lines printed are the
# steps, then a table of the four mutants: status, the check that caught it, and the gate and
# case of the caught qwen-pages run (which probe did it).

# The gtest filter of the cuda add_rms_norm test (rows past 2^31 floats) in kc_device_tests (1cdceff)
FILTER_ADDNORM=${FILTER_ADDNORM:-"EngineKernels.AddRmsNormIndexesRowsPast2To31Floats"}
# ----

T0=$(date +%s)
if [ -e .mutation-sweep-active ]; then echo "refused: .mutation-sweep-active: $(cat .mutation-sweep-active)"; exit 2; fi
W=/tmp/proofs4; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
pack(){ (cd /tmp && for f in proofs4/sweep-dev-*.json.part; do [ -f "$f" ] && cp "$f" "${f%.part}.partial"; done
         tar czf $OUT/proofs4.tgz.tmp proofs4 && mv $OUT/proofs4.tgz.tmp $OUT/proofs4.tgz); }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
ROOT=$PWD; MUT=reports/mutation-sweep/mutants-device-4.json
ONLY='^(rope-q4-amax-no-nan|eng-addnorm-row-offset-32bit|rope-plan-ignores-rot|q4-vmax-before-third-batch)$'
SHARDS=${SHARDS:-0 1 2 3}; NSHARD=4
# The device's copy has no .git: a shallow one from .dev/snap names the commit (tools/h200_snap.sh).
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1 || echo "(no snapshot: the commit is unknown)" >> $W/head.txt
{ cat $W/head.txt; git rev-parse HEAD 2>/dev/null; git status --short --untracked-files=no 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; } > $W/commit.txt
[ -n "$FILTER_ADDNORM" ] || echo "FILTER_ADDNORM is empty: eng-addnorm-row-offset-32bit runs its expect alone (run 1: survived)" | tee -a $W/steps.txt
# Shard i's mutant (ONLY, then --shard i/4, as the sweep selects), its THEN and the targets its checks need.
sel(){ python3 - "$MUT" "$ONLY" "$1" "$NSHARD" "$2" "$3" <<'PY'
import json, re, sys
mut, only, i, n, then, what = sys.argv[1:7]
ms = [m for m in json.load(open(mut)) if re.search(only, m["id"])][int(i)::int(n)]
if what == "ids":
    print(" ".join(m["id"] for m in ms))
else:
    checks = [c for m in ms for c in m.get("expect", []) + then.split(",") if c]
    t = {"tools/tf-cuda-test"} | {"tests/" + c.split(":")[1] for c in checks if c.startswith("gtest:")}
    print(" ".join(sorted(t)) if ms else "")
PY
}
then_of(){ case "$1" in
  eng-addnorm-row-offset-32bit) [ -n "$FILTER_ADDNORM" ] && echo "gtest:kc_device_tests:$FILTER_ADDNORM" ;;
  *) echo "${THEN_QP:-}" ;;
esac; }
BUILT=""; B0=""
for i in $SHARDS; do
  id=$(sel $i "" ids); [ -n "$id" ] || { echo "shard $i: no mutant selected" | tee -a $W/steps.txt; continue; }
  th=$(then_of "$id"); echo "$th" > $W/then$i.txt
  T=$(sel $i "$th" targets)
  # The first shard's build also gives the unmutated binaries of (a), copied out before its sweep starts.
  [ -z "$B0" ] && [ "${BASELINE:-1}" = 1 ] && { B0=$i; T="$T tests/kc_contract_tests tests/kc_device_tests"; }
  rm -rf /tmp/s$i /tmp/b$i /tmp/w$i; mkdir -p /tmp/s$i
  tar cf - --exclude=./.git --exclude=./.deps --exclude=./.deps.tgz --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/s$i
  (cmake -S /tmp/s$i -B /tmp/b$i -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr > $W/cfg$i.log 2>&1 &&
   ninja -C /tmp/b$i -j 5 $T > $W/build$i.log 2>&1; echo "shard $i ($id) build rc=$? ($T) at $(( $(date +%s) - T0 ))s" >> $W/steps.txt) &
  BUILT="$BUILT $i"
done
wait
echo "builds done at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
pack
left(){ local l=$(( T0 + ${TOTAL:-540} - $(date +%s) )); [ $l -lt $1 ] && echo $l || echo $1; }
step(){ local n=$1 lim=$2; shift 2; local t=$(left $lim); [ $t -gt 5 ] || { echo "$n: no time left" >> $W/steps.txt; return 124; }
  local t0=$(date +%s); timeout $t "$@" > $W/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(grep -v '^\s*$' $W/$n.log | tail -n 1 | cut -c1-160)" >> $W/steps.txt; return $rc; }
# (a) the unmutated build, beside the sweeps (its binaries copied before they mutate the tree).
BASEJOB=""
if [ -n "$B0" ] && [ -x /tmp/b$B0/tools/tf-cuda-test ] && [ -x /tmp/b$B0/tests/kc_contract_tests ]; then
  cp /tmp/b$B0/tools/tf-cuda-test /tmp/tf-base4; cp /tmp/b$B0/tests/kc_contract_tests /tmp/ct-base4
  cp /tmp/b$B0/tests/kc_device_tests /tmp/dt-base4 2>/dev/null
  (step base-qwen-pages 200 /tmp/tf-base4 qwen-pages --backend cuda --out $W/base-qwen-pages-cuda.json
   step base-kernel-path-tests 200 /tmp/ct-base4 --gtest_brief=1 \
     --gtest_filter='QwenPagesContract.CudaDefaultRunReachesEveryKernelPath:QwenPagesContract.CudaProbesAloneReachEveryTensorCoreKernel:QwenPagesContract.CudaRound4ProbesTakeTheirKernels'
   [ -x /tmp/dt-base4 ] && step base-engine-past-2to31 200 /tmp/dt-base4 --gtest_brief=1 --gtest_filter='EngineKernels.*'
   for p in q4-half-nan late-vmax partial-rotary; do
     step probe-$p 60 /tmp/tf-base4 qwen-pages --backend cuda --gates-only --quiet --filter "probe=$p," --out $W/probe-$p.json
   done) &
  BASEJOB=$!
elif [ "${BASELINE:-1}" = 1 ]; then
  echo "(a) not run: no unmutated build (see build$B0.log)" | tee -a $W/steps.txt
fi
# (b) the sweeps, one mutant a shard; they stop TOTAL seconds after the start.
LIMIT=$(( ${TOTAL:-540} - ($(date +%s) - T0) )); [ $LIMIT -gt ${MAXLIMIT:-420} ] && LIMIT=${MAXLIMIT:-420}
echo "sweep limit ${LIMIT}s" | tee -a $W/steps.txt
( while sleep 60; do pack; done ) & PACKER=$!
PIDS=""
for i in $BUILT; do
  (cd /tmp/s$i && timeout -k 10 $LIMIT python3 tools/mutation_sweep.py $MUT --only "$ONLY" --shard $i/$NSHARD --build /tmp/b$i \
     --backends cuda --then "$(cat $W/then$i.txt)" --timeout 150 --no-final-build --work /tmp/w$i --out $W/sweep-dev-$i.json \
     > $W/sweep-dev-$i.log 2>&1) & PIDS="$PIDS $!"
done
[ -n "$PIDS" ] && wait $PIDS  # not the packer
[ -n "$BASEJOB" ] && wait $BASEJOB  # its steps end by the same deadline
kill $PACKER 2>/dev/null
echo "sweeps done at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
for i in $BUILT; do mkdir -p $W/work$i; cp /tmp/w$i/*.json $W/work$i/ 2>/dev/null; done
grep -h -E "^\[|summary|survived" $W/sweep-dev-*.log > $W/summary.txt 2>/dev/null
# (a)'s verdicts and the kernels the new probes and the non-finite cases took.
python3 - "$W" <<'PY' | tee -a $W/summary.txt
import json, os, sys
w = sys.argv[1]
def load(f):
    try:
        return json.load(open(os.path.join(w, f)))
    except (OSError, ValueError):
        return None
b = load("base-qwen-pages-cuda.json")
if b:
    red = sum(1 for c in b.get("controls", []) if c.get("red"))
    bad = [g["name"] for g in b["gates"] if g.get("failed")]
    print(f"(a) qwen-pages/cuda unmutated: verdict {b['verdict']}, {red} of {len(b.get('controls', []))} controls red, "
          f"gates failed: {bad or 'none'}")
    for k, v in sorted(b["numbers"]["coverage"].get("non_finite_kernel_path", {}).items()):
        if k.startswith("q4/"):
            print(f"    non-finite {k}: {v}")
else:
    print("(a) qwen-pages/cuda unmutated: no receipt")
for p in ("q4-half-nan", "late-vmax", "partial-rotary"):
    r = load(f"probe-{p}.json")
    if not r:
        print(f"    probe {p}: no receipt")
        continue
    bad = [g["name"] for g in r["gates"] if g.get("failed")]
    kp = sorted(k for k in r["numbers"]["coverage"].get("kernel_path", {}) if "rope" in k or "partial" in k)
    print(f"    probe {p}: gates failed {bad or 'none'}; {', '.join(kp)}")
PY
# The table: each mutant, what became of it, the check that caught it, and, where that is qwen-pages,
# the failing gate and case of the caught run's receipt (the probe that caught it).
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
                got[r["id"]] = (s, r)
            break
def caught_case(s, r):
    by = r.get("caught_by", "")
    if "/" not in by:
        return ""
    contract, backend = by.split("/", 1)
    try:
        rc = json.load(open(f"{w}/work{s}/{r['id']}.{contract}.{backend}.json"))
    except (OSError, ValueError):
        return ""
    for g in rc.get("gates", []):
        if g.get("failed"):
            f = (g.get("failures") or [""])[0]
            m = re.search(r"probe=([\w-]+),seed=(\d+)", f)
            return f"{g['name']}: " + (f"probe {m.group(2)} {m.group(1)}" if m else f[:60])
    return ""
print(f"{'mutant':<32} {'sh':>2}  {'status':<9} {'caught by':<32} {'gate: case':<44} {'build':>6} {'checks':>7}")
for k, m in enumerate(ms):
    s = k % int(n)
    if s not in shards:
        continue
    if m["id"] not in got:
        print(f"{m['id']:<32} {s:>2}  {'not reached':<9}")
        continue
    _, r = got[m["id"]]
    cs = sum(c["seconds"] for c in r.get("checks", []))
    print(f"{m['id']:<32} {s:>2}  {r['status']:<9} {r.get('caught_by', r.get('detail', ''))[:32]:<32} "
          f"{caught_case(s, r)[:44]:<44} {r.get('build_s', 0):>5}s {cs:>6.1f}s")
PY
pack
cat $W/steps.txt
echo; tail -12 $W/summary.txt
