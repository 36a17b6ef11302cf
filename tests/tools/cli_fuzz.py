#!/usr/bin/env python3
"""tf-cuda-test's command line under random options and values.

    cli_fuzz.py TOOL [--count N] [--seed S] [--timeout T] [--show K]

N command lines (default 200; seed S, default 1), each a fast base command (a contract on a case
or three on the cpu backend, report and diff of committed receipts, generate on a tiny model,
serve-memory, make-model, make-draft, export, list) with one to four options drawn from its
own and given edge values: 0, -1, 2^31, 2^63, 2^64 and past it, fractions, empty strings,
spaces, shard forms (0/1, 2/1, 1/2^64), folders, devices, a path through a file, and missing
folders (created, as documented): every path written stays inside the run's own temporary
folder; the committed receipts are only read. Each runs in a
fresh folder with a T-second limit (default 30). A defect is:
  - an exit code other than 0, 1 or 2 (a signal, an abort);
  - a sanitizer report, "terminate called" or an uncaught exception on stderr (in a
    KC_SANITIZE_HOST build every undefined behaviour the run reaches is reported);
  - exit 2 with nothing on stderr, or with an --out / --junit file written that was not there.
A run past the limit is counted as slow and listed, not a defect (a large --cases is valid).
Exit 0 with no defect, 1 with any (the first K printed, default 12)."""
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from fixture_fuzz import parse_args  # noqa: E402

INTS = ["0", "1", "2", "3", "7", "64", "65", "256", "65536", "1048576", "2147483647", "2147483648", "4294967296",
        "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616", "-1",
        "-2147483648", "1e3", "0x10", "2.5", "", "abc", " 1", "01", "+1"]
SHARDS = ["1/1", "0/1", "1/0", "2/1", "1/2", "2/2", "3/2", "1/18446744073709551616", "18446744073709551615/18446744073709551615",
          "a/b", "/", "1/", "-1/2", "1/2/3", " 1/2"]
TEXT = ["", "x", " ", "fp8", "q4-rows(", "(.*)", "[", "\\", "case 1", "\xe9"]


def paths(tmp):
    return [os.path.join(tmp, "out.json"), os.path.join(tmp, "new", "deep", "r.json"), "/dev/null", tmp, "",
            os.path.join(tmp, "a b", "c.json"), os.path.join(tmp, "full"), os.path.join(tmp, "afile", "x.json")]


def receipts():
    return [os.path.join(SRC, "reports", p) for p in (
        "cpu/fp8-rows.json", "cpu/qwen-pages.json", "h200/fp8-rows.json", "h200/bench-attention.json",
        "h200/kv-gate-q4.json", "cpu-serve/serve-ci.json", "h200/generate-fixture-cuda.json", "schema/receipt.schema.json")]


def command(rng, tmp, model):
    P, R = paths(tmp), receipts()
    contract = ["fp8-rows", "q4-rows", "mxfp4-rows", "scale-planes", "rows-invariant"]  # qwen-pages: 20 s a case
    kind = rng.choice(["contract"] * 4 + ["report", "diff", "generate", "serve-memory", "make-model", "make-draft",
                                          "export", "list"])
    if kind == "contract":
        base = [rng.choice(contract), "--backend", "cpu", "--quiet", "--cases", rng.choice(["1", "2", "3"])]
        opts = {"--seed": INTS, "--cases": INTS, "--filter": TEXT, "--case": TEXT, "--gates-only": None,
                "--shard": SHARDS, "--out": P, "--junit": P, "--backend": ["cpu", "cuda", "auto", "gpu", ""]}
    elif kind == "report":
        base = ["report"] + rng.sample(R, rng.choice([1, 2]))
        opts = {"--format": ["md", "text", "html", "pdf", ""], "--merge-out": P, "--junit": P}
    elif kind == "diff":
        base = ["diff"] + [rng.choice(R), rng.choice(R)]
        opts = {}
    elif kind == "generate":
        base = ["generate", "--model", model, "--prompt", "import os", "--max-tokens", rng.choice(["1", "4"])]
        opts = {"--max-tokens": ["0", "1", "2", "-1", "", "2147483648"], "--kv-cache": ["bf16", "fp8", "q4", "mxfp4", "fp16", ""],
                "--pages": INTS, "--prompt": TEXT, "--prompt-file": P, "--out": P, "--backend": ["cpu", "cuda", ""]}
    elif kind == "serve-memory":
        base = ["serve-memory", "--preset", "tiny"]
        opts = {"--layers": INTS, "--parallel": INTS, "--context": INTS, "--page": INTS, "--kv-cache": ["bf16", "q4", "x"],
                "--max-tokens": INTS, "--draft-layers": INTS, "--draft-tokens": INTS, "--pool-pages": INTS, "--out": P,
                "--prompts": ["1", "2 3", "0", "-1", "2147483647", "16 16 16 16 16"]}
    elif kind == "make-model":
        base = ["make-model", "--preset", "tiny", "--out", os.path.join(tmp, "mm")]
        opts = {"--layers": INTS, "--seed": INTS, "--preset": ["tiny", "qwen35-27b-attn", "", "x"], "--out": P}
    elif kind == "make-draft":
        base = ["make-draft", "--from", model, "--layers", "1", "--out", os.path.join(tmp, "md")]
        opts = {"--layers": INTS, "--from": P + [model], "--out": P}
    elif kind == "export":
        base = ["export", "qwen-pages", "--out", os.path.join(tmp, "ex"), "--cases", "1"]
        opts = {"--cases": INTS, "--seed": INTS, "--backend": ["cpu", "cuda", ""], "--out": P}
    else:
        base, opts = ["list"], {}
    argv = list(base)
    for name in rng.sample(sorted(opts), min(len(opts), rng.choice([1, 1, 2, 3, 4]))):
        vals = opts[name]
        if vals is None:
            argv.append(name)
        else:
            v = rng.choice(vals)
            if name == "--prompts":
                argv += [name] + v.split()
            else:
                argv += [name, v]
    return argv


