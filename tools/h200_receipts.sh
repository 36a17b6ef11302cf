#!/usr/bin/env bash
# Re-makes the GPU receipts the README cites, with the README's own commands, from a build in
# build/ (so each receipt's argv reads build/tools/tf-cuda-test ...). Run on the GPU machine
# from the repository root; commit first, so that git.dirty is false in every receipt.
#   tools/h200_receipts.sh [OUT_DIR] [LOG_DIR]        (defaults: reports/h200, OUT_DIR)
# Environment: KC_PREFIX (CMAKE_PREFIX_PATH for the dependencies, e.g. $PWD/.deps/usr),
# KC_PREBUILT=1 (use the build/tools/tf-cuda-test that is there, e.g. built on a machine whose
# git checkout is the real one and carried: its receipts then name the right commit),
# KC_SKIP_BENCH=1 (contracts only), KC_SANITIZE=1 (tools/sanitize.py: four tools over every contract, KC_SANITIZE_JOBS runs at once, default 6,
# sanitize.json), KC_ORACLE=1 (export + tools/oracle_torch.py: oracle.json), KC_MUTANTS=1 (the
# cuda-labelled mutant tests; needs a build of the mutant targets, so not with KC_PREBUILT).
# Exit 1 when any contract or bench failed; the table printed last says which.
set -uo pipefail
out=${1:-reports/h200}
logs=${2:-$out}
mkdir -p "$out" "$logs"
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ "${KC_PREBUILT:-0}" != 1 ]; then
# The sanitizer plants and the device mutants exist only where KC_DEVICE_MUTANTS is on: asked for
# here, so a build/ configured earlier with it off (cached) does not leave the controls unbuilt.
mutants=
[ "${KC_SANITIZE:-0}" = 1 ] || [ "${KC_MUTANTS:-0}" = 1 ] && mutants=-DKC_DEVICE_MUTANTS=ON
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 ${KC_PREFIX:+-DCMAKE_PREFIX_PATH=$KC_PREFIX} $mutants \
  > "$logs/configure.log" 2>&1 || { cat "$logs/configure.log"; exit 2; }
cmake --build build --target tf-cuda-test > "$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; exit 2; }
fi
bin=build/tools/tf-cuda-test
step_logs=$logs
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"
for c in fp8-rows qwen-pages q4-rows mxfp4-rows scale-planes rows-invariant arena-offsets; do
  step "$c" "$bin" "$c" --backend cuda --out "$out/$c.json"
done
if [ "${KC_SKIP_BENCH:-0}" != 1 ]; then
  step bench-attention "$bin" bench attention --out "$out/bench-attention.json"
  step bench-pack "$bin" bench pack --out "$out/bench-pack.json"
  step bench-engine "$bin" bench engine --out "$out/bench-engine.json"
  step bench-rope-store "$bin" bench rope-store --out "$out/bench-rope-store.json"
  step bench-compact "$bin" bench compact --out "$out/bench-compact.json"
fi
if [ "${KC_SANITIZE:-0}" = 1 ]; then  # every contract under the four tools, and their controls (docs/verification.md)
  [ "${KC_PREBUILT:-0}" = 1 ] || cmake --build build --target tf-cuda-test-plant-merge-no-barrier \
    tf-cuda-test-plant-merge-read-past-end tf-cuda-test-plant-merge-barrier-two-sites \
    tf-cuda-test-plant-merge-read-unwritten >> "$logs/build.log" 2>&1
  step sanitize python3 tools/sanitize.py --bin "$bin" --plant-bin build --jobs "${KC_SANITIZE_JOBS:-6}" \
    --out "$out/sanitize.json" --logs "$logs/sanitize"
fi
if [ "${KC_ORACLE:-0}" = 1 ]; then  # our rope store and attention against PyTorch and transformers
  rm -rf /tmp/kc-export
  step export "$bin" export qwen-pages --backend cuda --out /tmp/kc-export
  step oracle python3 tools/oracle_torch.py /tmp/kc-export --out "$out/oracle.json"
fi
if [ "${KC_MUTANTS:-0}" = 1 ]; then  # the device-side planted bugs: each must turn its contract red on cuda
  targets=$(cuda_mutant_targets build)
  cmake --build build --target $targets >> "$logs/build.log" 2>&1
  step cuda-mutants ctest --test-dir build -L cuda -R '^mutant[.]' --no-tests=error --output-on-failure
fi
printf '%s' "$table"
exit $(( worst > 0 ? 1 : 0 ))
