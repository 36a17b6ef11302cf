#!/usr/bin/env python3
"""Mutation sweep: unplanted single-site mutants against the suite, one at a time.

The planted bugs (KC_PLANT_*, CMake's kc_add_mutant) prove that the contracts catch the bugs
someone thought of. This sweep asks the other question: for small edits nobody planted (an
off-by-one, a rounding mode, a dropped barrier), does some test go red? Each mutant is one
exact-text replacement in one source file:

  {"id": "q4-scale-rz", "file": "kernels/codecs/q4.h", "old": "...", "new": "...",
   "why": "...", "expect": ["q4-rows", "gtest:kc_q4_tests:*"]}

For each mutant the sweep checks that `old` occurs exactly once, writes the edit, rebuilds
the binaries its checks need (ninja in --build), runs the checks in order until one is red,
and restores the file (also on error or Ctrl-C). A mutant is

  caught       a check went red (a contract's gate failed or the backend erred; a test
               binary or command exited nonzero, a crash included);
  survived     every check ran green;
  build-error  the edit does not compile (not a result: fix the mutant);
  not-applied  `old` is not in the file exactly once.

Checks (the mutant's "expect" first, then --then, each run once):
  NAME                 a contract (fp8-rows, q4-rows, ...): tf-cuda-test NAME --backend B
                       --gates-only --quiet, for each backend of --backends; red when it exits 1
                       naming a failed gate or errors (what CTest's cpu mutant tests accept)
  contracts            every contract, as above
  serve-gate           tf-cuda-test serve-gate fixtures/serve/ci.json --backend B: red on exit != 0
  gtest:BIN[:FILTER]   tests/BIN --gtest_filter=FILTER: red on exit != 0
  ctest:REGEX          ctest -R REGEX in --build: red on exit != 0
  sanitize:TOOL:CONTRACT[:FILTER]
                       compute-sanitizer --tool TOOL (memcheck, racecheck, synccheck, initcheck)
                       --error-exitcode 99 over tf-cuda-test CONTRACT --backend cuda --gates-only
                       --quiet [--filter FILTER] (the contract's default cases): red when the
                       sanitizer reports (exit 99) or a gate fails; a defect that only a
                       sanitizer sees (a dropped barrier whose race the timing hides). Runs only
                       where --backends has cuda (otherwise not run, never red); $KC_SANITIZER
                       names the sanitizer (default compute-sanitizer on PATH)
A check name other than these (in a mutant's "expect" or in --then: a contract, a test
binary or a sanitizer tool that does not exist) is bad input, refused before anything is built.
The receipt (--out) lists every mutant with its status, the check that caught it and each
check's exit code and seconds. A sweep cut short (Ctrl-C, SIGTERM) restores the file, rebuilds
as at the end, and writes a receipt with "interrupted": true and the ids of the mutants it did
not finish ("not_run"). Exit 0 when every mutant ran and none survived, 1 when one survived, 2 on
bad input (refused before any build: a mutants file, a check name, an option, an --out whose
folder is missing or not writable) or when the final rebuild from the restored sources failed,
130 when interrupted.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
LOCK = ".mutation-sweep-active"  # in --root while a file there is mutated
CONTRACTS = ["fp8-rows", "q4-rows", "mxfp4-rows", "scale-planes", "rows-invariant", "arena-offsets", "qwen-pages"]
GTESTS = ["kc_unit_tests", "kc_q4_tests", "kc_mxfp4_tests", "kc_pack_tests", "kc_engine_tests", "kc_contract_tests",
          "kc_device_tests", "kc_receipt_view_tests", "kc_review_tools_tests"]


def fail(msg):
    print(f"mutation_sweep: {msg}", file=sys.stderr)
    sys.exit(2)


def check_error(name):
    """Why `name` is not a check this sweep knows, or None."""
    if name in CONTRACTS or name in ("contracts", "serve-gate"):
        return None
    if name.startswith("gtest:"):
        binary = name.split(":", 2)[1]
        return None if binary in GTESTS else f"no test binary '{binary}' (known: {', '.join(GTESTS)})"
    if name.startswith("ctest:"):
        return None if name[6:] else "ctest: without a REGEX"
    if name.startswith("sanitize:"):
        parts = name.split(":", 3)
        if len(parts) < 3 or parts[1] not in SANITIZER_TOOLS or parts[2] not in CONTRACTS:
            return f"not sanitize:TOOL:CONTRACT[:FILTER] with TOOL one of {', '.join(SANITIZER_TOOLS)}"
        return None
    return "not a contract, contracts, serve-gate, gtest:BIN[:FILTER], ctest:REGEX or sanitize:TOOL:CONTRACT[:FILTER]"


def load_mutants(path, root):
    try:
        with open(path) as f:
            ms = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{path}: {e}")
    if not isinstance(ms, list):
        fail(f"{path}: the top level is not a list")
    seen = set()
    for i, m in enumerate(ms):
        if not isinstance(m, dict):
            fail(f"{path}: mutant {i}: not an object")
        for k in ("id", "file", "old", "new"):
            if not isinstance(m.get(k), str) or not m[k]:
                fail(f"{path}: mutant {i}: field '{k}' missing or not a non-empty string")
        if m["id"] in seen:
            fail(f"{path}: mutant {i}: id '{m['id']}' repeated")
        seen.add(m["id"])
        if m["old"] == m["new"]:
            fail(f"{path}: mutant '{m['id']}': 'new' equals 'old'")
        if not os.path.isfile(os.path.join(root, m["file"])):
            fail(f"{path}: mutant '{m['id']}': file '{m['file']}' does not exist")
        exp = m.get("expect", [])
        if not isinstance(exp, list) or not all(isinstance(x, str) for x in exp):
            fail(f"{path}: mutant '{m['id']}': 'expect' is not a list of strings")
        for x in exp:
            why = check_error(x.strip())
            if why:
                fail(f"{path}: mutant '{m['id']}': expect: unknown check '{x}': {why}")
    return ms


def expand(check):
    """One check name -> the concrete checks it stands for (contracts -> every contract)."""
    if check == "contracts":
        return list(CONTRACTS)
    return [check]


def needed_targets(checks):
    t = {"tools/tf-cuda-test"}
    for c in checks:
        if c.startswith("gtest:"):
            t.add("tests/" + c.split(":")[1])
        elif c.startswith("ctest:"):
            t.add("all")
    return ["all"] if "all" in t else sorted(t)


class Sweep:
    def __init__(self, a):
        self.a = a
        self.root = os.path.abspath(a.root)
        self.build = os.path.abspath(a.build)
        self.tool = os.path.join(self.build, "tools", "tf-cuda-test")
        self.tmp = os.path.abspath(a.work)
        os.makedirs(self.tmp, exist_ok=True)
        self.built = {"tools/tf-cuda-test"}

    def run(self, cmd, timeout, cwd=None):
        t0 = time.time()
        try:
            p = subprocess.run(cmd, cwd=cwd or self.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout, text=True, errors="replace")
            return p.returncode, p.stdout, time.time() - t0
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            return 124, out, time.time() - t0

    def check(self, name, mid):
        """-> list of (label, red, rc, seconds, tail)."""
        res = []
        if name in CONTRACTS:
            for b in self.a.backends.split(","):
                out = os.path.join(self.tmp, f"{mid}.{name}.{b}.json")
                rc, text, s = self.run([self.tool, name, "--backend", b, "--gates-only", "--quiet", "--out", out],
                                       self.a.timeout)
                red = (rc == 1 and ("because gate " in text or "errors (listed in the receipt)" in text)) or rc < 0 \
                    or rc >= 128
                res.append((f"{name}/{b}", red, rc, s, text[-400:]))
                if red:
                    break
        elif name == "serve-gate":
            for b in self.a.backends.split(","):
                out = os.path.join(self.tmp, f"{mid}.serve.{b}.json")
                rc, text, s = self.run([self.tool, "serve-gate", "fixtures/serve/ci.json", "--backend", b, "--out", out],
                                       self.a.timeout)
                res.append((f"serve-gate/{b}", rc != 0, rc, s, text[-400:]))
                if rc != 0:
                    break
        elif name.startswith("gtest:"):
            parts = name.split(":", 2)
            if parts[1] not in GTESTS:
                return [(name, False, -1, 0.0, "unknown test binary")]
            cmd = [os.path.join(self.build, "tests", parts[1]), "--gtest_brief=1"]
            if len(parts) > 2 and parts[2]:
                cmd.append("--gtest_filter=" + parts[2])
            rc, text, s = self.run(cmd, self.a.timeout)
            res.append((name, rc != 0, rc, s, text[-400:]))
        elif name.startswith("ctest:"):
            rc, text, s = self.run(["ctest", "-R", name[6:], "-j", str(self.a.jobs), "--output-on-failure"],
                                   self.a.timeout * 4, cwd=self.build)
            res.append((name, rc != 0, rc, s, text[-400:]))
        elif name.startswith("sanitize:"):
            parts = name.split(":", 3)
            if len(parts) < 3 or parts[1] not in SANITIZER_TOOLS or parts[2] not in CONTRACTS:
                return [(name, False, -1, 0.0, "bad check: sanitize:TOOL:CONTRACT[:FILTER]")]
            if "cuda" not in self.a.backends.split(","):
                return [(name, False, -1, 0.0, "not run: the sanitizers need --backends cuda")]
            out = os.path.join(self.tmp, f"{mid}.{parts[1]}.{parts[2]}.json")
            cmd = [os.environ.get("KC_SANITIZER", "compute-sanitizer"), "--tool", parts[1], "--error-exitcode", "99",
                   self.tool, parts[2], "--backend", "cuda", "--gates-only", "--quiet", "--out", out]
            if len(parts) > 3 and parts[3]:
                cmd += ["--filter", parts[3]]
            rc, text, s = self.run(cmd, self.a.timeout)
            red = rc == 99 or (rc == 1 and ("because gate " in text or "errors (listed in the receipt)" in text)) \
                or rc < 0 or rc >= 128
            res.append((name, red, rc, s, text[-400:]))
        else:
            res.append((name, False, -1, 0.0, "unknown check"))
        return res

    def finish(self):
        """The last mutant's objects are still in the build: rebuild from the restored sources so
        that nothing mutated is left behind in --build (or, with --no-final-build, write the
        marker that says so). -> (ninja's exit code, its output)."""
        if not self.a.no_final_build:
            rc, text, _ = self.run(["ninja", "-C", self.build] + sorted(self.built), self.a.build_timeout)
            return rc, text
        if self.built:
            # (session 53: tests run from such a folder after a fresh copy of the sources saw the
            # last mutant's merge.cu object, older sources never rebuilt)
            with open(os.path.join(self.build, "MUTATED-BUILD.txt"), "w") as f:
                f.write("tools/mutation_sweep.py --no-final-build left this build's objects from mutated sources "
                        "(targets " + " ".join(sorted(self.built)) + "); rebuild from a clean folder before running "
                        "tests\n")
            print("mutation_sweep: --no-final-build: " + self.build + " keeps mutated objects (MUTATED-BUILD.txt)",
                  file=sys.stderr)
        return 0, ""

    def one(self, m):
        path = os.path.join(self.root, m["file"])
        with open(path, encoding="utf-8") as f:
            orig = f.read()
        rec = {"id": m["id"], "file": m["file"], "why": m.get("why", ""), "expect": m.get("expect", []), "checks": []}
        if orig.count(m["old"]) != 1:
            rec["status"] = "not-applied"
            rec["detail"] = f"'old' occurs {orig.count(m['old'])} times"
            return rec
        plan = []
        for c in m.get("expect", []) + self.a.then.split(","):
            for x in expand(c.strip()):
                if x and x not in plan:
                    plan.append(x)
        lock = os.path.join(self.root, LOCK)
        try:
            # The marker names the mutated file while it differs from its source: a copy of
            # the tree taken now (the GPU machine's) carries it, and run.sh refuses such a copy.
            with open(lock, "w") as f:
                f.write(f"{m['id']} {m['file']}\n")
            with open(path, "w", encoding="utf-8") as f:
                f.write(orig.replace(m["old"], m["new"]))
            t0 = time.time()
            targets = needed_targets(plan)
            self.built.update(targets)
            rc, text, s = self.run(["ninja", "-C", self.build] + targets, self.a.build_timeout)
            rec["build_s"] = round(s, 1)
            if rc != 0:
                rec["status"] = "build-error"
                errs = [l for l in text.splitlines() if "error" in l]
                rec["detail"] = "\n".join(errs[:6])[-800:] or text[-800:]
                return rec
            for c in plan:
                for label, red, crc, cs, tail in self.check(c, m["id"]):
                    rec["checks"].append({"check": label, "red": red, "rc": crc, "seconds": round(cs, 1)})
                    if red:
                        rec["status"] = "caught"
                        rec["caught_by"] = label
                        rec["tail"] = tail
                        return rec
            rec["status"] = "survived"
            return rec
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(orig)
            os.remove(lock)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("mutants", nargs="+", help="JSON file(s) of mutants")
    ap.add_argument("--root", default=".", help="repository root (default .)")
    ap.add_argument("--build", required=True, help="configured build folder (ninja)")
    ap.add_argument("--backends", default="cpu", help="contract backends, comma-separated (cpu, cuda)")
    ap.add_argument("--then", default="", help="checks after each mutant's own, comma-separated")
    ap.add_argument("--only", default="", help="regex on mutant ids")
    ap.add_argument("--no-final-build", action="store_true",
                    help="skip the rebuild from the restored sources at the end (a throwaway build folder: the H200 "
                         "script's copies, where the rebuild cost the call its last minutes). The folder keeps the "
                         "last mutants' objects: never run tests from it afterwards (a later ninja may not rebuild "
                         "them where a fresh copy of the sources is older than the objects); the sweep writes "
                         "MUTATED-BUILD.txt there to say so")
    ap.add_argument("--files", default="", help="regex on the mutated files (e.g. '\\.h$')")
    ap.add_argument("--shard", default="", help="i/n: every n-th selected mutant from the i-th (0-based)")
    ap.add_argument("--list", action="store_true", help="print the selected mutants and exit")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per check (default 300)")
    ap.add_argument("--build-timeout", type=int, default=900, help="seconds per build (default 900)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--work", default="/tmp/kc-mutation-sweep", help="folder for the checks' receipts")
    ap.add_argument("--out", required=True, help="the sweep's receipt (JSON)")
    a = ap.parse_args()
    for b in a.backends.split(","):
        if b not in ("cpu", "cuda"):
            fail(f"--backends: '{b}' is not cpu or cuda")
    for c in a.then.split(","):
        why = check_error(c.strip()) if c.strip() else None
        if why:
            fail(f"--then: unknown check '{c.strip()}': {why}")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if os.path.isdir(a.out):
        fail(f"--out: {a.out} is a folder")
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        fail(f"--out: {out_dir} is not a writable folder")
    if os.path.exists(os.path.join(a.root, LOCK)):
        with open(os.path.join(a.root, LOCK)) as f:
            held = f.read().strip()
        fail(f"{os.path.join(a.root, LOCK)} exists ({held}): another sweep is mutating this tree, or one was killed "
             "before it restored its file (check `git status`, then remove the marker)")
    ms = []
    for p in a.mutants:
        ms += load_mutants(p, a.root)
    for flag, pattern, field in (("--only", a.only, "id"), ("--files", a.files, "file")):
        if pattern:
            try:
                rx = re.compile(pattern)
            except re.error as e:
                fail(f"{flag}: {e}")
            ms = [m for m in ms if rx.search(m[field])]
    if a.shard:
        mm = re.fullmatch(r"(\d+)/(\d+)", a.shard)
        if not mm or int(mm.group(2)) < 1 or int(mm.group(1)) >= int(mm.group(2)):
            fail(f"--shard: '{a.shard}' is not i/n with 0 <= i < n")
        ms = ms[int(mm.group(1))::int(mm.group(2))]
    if not ms:
        fail("no mutant selected")
    if a.list:
        for m in ms:
            print(f"{m['id']:<40} {m['file']}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sw = Sweep(a)
    out = {"schema": "kc-mutation-sweep/1", "backends": a.backends, "then": a.then, "mutants": []}
    t0 = time.time()
    interrupted = False
    try:
        for i, m in enumerate(ms):
            r = sw.one(m)
            out["mutants"].append(r)
            print(f"[{i + 1}/{len(ms)}] {r['status']:<11} {r['id']:<40} {r.get('caught_by', r.get('detail', ''))[:60]}",
                  flush=True)
            with open(a.out + ".part", "w") as f:
                json.dump(out, f, indent=1)
    except KeyboardInterrupt:
        interrupted = True
        print("mutation_sweep: interrupted; the file being mutated was restored", file=sys.stderr)
    finally:
        # Also when the loop fails: no mutated object stays in --build without a rebuild or a marker.
        rc, text = sw.finish()
    out["restored_build"] = None if a.no_final_build else rc == 0
    if interrupted:
        done = {r["id"] for r in out["mutants"]}
        out["interrupted"] = True
        out["not_run"] = [m["id"] for m in ms if m["id"] not in done]
    if rc != 0:
        print("mutation_sweep: the final rebuild from the restored sources failed:\n" + text[-2000:], file=sys.stderr)
    out["seconds"] = round(time.time() - t0, 1)
    st = {}
    for r in out["mutants"]:
        st[r["status"]] = st.get(r["status"], 0) + 1
    if interrupted:
        st["not-run"] = len(out["not_run"])
    out["summary"] = st
    with open(a.out + ".part", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(a.out + ".part", a.out)
    print("summary:", ", ".join(f"{k} {v}" for k, v in sorted(st.items())))
    for r in out["mutants"]:
        if r["status"] == "survived":
            print(f"  survived: {r['id']} ({r['file']}): {r['why']}")
    if out["restored_build"] is False:
        return 2
    if interrupted:
        print(f"mutation_sweep: incomplete: {len(out['not_run'])} of {len(ms)} mutants not run", file=sys.stderr)
        return 130
    return 1 if st.get("survived") else 0


if __name__ == "__main__":
    sys.exit(main())
