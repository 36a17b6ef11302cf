#!/usr/bin/env python3
"""Round 3, serve-gate: fixtures at the edges of the schema (cpu backend).

usage: sweep_serve.py TF_CUDA_TEST WORKDIR MODELS_DIR   (MODELS_DIR: made by sweep_generate.py, WORKDIR/ck)
Each fixture runs once (plus --kv-cache variants for a few). Checks: exit code 0 or 1 (2 only where expected),
no gate FAIL and no error on a valid fixture (a green control alone may fail a small fixture: design.md),
the receipt's verdict matches the exit code, a receipt is written on 0/1 and nothing on 2.
Log: WORKDIR/serve.log (one JSON line per command).
"""
import json, os, subprocess, sys, shutil

TF, WD, CK = sys.argv[1], sys.argv[2], sys.argv[3]
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.makedirs(WD, exist_ok=True)
LOG = open(os.path.join(WD, "serve.log"), "w")
N = 0
PROBLEMS, GREEN = [], []

P3 = ["import os\n", "def f(x):\n    return x\n", "class Q:\n"]
BASE = {"name": "x", "model": "", "prompts": P3, "new_tokens": 8, "parallel": 2, "pages": [16, 7], "pages_all": True,
        "pool_pages": 20, "context": 64, "prefill_chunk": 16, "cache_formats": ["bf16"],
        "draft": {"layers": 1, "tokens": 3, "tree": [2, 2]}}

def serve(name, model="base", expect=(0, 1), extra=(), **over):
    global N
    fx = json.loads(json.dumps(BASE)); fx.update(over); fx["name"] = name
    fx["model"] = model if os.path.isabs(model) else os.path.join(CK, model)
    if "draft" in over and "model" in over["draft"] and not os.path.isabs(over["draft"]["model"]):
        fx["draft"]["model"] = os.path.join(CK, over["draft"]["model"])
    d = os.path.join(WD, "fixtures"); os.makedirs(d, exist_ok=True)
    f = os.path.join(d, name + ".json"); json.dump(fx, open(f, "w"), indent=1)
    out = os.path.join(WD, "receipts", name + ".json")
    if os.path.exists(out): os.remove(out)
    N += 1
    try:
        p = subprocess.run([TF, "serve-gate", f, "--backend", "cpu", "--out", out] + list(extra), capture_output=True, timeout=300)
        rc, se = p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, se = "timeout", ""
    LOG.write(json.dumps({"fixture": name, "extra": list(extra), "rc": rc, "stderr": se[-800:]}) + "\n"); LOG.flush()
    if rc not in expect:
        PROBLEMS.append(f"{name}: rc {rc} (want {expect}): {se.strip()[-500:]}"); return None
    if rc == 2:
        if os.path.exists(out): PROBLEMS.append(f"{name}: receipt written on exit 2")
        return None
    if rc not in (0, 1):
        PROBLEMS.append(f"{name}: rc {rc}: {se.strip()[-500:]}"); return None
    r = json.load(open(out))
    if (r["verdict"] == "pass") != (rc == 0): PROBLEMS.append(f"{name}: verdict {r['verdict']} on rc {rc}")
    bad = [g["name"] for g in r["gates"] if g["status"] not in ("ok", "skipped")]
    if bad or r.get("errors"): PROBLEMS.append(f"{name}: gates {bad} errors {r.get('errors')} reasons {r['verdict_reasons']}")
    green = [c["name"] for c in r["controls"] if not c["red"]]
    if green: GREEN.append(f"{name}: green {green}")
    return r

# 1 the baseline and the shape families
serve("base")
serve("one-layer-draft-model", model="one-layer", draft={"model": "base", "tokens": 3, "tree": [2, 2]})
serve("many-prompts", prompts=[f"p{i}: " + "ab" * i for i in range(24)], parallel=[2, 23], pool_pages=200, context=96)
serve("identical-prompts", prompts=["same prompt\n"] * 5, parallel=[2, 4])
serve("one-byte-prompts", prompts=["a", "b", "c"], new_tokens=3)
serve("nul-and-utf8", prompts=["\u0000", "\u00e9\u4e2d\U0001f600", "\u0000\u0000x"])
serve("pages-1", pages=[1], pool_pages=40)
serve("pages-1-2", pages=[1, 2], pool_pages=40)
serve("pages-big", pages=[65536], pool_pages=1)
serve("pages-big-small", pages=[65536, 1], pool_pages=40)
serve("pages-all-false", pages_all=False)
serve("pages-all-false-1", pages=[7, 1], pages_all=False, pool_pages=5)
for P in [5, 6, 7, 8, 9]:  # the longest prompt (24 tokens) + 8 new = 32: around page multiples
    held = (24 + 8 + P - 1) // P
    serve(f"pool-exact-p{P}", pages=[P], pool_pages=held)
    serve(f"pool-exact-p{P}-2", pages=[P, 16], pool_pages=max(held, 2))
