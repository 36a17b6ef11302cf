#!/usr/bin/env python3
"""The engine's greedy continuations against transformers' (run on the GPU machine).

Reads the continuations written by tools/transformers_greedy.py, replays every prompt with
`tf-cuda-test generate` (one process per prompt, the given backend and cache), and writes
a JSON result: per prompt, whether the two agree token for token, the first differing
step, and transformers' top-1 minus top-2 margin there; n of N equal in all.

  python3 tools/engine_vs_transformers.py GREEDY.json --bin build/tools/tf-cuda-test --backend cuda --out R.json

Exit 0 written (agreeing or not: the result counts); 1 a generate run failed (its command
named, nothing written); 2 bad input (GREEDY not such a file, --bin not an executable, an
--out whose folder is missing or not writable), one line naming it, before any run.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile


def fail(msg, code=2):
    print(f"engine_vs_transformers: {msg}", file=sys.stderr)
    sys.exit(code)


def read_greedy(path):
    """transformers_greedy.py's file, with the fields this script reads."""
    try:
        with open(path) as f:
            g = json.load(f)
        if not isinstance(g, dict) or not isinstance(g.get("model"), str) or not isinstance(g.get("prompts"), list):
            raise ValueError("not an object with model and prompts (tools/transformers_greedy.py's output)")
        for k in ("torch", "transformers", "device", "precision"):
            if k not in g:
                raise ValueError(f"no {k}")
        for i, pr in enumerate(g["prompts"]):
            if not isinstance(pr, dict) or not all(isinstance(pr.get(k), t) for k, t in (
                    ("path", str), ("prompt_hex", str), ("tokens", list), ("margins", list))) or not pr["margins"]:
                raise ValueError(f"prompt {i}: not an object with path, prompt_hex, tokens and margins")
            try:
                bytes.fromhex(pr["prompt_hex"])
            except ValueError as e:
                raise ValueError(f"prompt {i}: prompt_hex: {e}")
    except (OSError, ValueError) as e:
        fail(f"GREEDY: {path}: {e}")
    return g


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("greedy")
    p.add_argument("--bin", default="build/tools/tf-cuda-test")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--kv-cache", default="bf16")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    g = read_greedy(a.greedy)
    if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
        fail(f"--bin: {a.bin}: no such executable")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if os.path.isdir(a.out) or not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        fail(f"--out: {a.out}: not a file in a writable folder")
    rows, equal = [], 0
    with tempfile.TemporaryDirectory() as d:
        for i, pr in enumerate(g["prompts"]):
            pf, rf = os.path.join(d, f"p{i}"), os.path.join(d, f"r{i}.json")
            open(pf, "wb").write(bytes.fromhex(pr["prompt_hex"]))
            cmd = [a.bin, "generate", "--model", g["model"], "--prompt-file", pf, "--max-tokens", str(len(pr["tokens"])),
                   "--kv-cache", a.kv_cache, "--backend", a.backend, "--out", rf]
            if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
                fail(f"prompt {i} ({pr['path']}): `{shlex.join(cmd)}` failed; nothing written", 1)
            rec = json.load(open(rf))
            ours = rec["generate"]["tokens"] if "generate" in rec else rec["tokens"]  # a generate receipt (kind generate)
            theirs = pr["tokens"]
            first = next((k for k in range(min(len(ours), len(theirs))) if ours[k] != theirs[k]),
                         None if len(ours) == len(theirs) else min(len(ours), len(theirs)))
            equal += first is None
            rows.append({"path": pr["path"], "tokens": len(theirs), "equal": first is None, "first_difference": first,
                         "transformers_margin_there": None if first is None or first >= len(pr["margins"])
                         else pr["margins"][first], "min_margin": min(pr["margins"])})
    res = {"kind": "engine-vs-transformers", "note": "plain result file (the receipt schema has no kind for it yet)",
           "backend": a.backend, "kv_cache": a.kv_cache, "equal": equal, "prompts": len(rows),
           "transformers": {k: g[k] for k in ("torch", "transformers", "device", "precision")}, "rows": rows}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"engine ({a.backend}, {a.kv_cache} cache) vs transformers fp32: {equal} of {len(rows)} greedy continuations "
          f"equal token for token")


if __name__ == "__main__":
    sys.exit(main())
