#!/usr/bin/env bash
# (Session 45: call8.sh with receipts-s45/cd-experiment-unmeasured.patch, which is session 44's
# c-experiment patch plus D, KC_XS_EXPERIMENT bit 32, default now 63: q_norm and k_norm in one
# launch, EngineBackend::rms_norm_parts, with its tests; and ForwardingEngine no longer passes
# add_rms_norm on, so a decorator's add / rms_norm plants reach the joined calls. Modes add 63.)
# For the next session's first device call (session 44's device time ran out before it started;
# one try was taken back mid-run with nothing returned), at HEAD:
#  1. build HEAD's tf-cuda-test and kc_engine_tests, and C = HEAD + c-experiment-unmeasured.patch
#     beside it: KC_XS_EXPERIMENT bit 2 (default on) an unguarded octet step where nr == R and
#     the group's 4 outputs exist (no branch between a row's activations and the previous row's
#     multiply-adds; aeff612), bit 1 (default on) the first weights before the staging (HEAD's
#     order; off: after it, as before e1f8268, which read 1.5-2 % faster at parallel 1), bit 4
#     (default on) RMSNorm rows staged 16 float4 ahead and scaled 4 floats at a time (call 7's
#     profile: 9.2 us a call at dim 5120, 8 calls a step, against 4.4 for an add), bit 16
#     (default on) the residual add fused with the RMSNorm after it (EngineBackend::add_rms_norm,
#     which the patch adds with a default of the two calls; the model calls it for post_norm
#     and the next layer's input_norm; a block per row, rows <= 8192 floats), bit 8 (default
#     on) the product tree's levels 16 .. 1 by exchanging halves (K - 1 + log2(32 / K)
#     shuffles for a warp's K sums instead of 5 K; tree_exchange_model.cpp checks the pairs);
#  2. HEAD: the product's byte tests and EngineCuda.*, rows-invariant, the ci serve gate (HEAD's
#     staging change, e1f8268, was tested in call 7 only inside a binary that also held the
#     KC_ENGINE_PF experiment, off);
#  3. bench engine --profile, HEAD and C with KC_XS_EXPERIMENT 1 (HEAD's code path: the noise
#     between binaries), 3, 7, 23, 31 and 30 interleaved, one round; the sanitizers (memcheck,
#     racecheck, synccheck over rows-invariant) on HEAD; a second round;
#  4. C (all on): the byte tests (EngineBackend.AddRmsNormGivesAddThenRmsNormBytesOnCuda among
#     them), rows-invariant and the ci serve gate (if C is kept: its sanitizers);
#  5. HEAD: bench engine --out, on an H200 only (the receipt replaces reports/h200/bench-engine.json).
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c9.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c9; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/c9.tgz -C /tmp c9 2>/dev/null; }
SRC=$PWD
# C's patch, configure or build failing leaves HEAD's steps to run; C's are skipped (C="").
C=/tmp/buildc/tools/tf-cuda-test
rm -rf /tmp/srcc && mkdir /tmp/srcc && git ls-files -z | xargs -0 cp --parents -t /tmp/srcc && cp -r .deps /tmp/srcc/ \
  && (cd /tmp/srcc && patch -p1 -s < $SRC/reports/h200/receipts-s45/cd-experiment-unmeasured.patch) || { echo "C: patch failed"; C=""; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake-h.log 2>&1 \
  || { tail -20 $W/cmake-h.log; exit 2; }
[ -n "$C" ] && { cmake -S /tmp/srcc -B /tmp/buildc -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=/tmp/srcc/.deps/usr > $W/cmake-c.log 2>&1 || { echo "C: cmake failed"; C=""; }; }
CB=""
if [ -n "$C" ]; then ninja -C /tmp/buildc tf-cuda-test kc_engine_tests > $W/build-c.log 2>&1 & CB=$!; fi
ninja -C build tf-cuda-test kc_engine_tests > $W/build-h.log 2>&1 || { tail -30 $W/build-h.log; pack; exit 2; }
H=build/tools/tf-cuda-test
[ -n "$CB" ] && { wait $CB || { echo "C did not build:"; tail -15 $W/build-c.log; C=""; }; }
echo "built $((SECONDS-T0)) s"
for b in build ${C:+/tmp/buildc}; do
  cuobjdump -sass $b/tools/tf-cuda-test 2>/dev/null | awk '/Function : .*matmul_xs_kernelILi8EE/{p=1} p&&/Function : /&&!/matmul_xs_kernelILi8EE/{p=0} p' \
    | gzip > $W/sass-xs8-$(basename $b).txt.gz
done
for b in build ${C:+/tmp/buildc}; do
  $b/tests/kc_engine_tests --gtest_filter='EngineBackend.*OnCuda:EngineCuda.*' > $W/gtest-$(basename $b).log 2>&1
  echo "$b gtest rc=$?: $(grep -cE '^\[       OK \]' $W/gtest-$(basename $b).log) ok"
done
timeout 60 $H rows-invariant --backend cuda --out $W/rows-invariant.json > $W/rows-invariant.log 2>&1
echo "rows-invariant rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant.log | tail -1)"
timeout 60 $H serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve.json > $W/serve.log 2>&1
echo "serve-gate rc=$? $(grep -E '^serve-ci:' $W/serve.log | tail -1)"
[ -n "$C" ] && timeout 60 $C rows-invariant --backend cuda --out $W/rows-invariant-c.json > $W/rows-invariant-c.log 2>&1
echo "C rows-invariant rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant-c.log | tail -1)"
[ -n "$C" ] && timeout 60 $C serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve-c.json > $W/serve-c.log 2>&1
echo "C serve-gate rc=$? $(grep -E '^serve-ci:' $W/serve-c.log | tail -1)"; gzip -f $W/serve-c.json
gzip -f $W/serve.json; pack
profile_round() {
  for t in h ${C:+c1 c3 c7 c23 c31 c30 c63}; do
    if [ $t = h ]; then X=$H; else X=$C; fi
    KC_XS_EXPERIMENT=${t#c} timeout 50 $X bench engine --profile $W/profile-$t-$1.json --transformers none --tokens 32 --reps 2 > $W/profile-$t-$1.log 2>&1
    echo "profile $t round $1 rc=$? ($((SECONDS-T0)) s)"
  done
  python3 reports/h200/receipts-s44/summary.py $W h c1 c3 c7 c23 c31 c30 c63 > $W/profile-summary.txt 2>&1
  pack
}
profile_round 1
grep -E "27b-attn-4l/p8/bf16/window|27b-attn-4l/p1/bf16/window step|stdlib-bytes-3m/p8/bf16/window step" $W/profile-summary.txt
timeout 120 python3 tools/sanitize.py --bin $H --runs rows-invariant --skip-controls \
  --tools memcheck,racecheck,synccheck --jobs 4 --out $W/sanitize-rows.json --logs $W/san-logs > $W/sanitize.log 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"; tail -4 $W/sanitize.log
pack
profile_round 2
grep -E "27b-attn-4l/p8/bf16/window|27b-attn-4l/p1/bf16/window|stdlib-bytes-3m/p8/bf16/window" $W/profile-summary.txt | head -40
gzip -f $W/profile-*.json; pack
# The receipt replaces reports/h200/bench-engine.json only from an H200: elsewhere the device time is saved.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 200 $H bench engine --out $W/bench-engine.json > $W/bench-engine.log 2>&1
  echo "bench engine rc=$? ($((SECONDS-T0)) s)"; sed -n '/^targets:/,$p' $W/bench-engine.log | head -14
else echo "bench engine: skipped (not an H200)"; fi
pack
