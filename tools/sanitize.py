#!/usr/bin/env python3
"""Runs compute-sanitizer's four tools over every contract and the engine's gates, one receipt.

    tools/sanitize.py [--bin build/tools/tf-cuda-test] [--out reports/h200/sanitize.json]
                      [--logs DIR] [--tools memcheck,racecheck,...] [--runs a,b]
                      [--plant-bin DIR] [--seed S] [--jobs N] [--resume RECEIPT] [--dry-run]

Run on the GPU machine from the repository root, on a build with the cuda backend. Each
(tool, run) pair is one gate of the receipt: it is ok only when the sanitizer printed its
summary, found nothing (0 errors; racecheck: 0 hazards), and the contract itself passed on
the same cases. A sanitizer that finds something fails the receipt (exit 1), as does a
contract that fails under it. Cases are reduced (a tool slows a run 10x to 100x); each
contract's controls run in full in every run, since they are part of the contract.

Controls: binaries with a planted device-side defect that only a sanitizer can see (the
contract stays green on them). Each must make its tool report at least one finding; a
control that stays clean means the tool, its options or this script's reading of its
summary is blind, and fails the receipt. Each of the four tools has one. They are the targets tf-cuda-test-plant-NAME built
by kc_add_sanitizer_plant (kernels/attention/CMakeLists.txt), looked up in --plant-bin
(default: the folder of --bin); a missing one fails the receipt.

A receipt in which no sanitizer run ended (every gate skipped: the binary lacks the runs'
contracts, or the tools do not take the runs) is not a pass: nothing was sanitized.

Exit codes: 0 all clean and every control red, 1 a finding, a failed contract, a green
control or nothing sanitized, 2 bad arguments (an empty --tools among them) or no binary,
or a --bin whose --help lists none of the runs' contracts (not tf-cuda-test).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time

TOOLS = ["memcheck", "racecheck", "synccheck", "initcheck"]

# (run label, contract, extra arguments). The mma run selects the cases that take the
# tensor-core partials (d 128 and 256, bf16, fp8 and q4), where shared memory is busiest.
# qwen-pages' 51 probes (fixed cases with shaped inputs, `probe=` in their case line) run in
# every qwen-pages run whatever --cases says; they have a run of their own, and the other
# qwen-pages runs and the controls leave them out (under racecheck they doubled a run's time).
NO_PROBES = r"^(?!.*probe=)"
RUNS = [
    ("fp8-rows", "fp8-rows", ["--cases", "4"]),
    ("q4-rows", "q4-rows", ["--cases", "4"]),
    ("mxfp4-rows", "mxfp4-rows", ["--cases", "4"]),
    ("scale-planes", "scale-planes", ["--cases", "4"]),
    ("qwen-pages", "qwen-pages", ["--cases", "8", "--filter", NO_PROBES]),
    ("qwen-pages-mma", "qwen-pages", ["--cases", "24", "--filter", NO_PROBES + r".*d(128|256)(-r64)?,fmt=(bf16|fp8|q4)"]),
    ("qwen-pages-probes", "qwen-pages", ["--cases", "1", "--filter", r"probe="]),
    ("rows-invariant", "rows-invariant", ["--cases", "4"]),
    ("arena-offsets", "arena-offsets", ["--cases", "1"]),
    # The engine on the device-resident backend (streams, the page pool, fills, pack / unpack of
    # a resumed prompt, the drafter's cache): the serve gate's ci fixture in four cache formats,
    # and the kv gate's ci fixture (its bf16 arm computed afresh in a folder of the run's own, then
    # fp8, which passes the fixture's bar; q4 fails it on this model, as designed).
    # {src} is the repository root, {tmp} a folder of the run's own. They take no --seed / --quiet.
    ("serve-gate", "serve-gate", ["{src}/fixtures/serve/ci.json", "--kv-cache", "bf16,fp8,q4,mxfp4"]),
    ("kv-gate", "kv-gate", ["{src}/fixtures/kv/ci.json", "--format", "fp8", "--bf16-cache", "{tmp}/kvc"]),
]
# Runs left out unless --runs names them: arena-offsets' 4.3 GB arena makes every tool's run
# long, so it gets a receipt of its own (--runs arena-offsets --out .../sanitize-arena-offsets.json).
NOT_BY_DEFAULT = {"arena-offsets"}
# Runs a tool does not take, with the reason (the gate is recorded as skipped, never as clean).
# racecheck: the serve gate ran past 200 s under it on the H200 twice (the ci fixture in bf16 and
# a 3-prompt x 4-token cut of it), against 82-89 s for the ci fixture in four formats under the other
# three tools: racecheck's cost grows with the launches, thousands here. The shared-memory kernels
# these gates launch have racecheck runs of their own: the engine kernels in rows-invariant, every
# attention, rope-store and keep kernel in qwen-pages.
NOT_UNDER = {
    "serve-gate": {"racecheck": "racecheck ran past 200 s on the serve gate (H200, session 32); its kernels are "
                                "racechecked by rows-invariant (engine) and qwen-pages (attention, rope store, keep)"},
    "kv-gate": {"racecheck": "racecheck is not run on the fixture gates (see serve-gate); its kernels are "
                             "racechecked by rows-invariant and qwen-pages"},
}
# The gates that replay a fixture: no --seed or --quiet option (their inputs are the fixture's).
FIXTURE_GATES = {"serve-gate", "kv-gate"}
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (control name, plant target, tool, contract arguments, description)
CONTROLS = [
    ("merge-barrier-dropped", "merge-no-barrier", "racecheck", ["qwen-pages", "--cases", "4", "--filter", NO_PROBES],
     "the merge kernel's barrier after staging a tile of chunk maxima and sums in shared memory is removed "
     "(a read-after-write hazard on shared memory)"),
    ("merge-reads-past-end", "merge-read-past-end", "memcheck", ["qwen-pages", "--cases", "4", "--filter", NO_PROBES],
     "the merge kernel also reads the first partial sum of the next (row, head), past the buffer's end on the "
     "last one"),
    ("merge-barrier-two-sites", "merge-barrier-two-sites", "synccheck",
     ["qwen-pages", "--cases", "4", "--filter", NO_PROBES],
     "the merge kernel's first block barrier is met at two bar.sync instructions (the first warp at one, the other "
     "warps at another): an aligned barrier reached from divergent code, an error the hardware may let pass"),
    ("merge-reads-unwritten", "merge-read-unwritten", "initcheck", ["qwen-pages", "--cases", "4", "--filter", NO_PROBES],
     "after every merge, a kernel reads a device buffer that nothing ever writes"),
]

SUMMARY = {
    "racecheck": re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)"),
    "default": re.compile(r"ERROR SUMMARY: (\d+) errors?"),
}


def parse_findings(tool, text):
    """The sanitizer's own count of findings, or None when it printed no summary (crash,
    timeout, wrong tool): a run without a summary is never read as clean."""
    rx = SUMMARY["racecheck"] if tool == "racecheck" else SUMMARY["default"]
    found = rx.findall(text)
    if not found:
        return None
    last = found[-1]
    return int(last[0]) if isinstance(last, tuple) else int(last)


def run_one(cmd, log_path, dry):
    if dry:
        print("would run:", " ".join(shlex.quote(c) for c in cmd))
        return 0, "", 0.0
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    with open(log_path, errors="replace") as log:
        text = log.read()
    return p.returncode, text, time.monotonic() - t0


def available_contracts(binary):
    p = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/tools/tf-cuda-test")
    ap.add_argument("--out", default="reports/h200/sanitize.json")
    ap.add_argument("--logs", default=None, help="folder of the per-run logs (default: beside --out, sanitize-logs/)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--runs", default=None, help="comma-separated run labels (default: all that the binary has)")
    ap.add_argument("--plant-bin", default=None)
    ap.add_argument("--sanitizer", default="compute-sanitizer")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--jobs", type=int, default=1,
                    help="sanitizer runs at once (default 1); the GPU and the host's cores take several, and the "
                         "receipt lists the runs in the same order whatever order they end in. racecheck's runs and "
                         "control go one at a time after the others, with nothing beside them (racecheck slows "
                         "several times beside other runs)")
    ap.add_argument("--resume", default=None, metavar="RECEIPT",
                    help="a receipt this script wrote (often one cut short, its verdict naming 'incomplete'): its "
                         "ended runs and controls are kept as they are and only the others run. Its seed must be "
                         "--seed, and the binary must report the commit and device it names (the receipt fails "
                         "otherwise); timings.total_s adds its time")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing, write nothing")
    ap.add_argument("--skip-controls", action="store_true",
                    help="run no control (for a second receipt of extra runs; the controls are in the main one)")
    a = ap.parse_args()

    tools = [t for t in a.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    if not tools:
        print(f"sanitize: --tools: {a.tools!r} names no tool (known: {', '.join(TOOLS)})", file=sys.stderr)
        return 2
    if bad:
        print(f"sanitize: --tools: unknown tool {bad[0]!r} (known: {', '.join(TOOLS)})", file=sys.stderr)
        return 2
    if not a.seed.isdigit() or int(a.seed) >= 2**64:
        print(f"sanitize: --seed: {a.seed!r} is not an integer 0..2^64-1", file=sys.stderr)
        return 2
    if a.jobs < 1 or a.jobs > 64:
        print(f"sanitize: --jobs: {a.jobs} is not in 1..64", file=sys.stderr)
        return 2
    resumed = None
    if a.resume:
        try:
            with open(a.resume) as f:
                resumed = json.load(f)
            if not isinstance(resumed, dict) or resumed.get("name") != "sanitize" or not isinstance(
                    resumed.get("gates"), list) or not isinstance(resumed.get("controls"), list):
                raise ValueError("not a receipt of tools/sanitize.py (name sanitize, gates and controls)")
            if str(resumed.get("seed")) != a.seed:
                raise ValueError(f"its seed is {resumed.get('seed')}, --seed is {a.seed}")
        except (OSError, ValueError) as e:
            print(f"sanitize: --resume: {a.resume}: {e}", file=sys.stderr)
            return 2
    if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
        print(f"sanitize: {a.bin}: no such executable (build tf-cuda-test with the cuda backend first)", file=sys.stderr)
        return 2
    helptext = "" if a.dry_run else available_contracts(a.bin)
    runs = [r for r in RUNS if r[0] not in NOT_BY_DEFAULT]
    if a.runs:
        wanted = a.runs.split(",")
        unknown = [w for w in wanted if w not in [r[0] for r in RUNS]]
        if unknown:
            print(f"sanitize: --runs: unknown run {unknown[0]!r}", file=sys.stderr)
            return 2
        runs = [r for r in RUNS if r[0] in wanted]
    listed = [r[1] for r in runs if re.search(r"^\s+" + re.escape(r[1]) + r"\b", helptext, re.M)]
    if not a.dry_run and not listed:
        print(f"sanitize: --bin: {a.bin}'s --help lists none of the runs' contracts "
              f"({', '.join(sorted({r[1] for r in runs}))}): not tf-cuda-test?", file=sys.stderr)
        return 2
    logs = a.logs or os.path.join(os.path.dirname(os.path.abspath(a.out)), "sanitize-logs")
    plant_bin = a.plant_bin or os.path.dirname(os.path.abspath(a.bin))
    if not a.dry_run:
        os.makedirs(logs, exist_ok=True)
    sub_receipts = tempfile.mkdtemp(prefix="kc-sanitize-")

    t_start = time.monotonic()
    reasons, errors = [], []
    found = {"device": {"name": "unknown"}, "git": {"commit": "unknown", "dirty": True}}
    # Results by task index: the receipt lists gates and controls in task order, whatever the
    # order the runs end in (--jobs).
    gate_at, control_at, reason_at = {}, {}, {}
    lock = threading.Lock()

    def write_receipt(final):
        if resumed is not None and found.get("new"):
            for key in ("git", "device"):  # kept runs and new ones must be of one binary on one device
                if found[key] != resumed.get(key):
                    why = f"--resume: {a.resume} names {key} {resumed.get(key)}, this run's binary {found[key]}"
                    if why not in errors:
                        errors.append(why)
        why = list(reasons) + [reason_at[k] for k in sorted(reason_at)]
        if not final:
            why.append("incomplete: written after each run; the script had not finished every run and control")
        gates = [gate_at[k] for k in sorted(gate_at)]
        if final and not any(g.get("status") in ("ok", "FAIL") for g in gates):
            why.append("nothing sanitized: no sanitizer run ended (every gate skipped)")
        controls = [control_at[k] for k in sorted(control_at)]
        receipt = {
            "schema": "kernel-contracts/receipt/1", "kind": "contract", "name": "sanitize",
            "verdict": "fail" if why or errors else "pass", "verdict_reasons": why,
            "backend": "cuda", "device": found["device"], "git": found["git"], "seed": int(a.seed), "argv": sys.argv,
            "gates": gates, "controls": controls, "errors": errors,
            "numbers": {"findings": sum(g.get("findings") or 0 for g in gates),
                        "runs": sum(1 for g in gates if g.get("status") in ("ok", "FAIL"))},
            "timings": {"total_s": time.monotonic() - t_start + prior_s, "jobs": a.jobs},
        }
        # The binary's build id, as its contract runs' receipts name it (build.id: a rebuild of the
        # commit has another); a resumed receipt's runs kept from another build say which.
        if found.get("build"):
            receipt["build"] = found["build"]
        if resumed is not None:
            receipt["resumed_from"] = {"path": a.resume, "gates_kept": kept[0], "controls_kept": kept[1],
                                       "total_s": prior_s}
            if resumed.get("build") and resumed.get("build") != found.get("build"):
                receipt["resumed_from"]["build"] = resumed["build"]
        tmp = a.out + ".tmp"
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(receipt, f, indent=1)
            f.write("\n")
        os.replace(tmp, a.out)
        return receipt

    def run_gate(idx, tool, label, contract, extra):
        name = f"{tool}:{label}"
        gate = {"name": name, "description": f"compute-sanitizer --tool {tool} over {contract} " + " ".join(extra),
                "ok": False, "passed": 0, "failed": 0, "skipped": 0, "total": 1}
        if not a.dry_run and not re.search(r"^\s+" + re.escape(contract) + r"\b", helptext, re.M):
            gate.update(skipped=1, status="skipped", ok=True, skip_reason=f"this build has no contract {contract}")
            with lock:
                gate_at[idx] = gate
            return
        if tool in NOT_UNDER.get(label, {}):
            gate.update(skipped=1, status="skipped", ok=True, skip_reason=NOT_UNDER[label][tool])
            with lock:
                gate_at[idx] = gate
            return
        rec = os.path.join(sub_receipts, f"{tool}.{label}.json")
        own = os.path.join(sub_receipts, f"{tool}.{label}")
        extra = [e.replace("{src}", SRC).replace("{tmp}", own) for e in extra]
        cmd = [a.sanitizer, "--tool", tool, "--error-exitcode", "99", a.bin, contract, "--backend", "cuda"]
        cmd += ([] if contract in FIXTURE_GATES else ["--seed", a.seed, "--quiet"]) + ["--out", rec] + extra
        rc, text, secs = run_one(cmd, os.path.join(logs, f"{tool}.{label}.log"), a.dry_run)
        gate["command"] = " ".join(shlex.quote(c) for c in cmd[:-len(extra) - 2]) + " " + " ".join(
            shlex.quote(c) for c in extra)
        gate["time_s"] = secs
        if a.dry_run:
            return
        findings = parse_findings(tool, text)
        verdict, sub = None, None
        try:
            with open(rec) as f:
                sub = json.load(f)
            verdict = sub.get("verdict")
            gate["cases"] = sub.get("cases", {}).get("run")
        except (OSError, ValueError):
            pass
        gate["findings"] = findings
        gate["exit_code"] = rc
        gate["contract_verdict"] = verdict
        why = None
        if findings is None:
            why = f"{name}: no {tool} summary in the output (exit {rc}); see {tool}.{label}.log"
        elif findings > 0:
            why = f"{name}: {findings} finding(s); see {tool}.{label}.log"
        elif verdict != "pass":
            why = f"{name}: the contract's verdict under the sanitizer is {verdict} (exit {rc})"
        elif rc != 0:
            why = f"{name}: exit {rc} with no finding counted"
        if why:
            gate.update(failed=1, status="FAIL", failures=[why])
        else:
            gate.update(passed=1, ok=True, status="ok")
        with lock:
            if sub is not None:
                found["device"] = sub.get("device", found["device"])
                found["git"] = sub.get("git", found["git"])
                if sub.get("build"):
                    found["build"] = sub["build"]
                found["new"] = True  # this run's binary named its commit and device
            gate_at[idx] = gate
            if why:
                reason_at[idx] = why
            write_receipt(False)
            print(f"{name:34s} {gate.get('status', '?'):7s} findings={findings} contract={verdict} {secs:6.1f}s",
                  flush=True)

    def run_control(idx, cname, plant, tool, args, desc):
        exe = os.path.join(plant_bin, f"tf-cuda-test-plant-{plant}")
        ctl = {"name": cname, "description": f"{desc}; must be found by {tool}", "red": False, "caught_by": []}
        if not a.dry_run and not os.path.isfile(exe):
            why = f"control {cname}: {exe} not built (target tf-cuda-test-plant-{plant})"
            ctl["errors"] = [why]
            with lock:
                reason_at[idx] = why
                control_at[idx] = ctl
            return
        cmd = [a.sanitizer, "--tool", tool, "--error-exitcode", "99", exe] + args[:1] + [
            "--backend", "cuda", "--seed", a.seed, "--quiet"] + args[1:]
        rc, text, secs = run_one(cmd, os.path.join(logs, f"control.{cname}.log"), a.dry_run)
        if a.dry_run:
            return
        findings = parse_findings(tool, text)
        ctl.update(time_s=secs, findings=findings, exit_code=rc)
        why = None
        if findings and findings > 0:
            ctl.update(red=True, caught_by=[tool])
        else:
            why = f"control {cname}: {tool} reported {findings} findings on a planted defect (green: the gate is blind)"
        with lock:
            if why:
                reason_at[idx] = why
            control_at[idx] = ctl
            write_receipt(False)
            print(f"control {cname:26s} {'red' if ctl['red'] else 'GREEN'} findings={findings} {secs:6.1f}s",
                  flush=True)

    # Tasks in receipt order: every (tool, run), then the controls. A dry run prints in this order.
    tasks = [(run_gate, (tool,) + r) for tool in tools for r in runs]
    tasks += [(run_control, c) for c in ([] if a.skip_controls else CONTROLS) if c[2] in tools]
    # --resume: the ended gates and controls of the receipt keep their place and result; the
    # rest run. An ended gate has status ok or FAIL (skipped ones run again: the binary may now
    # have the contract); an ended control has its time.
    prior_s, kept = 0.0, [0, 0]
    if resumed is not None:
        old_gates = {g.get("name"): g for g in resumed["gates"] if g.get("status") in ("ok", "FAIL")}
        old_ctls = {c.get("name"): c for c in resumed["controls"] if "time_s" in c}
        prior_s = float((resumed.get("timings") or {}).get("total_s") or 0.0)
        found["device"], found["git"] = resumed.get("device", found["device"]), resumed.get("git", found["git"])
        if resumed.get("build"):
            found["build"] = resumed["build"]
        todo = []
        for i, (fn, args) in enumerate(tasks):
            if fn is run_gate and f"{args[0]}:{args[1]}" in old_gates:
                g = old_gates[f"{args[0]}:{args[1]}"]
                gate_at[i] = g
                if g["status"] == "FAIL":
                    reason_at[i] = (g.get("failures") or [f"{g['name']}: failed in {a.resume}"])[0]
                kept[0] += 1
            elif fn is run_control and args[0] in old_ctls:
                c = old_ctls[args[0]]
                control_at[i] = c
                if not c.get("red"):
                    reason_at[i] = f"control {c['name']}: green in {a.resume}"
                kept[1] += 1
            else:
                todo.append(i)
        # The resumed receipt's failures stand: a kept run of another commit stays an error.
        errors.extend(e for e in resumed.get("errors", []) if isinstance(e, str) and e not in errors)
        print(f"sanitize: --resume {a.resume}: {kept[0]} runs and {kept[1]} controls kept, {len(todo)} to run",
              flush=True)
    else:
        todo = list(range(len(tasks)))
    if resumed is not None and not a.dry_run and not any(tasks[i][0] is run_gate for i in todo):
        # No gate runs, so no run names the binary's commit: a one-case cpu run of the smallest
        # contract does (the controls' plants are built with it). The device stays unchecked.
        probe = os.path.join(sub_receipts, "commit-probe.json")
        subprocess.run([a.bin, "rows-invariant", "--backend", "cpu", "--cases", "1", "--gates-only", "--quiet",
                        "--out", probe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        try:
            with open(probe) as f:
                git = json.load(f).get("git")
        except (OSError, ValueError):
            git = None
        if git != resumed.get("git"):
            errors.append(f"--resume: {a.resume} names git {resumed.get('git')}, this binary {git}"
                          if git else f"--resume: {a.bin} wrote no receipt naming its commit (rows-invariant on cpu)")
    tasks = [(fn, args) if i in todo else None for i, (fn, args) in enumerate(tasks)]
    if a.dry_run or a.jobs == 1:
        for i, t in enumerate(tasks):
            if t is None:
                continue
            fn, args = t
            fn(i, *args)
    else:
        # racecheck runs alone, after the others: beside other runs it slowed by 4x (fp8-rows: 135 s
        # among 8 jobs, 33 s alone on the H200), where memcheck, synccheck and initcheck lost little.
        def tool_of(fn, args):
            return args[0] if fn is run_gate else args[2]
        live = [(i, t[0], t[1]) for i, t in enumerate(tasks) if t is not None]
        shared = [(i, fn, args) for i, fn, args in live if tool_of(fn, args) != "racecheck"]
        alone = [(i, fn, args) for i, fn, args in live if tool_of(fn, args) == "racecheck"]
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            for fut in [pool.submit(fn, i, *args) for i, fn, args in shared]:
                fut.result()  # an exception in a task is the script's bug: let it surface
        for i, fn, args in alone:
            fn(i, *args)

    if a.dry_run:
        return 0
    receipt = write_receipt(True)
    print(f"sanitize: {receipt['verdict']}: {receipt['numbers']['runs']} runs "
          f"({len(receipt['gates']) - receipt['numbers']['runs']} skipped), {receipt['numbers']['findings']} findings, "
          f"{sum(c['red'] for c in receipt['controls'])}/{len(receipt['controls'])} controls red -> {a.out}")
    return 0 if receipt["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
