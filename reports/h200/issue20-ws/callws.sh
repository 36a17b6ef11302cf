#!/usr/bin/env bash
# Session 31: the warp-specialized bf16 partial: correctness (qwen-pages bf16 with KC_ATTN_WS=all,
# sanitizers), then an interleaved A/B of bench attention bf16 >= 32K (base: KC_ATTN_WS unset).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS
R=$OUT/r; mkdir -p $R
if [ "$(git rev-parse HEAD 2>/dev/null)" != "$(git bundle list-heads .dev/kc-head.bundle | awk '{print $1}')" ]; then
  git fetch -q .dev/kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main
fi
git checkout -q -- . ; git rev-parse HEAD > $R/head.txt; git status --short | head -5 >> $R/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $R/cfg.log 2>&1 || { tail -30 $R/cfg.log; exit 2; }
ninja -C build tf-cuda-test > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -40; exit 2; }
echo "build $((SECONDS-T0)) s"
B=build/tools/tf-cuda-test
f='fmt=bf16'
KC_ATTN_WS=all timeout 200 $B qwen-pages --backend cuda --filter "$f" --out $R/qp-ws.json > $R/qp-ws.log 2>&1
echo "qwen-pages bf16 ws=all rc=$? $((SECONDS-T0)) s: $(tail -2 $R/qp-ws.log | tr '\n' ' ')"
KC_ATTN_WS=all timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B qwen-pages --backend cuda --cases 16 --filter "$f" --quiet --out $R/san-mem.json > $R/san-mem.log 2>&1
echo "memcheck rc=$? $((SECONDS-T0)) s: $(grep -E 'ERROR SUMMARY' $R/san-mem.log | tail -1)"
KC_ATTN_WS=all timeout 120 compute-sanitizer --tool synccheck --error-exitcode 9 $B qwen-pages --backend cuda --cases 8 --filter "$f" --quiet --out $R/san-sync.json > $R/san-sync.log 2>&1
echo "synccheck rc=$? $((SECONDS-T0)) s: $(grep -E 'ERROR SUMMARY' $R/san-sync.log | tail -1)"
KC_ATTN_WS=all timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B qwen-pages --backend cuda --cases 4 --filter "$f" --gates-only --quiet --out $R/san-race.json > $R/san-race.log 2>&1
echo "racecheck rc=$? (1 = clean gates-only) $((SECONDS-T0)) s: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $R/san-race.log | tail -1)"
flt='(ctx32768|ctx131072)/bf16/'
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
for round in 1 2; do
  timeout 150 $B bench attention --reps 20 --script-dir /tmp/nosdpa --filter "$flt" --out $R/bench-base-$round.json > $R/bench-base-$round.log 2>&1
  echo "bench base $round rc=$? $((SECONDS-T0)) s"
  sd=/tmp/nosdpa; [ $round = 2 ] && sd=tools
  KC_ATTN_WS=1 timeout 200 $B bench attention --reps 20 --script-dir $sd --filter "$flt" --out $R/bench-ws-$round.json > $R/bench-ws-$round.log 2>&1
  echo "bench ws $round rc=$? $((SECONDS-T0)) s"
done
python3 .dev/abws.py $R > $R/ab.txt 2>&1; cat $R/ab.txt
tar czf $OUT/callws.tgz -C $OUT r && rm -rf $R
echo "total $((SECONDS-T0)) s"