serve("pool-one-short", pages=[7], pool_pages=4, expect=(2,))
serve("prompt-page-len", prompts=["a" * 15, "b" * 16, "c" * 17], pages=[16, 17], pool_pages=10, context=64)
serve("prompt-chunk-len", prompts=["a" * 15, "b" * 16, "c" * 31], prefill_chunk=16, context=64)
serve("chunk-1", prefill_chunk=1)
serve("chunk-4096", prefill_chunk=4096)
serve("context-min-minus-1", context=24 + 8 + 6, expect=(2,))  # longest 24 tokens, tree [2,2] = 6 nodes
serve("context-exact", context=24 + 8 + 6 + 1)
serve("new-tokens-3", new_tokens=3)
serve("new-tokens-40", new_tokens=40, context=100, pool_pages=40)
serve("parallel-8-values", prompts=[f"x{i}\n" for i in range(10)], parallel=[2, 3, 4, 5, 6, 7, 8, 9], pool_pages=60)
serve("parallel-desc", prompts=[f"x{i}\n" for i in range(6)], parallel=[5, 2])
serve("draft-tokens-64", draft={"layers": 1, "tokens": 64}, context=24 + 8 + 128 + 1, pool_pages=40)
serve("draft-tokens-1", draft={"layers": 1, "tokens": 1, "tree": [2]})
serve("draft-tree-126", draft={"layers": 1, "tokens": 2, "tree": [2, 2, 2, 2, 2, 2]}, context=24 + 8 + 126 + 1, expect=(2,))
serve("draft-tree-62", draft={"layers": 1, "tokens": 2, "tree": [2, 2, 2, 2, 2]}, context=24 + 8 + 62 + 1)
serve("draft-tree-72", draft={"layers": 1, "tokens": 2, "tree": [8, 8]}, context=24 + 8 + 72 + 1, expect=(2,))
serve("draft-tree-64", draft={"layers": 1, "tokens": 2, "tree": [8, 7]}, context=24 + 8 + 64 + 1)
serve("draft-tree-deep", draft={"layers": 1, "tokens": 2, "tree": [1] * 15 + [2]}, context=24 + 8 + 17 + 1)
serve("draft-tree-default", draft={"layers": 1, "tokens": 5})
serve("draft-longer-than-budget", new_tokens=4, draft={"layers": 1, "tokens": 10, "tree": [3, 3]})
for fmt in ["fp8", "q4", "mxfp4"]:
    serve(f"only-{fmt}", cache_formats=[fmt])
serve("all-formats", cache_formats=["mxfp4", "q4", "fp8", "bf16"])
serve("kv-cache-flag", extra=["--kv-cache", "q4,mxfp4"])
serve("kv-cache-flag-all", extra=["--kv-cache", "bf16,fp8,q4,mxfp4"])
# 2 model families (the checkpoints of sweep_generate.py)
for m in ["gqa1", "mqa32", "kv8", "hd64", "hd128", "hd256", "untied", "partial-half", "partial-tiny", "theta-tiny",
          "theta-huge", "eps-huge", "vocab258", "vocab-big", "bf16", "f16", "hidden-odd", "maxpos-small"]:
    serve(f"model-{m}", model=m, cache_formats=["bf16", "q4"])
for m in ["const-eos", "const-a", "const-258", "shards-3"]:
    serve(f"model-{m}", model=m)
serve("model-const-eos-golden", model="const-eos", golden={"bf16": ["cbf29ce484222325"] * 3})  # FNV-1a of no token
serve("model-const-a-golden-wrong", model="const-a", golden={"bf16": {"cpu": ["0000000000000000"] * 3}})
# a drafter of another shape (only the vocabulary must agree)
serve("draft-other-shape", draft={"model": "hd128", "tokens": 3, "tree": [2, 2]})
serve("draft-more-layers", model="one-layer", draft={"model": "kv8", "tokens": 3, "tree": [2, 2]})
serve("draft-is-target", draft={"model": "base", "tokens": 3, "tree": [2, 2]})
serve("draft-vocab-differs", draft={"model": "vocab-big", "tokens": 3}, expect=(2,))
serve("draft-layers-too-many", draft={"layers": 2, "tokens": 3}, expect=(2,))
# 3 the trained model: short fixtures
real = os.path.join(REPO, "fixtures", "models", "stdlib-bytes-3m")
serve("real-identical", model=real, prompts=["def __init__(self):\n"] * 3, new_tokens=12, context=64, pool_pages=20)
serve("real-pages-1", model=real, pages=[1, 3], pool_pages=60, new_tokens=12, context=64, cache_formats=["fp8"])
serve("real-draft-self", model=real, draft={"model": real, "tokens": 4, "tree": [3, 2]}, new_tokens=12, context=64)

print(json.dumps({"serve-gate": N})); print(f"{len(PROBLEMS)} problems")
for p in PROBLEMS: print(" -", p)
print(f"{len(GREEN)} fixtures with a green control (failing, as designed for a too-small fixture):")
for g in GREEN: print(" -", g)
