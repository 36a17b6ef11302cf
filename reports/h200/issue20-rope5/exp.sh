#!/bin/bash
# rope store A/B in one call: A = main, B = one stage-free arrival per warp, C = bf16 on the
# batched-table kernel (rope4's untested patches), BC = both. Benches interleaved, L2 flushed.
R=$PWD; W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
git fetch -q .kcgit/s16/head.bundle main:kc-x || exit 3
rm -rf /tmp/x; git worktree add -q -f /tmp/x kc-x && cd /tmp/x || exit 3
git rev-parse HEAD > $W/commit.txt
step build-A bash -c "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF >$W/cfg.log 2>&1 && ninja -C build tf-cuda-test >$W/build.log 2>&1" || { tail -30 $W/build.log; exit 4; }
cp build/tools/tf-cuda-test /tmp/tf-A
v() { git checkout -q -- kernels/attention/rope_store.cu; for p in "$@"; do git apply $R/.kcgit/s16/$p.patch || return 5; done; ninja -C build tf-cuda-test >>$W/build.log 2>&1; }
step build-B v B && cp build/tools/tf-cuda-test /tmp/tf-B
step build-C v C && cp build/tools/tf-cuda-test /tmp/tf-C
step build-BC v C B && cp build/tools/tf-cuda-test /tmp/tf-BC
git checkout -q -- kernels/attention/rope_store.cu
for r in 1 2; do for x in A B C BC; do
  [ -x /tmp/tf-$x ] && step rope-$x-$r /tmp/tf-$x bench rope-store --out $W/rope-$x-$r.json > $W/rope-$x-$r.log 2>&1
done; done
F='fmt=(bf16|fp8|q4)'
for x in BC; do [ -x /tmp/tf-$x ] && step qp-$x /tmp/tf-$x qwen-pages --backend cuda --cases 24 --filter "$F" --quiet --out $W/qp-$x.json > $W/qp-$x.log 2>&1; done
step sync-BC timeout 40 compute-sanitizer --tool synccheck --error-exitcode 9 /tmp/tf-BC qwen-pages --backend cuda --cases 4 --filter "$F" --gates-only --quiet --out $W/sync-BC.json > $W/sync-BC.log 2>&1
# step race-BC timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/tf-BC qwen-pages --backend cuda --cases 4 --filter "$F" --gates-only --quiet --out $W/race-BC.json > $W/race-BC.log 2>&1
pack
python3 - <<'PY'
import json,glob,os,collections
W=os.environ['OUT']+'/w'
for f in sorted(glob.glob(W+'/rope-*.json')):
    d=json.load(open(f)); acc=collections.defaultdict(list)
    for r in d['rows']:
        name=r.get('name') or r.get('config') or ''
        mib=r.get('mib') or r.get('size_mib')
        if mib is None:
            try: mib=int(str(name).split('MiB')[0])
            except: mib=0
        if mib>=64: acc[r.get('format','?')].append(r.get('of_ceiling',0))
    print(os.path.basename(f), ' '.join('%s %.3f-%.3f (%.3f)'%(k,min(v),max(v),sum(v)/len(v)) for k,v in sorted(acc.items())))
PY
cat $W/steps.txt
