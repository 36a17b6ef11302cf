#!/bin/bash
# Issue 20, q4rcp: one device call. The head (the q4rcp commit: one reciprocal per q4 group in
# the rope store) against the base (main before it), built side by side on the H200 from the
# commits of kc-head.bundle (refs kc-q4rcp and kc-main):
# 1. bench rope-store on the rows from 64 MiB up and the 1 MiB p16 rows, 3 rounds interleaved
#    (A = base, H = head), L2 flushed as the bench does; ../issue20-rope10/sum.py compares every
#    row's out_hash with A's (the stored bytes must be equal) and the times;
# 2. qwen-pages on the head (the default cases and deep --cases 120 on the tensor-core shapes);
# 3. the rope store's four device mutants on the head (ctest: each must turn qwen-pages red);
# 4. memcheck, synccheck and racecheck on the rope store (qwen-pages' q4 / fp8 cases and the
#    64 MiB q4 bench rows);
# 5. a full bench rope-store receipt of the head.
# Everything is written under $OUT (results.tgz, refreshed after each step); a table last.
T0=$(date +%s); DL=${DL:-540}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=/tmp/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; cp $W/steps.txt $OUT/ 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@" > $W/$n.log 2>&1; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(tail -n 1 $W/$n.log | cut -c1-150)" | tee -a $W/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git fetch -q kc-head.bundle q4rcp:refs/heads/kc-q4rcp main:refs/heads/kc-main && git reset -q --mixed kc-q4rcp || { echo "bundle fetch failed"; exit 4; }
git rev-parse HEAD kc-main > $W/commits.txt; git status --short --untracked-files=no > $W/status.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,ecc.mode.current --format=csv > $W/gpu.txt 2>&1
cfg() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_CUDA=ON "${@:3}"; }
MUT="tf-cuda-test-mutant-q4-store-scale-rz-dev tf-cuda-test-mutant-fp8-store-zeros-dev tf-cuda-test-mutant-fp8-store-amax-off-by-one-dev tf-cuda-test-mutant-rope-table-batch-dev"
bh() { cfg $R /tmp/b -DKC_DEVICE_MUTANTS=ON && ninja -C /tmp/b tf-cuda-test $MUT; }
bb() { git worktree add --detach /tmp/base kc-main && cfg /tmp/base /tmp/bb -DKC_DEVICE_MUTANTS=OFF && ninja -C /tmp/bb tf-cuda-test; }
tb=$(date +%s); bb > $W/build-base.log 2>&1 & pb=$!; bh > $W/build-head.log 2>&1; rh=$?; wait $pb; rb=$?
echo "builds head=$rh base=$rb $(( $(date +%s) - tb ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack
[ $rh = 0 ] && [ $rb = 0 ] || { tail -30 $W/build-*.log; exit 4; }
TA=/tmp/bb/tools/tf-cuda-test; TB=/tmp/b/tools/tf-cuda-test
FB='^(64|256|1024)MiB/|^1MiB/.*/p16$'
run() { local t=$TB; [ $1 = A ] && t=$TA; $t bench rope-store --filter "$FB" --out $W/$1-$2.json > $W/$1-$2.log 2>&1; echo "$1-$2 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="H A"; else ORD="A H"; fi
  for v in $ORD; do [ $(left) -gt 300 ] && run $v $r; done; pack
done
python3 reports/h200/issue20-rope10/sum.py $W A:0 H:1 > $W/summary.txt 2>&1; pack
F='d(128|256)(-r64|-r20)?,fmt=(q4|fp8|bf16)'
step qwen-pages $TB qwen-pages --backend cuda --quiet --out $W/qwen-pages.json
step deep $TB qwen-pages --backend cuda --cases 120 --filter "$F" --quiet --out $W/qwen-pages-deep.json
step mutants ctest --test-dir /tmp/b -R '^mutant[.](q4-store-scale-rz-dev|fp8-store-zeros-dev|fp8-store-amax-off-by-one-dev|rope-table-batch-dev)$' -j4 --output-on-failure
SAN="compute-sanitizer --error-exitcode 9"
Q='d(128|256)[^,]*,fmt=(fp8|q4)'
step memcheck timeout 120 $SAN --tool memcheck $TB qwen-pages --backend cuda --cases 16 --filter "$Q" --gates-only --quiet --out $W/memcheck.json
step synccheck timeout 60 $SAN --tool synccheck $TB qwen-pages --backend cuda --cases 12 --filter "$Q" --gates-only --quiet --out $W/synccheck.json
step memcheck-bench timeout 60 $SAN --tool memcheck $TB bench rope-store --reps 1 --filter '^(1|64)MiB/q4/' --out $W/memcheck-bench.json
step synccheck-bench timeout 60 $SAN --tool synccheck $TB bench rope-store --reps 1 --filter '^64MiB/q4/' --out $W/synccheck-bench.json
step racecheck-bench timeout 60 $SAN --tool racecheck $TB bench rope-store --reps 1 --filter '^64MiB/q4/p16' --out $W/racecheck-bench.json
[ $(left) -gt 60 ] && step bench-rope-store timeout $(( $(left) - 50 )) $TB bench rope-store --out $W/bench-rope-store.json
[ $(left) -gt 20 ] && step racecheck timeout $(( $(left) - 8 )) $SAN --tool racecheck $TB qwen-pages --backend cuda --cases 4 --filter "$Q" --gates-only --quiet --out $W/racecheck.json
pack
echo "--- commits (head, base): $(tr '\n' ' ' < $W/commits.txt) dirty: $(wc -l < $W/status.txt)"
grep -v -E "^[AH]-[0-9] rc=[01] " $W/steps.txt
for f in memcheck synccheck memcheck-bench synccheck-bench racecheck-bench racecheck; do echo "$f: $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$f.log 2>/dev/null | tail -1)"; done
sed -n '/^bf16 /,$p' $W/summary.txt | grep -v "^$"
