#!/bin/sh
# tools/make_suite12.py on a copy of the tree (the script writes beside itself): the committed
# fixtures/serve/suite12.json is as generated (--check 0); --help and an unknown option write
# nothing (0 and 2, a hand edit kept); --check reports a hand edit (1) and a missing file (1,
# "missing"); a run without options rewrites the file and keeps its goldens; an existing file
# that is not JSON is not overwritten (2).
# usage: make_suite12_test.sh REPO_ROOT
set -u
root=$1
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$t/tools" "$t/fixtures/serve"
cp "$root/tools/make_suite12.py" "$t/tools/"
fx=$t/fixtures/serve/suite12.json
cp "$root/fixtures/serve/suite12.json" "$fx"
gen() { python3 "$t/tools/make_suite12.py" "$@"; }
out=$(gen --check) || fail "the committed suite12.json: --check exited $? ($out)"
sed 's/"note": "12 prompts/"note": "hand edit: 12 prompts/' "$root/fixtures/serve/suite12.json" > "$fx"
cp "$fx" "$t/edited"
out=$(gen --help 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q -- '--check' || fail "--help: exit $rc, no usage: $out"
cmp -s "$fx" "$t/edited" || fail "--help rewrote the file"
out=$(gen --chek 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q -- '--chek' || fail "an unknown option: exit $rc (want 2, naming it): $out"
cmp -s "$fx" "$t/edited" || fail "an unknown option rewrote the file"
out=$(gen --check); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q differs || fail "--check of a hand edit: exit $rc (want 1): $out"
gen > /dev/null || fail "a rewrite: exit $?"
cmp -s "$fx" "$root/fixtures/serve/suite12.json" || fail "a rewrite did not give the committed file (goldens kept)"
rm "$fx"
out=$(gen --check 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q missing || fail "--check of a missing file: exit $rc (want 1, missing): $out"
echo '{"golden": ' > "$fx"
out=$(gen 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q 'not JSON' || fail "a file that is not JSON: exit $rc (want 2): $out"
[ "$(cat "$fx")" = '{"golden": ' ] || fail "a file that is not JSON was overwritten"
echo "make_suite12: ok"
