#!/usr/bin/env bash
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS
R=$OUT/r; mkdir -p $R
if [ "$(git rev-parse HEAD 2>/dev/null)" != "$(git bundle list-heads .dev/kc-head.bundle | awk '{print $1}')" ]; then
  git fetch -q .dev/kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main
fi
git checkout -q -- . ; git rev-parse HEAD > $R/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $R/cfg.log 2>&1 || { tail -30 $R/cfg.log; exit 2; }
ninja -C build tf-cuda-test > $R/build.log 2>&1 || { grep -E "error" -A3 $R/build.log | head -40; exit 2; }
echo "build $((SECONDS-T0)) s"
B=build/tools/tf-cuda-test
for v in "8 x" "3 x"; do set -- $v
  KC_ATTN_WS=all KC_ATTN_WS_PRODUCERS=$1 KC_ATTN_WS_COPY=$2 timeout 100 $B qwen-pages --backend cuda --filter fmt=bf16 --quiet --out $R/qp-$1-$2.json > $R/qp-$1-$2.log 2>&1
  echo "qwen-pages ws=all P=$1 $2 rc=$? $(python3 -c "import json;r=json.load(open('$R/qp-$1-$2.json'));print(r['verdict'], r['cases'])")"
done
KC_ATTN_WS=all KC_ATTN_WS_PRODUCERS=8 timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B qwen-pages --backend cuda --cases 4 --filter fmt=bf16 --gates-only --quiet --out $R/san-race.json > $R/san-race.log 2>&1
echo "racecheck P=8 rc=$? (1 = clean gates-only): $(grep -E 'RACECHECK SUMMARY' $R/san-race.log | tail -1)"
KC_ATTN_WS=all KC_ATTN_WS_PRODUCERS=8 timeout 150 compute-sanitizer --tool synccheck --error-exitcode 9 $B qwen-pages --backend cuda --cases 6 --filter fmt=bf16 --quiet --out $R/san-sync.json > $R/san-sync.log 2>&1
echo "synccheck rc=$?: $(grep -E 'ERROR SUMMARY' $R/san-sync.log | tail -1)"
KC_ATTN_WS=all KC_ATTN_WS_PRODUCERS=8 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B qwen-pages --backend cuda --cases 10 --filter fmt=bf16 --quiet --out $R/san-mem.json > $R/san-mem.log 2>&1
echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY' $R/san-mem.log | tail -1)"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
flt='(b8/ctx32768|b1/ctx131072|b32/ctx32768)/bf16/(window|p16)'
for round in 1 2; do
  timeout 100 $B bench attention --reps 20 --script-dir /tmp/nosdpa --filter "$flt" --out $R/bench-base-$round.json > $R/bench-base-$round.log 2>&1
  for v in "4 x" "6 x" "8 x"; do set -- $v
    KC_ATTN_WS=1 KC_ATTN_WS_PRODUCERS=$1 KC_ATTN_WS_COPY=$2 timeout 100 $B bench attention --reps 20 --script-dir /tmp/nosdpa --filter "$flt" --out $R/bench-p$1$2-$round.json > $R/bench-p$1$2-$round.log 2>&1
  done
  echo "round $round $((SECONDS-T0)) s"
done
for v in p4x p6x p8x; do python3 .dev/abws.py $R $v > $R/ab-$v.txt 2>&1; echo "$v:"; cat $R/ab-$v.txt; done
if [ -n "${NCU:-}" ]; then
  KC_ATTN_WS=1 KC_ATTN_WS_PRODUCERS=1 timeout 150 ncu --clock-control none -k regex:ws_kernel -c 1 --set full -o $R/ncu-ws \
    $B bench attention --reps 1 --script-dir /tmp/nosdpa --filter '32q/8kv/d128/b8/ctx32768/bf16/window' > $R/ncu.log 2>&1
  ncu -i $R/ncu-ws.ncu-rep --page details > $R/ncu-ws.txt 2>&1; echo "ncu rc=$?"; grep -E "Duration|Memory Throughput|DRAM Throughput|Registers|Achieved Occupancy|Stall|Warp Cycles" $R/ncu-ws.txt | head -20
fi
tar czf $OUT/callws2.tgz -C $OUT r && rm -rf $R
echo "total $((SECONDS-T0)) s"
