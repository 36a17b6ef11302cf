#!/bin/bash
# tools/h200_steps.sh (sourced by the device scripts): step runs a command with its output in
# NAME.log, adds the table line (exit code, seconds, the log's last line), keeps the worst exit
# code, and writes steps.txt as it goes: a step's start, then its line when it ends, so a run
# killed inside a step still shows the steps that ended and the one it was in; step_within cuts a
# step at its limit, or at KC_DEADLINE_S less 10 s, and runs none with under 20 s left.
# Usage: h200_steps_test.sh SOURCE_DIR
set -u
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "h200_steps_test: $*"; exit 1; }
step_logs=$t
# shellcheck source=../../tools/h200_steps.sh
. "$1/tools/h200_steps.sh"
step good sh -c 'echo first; echo all fine' || fail "a step exiting 0 returned $?"
step bad sh -c 'echo broke; exit 3'
[ $? = 3 ] || fail "a failing step did not return its exit code"
step good2 true
[ "$worst" = 3 ] || fail "worst is $worst, not 3"
[ "$(cat "$t/bad.log")" = broke ] || fail "bad.log: $(cat "$t/bad.log")"
printf '%s' "$table" | grep -q '^good  *rc=0  *[0-9]*s  all fine$' || fail "the table's good line: $table"
printf '%s' "$table" | grep -q '^bad  *rc=3  *[0-9]*s  broke$' || fail "the table's bad line: $table"
[ "$(grep -c . "$t/steps.txt")" = 6 ] || fail "steps.txt: $(cat "$t/steps.txt")"
sed -n 3,4p "$t/steps.txt" | grep -q '^bad  *rc=3' || fail "steps.txt lacks bad's end after its start: $(cat "$t/steps.txt")"
# A step killed from outside leaves its start, and the lines of the steps before it.
( step_logs=$t/cut && mkdir -p "$step_logs" && table="" && worst=0 && step one true && timeout 1 bash -c ". '$1/tools/h200_steps.sh'; step_logs='$t/cut'; step two sleep 5" )
[ "$(sed -n 1p "$t/cut/steps.txt")" = "one: started" ] && grep -q '^one  *rc=0' "$t/cut/steps.txt" &&
  [ "$(tail -n 1 "$t/cut/steps.txt")" = "two: started" ] || fail "a cut run's steps.txt: $(cat "$t/cut/steps.txt")"
# step_within: the step's own limit without KC_DEADLINE_S; with it, no more than the time left
# (less 10 s), and a step left under 20 s does not run: "not run (time)", exit 3.
step_logs=$t/within && mkdir -p "$step_logs" && table="" && worst=0
t0=$SECONDS
step_within cut 1 sleep 5
[ $? = 124 ] && [ $((SECONDS - t0)) -lt 4 ] || fail "step_within did not cut a step at its limit"
show_limit() { echo "limit $step_limit"; }
KC_DEADLINE_S=$((SECONDS + 40)) step_within fn 100 show_limit || fail "a function step failed"
l=$(sed -n 's/^limit //p' "$step_logs/fn.log")
[ "$l" -ge 27 ] && [ "$l" -le 30 ] || fail "the deadline's limit is $l, not about 30 (40 less 10)"
KC_DEADLINE_S=$((SECONDS + 25)) step_within late 100 touch "$t/ran"
[ $? = 3 ] || fail "a step past the deadline did not exit 3"
[ ! -e "$t/ran" ] || fail "a step past the deadline ran"
printf '%s' "$table" | grep -q '^late  *rc=3  *[0-9]*s  not run (time): 1[45]s left before KC_DEADLINE_S' ||
  fail "the late step's table line: $(printf '%s' "$table" | tail -1)"
[ "$worst" = 124 ] || fail "worst is $worst"
# A switch or deadline spelled otherwise than the scripts read it (KC_SANITIZE=yes, KC_DEADLINE_S=10m)
# is refused, exit 2: it was read as off, or left its steps out of the table with exit 0.
for bad in KC_SANITIZE=yes KC_MUTANTS=true KC_DEADLINE_S=10m KC_SANITIZE_JOBS=0; do
  out=$(env "$bad" bash -c ". '$1/tools/h200_steps.sh'; echo sourced" 2>&1); rc=$?
  [ $rc = 2 ] && ! echo "$out" | grep -q sourced || fail "$bad: exit 2 expected at the source, got $rc: $out"
done
out=$(bash -c "step_logs='$t'; . '$1/tools/h200_steps.sh'; KC_DEADLINE_S=10m step_within x 100 true; echo after" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "KC_DEADLINE_S='10m'" || fail "a step's KC_DEADLINE_S=10m: exit 2 expected, got $rc: $out"
KC_SANITIZE=1 KC_DEADLINE_S=600 bash -c ". '$1/tools/h200_steps.sh'" || fail "KC_SANITIZE=1 KC_DEADLINE_S=600 refused"
echo "h200_steps_test: ok"
