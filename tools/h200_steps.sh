# Sourced by tools/h200_receipts.sh and tools/h200_premerge.sh (bash).
# step NAME CMD...: runs CMD with its output in $step_logs/NAME.log, adds a line to $table (the
# exit code, the seconds, the log's last line) and keeps the largest exit code in $worst;
# returns CMD's exit code. $step_logs/steps.txt gets each step's start and its table line as it
# ends, so a run cut short (a device call's time limit) still tells which steps ended and how.
table=""
worst=0
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
# cuda_mutant_targets BUILD: the targets of BUILD's cuda-labelled mutant tests (configured with
# -DKC_DEVICE_MUTANTS=ON), for a build of those alone.
cuda_mutant_targets() {
  ctest --test-dir "$1" -N -L cuda -R '^mutant[.]' | sed -n 's/.*Test *#[0-9]*: mutant[.]/tf-cuda-test-mutant-/p'
}
