#!/bin/bash
# tools/device_call.sh, the common start of a device call script, sourced in a device copy (the
# tracked files and .dev, no .git): sets W (made), L (KC_CALL_S), GPU (from nvidia-smi), left
# and pack ($OUT/NAME.tgz holding $W), writes the snapshot's and the card's lines to
# $W/head.txt; a copy without a snapshot exits 4 before the script's own steps; NAME is required.
# Runs on a repository of its own, with a stand-in nvidia-smi on the PATH.
# Usage: device_call_test.sh SOURCE_DIR
set -u
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t" /tmp/kc-device-call-test-$$' EXIT
fail() { echo "device_call_test: $*"; exit 1; }
name=kc-device-call-test-$$
r=$t/repo
mkdir -p "$r/tools" "$r/reports/h200" && cd "$r" || exit 1
git init -q && git config user.email t@t && git config user.name t
cp "$src/tools/h200_snap.sh" "$src/tools/h200_git_from_snap.sh" "$src/tools/device_call.sh" tools/
echo one > a.txt
git add -A && git commit -qm base || fail "no commit"
printf '{"git": {"commit": "%s"}}\n' "$(git rev-parse HEAD)" > reports/h200/fp8-rows.json
git add -A && git commit -qm head || fail "no head commit"
head=$(git rev-parse HEAD)
KC_SNAP_BASE=0 bash tools/h200_snap.sh > /dev/null 2>&1 || fail "h200_snap.sh failed"
c=$t/copy
mkdir -p "$c" "$t/bin" "$t/out" && git archive HEAD | tar -x -C "$c" && cp -r .dev "$c/" || fail "copy"
printf '#!/bin/sh\ncase "$*" in *driver_version*) echo "NVIDIA H200, 580.1, 1980 MHz";; *) echo "NVIDIA H200";; esac\n' \
  > "$t/bin/nvidia-smi" && chmod +x "$t/bin/nvidia-smi"
cd "$c" || exit 1
script='. tools/device_call.sh '"$name"'
echo "W=$W L=$L GPU=$GPU left=$(left)"
echo data > "$W/result.txt"
pack'
out=$(PATH=$t/bin:$PATH OUT=$t/out KC_CALL_S=300 bash -c "$script" 2>&1) || fail "the script failed: $out"
echo "$out" | grep -qx "head $head, changed tracked files: 0" || fail "no snapshot line: $out"
echo "$out" | grep -qx "NVIDIA H200, 580.1, 1980 MHz" || fail "no card line: $out"
line=$(echo "$out" | grep '^W=') || fail "the script's own line is missing: $out"
[[ $line =~ ^W=/tmp/$name\ L=300\ GPU=NVIDIA\ H200\ left=(2[0-9][0-9]|300)$ ]] || fail "unexpected values: $line"
grep -qx "head $head, changed tracked files: 0" "/tmp/$name/head.txt" && grep -q H200 "/tmp/$name/head.txt" ||
  fail "head.txt lacks a line: $(cat "/tmp/$name/head.txt")"
[ "$(tar xzOf "$t/out/$name.tgz" "$name/result.txt" 2> /dev/null)" = data ] || fail "pack did not bring \$W back"
[ "$(git rev-parse HEAD)" = "$head" ] || fail "the copy's git dir is not at the snapshot"
# no snapshot: exit 4, before the script's own steps
rm -rf .dev .git
out=$(PATH=$t/bin:$PATH OUT=$t/out bash -c "$script; echo reached" 2>&1); rc=$?
[ $rc = 4 ] || fail "no snapshot: exit 4 expected, got $rc: $out"
echo "$out" | grep -q reached && fail "the script went on without a snapshot"
# NAME is required
out=$(bash -c '. tools/device_call.sh' 2>&1) && fail "no NAME: accepted"
echo "$out" | grep -q 'usage: . tools/device_call.sh NAME' || fail "no NAME: no usage line: $out"
echo "device_call_test: ok"
