#!/bin/bash
# rope6, second device call: the candidate commit (fp8 / q4 at d 128 / 256 on the ring kernel,
# MODE 3) with a run-time knob: KC_ROPE6=t main's fp8 / q4 kernels (PTX-identical), KC_ROPE6=r,S
# the candidate with S data stages. bench rope-store interleaved (main and the candidate: every
# row; S 3 / 4: fp8 / q4 from 64 MiB); then qwen-pages (fp8 / q4 at d 128 / 256, seed 7) and
# memcheck on the best.
T0=$(date +%s); DL=${DL:-100}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/results2.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
git rev-parse HEAD > $W/commit.txt; nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
B=/tmp/b-rope6; TF=$B/tools/tf-cuda-test
step build bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF >$W/cfg.log 2>&1 && ninja -C $B tf-cuda-test >$W/build.log 2>&1" || { tail -40 $W/build.log; exit 4; }
run() {  # name knob filter
  KC_ROPE6=$2 $TF bench rope-store ${3:+--filter "$3"} --out $W/$1.json > $W/$1.log 2>&1; echo "$1 rc=$?" >> $W/steps.txt
}
for r in 1 2; do
  run main-$r t ''; run cand-$r '' ''; run s3-$r r,3 '^(64|256|1024)MiB/(fp8|q4)/'; pack
done
python3 reports/h200/issue20-rope6/sum2.py $W > $W/summary.txt; cat $W/summary.txt
WK=$(sed -n 's/^best knob: //p' $W/summary.txt); echo "best knob: '$WK'" >> $W/steps.txt
F='d(128|256)[^,]*,fmt=(fp8|q4)'
[ $(left) -gt 25 ] && step qp bash -c "KC_ROPE6=$WK $TF qwen-pages --backend cuda --seed 7 --cases 40 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
[ $(left) -gt 8 ] && step memcheck bash -c "KC_ROPE6=$WK timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TF qwen-pages --backend cuda --seed 7 --cases 40 --filter '$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
pack
tail -8 $W/steps.txt; grep -h -E "^qwen-pages|^verdict" $W/qp.log 2>/dev/null; tail -2 $W/memcheck.log 2>/dev/null; grep -E "^qwen-pages" $W/memcheck.log
cat $W/summary.txt
