#!/bin/sh
# A file or folder option given an empty value (an unset variable in a script) is refused, exit 2,
# naming the option, and nothing is written: taken as "not given", the run would pass and write
# nothing where its caller looks for the file.
#   empty_paths_test.sh TF_CUDA_TEST SOURCE_DIR
tool=$1 src=$2
fail() { echo "FAIL: $*"; exit 1; }
d=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$d"' EXIT
cd "$d" || fail "cd $d"
check() {  # option, command...
  opt=$1
  shift
  msg=$("$tool" "$@" 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2"
  case "$msg" in *"$opt: empty path"*) echo "refused: $msg";; *) fail "$*: '$msg' lacks '$opt: empty path'";; esac
}
check --out fp8-rows --backend cpu --cases 1 --out ""
check --junit rows-invariant --backend cpu --cases 1 --junit ""
check --out-dir kernel-contract --backend cpu --out-dir ""
check --merge-out report "$src/reports/cpu/fp8-rows.json" --merge-out ""
check --junit report "$src/reports/cpu/fp8-rows.json" --junit ""
check --out serve-gate "$src/fixtures/serve/ci.json" --backend cpu --out ""
check --out serve-memory --preset tiny --out ""
check --prompt-file generate --model "$src/fixtures/models/stdlib-bytes-3m" --prompt-file "" --max-tokens 1
check --out-dir premerge --base "$src/reports/cpu" --out-dir ""
# --junit naming --out's file through a folder not made yet ("sub/.." once sub exists): the same
# file, refused, whether or not the receipt exists already.
check2() { msg=$("$tool" "$@" 2>&1 >/dev/null); rc=$?; [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2"
  case "$msg" in *"name the same file"*) echo "refused: $msg";; *) fail "$*: '$msg'";; esac; }
check2 rows-invariant --backend cpu --cases 1 --out x.json --junit ./sub/../x.json
check2 serve-gate "$src/fixtures/serve/ci.json" --backend cpu --out s.json --junit ./sub/../s.json
# A comma list with an empty item: the item was dropped, and the run planned other requests
# (serve-memory) or formats (serve-gate) than the ones written.
check3() { msg=$("$tool" "$@" 2>&1 >/dev/null); rc=$?; [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2"
  case "$msg" in *"empty item"*) echo "refused: $msg";; *) fail "$*: '$msg'";; esac; }
check3 serve-memory --preset tiny --prompts 2,,3
check3 serve-memory --preset tiny --prompts 2,
check3 serve-gate "$src/fixtures/serve/ci.json" --backend cpu --kv-cache bf16,
msg=$("$tool" serve-gate "$src/fixtures/serve/ci.json" --backend cpu --kv-cache "" 2>&1 >/dev/null)
[ $? -eq 2 ] || fail "--kv-cache '': not exit 2"
case "$msg" in *"--kv-cache: empty value"*) echo "refused: $msg";; *) fail "--kv-cache '': '$msg'";; esac
[ -z "$(ls -A "$d")" ] || fail "a refused command wrote $(ls -A "$d")"
echo '{}' > x.json
check2 rows-invariant --backend cpu --cases 1 --out x.json --junit ./sub/../x.json
[ "$(cat x.json)" = '{}' ] && [ ! -e sub ] || fail "a refused command wrote x.json or sub/"
rm -f x.json
# A whole-number option given something that is not a decimal integer is told so (not "out of range").
msg=$("$tool" fp8-rows --cases 1e3 2>&1)
[ $? -eq 2 ] || fail "--cases 1e3: not exit 2"
case "$msg" in *"expected a decimal integer"*) echo "refused: $msg";; *) fail "--cases 1e3: '$msg'";; esac
echo "empty paths, one file under two names and non-decimal counts refused, nothing written"
