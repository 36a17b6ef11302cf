#!/usr/bin/env bash
# Session 46's second device call (call1.sh's attention A/C had not run: the bench now refuses a
# --script-dir without bench_sdpa.py; here a stand-in that exits 1, so SDPA reads not measured; and
# Q = R without the rotation's change, to split R's effect on bf16 from the q4 encode's): two same-call A/Bs against HEAD (A), each variant a patch.
#  R = rope-lean-encode.patch: the rope store's q4 Hadamard butterflies and the rotation's last
#      step as fma(-+1, v, o) (the add's and subtract's bytes: Q4Group.SignedFmaIsTheAddAndTheSubtract),
#      and the ring kernel's fast-encode nibble by the magic add (q4_nibble_magic, q4_nibble_of's
#      nibble for every fp16 scale: Q4Group.MagicAddNibbleIsTheDivisionsForEveryScale). Static
#      SASS of the q4 d128 ring kernel 3912 -> 3848 instructions, d256 4344 -> 4176.
#      bench rope-store, all 27 rows (the rotation change touches bf16 and fp8 too), 3 rounds
#      interleaved (A R, R A, A R); out_hash must be A's on every row. Then R's qwen-pages on
#      cuda (every format) and memcheck / synccheck / racecheck over R's ring rows.
#  C = issue20-fp8x/fp8x-pv-two-tiles-unmeasured.patch (never timed since session 17): the fp8
#      p.v loads and converts a stage's two tiles before their products; same sums, same order.
#      bench attention (no SDPA), the fp8 and bf16 window rows of b8 / b32 at 32K and 128K, both
#      shapes, 3 rounds interleaved; out_fnv1a must be A's. Then C's qwen-pages fmt=fp8.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/s46c2.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; DL=${TOTAL:-570}; W=/tmp/s46c2; rm -rf $W; mkdir -p $W
left() { echo $(( DL - (SECONDS - T0) )); }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s46c2.tgz -C /tmp s46c2 2>/dev/null; }
SRC=$PWD; P=$SRC/reports/h200
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
declare -A PATCH=([r]=$P/receipts-s46/rope-lean-encode.patch [q]=$P/receipts-s46/rope-q4-encode-only.patch [c]=$P/issue20-fp8x/fp8x-pv-two-tiles-unmeasured.patch)
for v in r q c; do
  rm -rf /tmp/src-$v && mkdir /tmp/src-$v && git ls-files -z | xargs -0 cp --parents -t /tmp/src-$v && cp -r .deps /tmp/src-$v/ \
    && (cd /tmp/src-$v && patch -p1 -s < ${PATCH[$v]}) || { echo "$v: patch failed"; exit 4; }
done
cmake -S . -B /tmp/b-a $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-a.log 2>&1 || { tail -20 $W/cmake-a.log; exit 2; }
for v in r q c; do
  cmake -S /tmp/src-$v -B /tmp/b-$v $CFG -DCMAKE_PREFIX_PATH=/tmp/src-$v/.deps/usr > $W/cmake-$v.log 2>&1 || { tail -20 $W/cmake-$v.log; exit 2; }
done
for v in a r q c; do ninja -C /tmp/b-$v -j 5 tf-cuda-test > $W/build-$v.log 2>&1 & done
wait
for v in a r q c; do [ -x /tmp/b-$v/tools/tf-cuda-test ] || { echo "$v did not build"; tail -30 $W/build-$v.log; pack; exit 2; }; done
echo "built $((SECONDS-T0)) s"
BIN() { echo /tmp/b-$1/tools/tf-cuda-test; }
# 1. rope store: A / R
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="q r a"; else ORD="a r q"; fi
  for v in $ORD; do
    V=$(echo $v | tr a-z A-Z)
    [ $(left) -gt 300 ] && { timeout 60 $(BIN $v) bench rope-store --out $W/rope/$V-$r.json > $W/rope-$V-$r.log 2>&1; echo "rope $V-$r rc=$? at $((SECONDS-T0)) s"; }
  done
done
pack
python3 $P/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
# 2. attention: A / C (fp8 p.v two tiles); no SDPA (a stand-in script that fails)
mkdir -p /tmp/nosdpa && printf 'import sys\nsys.exit(1)\n' > /tmp/nosdpa/bench_sdpa.py
F='/(b8|b32)/ctx(32768|131072)/(fp8|bf16)/window'
mkdir -p $W/attn
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="c a"; else ORD="a c"; fi
  for v in $ORD; do
    V=$(echo $v | tr a-z A-Z)
    [ $(left) -gt 200 ] && { timeout 40 $(BIN $v) bench attention --filter "$F" --script-dir /tmp/nosdpa --reps 20 --out $W/attn/ab-$V-r$r.json > $W/attn-$V-$r.log 2>&1; echo "attention $V-$r rc=$? at $((SECONDS-T0)) s"; }
  done
done
pack
python3 $P/issue20-fp8s/summ.py $W/attn > $W/attn-summary.txt 2>&1
# 3. correctness: Q's qwen-pages (call 1 ran R's, and the sanitizers over R's ring rows), C's fp8
[ $(left) -gt 40 ] && { timeout $(( $(left) > 75 ? 60 : $(left) - 15 )) $(BIN q) qwen-pages --backend cuda --out $W/qp-q.json > $W/qp-q.log 2>&1
  echo "qwen-pages Q rc=$? $(grep -E '^qwen-pages' $W/qp-q.log | tail -1)"; }
[ $(left) -gt 30 ] && { timeout $(( $(left) - 10 )) $(BIN c) qwen-pages --backend cuda --filter 'fmt=fp8' --out $W/qp-c.json > $W/qp-c.log 2>&1
  echo "qwen-pages C fp8 rc=$? $(grep -E '^qwen-pages' $W/qp-c.log | tail -1)"; }
pack
echo "== rope (R, Q / A)"; grep -E "^(row|4MiB|16MiB|64MiB)" $W/rope-summary.txt; tail -9 $W/rope-summary.txt
echo "== attention (C / A)"; cat $W/attn-summary.txt
echo "done $((SECONDS-T0)) s"