def judge(rc, err, written):
    """The defect of one run (None when it is right): written = the --out / --junit files that
    were not there before."""
    if rc not in (0, 1, 2):
        return "exit %d" % rc
    if any(s in err for s in ("runtime error:", "AddressSanitizer", "LeakSanitizer", "terminate called", "what():",
                              "Segmentation fault")):
        return "sanitizer or abort on stderr"
    if rc == 2 and not err.strip():
        return "exit 2 with nothing on stderr"
    if rc == 2 and written:
        return "exit 2 but wrote %s" % written
    return None


def self_check():
    """Each defect kind, fabricated, is reported; right answers are not."""
    cases = [(139, "", [], "exit 139"), (134, "terminate called after throwing", [], "exit 134"),
             (1, "x.cpp:3:5: runtime error: signed integer overflow", [], "sanitizer"),
             (0, "==1==ERROR: AddressSanitizer: heap-buffer-overflow", [], "sanitizer"),
             (2, "", [], "exit 2 with nothing"), (2, "error: --out", ["/t/r.json"], "exit 2 but wrote"),
             (2, "tf-cuda-test: error: --cases 0", [], None), (1, "FAIL codes==reference", [], None), (0, "", [], None)]
    for rc, err, written, want in cases:
        got = judge(rc, err, written)
        if (want is None) != (got is None) or (want and not got.startswith(want)):
            print("self-check failed: exit %d, %r -> %s, wanted %s" % (rc, err, got, want))
            return False
    return True


def main():
    opts, rest = parse_args(sys.argv[1:], {"--count": 200, "--seed": 1, "--timeout": 30, "--show": 12})
    if len(rest) != 1:
        print(__doc__)
        return 2
    tool = os.path.abspath(rest[0])
    if not self_check():
        return 1
    rng = random.Random(opts["--seed"])
    root = tempfile.mkdtemp(prefix="kc-cli-fuzz-")
    defects, slow, tally = [], [], {}
    try:
        model = os.path.join(root, "model")
        subprocess.run([tool, "make-model", "--preset", "tiny", "--layers", "2", "--out", model], check=True,
                       capture_output=True)
        for i in range(opts["--count"]):
            tmp = os.path.join(root, "r%04d" % i)
            os.makedirs(tmp)
            open(os.path.join(tmp, "afile"), "w").close()  # a file where a path wants a folder
            os.makedirs(os.path.join(tmp, "full"))  # a folder that is not empty
            shutil.copy(os.path.join(SRC, "reports", "cpu", "fp8-rows.json"), os.path.join(tmp, "full"))
            argv = command(rng, tmp, model)
            outs = [argv[k + 1] for k in range(len(argv) - 1) if argv[k] in ("--out", "--junit") and argv[k + 1]]
            before = {p: os.path.exists(p) for p in outs}
            try:
                run = subprocess.run([tool] + argv, cwd=tmp, capture_output=True, timeout=opts["--timeout"],
                                     env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
            except subprocess.TimeoutExpired:
                slow.append(argv)
                tally["slow"] = tally.get("slow", 0) + 1
                continue
            err = run.stderr.decode("utf-8", "replace")
            tally[run.returncode] = tally.get(run.returncode, 0) + 1
            why = judge(run.returncode, err, [p for p in outs if not before[p] and os.path.isfile(p)])
            if why:
                defects.append((why, argv, err.strip()[-600:]))
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("cli fuzz: %d command lines (seed %d): %s" % (
        opts["--count"], opts["--seed"], ", ".join("%s %d" % (k if k == "slow" else "exit %s" % k, v)
                                                   for k, v in sorted(tally.items(), key=lambda x: str(x[0])))))
    for argv in slow[:5]:
        print("  slow (past %d s): tf-cuda-test %s" % (opts["--timeout"], " ".join(repr(a) if " " in a or not a else a for a in argv)))
    if not defects:
        print("no defect: every line exited 0, 1 or 2, cleanly, and a refusal said why and wrote nothing")
        return 0
    print("%d defects" % len(defects))
    for why, argv, err in defects[:opts["--show"]]:
        print("- %s: tf-cuda-test %s\n    %s" % (why, " ".join(repr(a) if " " in a or not a else a for a in argv),
                                               err.replace("\n", "\n    ")))
    return 1


if __name__ == "__main__":
    sys.exit(main())
