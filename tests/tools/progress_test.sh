#!/bin/sh
# Progress on stderr: plain lines when stderr is not a terminal (here: a file), "  .. case i/n
# <case line>" as before (the line last, to paste into --case); on a terminal
# (KC_PROGRESS=live stands in for one) one status line with the contract, case i/n and the
# elapsed time, rewritten in place (carriage return, erase to end of line); lines printed
# meanwhile (controls, FAIL) start on a cleared line.
#   progress_test.sh TF_CUDA_TEST
tool=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cr=$(printf '\r')
env -u KC_PROGRESS "$tool" q4-rows --backend cpu --cases 3 >/dev/null 2>"$d/plain" || fail "q4-rows failed: $(tail -3 "$d/plain")"
grep -q '^  \.\. case 3/3 q4-rows(.*)$' "$d/plain" || fail "no plain progress line: $(head -5 "$d/plain")"
! grep -q "$cr" "$d/plain" || fail "carriage returns on a stderr that is not a terminal"
KC_PROGRESS=live "$tool" q4-rows --backend cpu --cases 3 >/dev/null 2>"$d/live" || fail "q4-rows (live) failed"
lines=$(grep -c '' "$d/live")
plain_lines=$(grep -c '' "$d/plain")
[ "$lines" -lt "$plain_lines" ] || fail "live status took $lines lines, plain $plain_lines"
grep -q "${cr}.\[Kq4-rows: case 3/3 q4-rows(.* ([0-9]*\.[0-9] s)" "$d/live" || fail "no live status line"
grep -q "${cr}.\[K  control refusal-accepts-one-past: red" "$d/live" || fail "a control line after the status does not clear it first"
echo "plain: $plain_lines lines; live: $lines lines, status rewritten in place"
