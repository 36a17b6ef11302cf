#!/bin/sh
# report --format html in a real browser: the page of reports/h200/bench-attention.json (and
# one of bench-pack + a kv-gate receipt) rendered by headless Chromium must show something
# (a screenshot that is not blank: tests/tools/png_stats.py) and log no console message (a
# script error, a resource that failed to load); the page fetches nothing (no URL, no script).
# Two controls first prove the checks can fail: a planted page with a script error and an
# empty body must be reported blank and noisy. Without Chromium (Debian's package
# `chromium`, installed by tools/kc.sh test) the test is skipped (exit 77), never passed.
#   html_chromium_test.sh TF_CUDA_TEST SOURCE_DIR
tool=$1 src=$2
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIP: chromium not installed (apt-get install chromium; tools/kc.sh test installs it)"
  exit 77
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# shot PAGE PNG LOG: a 1000x1100 screenshot, Chromium's log (console messages included) in LOG.
shot() {
  HOME=$d timeout 60 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --no-first-run --host-resolver-rules='MAP * ~NOTFOUND' --window-size=1000,1100 --screenshot="$2" \
    --enable-logging=stderr --v=0 "file://$1" >"$3" 2>&1
}
# A console line in Chromium's log: ...:INFO:CONSOLE(12)] "message", source: ...
console_lines() { grep ':CONSOLE' "$1"; }

# Controls: the checks must catch a blank page and a script error.
printf '<!DOCTYPE html><html><head><meta charset="utf-8"><title>control</title></head><body><script>planted_error();</script></body></html>\n' >"$d/control.html"
shot "$d/control.html" "$d/control.png" "$d/control.log" || fail "chromium did not render the control page: $(tail -3 "$d/control.log")"
python3 "$src/tests/tools/png_stats.py" "$d/control.png" >"$d/control.stats"
[ $? -eq 1 ] || fail "control: an empty page was not judged blank ($(cat "$d/control.stats"))"
console_lines "$d/control.log" | grep -q 'planted_error' || fail "control: the planted script error was not seen in the console log"
echo "controls red: empty page blank ($(cat "$d/control.stats")), script error seen"

check_page() {  # name, receipts...
  name=$1
  shift
  "$tool" report --format html "$@" >"$d/$name.html"
  rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "$name: report --format html exited $rc"
  grep -q '<svg' "$d/$name.html" || fail "$name: no plot in the page"
  if grep -n '://\|<script\|<link\|<img\|@import' "$d/$name.html" | head -3 | grep .; then fail "$name: the page refers to something outside itself"; fi
  shot "$d/$name.html" "$d/$name.png" "$d/$name.log" || fail "$name: chromium failed: $(tail -3 "$d/$name.log")"
  if console_lines "$d/$name.log"; then fail "$name: console messages (above)"; fi
  python3 "$src/tests/tools/png_stats.py" "$d/$name.png" >"$d/$name.stats" || fail "$name: blank screenshot ($(cat "$d/$name.stats"))"
  echo "$name: $(grep -c '<svg' "$d/$name.html") plots, $(wc -c <"$d/$name.html") bytes, screenshot $(cat "$d/$name.stats"), no console message"
}
check_page bench-attention "$src/reports/h200/bench-attention.json"
check_page pack-kv "$src/reports/h200/bench-pack.json" "$src/reports/h200/kv-gate-long-q4.json"
