#!/usr/bin/env bash
# "Same seed, same receipts" (issue 15): every contract on the cpu backend with the default
# seed, the serve-gate ci fixture and the kv-gate ci fixture (q4), run by two builds of
# tf-cuda-test; each pair of receipts compared with `tf-cuda-test diff`.
#   reports/layout/same-seed.sh BEFORE_BIN AFTER_BIN WORKDIR > reports/layout/same-seed-diff.md
# Exit 0 when no diff finds a regression, no gate count, worst ratio or number differs, and
# receipt_fields.py finds the same keys and values (wall times and speeds aside).
set -uo pipefail
before=$1 after=$2 work=$3
before=$(realpath "$before") after=$(realpath "$after")
mkdir -p "$work" && work=$(realpath "$work")
cd "$(dirname "$0")/../.."  # fixture paths as CTest gives them: relative to the root
for side in before after; do
  bin=${!side}
  [ -s "$work/$side/contracts/fp8-rows.json" ] ||
    "$bin" kernel-contract --backend cpu --quiet --out-dir "$work/$side/contracts" > "$work/$side.contracts.log" 2>&1
  [ -s "$work/$side/serve-ci.json" ] ||
    "$bin" serve-gate fixtures/serve/ci.json --backend cpu --out "$work/$side/serve-ci.json" > "$work/$side.serve.log" 2>&1
  [ -s "$work/$side/kv-ci-q4.json" ] ||
    "$bin" kv-gate fixtures/kv/ci.json --format q4 --backend cpu --bf16-cache "$work/$side/kvcache" \
      --out "$work/$side/kv-ci-q4.json" > "$work/$side.kv.log" 2>&1
done
status=0
for f in $(cd "$work/before" && ls contracts/*.json serve-ci.json kv-ci-q4.json); do
  echo "## $f"
  echo
  out=$("$after" diff "$work/before/$f" "$work/after/$f"); rc=$?
  # What must not move: gate statuses and counts, worst ratios, controls, numbers. The
  # diff lists a row per gate and control (unchanged ones too); a change shows in the
  # last column ("change") or as a numbers row.
  echo "$out" | grep -v '^- base: \|^- head: '
  echo
  [ $rc -eq 0 ] || status=1
  # Field by field (reports/layout/receipt_fields.py): the same keys, the same values but
  # for wall times, provenance and measured speeds.
  python3 reports/layout/receipt_fields.py "$work/before/$f" "$work/after/$f" || status=1
  # numbers: every row of the changed-numbers table is a difference, except wall-clock
  # speeds (decode_tok_s, time_to_first_token_*_s), which move from run to run.
  echo "$out" | awk '/^\| number \| base \| head \|/ {t=1; next} t && /^\|---/ {next} t && /^\|/ {split($0, c, "|"); k=c[2]; gsub(/ /, "", k); if (k !~ /(tok_s|_s)$/) bad=1; next} {t=0} END {exit bad}' || status=1
  echo "$out" | grep -qE '^\|.* -> ' && status=1
  echo "$out" | awk -F'|' '/^\| .* \| (ok|FAIL|skipped|not run|red|GREEN) \|/ && $(NF-1) !~ /^ *$/ {bad=1} END {exit bad}' || status=1
done
echo "result: $([ $status -eq 0 ] && echo 'same gates, counts, worst ratios and numbers' || echo 'DIFFERENT (see above)')"
exit $status
