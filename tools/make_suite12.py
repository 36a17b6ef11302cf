#!/usr/bin/env python3
"""Writes fixtures/serve/suite12.json: the serve-gate suite of issue 17 after the shape of a
known public serving suite (12 prompts: 8 short questions, 4 long filler logs; 96 new
tokens each; --parallel 8 and 4). The text is made here, deterministically (no download,
no third-party text): the questions are written by hand, the logs are synthetic
web-server log lines drawn from a fixed 32-bit LCG. Tokens are bytes (the fixture model is
byte-level); a prompt's token count is its byte count + 1 (the leading <|eos|>).

    python3 tools/make_suite12.py            # rewrites fixtures/serve/suite12.json
    python3 tools/make_suite12.py --check    # exit 1 if the file differs from what it would write

Goldens are kept from the existing file (they are recorded by serve-gate runs, per backend);
any other hand edit of the file is overwritten (--check shows whether there is one). An
existing file that is not JSON is not overwritten (its goldens would be lost).
Exit codes: 0 written or as generated; 1 (--check) the file differs or is missing; 2 bad
arguments (an unknown option: nothing is written) or an existing file that is not JSON."""
import argparse
import json
import os
import sys

QUESTIONS = [  # 10..14 bytes: 11..15 tokens
    "Why async?",
    "What is id?",
    "How to sort?",
    "What is GIL?",
    "What is self?",
    "Is 0.1 exact?",
    "What is PEP 8?",
    "Is None falsy?",
]
LOG_TOKENS = [1201, 2804, 4413, 6003]


def lcg(seed):
    x = seed & 0xFFFFFFFF
    while True:
        x = (1664525 * x + 1013904223) & 0xFFFFFFFF
        yield x >> 8


def filler_log(tokens, seed):
    """A synthetic access log of exactly tokens - 1 bytes, ending in a newline."""
    r = lcg(seed)
    methods = ["GET", "GET", "GET", "POST", "PUT", "DELETE"]
    paths = ["/api/items", "/api/users", "/static/app.js", "/health", "/api/orders", "/login", "/search"]
    codes = [200, 200, 200, 200, 201, 204, 304, 404, 500]
    lines = []
    t = 0
    size = 0
    while size < tokens:
        t += next(r) % 7
        h, m, s = 9 + t // 3600, t // 60 % 60, t % 60
        line = "2026-11-03 %02d:%02d:%02d worker-%d %s %s/%d %d %dms\n" % (
            h, m, s, next(r) % 8, methods[next(r) % len(methods)], paths[next(r) % len(paths)],
            next(r) % 10000, codes[next(r) % len(codes)], 1 + next(r) % 250)
        lines.append(line)
        size += len(line)
    text = "".join(lines)[: tokens - 2] + "\n"
    assert len(text.encode()) == tokens - 1
    return text


def build(old):
    logs = [filler_log(n, 1000 + i) for i, n in enumerate(LOG_TOKENS)]
    q = QUESTIONS
    prompts = [q[0], logs[0], q[1], q[2], logs[1], q[3], q[4], logs[2], q[5], q[6], logs[3], q[7]]
    fx = {
        "$schema": "../schema/serve-fixture.schema.json",
        "name": "serve-suite12",
        "note": ("12 prompts after the shape of a known public serving suite: 8 short questions of 11-15 tokens and "
                 "4 filler logs of 1,201 / 2,804 / 4,413 / 6,003 tokens (tokens = bytes + the leading <|eos|>), 96 new "
                 "tokens each, greedy, --parallel 8 and 4, pages of 256 with and without pages-all, bf16 and fp8. "
                 "Text: made by tools/make_suite12.py (questions written by hand; logs synthetic access-log lines from "
                 "a fixed LCG; no third-party text). Positions past the model's 4,096 (the 6,003-token log) are "
                 "beyond its training: the gates compare exactness, not quality. Goldens are per backend: the cuda "
                 "engine's SwiGLU uses CUDA's expf (rows-invariant holds it to its float64 bound, not to the twin's "
                 "bytes), so after enough tokens a near tie can resolve differently on cpu and cuda. golden.*.cuda: "
                 "the solo arm's token hashes recorded by serve-gate --backend cuda on an H200 at commit c3946fe "
                 "(2026-12-01; reports/h200/serve-suite12-c3946fe.json); no cpu goldens yet (the cpu backend takes "
                 "long on the 6,003-token log: see engine/README.md)."),
        "model": "../models/stdlib-bytes-3m",
        "prompts": prompts,
        "new_tokens": 96,
        "parallel": [8, 4],
        "pages": [256],
        "pages_all": True,
        "pool_pages": 48,
        "context": 6144,
        "prefill_chunk": 256,
        "cache_formats": ["bf16", "fp8"],
        "draft": {"layers": 1, "tokens": 3},
    }
    if old and "golden" in old:
        fx["golden"] = old["golden"]
    return fx


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if the file differs from what would be written, or is missing")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "fixtures", "serve", "suite12.json")
    old, current = None, None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            current = f.read()
        try:
            old = json.loads(current)
        except ValueError as e:
            if not a.check:
                print(f"make_suite12: {path}: not JSON ({e}); not overwritten (its goldens would be lost)",
                      file=sys.stderr)
                return 2
    text = json.dumps(build(old), indent=2, ensure_ascii=False) + "\n"
    if a.check:
        if current is None:
            print(f"suite12.json: missing ({path})")
            return 1
        same = current == text
        print("suite12.json: " + ("as generated" if same else "differs from tools/make_suite12.py's output"))
        return 0 if same else 1
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    print("wrote " + path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
