#!/bin/bash
# Session 57: the racecheck runs session 56's sanitize receipt (H100, 846e117) did not reach,
# from HEAD: racecheck over qwen-pages-mma, qwen-pages-probes and rows-invariant, and racecheck's
# control (merge-barrier-dropped). Resumable: the build and the partial receipt stay in build-san/.
T0=$(date +%s); ROOT=$PWD; LIMIT=${LIMIT:-570}; W=${OUT:=/tmp/out}/san; mkdir -p $W
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $W/head.txt; cat $W/head.txt
B=$ROOT/build-san
[ -f $B/steps.txt ] && cp $B/steps.txt $W/steps.txt
if [ -x $B/tools/tf-cuda-test ] && cmp -s $B/head.txt $W/head.txt; then
  echo "build: kept from the last call ($(head -1 $B/head.txt))" | tee -a $W/steps.txt
else
  rm -rf $B; mkdir -p $B; t=$(date +%s)
  { cmake -S . -B $B -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=ON \
      -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr && ninja -C $B -j 16 tools/tf-cuda-test tf-cuda-test-plant-merge-no-barrier; } > $W/build.log 2>&1
  rc=$?; echo "build rc=$rc $(( $(date +%s) - t ))s" | tee -a $W/steps.txt; [ $rc = 0 ] || { tail -30 $W/build.log; exit 1; }
  cp $W/head.txt $B/head.txt; rm -f $B/sanitize-*.json
fi
PART=${PART:-a}; RUNS=${RUNS:-qwen-pages-probes,rows-invariant}; extra=(); [ -n "${SKIP:-}" ] && extra=(--skip-controls)
res=(); [ -f $B/sanitize-$PART.json ] && res=(--resume $B/sanitize-$PART.json)
LEFT=$(( LIMIT - ($(date +%s) - T0) - 20 ))
echo "sanitize ${res[*]} gets ${LEFT}s" | tee -a $W/steps.txt
t=$(date +%s)
timeout $LEFT python3 tools/sanitize.py --bin $B/tools/tf-cuda-test --plant-bin $B --jobs 1 --tools racecheck \
  --runs $RUNS "${extra[@]}" "${res[@]}" \
  --out $B/sanitize-new.json --logs $B/logs-$PART > $W/sanitize-$PART.out 2>&1
echo "sanitize rc=$? $(( $(date +%s) - t ))s" | tee -a $W/steps.txt
[ -f $B/sanitize-new.json ] && mv $B/sanitize-new.json $B/sanitize-$PART.json
cp $B/sanitize-$PART.json $W/sanitize-$PART.json 2>/dev/null
cp $W/steps.txt $B/steps.txt
(cd $B && tar czf $W/logs-$PART.tgz logs-$PART) 2>/dev/null
tail -8 $W/sanitize-$PART.out
python3 - $W/sanitize-$PART.json <<'PY' | tee -a $W/steps.txt
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no receipt: {e}")
g = r["gates"]; c = r["controls"]
inc = any(w.startswith("incomplete") for w in r["verdict_reasons"])
print(f"receipt: {'incomplete' if inc else 'complete'}, verdict {r['verdict']}, {len(g)} gates "
      f"({sum(1 for x in g if x.get('status') == 'ok')} ok), controls red {sum(1 for x in c if x.get('red'))} of {len(c)}, "
      f"findings {r['numbers']['findings']}, {r['timings']['total_s']:.0f}s; reasons: {[w for w in r['verdict_reasons']][:4]}")
PY
