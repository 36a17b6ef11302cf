#!/bin/sh
# JUnit files against tests/tools/junit.xsd (xmllint from Debian's libxml2-utils), and their
# counts against their test cases (what a schema cannot say): each suite's tests, failures,
# errors and skipped equal its testcases, those with a <failure>, an <error>, a <skipped>.
# A control first: a document without the required attributes must be refused.
# Skipped (exit 77) without xmllint; never passed.
#   junit_check.sh XSD FILE...
xsd=$1
shift
command -v xmllint >/dev/null || { echo "SKIP: xmllint not installed (apt-get install libxml2-utils)"; exit 77; }
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
printf '<?xml version="1.0"?>\n<testsuites><testsuite name="x"><testcase classname="c"/></testsuite></testsuites>\n' >"$d/bad.xml"
if xmllint --noout --schema "$xsd" "$d/bad.xml" 2>/dev/null; then echo "FAIL: control: a testsuite without tests= and a testcase without name= validated"; exit 1; fi
[ $# -gt 0 ] || { echo "FAIL: no JUnit file given"; exit 1; }
for f in "$@"; do
  [ -s "$f" ] || { echo "FAIL: $f: missing or empty"; exit 1; }
  xmllint --noout --schema "$xsd" "$f" || { echo "FAIL: $f does not validate against $xsd"; exit 1; }
  n=$(xmllint --xpath 'count(//testsuite)' "$f")
  i=1
  while [ "$i" -le "$n" ]; do
    s="//testsuite[$i]"
    for pair in "tests:count($s/testcase)" "failures:count($s/testcase[failure])" "errors:count($s/testcase[error])" \
                "skipped:count($s/testcase[skipped])"; do
      attr=${pair%%:*} expr=${pair#*:}
      want=$(xmllint --xpath "$expr" "$f")
      got=$(xmllint --xpath "string($s/@$attr)" "$f")
      [ "$got" = "$want" ] || { echo "FAIL: $f: testsuite $i: $attr=\"$got\" but $want such testcases"; exit 1; }
    done
    i=$((i + 1))
  done
  echo "$f: valid, $n suites, $(xmllint --xpath 'count(//testcase)' "$f") testcases, $(xmllint --xpath 'count(//failure)' "$f") failures"
done
