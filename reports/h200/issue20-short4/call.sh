#!/bin/bash
# short4's one device call: base (cb074ed) and short4 built side by side; A/B benches,
# qwen-pages, sanitizers, two mutants; everything under $OUT/w, tarred after each stage.
R=$PWD; T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
W=$OUT/w; mkdir -p $W
pack(){ tar czf $OUT/short4.tgz -C $W . 2>/dev/null; echo "[stage $1 done at $(el) s]"; }
git fetch -q .kcgit/short4/head.bundle short4:kc-short4 || exit 3
rm -rf /tmp/short4 /tmp/base
git worktree add -q -f /tmp/short4 kc-short4 && git worktree add -q -f /tmp/base cb074ed || exit 3
git -C /tmp/short4 log --oneline -1 > $W/head.txt
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90"
cmake -S /tmp/short4 -B /tmp/short4/build $CM -DKC_DEVICE_MUTANTS=ON >$W/cfg-new.log 2>&1 &
cmake -S /tmp/base -B /tmp/base/build $CM -DKC_DEVICE_MUTANTS=OFF >$W/cfg-base.log 2>&1 &
wait
(ninja -C /tmp/short4/build -j10 tf-cuda-test >$W/build-new.log 2>&1; echo $? > $W/build-new.rc) &
(ninja -C /tmp/base/build -j8 tf-cuda-test >$W/build-base.log 2>&1; echo $? > $W/build-base.rc) &
wait
B=/tmp/base/build/tools/tf-cuda-test; N=/tmp/short4/build/tools/tf-cuda-test
[ -x $N ] || { tail -40 $W/build-new.log; pack build; exit 4; }
[ -x $B ] || { tail -20 $W/build-base.log; }
pack build
F='/b1/ctx4096/'; BO="--script-dir /nonexistent --reps 30"
$B bench attention --filter $F $BO --out $W/b1-base-1.json >$W/b1-base-1.log 2>&1
$N bench attention --filter $F $BO --out $W/b1-new-1.json >$W/b1-new-1.log 2>&1
KC_ATTN_SHORT=2 $N bench attention --filter $F $BO --out $W/b1-two-1.json >$W/b1-two-1.log 2>&1
KC_ATTN_SHORT=0 $N bench attention --filter $F $BO --out $W/b1-off-1.json >$W/b1-off-1.log 2>&1
$B bench attention --filter $F $BO --timing gated --out $W/b1g-base.json >/dev/null 2>&1
$N bench attention --filter $F $BO --timing gated --out $W/b1g-new.json >/dev/null 2>&1
KC_ATTN_SHORT=2 $N bench attention --filter $F $BO --timing gated --out $W/b1g-two.json >/dev/null 2>&1
pack b1
QF='d(128|256)(-r64|-r20)?,fmt=(bf16|fp8|q4)'
KC_ATTN_SHORT=v timeout 60 $N qwen-pages --backend cuda --cases 100 --filter "$QF" --out $W/qp-new.json >$W/qp-new.log 2>$W/qp-new.err
echo "qp rc=$?" >> $W/rc.txt
pack qp
S="compute-sanitizer --print-limit 20"
KC_ATTN_SHORT=v timeout 40 $S --tool memcheck $N qwen-pages --backend cuda --cases 8 --filter "$QF" --gates-only --out $W/san-mem.json >$W/san-mem.log 2>&1; echo "memcheck rc=$?" >> $W/rc.txt
KC_ATTN_SHORT=v timeout 30 $S --tool racecheck $N qwen-pages --backend cuda --cases 4 --filter "$QF" --gates-only --out $W/san-race.json >$W/san-race.log 2>&1; echo "racecheck rc=$?" >> $W/rc.txt
KC_ATTN_SHORT=v timeout 30 $S --tool synccheck $N qwen-pages --backend cuda --cases 4 --filter "$QF" --gates-only --out $W/san-sync.json >$W/san-sync.log 2>&1; echo "synccheck rc=$?" >> $W/rc.txt
pack san
if [ $(el) -lt 175 ]; then
  $B bench attention --script-dir /nonexistent --out $W/full-base.json >$W/full-base.log 2>&1
  $N bench attention --script-dir /nonexistent --out $W/full-new.json >$W/full-new.log 2>&1
  pack full
fi
if [ $(el) -lt 200 ]; then
  $B bench attention --filter $F $BO --out $W/b1-base-2.json >/dev/null 2>&1
  $N bench attention --filter $F $BO --out $W/b1-new-2.json >/dev/null 2>&1
  KC_ATTN_SHORT=2 $N bench attention --filter $F $BO --out $W/b1-two-2.json >/dev/null 2>&1
  pack b1r2
fi
if [ $(el) -lt 185 ]; then
  timeout 40 ninja -C /tmp/short4/build -j16 tf-cuda-test-mutant-merge-skip-nonfinite-dev tf-cuda-test-mutant-pv-group-drop >$W/build-mut.log 2>&1
  for m in merge-skip-nonfinite-dev pv-group-drop; do
    X=/tmp/short4/build/tf-cuda-test-mutant-$m; [ -x $X ] || X=$(find /tmp/short4/build -name tf-cuda-test-mutant-$m -type f | head -1)
    [ -n "$X" ] && { timeout 20 $X qwen-pages --backend cuda --cases 20 --filter "$QF" --quiet --out $W/mut-$m.json >$W/mut-$m.log 2>&1; echo "mutant $m rc=$? (1 = red)" >> $W/rc.txt; }
  done
  pack mut
fi
python3 .kcgit/short4/summ.py $W 2>&1 | tee $W/summary.txt
pack end
