# shellcheck shell=bash disable=SC2154,SC2034  # step_logs comes from the sourcing script; its functions read step_limit
# Sourced by tools/h200_receipts.sh and tools/h200_premerge.sh (bash).
# step NAME CMD...: runs CMD with its output in $step_logs/NAME.log, adds a line to $table (the
# exit code, the seconds, the log's last line) and keeps the largest exit code in $worst;
# returns CMD's exit code. $step_logs/steps.txt gets each step's start and its table line as it
# ends, so a run cut short (a device call's time limit) still tells which steps ended and how.
table=""
worst=0
# The switches of the sourcing scripts are 0 or 1, and KC_DEADLINE_S a whole number of seconds:
# another spelling (KC_SANITIZE=yes, KC_DEADLINE_S=10m) used to be read as off, or to leave its
# steps out of the table with exit 0. Exit 2 before anything runs.
for kc_v in KC_AB_CONTROL KC_BASE_HERE KC_MUTANTS KC_ORACLE KC_PREBUILT KC_SANITIZE KC_SKIP_BENCH KC_SKIP_GATES \
  KC_SKIP_MUTANTS KC_SKIP_SANITIZERS; do
  case "${!kc_v:-0}" in 0 | 1) ;; *) echo "${0##*/}: $kc_v='${!kc_v}': expected 0 or 1" >&2; exit 2 ;; esac
done
case "${KC_DEADLINE_S:-0}" in '' | *[!0-9]*) echo "${0##*/}: KC_DEADLINE_S='$KC_DEADLINE_S': expected whole seconds" >&2; exit 2 ;; esac
case "${KC_SANITIZE_JOBS:-6}" in '' | 0 | *[!0-9]*) echo "${0##*/}: KC_SANITIZE_JOBS='$KC_SANITIZE_JOBS': expected a whole number from 1" >&2; exit 2 ;; esac
unset kc_v
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "$name: started" >> "$step_logs/steps.txt"
  "$@" > "$step_logs/$name.log" 2>&1
  step_record "$name" $? "$t0"
}
# step_record NAME RC T0: the table line and $worst for a step that ran elsewhere (in the
# background, from $SECONDS = T0, its output in $step_logs/NAME.log); returns RC.
step_record() {
  local name=$1 rc=$2 t0=$3
  local line
  line=$(printf '%-20s rc=%-3d %4ds  %s' "$name" "$rc" "$((SECONDS - t0))" "$(tail -n 1 "$step_logs/$name.log")")
  table+=$line$'\n'
  echo "$line" >> "$step_logs/steps.txt"
  [ "$rc" -gt "$worst" ] && worst=$rc
  return "$rc"
}
# step_within NAME LIMIT_S CMD...: step NAME with CMD cut off after LIMIT_S seconds, or sooner when
# KC_DEADLINE_S is set: then at most the seconds left until KC_DEADLINE_S after the script's start
# ($SECONDS) less 10, for the steps after it to record; with fewer than 20 left (by the deadline)
# nothing runs and the step is recorded "not run (time)", exit 3 (not a pass: what it checks went unchecked). A
# device call has a hard limit, and a run it cuts off returns no table. CMD may be a shell
# function: it then runs as it is, with the limit in $step_limit for its own timeout.
step_within() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${KC_DEADLINE_S:-}" ]; then
    case "$KC_DEADLINE_S" in *[!0-9]*) echo "${0##*/}: KC_DEADLINE_S='$KC_DEADLINE_S': expected whole seconds" >&2; exit 2 ;; esac
    local left=$((10#$KC_DEADLINE_S - SECONDS - 10))
    if [ "$left" -lt 20 ]; then
      step "$name" sh -c 'echo "not run (time): $0s left before KC_DEADLINE_S=$1"; exit 3' "$left" "$KC_DEADLINE_S"
      return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  step_limit=$limit
  if [ "$(type -t "$1")" = function ]; then
    step "$name" "$@"
  else
    step "$name" timeout "$limit" "$@"
  fi
}
# cuda_mutant_targets BUILD: the targets of BUILD's cuda-labelled mutant tests (configured with
# -DKC_DEVICE_MUTANTS=ON), for a build of those alone.
cuda_mutant_targets() {
  ctest --test-dir "$1" -N -L cuda -R '^mutant[.]' | sed -n 's/.*Test *#[0-9]*: mutant[.]/tf-cuda-test-mutant-/p'
}
