#!/usr/bin/env bash
# Session 44, device call 7, at HEAD (main) with .dev/stage.patch (branch stage-x) built beside it:
#  1. build A = HEAD's tf-cuda-test; B = HEAD + stage.patch (the staged product's first weights
#     requested before the activations are staged, the staging 8 float4 ahead per thread);
#  2. B: the product's byte tests and EngineCuda.*, rows-invariant, the ci serve gate;
#  3. bench engine --profile, A, B, B with KC_ENGINE_PF=4 and 16 (the next group's weights
#     prefetched into the L2, up to that many steps of a group) interleaved, two rounds each;
#  4. A: bench engine --out (the receipt at HEAD: on an H200 it replaces 98afef3's);
#  5. ncu on B's matmul_xs_kernel<8> (KC_ENGINE_PF=4), the 27B preset at parallel 8 (q/k/v, o_proj, gate/up, down);
#  6. B: memcheck, racecheck and synccheck over rows-invariant.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c7.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c7; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/c7.tgz -C /tmp c7 2>/dev/null; }
SRC=$PWD
rm -rf /tmp/srcb && mkdir /tmp/srcb && git ls-files -z | xargs -0 cp --parents -t /tmp/srcb && cp -r .deps /tmp/srcb/ \
  && (cd /tmp/srcb && patch -p1 -s < $SRC/.dev/stage.patch) || { echo "patch failed"; exit 3; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake-a.log 2>&1 \
  && cmake -S /tmp/srcb -B /tmp/buildb -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=/tmp/srcb/.deps/usr > $W/cmake-b.log 2>&1 \
  || { tail -20 $W/cmake-*.log; exit 2; }
ninja -C build tf-cuda-test > $W/build-a.log 2>&1 || { tail -30 $W/build-a.log; pack; exit 2; }
ninja -C /tmp/buildb tf-cuda-test kc_engine_tests > $W/build-b.log 2>&1 || { tail -30 $W/build-b.log; pack; exit 2; }
A=build/tools/tf-cuda-test; B=/tmp/buildb/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
cuobjdump -sass $B 2>/dev/null | awk '/Function : .*matmul_xs_kernelILi8EE/{p=1} p&&/Function : /&&!/matmul_xs_kernelILi8EE/{p=0} p' | gzip > $W/sass-xs8-b.txt.gz
/tmp/buildb/tests/kc_engine_tests --gtest_filter='EngineBackend.*OnCuda:EngineCuda.*' > $W/gtest-b.log 2>&1
echo "B gtest rc=$?: $(grep -cE '^\[       OK \]' $W/gtest-b.log) ok, $(grep -E '^\[  (PASSED|FAILED) |FAILED  \]|SKIPPED \]' $W/gtest-b.log | tr '\n' ' ')"
timeout 60 $B rows-invariant --backend cuda --out $W/rows-invariant-b.json > $W/rows-invariant-b.log 2>&1
echo "B rows-invariant rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant-b.log | tail -1)"
timeout 60 $B serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve-b.json > $W/serve-b.log 2>&1
echo "B serve-gate rc=$? $(grep -E '^serve-ci:' $W/serve-b.log | tail -1)"
gzip -f $W/serve-b.json; pack
for round in 1 2; do
  for t in a b0 b4 b16; do
    if [ $t = a ]; then X=$A; else X=$B; fi
    KC_ENGINE_PF=${t#b} timeout 50 $X bench engine --profile $W/profile-$t-$round.json --transformers none --tokens 32 --reps 2 > $W/profile-$t-$round.log 2>&1
    echo "profile $t round $round rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
python3 reports/h200/receipts-s43/summary.py $W a b0 b4 b16 > $W/profile-summary.txt 2>&1; grep -E "p8|p1/bf16/window" $W/profile-summary.txt | head -30
gzip -f $W/profile-*.json; pack
timeout 200 $A bench engine --out $W/bench-engine.json > $W/bench-engine.log 2>&1
echo "A bench engine rc=$? ($((SECONDS-T0)) s)"; sed -n '/^targets:/,$p' $W/bench-engine.log | head -14
pack
$A make-model --preset qwen35-27b-attn --layers 4 --out $W/m27 > $W/make-model.log 2>&1
KC_ENGINE_PF=4 timeout 100 ncu --clock-control none --kernel-name-base mangled --kernel-name regex:matmul_xs_kernelILi8EE --launch-count 24 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SourceCounters --section MemoryWorkloadAnalysis \
  $B bench engine --quick --transformers none --tokens 8 --engine-model $W/m27 > $W/ncu-matmul-b.txt 2>&1
echo "ncu rc=$? ($((SECONDS-T0)) s)"; grep -E "^  [a-z_]*matmul|Duration|DRAM Throughput|Achieved Occupancy" $W/ncu-matmul-b.txt | head -24
rm -rf $W/m27; gzip -f $W/ncu-matmul-b.txt; pack
timeout $((560 - (SECONDS - T0) > 20 ? 560 - (SECONDS - T0) : 20)) python3 tools/sanitize.py --bin $B --runs rows-invariant --skip-controls \
  --tools memcheck,racecheck,synccheck --jobs 4 --out $W/sanitize-rows-b.json --logs $W/san-logs-b > $W/sanitize-b.log 2>&1
echo "B sanitize rc=$? ($((SECONDS-T0)) s)"; tail -4 $W/sanitize-b.log
pack
