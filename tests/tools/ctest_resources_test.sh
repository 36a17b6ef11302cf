#!/bin/sh
# CTest resource groups, on a machine without a GPU: a stand-in nvidia-smi lists GPUs,
# tools/gpu_resource_spec.sh writes the spec, and a CTest test file (written here, no
# configure needed) holds tests with RESOURCE_GROUPS "gpus:1" that run through
# tools/ctest_gpu.sh, as the cuda contract tests do (cmake/kc_helpers.cmake); one of them runs
# tf-cuda-test rows-invariant on the cpu backend. Checked:
#   one GPU declared as two slots: ctest accepts the spec, every test runs with
#     CUDA_VISIBLE_DEVICES=0 (the id CTest allotted), tf-cuda-test passes under it;
#   two GPUs of one slot each, four tests with ctest -j4: both GPUs are used;
#   control: a spec with no GPU: ctest must not run the tests (exit not 0).
#   ctest_resources_test.sh CTEST TF_CUDA_TEST SOURCE_DIR
ctest=$1 tool=$2 src=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$d/bin" "$d/t"
stand_in() { printf '#!/bin/sh\nprintf "%s"\n' "$1" >"$d/bin/nvidia-smi"; chmod +x "$d/bin/nvidia-smi"; }
tests() {  # N EXTRA: N tests recording their CUDA_VISIBLE_DEVICES; test 1 also runs tf-cuda-test
  : >"$d/t/CTestTestfile.cmake"
  i=1
  while [ "$i" -le "$1" ]; do
    cmd="echo \$CUDA_VISIBLE_DEVICES > $d/dev.$i; sleep 1"
    [ "$i" -eq 1 ] && cmd="$cmd; \"$tool\" rows-invariant --backend cpu --quiet --cases 4 > $d/tool.out 2>&1"
    printf 'add_test(gpu%s "sh" "%s/tools/ctest_gpu.sh" "sh" "-c" "%s")\n' "$i" "$src" "$(printf '%s' "$cmd" | sed 's/"/\\"/g')" >>"$d/t/CTestTestfile.cmake"
    printf 'set_tests_properties(gpu%s PROPERTIES RESOURCE_GROUPS "gpus:1")\n' "$i" >>"$d/t/CTestTestfile.cmake"
    i=$((i + 1))
  done
  rm -f "$d"/dev.*
}

stand_in '0\n'
PATH="$d/bin:$PATH" sh "$src/tools/gpu_resource_spec.sh" 2 >"$d/one.json" || fail "gpu_resource_spec.sh failed"
grep -q '{"id": "0", "slots": 2}' "$d/one.json" || fail "spec: $(cat "$d/one.json")"
# SLOTS with leading zeros: 08 is 8 slots (written 08 it was not JSON), 00 is 0 and refused.
PATH="$d/bin:$PATH" sh "$src/tools/gpu_resource_spec.sh" 08 >"$d/eight.json" || fail "SLOTS 08 refused"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['local'][0]['gpus'][0]['slots'] == 8" "$d/eight.json" ||
  fail "SLOTS 08: not 8 slots in valid JSON: $(cat "$d/eight.json")"
if PATH="$d/bin:$PATH" sh "$src/tools/gpu_resource_spec.sh" 00 >/dev/null 2>&1; then fail "SLOTS 00 (0 slots) accepted"; fi
tests 3
"$ctest" --test-dir "$d/t" -j3 --resource-spec-file "$d/one.json" >"$d/ctest.out" 2>&1 || fail "ctest refused one GPU of two slots: $(tail -5 "$d/ctest.out")"
for i in 1 2 3; do [ "$(cat "$d/dev.$i" 2>/dev/null)" = 0 ] || fail "test $i ran with CUDA_VISIBLE_DEVICES='$(cat "$d/dev.$i" 2>/dev/null)'"; done
grep -q 'rows-invariant: pass' "$d/tool.out" || fail "tf-cuda-test under ctest_gpu.sh: $(tail -3 "$d/tool.out")"
echo "one GPU as two slots: 3 tests ran on GPU 0; tf-cuda-test rows-invariant passed under the allocation"

stand_in '0\n1\n'
PATH="$d/bin:$PATH" sh "$src/tools/gpu_resource_spec.sh" >"$d/two.json"
tests 4
"$ctest" --test-dir "$d/t" -j4 --resource-spec-file "$d/two.json" >"$d/ctest.out" 2>&1 || fail "ctest with two GPUs: $(tail -5 "$d/ctest.out")"
used=$(cat "$d"/dev.* | sort -u | tr '\n' ' ')
[ "$used" = "0 1 " ] || fail "four tests on two GPUs used '$used'"
echo "two GPUs, one slot each: four tests used GPUs $used"

stand_in ''
PATH="$d/bin:$PATH" sh "$src/tools/gpu_resource_spec.sh" >"$d/none.json" 2>/dev/null
tests 1
if "$ctest" --test-dir "$d/t" --resource-spec-file "$d/none.json" >"$d/ctest.out" 2>&1; then fail "control: ctest ran a gpus:1 test with no GPU declared"; fi
[ ! -e "$d/dev.1" ] || fail "control: the test ran without a GPU"
echo "control: no GPU declared, ctest did not run the test ($(grep -o 'Insufficient resources[^*]*' "$d/ctest.out" | head -1))"
