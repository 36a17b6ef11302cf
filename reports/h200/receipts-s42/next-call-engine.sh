#!/usr/bin/env bash
# Prepared in session 42 (not run: no device after call 3). The engine's pipelined product
# (kernels/engine/kernels.cu, matmul_xs_pipe_kernel) against the staged one, one binary, three
# modes by KC_ENGINE_XS (unset = staged, pipe1, pipe3):
#  1. correctness: kc_engine_tests EngineBackend.MatmulParts*OnCuda (the pipelined kernels' bytes
#     against the host twin); rows-invariant and the ci serve gate with each mode set for the
#     whole process (every product of the engine through it);
#  2. bench engine --profile per mode (event time per kernel kind: matmul q/k/v, o_proj, gate/up,
#     down at parallel 1 / 4 / 8), 2 rounds interleaved; then bench engine (transformers none:
#     our step times) per mode.
# Carry .deps.tgz and .dev; commit and tools/h200_snap.sh first. Returns $OUT/eng.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/eng; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/eng.tgz -C /tmp eng 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr \
  -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test kc_engine_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
echo "built $((SECONDS-T0)) s"
build/tests/kc_engine_tests --gtest_filter='EngineBackend.MatmulParts*OnCuda' > $W/gtest.log 2>&1
echo "gtest rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $W/gtest.log | tr '\n' ' ')"
for m in staged pipe1 pipe3; do
  KC_ENGINE_XS=$m timeout 120 build/tools/tf-cuda-test rows-invariant --backend cuda --out $W/rows-invariant-$m.json > $W/rows-invariant-$m.log 2>&1
  echo "rows-invariant $m rc=$? $(tail -1 $W/rows-invariant-$m.log)"
  KC_ENGINE_XS=$m timeout 120 build/tools/tf-cuda-test serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve-$m.json > $W/serve-$m.log 2>&1
  echo "serve-gate $m rc=$? $(grep -E '^serve-ci:' $W/serve-$m.log | tail -1)"
done
pack
for r in 1 2; do
  order="staged pipe1 pipe3"; [ $r = 2 ] && order="pipe3 staged pipe1"
  for m in $order; do
    KC_ENGINE_XS=$m timeout 150 build/tools/tf-cuda-test bench engine --profile $W/profile-$m-$r.json --transformers none > $W/profile-$m-$r.log 2>&1
    echo "profile $m $r rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
python3 - $W > $W/profile-summary.txt <<'PY'
import json, sys, glob
w = sys.argv[1]
t = {}
for f in sorted(glob.glob(w + "/profile-*-*.json")):
    m, r = f.rsplit("/", 1)[1][:-5].split("-")[1:3]
    for row in json.load(open(f))["rows"]:
        if row.get("kernels") != "current":  # the profile also times the legacy kernels
            continue
        c = row["config"]
        t.setdefault((c, "step"), {}).setdefault(m, []).append(row["step_us"])
        t.setdefault((c, "matmul, all"), {}).setdefault(m, []).append(row["matmul_us"])
        for k in row["kinds"]:
            if k["kind"].startswith("matmul"):
                t.setdefault((c, k["kind"]), {}).setdefault(m, []).append(k["us_per_step"])
print(f"{'config / kind (us per step, best of the rounds)':64s} {'staged':>9s} {'pipe1':>9s} {'pipe3':>9s}")
for (c, k), v in sorted(t.items()):
    b = {m: min(x) for m, x in v.items()}
    print(f"{(c + ' ' + k)[:64]:64s} " + " ".join(f"{b.get(m, float('nan')):9.1f}" for m in ("staged", "pipe1", "pipe3")))
PY
head -40 $W/profile-summary.txt
for m in staged pipe1 pipe3; do
  KC_ENGINE_XS=$m timeout 150 build/tools/tf-cuda-test bench engine --transformers none --out $W/bench-engine-$m.json > $W/bench-engine-$m.log 2>&1
  echo "bench engine $m rc=$? ($((SECONDS-T0)) s)"
  pack
done
python3 -c "
import json
for m in ('staged','pipe1','pipe3'):
    r = json.load(open('$W/bench-engine-%s.json' % m))
    print(m, [(x['config'], round(x['step_us'], 1)) for x in r['rows'] if x['engine'] == 'ours' and x['addressing'] == 'window' and x['format'] == 'bf16'])
" 2>&1 | tail -4
pack
