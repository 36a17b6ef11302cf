#!/usr/bin/env bash
# Session 42, device call 3 (H200, at HEAD = the merge of 59d72e4): the merge's four sanitizer
# controls (tools/sanitize.py, arena-offsets run, plants built), the cuda serve gate on
# fixtures/serve/ci.json (all four caches), and bench engine again (call 2's transformers
# baseline ran 1527 us a step at p8 against the committed receipt's 2054). $OUT/s42c3.tgz.
# Second run: KC_SAN_ONLY=1 KC_SAN_RUNS=qwen-pages-probes (the plants need -DKC_DEVICE_MUTANTS=ON: the first
# run's build/ had it OFF from call 1, and no plant was built).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s42c3; mkdir -p $W
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/s42c3.tgz -C /tmp s42c3 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=ON > $W/cmake.log 2>&1
ninja -C build tf-cuda-test tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end \
  tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten > $W/build.log 2>&1 || tail -20 $W/build.log
echo "built $((SECONDS-T0)) s"
timeout ${KC_SAN_S:-200} python3 tools/sanitize.py --bin build/tools/tf-cuda-test --plant-bin build --runs ${KC_SAN_RUNS:-arena-offsets} --jobs 8 \
  --out $W/sanitize-controls.json --logs $W/san-logs > $W/sanitize.log 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"; tail -3 $W/sanitize.log
python3 -c "
import json; r=json.load(open('$W/sanitize-controls.json'))
print(r['verdict'], [(c['name'], c['red'], c.get('findings')) for c in r.get('controls', [])])" 2>&1 | tail -2
pack
[ "${KC_SAN_ONLY:-0}" = 1 ] && exit 0
timeout 120 build/tools/tf-cuda-test serve-gate fixtures/serve/ci.json --backend cuda --kv-cache bf16,fp8,q4,mxfp4 \
  --out $W/serve-gate-cuda.json > $W/serve-gate.log 2>&1
echo "serve-gate rc=$? ($((SECONDS-T0)) s)"; tail -2 $W/serve-gate.log
pack
timeout 200 build/tools/tf-cuda-test bench engine --out $W/bench-engine.json > $W/bench-engine.log 2>&1
echo "bench engine rc=$? ($((SECONDS-T0)) s)"; grep -E "transformers tok/s" $W/bench-engine.log
pack
