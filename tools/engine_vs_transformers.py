#!/usr/bin/env python3
"""The engine's greedy continuations against transformers' (run on the GPU machine).

Reads the continuations written by tools/transformers_greedy.py, replays every prompt with
`tf-cuda-test generate` (one process per prompt, the given backend and cache), and writes
a JSON result: per prompt, whether the two agree token for token, the first differing
step, and transformers' top-1 minus top-2 margin there; n of N equal in all.

  python3 tools/engine_vs_transformers.py GREEDY.json --bin build/tools/tf-cuda-test --backend cuda --out R.json
"""
import argparse
import json
import os
import subprocess
import tempfile


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("greedy")
    p.add_argument("--bin", default="build/tools/tf-cuda-test")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--kv-cache", default="bf16")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    g = json.load(open(a.greedy))
    rows, equal = [], 0
    with tempfile.TemporaryDirectory() as d:
        for i, pr in enumerate(g["prompts"]):
            pf, rf = os.path.join(d, f"p{i}"), os.path.join(d, f"r{i}.json")
            open(pf, "wb").write(bytes.fromhex(pr["prompt_hex"]))
            cmd = [a.bin, "generate", "--model", g["model"], "--prompt-file", pf, "--max-tokens", str(len(pr["tokens"])),
                   "--kv-cache", a.kv_cache, "--backend", a.backend, "--out", rf]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
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
    json.dump(res, open(a.out, "w"), indent=1)
    print(f"engine ({a.backend}, {a.kv_cache} cache) vs transformers fp32: {equal} of {len(rows)} greedy continuations "
          f"equal token for token")


if __name__ == "__main__":
    main()
