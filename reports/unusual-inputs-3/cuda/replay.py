#!/usr/bin/env python3
"""Round 3 on two backends: rebuilds the inputs of sweep_generate.py, sweep_serve.py and sweep_kv.py,
runs their command lines once with --backend A and once with --backend B from the same binary, and
compares the two sides line by line.

usage: replay.py TF_CUDA_TEST WORKDIR [--a cpu] [--b cuda] [--jobs-a N] [--jobs-b N] [--deadline EPOCH]
                 [--only REGEX] [--every K] [--list]
  --deadline  no line starts after it, and a running one is stopped there (not run / timeout)
  --only      the lines whose id matches (e.g. '^(gen|serve):'), --every K: every K-th of them
  --list      print the lines (id, command line with @BK@ for the backend) and the check against
              round 3's logs, run nothing

A line's id is CMD:NAME (generate: the sweep's note, numbered where a note repeats). Each side writes
under WORKDIR/<side>/; the inputs (checkpoints, fixtures, token and prompt files, make-model and
make-draft output, made once: those commands take no --backend) under WORKDIR/in/.
Output: WORKDIR/results.jsonl (one JSON line per line, written as each finishes), WORKDIR/summary.txt.
Classes: equal; by-design (every difference is one the design allows, named in the line's "why");
finding (a difference the design does not allow, a crash, a timeout, or a round-3 invariant broken on
one side); not-run. Also flagged: side A's exit code against round 3's log (drift).
"""
import argparse, concurrent.futures as cf, hashlib, json, math, os, re, shutil, subprocess, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
R3 = os.path.dirname(HERE)
REPO = os.path.abspath(os.path.join(R3, "..", ".."))
sys.path.insert(0, HERE)
import f64  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("tf"); ap.add_argument("wd")
ap.add_argument("--a", default="cpu"); ap.add_argument("--b", default="cuda")
ap.add_argument("--jobs-a", type=int, default=6); ap.add_argument("--jobs-b", type=int, default=6)
ap.add_argument("--deadline", type=float, default=0.0)
ap.add_argument("--only", default=""); ap.add_argument("--every", type=int, default=1)
ap.add_argument("--list", action="store_true")
A = ap.parse_args()
TF, WD = os.path.abspath(A.tf), os.path.abspath(A.wd)
IN = os.path.join(WD, "in")
CK = os.path.join(IN, "ck")
SIDES = [("a", A.a), ("b", A.b)]
T0 = time.time()
DEADLINE = A.deadline or float("inf")
# The near-tie tolerance: |logit[a] - logit[b]| / std(logits) in float64 under which two backends may
# pick different greedy tokens. The engine's logits differ from float64's by the cache's rounding (not in
# the float64 forward): on a bf16 cache f64.py and the cpu engine parted at 2.8e-3 and 6.0e-3 std (two of
# 1,438 tokens of round 3's bf16 generate lines, both in draft untied-3 2), on a quantized cache by more.
TIE = {"bf16": 0.02, "fp8": 0.05, "q4": 0.2, "mxfp4": 0.2}


class Line:
    def __init__(self, cmd, name, argv, r3=None, chain=None, est=0.05, meta=None, once=False):
        self.cmd, self.name, self.argv, self.r3, self.once = cmd, name, argv, r3, once
        self.id = f"{cmd}:{name}"
        self.chain = chain or self.id   # lines of one chain run in order on each side (kv: one bf16 store)
        self.est, self.meta = est, meta or {}


def side_argv(line, side, backend):
    d = os.path.join(WD, side)
    return [TF] + [a.replace("@SIDE@", d).replace("@BK@", backend) for a in line.argv]


# ------------------------------------------------------------------ inputs (as the sweeps made them)
FAMILIES = {
    "base": {},
    "one-layer": {"num_hidden_layers": 1},
    "gqa1": {"num_attention_heads": 2, "num_key_value_heads": 2},
    "mqa32": {"num_attention_heads": 32, "num_key_value_heads": 1, "hidden_size": 32},
    "kv8": {"num_attention_heads": 8, "num_key_value_heads": 8},
    "hd64": {"head_dim": 64},
    "hd128": {"head_dim": 128, "num_attention_heads": 2, "num_key_value_heads": 1},
    "hd256": {"head_dim": 256, "num_attention_heads": 2, "num_key_value_heads": 1},
    "untied": {"tie_word_embeddings": False},
    "partial-half": {"partial_rotary_factor": 0.5},
    "partial-tiny": {"partial_rotary_factor": 0.0625},
    "partial-rope-params": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}},
    "theta-tiny": {"rope_theta": 1e-6},
    "theta-one": {"rope_theta": 1.0},
    "theta-huge": {"rope_theta": 1e30},
    "eps-tiny": {"rms_norm_eps": 1e-30},
    "eps-huge": {"rms_norm_eps": 1e6},
    "vocab258": {"vocab_size": 258},
    "vocab-big": {"vocab_size": 1000},
    "bf16": {"dtype": "bfloat16"},
    "f16": {"dtype": "float16"},
    "torch_dtype": {"-dtype": None, "torch_dtype": "float32"},
    "headdim-null": {"head_dim": None, "hidden_size": 128, "num_attention_heads": 4},
    "maxpos-small": {"max_position_embeddings": 17},
    "hidden-odd": {"hidden_size": 40, "intermediate_size": 7},
    "hidden-1": {"hidden_size": 1, "intermediate_size": 1},
    "const-eos": {"tie_word_embeddings": False, "const": 257},
    "const-a": {"tie_word_embeddings": False, "const": 97},
    "const-258": {"tie_word_embeddings": False, "const": 258},
    "shards-3": {"shards": 3},
    "shards-1": {"shards": 1},
}
EXTRA_CK = {
    "ctx": {"max_position_embeddings": 130},
    "untied-3": {"tie_word_embeddings": False, "num_hidden_layers": 3},
    "sharded-3": {"shards": 3, "num_hidden_layers": 3},
    "partial-3": {"partial_rotary_factor": 0.25, "num_hidden_layers": 3, "dtype": "float16"},
    "theta-rp": {"num_hidden_layers": 2, "-rope_theta": None, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}},
}


def make_checkpoints():
    jobs = []
    for name, cfg in list(FAMILIES.items()) + list(EXTRA_CK.items()):
        d = os.path.join(CK, name)
        shutil.rmtree(d, ignore_errors=True)
        jobs.append([sys.executable, os.path.join(R3, "mkckpt.py"), d] + [f"{k}={json.dumps(v)}" for k, v in cfg.items()])
    with cf.ThreadPoolExecutor(max(1, (os.cpu_count() or 2) - 1)) as ex:
        for p in ex.map(lambda c: subprocess.run(c, capture_output=True), jobs):
            if p.returncode != 0:
                sys.exit(f"mkckpt failed: {p.stderr.decode()[-400:]}")


# setup lines: make-model and make-draft take no --backend; they run once, before the sides
SETUP = []   # (name, argv, round-3 rc)
PROMPT_FILES = [b"", b"\x00", b"\x00\xff\x80abc", bytes(range(256))[:120]]


def setup_lines():
    S = []
    for layers in ["1", "2", "64"]:
        S.append((f"make-model layers {layers}", ["make-model", "--preset", "tiny", "--layers", layers, "--out", os.path.join(IN, f"mm {layers}")], 0))
    S.append(("existing empty folder", ["make-model", "--preset", "tiny", "--out", os.path.join(IN, "mm empty")], 0))
    S.append(("folder now holds files", ["make-model", "--preset", "tiny", "--out", os.path.join(IN, "mm empty")], 2))
    S.append(("seed max", ["make-model", "--preset", "tiny", "--seed", "18446744073709551615", "--out", os.path.join(IN, "mm seedmax")], 0))
    for src, L in DRAFTS:
        S.append((f"make-draft {os.path.basename(src)} {L}", ["make-draft", "--from", src, "--layers", str(L), "--out", os.path.join(IN, f"draft {os.path.basename(src)} {L}")], 0))
    S.append(("from 1 layer", ["make-draft", "--from", os.path.join(IN, "mm 1"), "--layers", "1", "--out", os.path.join(IN, "d1")], 2))
    S.append(("layers == source", ["make-draft", "--from", os.path.join(IN, "mm 2"), "--layers", "2", "--out", os.path.join(IN, "d2")], 2))
    S.append(("layers 0", ["make-draft", "--from", os.path.join(IN, "mm 2"), "--layers", "0", "--out", os.path.join(IN, "d0")], 2))
    return S


DRAFTS = [(os.path.join(IN, "mm 64"), 1), (os.path.join(IN, "mm 64"), 63), (os.path.join(IN, "mm 2"), 1),
          (os.path.join(CK, "untied-3"), 2), (os.path.join(CK, "sharded-3"), 2), (os.path.join(CK, "partial-3"), 1),
          (os.path.join(CK, "theta-rp"), 1)]


def run_setup():
    out = []
    for p in ["mm empty"]:
        shutil.rmtree(os.path.join(IN, p), ignore_errors=True)
    os.makedirs(os.path.join(IN, "mm empty"))
    for p in ["mm 1", "mm 2", "mm 64", "mm seedmax", "d1", "d2", "d0"] + [f"draft {os.path.basename(s)} {L}" for s, L in DRAFTS]:
        shutil.rmtree(os.path.join(IN, p), ignore_errors=True)
    for name, argv, want in setup_lines():
        t = time.time()
        p = subprocess.run([TF] + argv, capture_output=True)
        out.append({"id": f"{argv[0]}:{name}", "cmd": argv[0], "rc": p.returncode, "r3_rc": want, "dt": round(time.time() - t, 3),
                    "class": "once", "stderr": p.stderr.decode(errors="replace")[-300:]})
    for i, c in enumerate(PROMPT_FILES):
        open(os.path.join(IN, f"p file {i}.txt"), "wb").write(c)
    return out


# ------------------------------------------------------------------ the lines
def generate_lines():
    L, seen = [], {}
    inv = []   # (line id, reference line id): tokens must be equal on each side (round 3's invariants)

    def gen(model, prompt, n, extra=(), note="", r3=0):
        k = seen.get(note, 0); seen[note] = k + 1
        name = note if k == 0 else f"{note} #{k + 1}"
        argv = ["generate", "--model", model, "--prompt", prompt, "--max-tokens", str(n), "--backend", "@BK@",
                "--out", f"@SIDE@/gen/{len(L):03d}.json"] + list(extra)
        fmt = extra[1] if len(extra) > 1 and extra[0] == "--kv-cache" else "bf16"
        L.append(Line("generate", name, argv, r3, meta={"model": model, "prompt": prompt, "n": n, "format": fmt}))
        return L[-1].id

    def raw(args, note, r3, out=None):
        # round 3 ran these without --backend (cpu by default): the replay names the side's backend
        argv = list(args) + ["--backend", "@BK@"]
        opt = lambda k: args[args.index(k) + 1] if k in args else None
        L.append(Line(args[0], note, argv, r3, meta={"model": args[2], "format": "bf16", "out": out, "prompt": opt("--prompt"),
                                                     "n": int(opt("--max-tokens"))}))
        return L[-1].id

    win = {}
    for name in FAMILIES:
        d = os.path.join(CK, name)
        win[name] = gen(d, "hello world", 6, note=f"{name} window")
        for fmt in ["fp8", "q4", "mxfp4"]:
            gen(d, "hello world", 4, ["--kv-cache", fmt], note=f"{name} {fmt}")
        for P in [1, 7, 12, 16, 64]:
            inv.append((gen(d, "hello world", 6, ["--pages", str(P)], note=f"{name} pages {P}"), win[name]))
    for a, b in [("base", "torch_dtype"), ("base", "shards-3"), ("base", "shards-1")]:
        inv.append((win[b], win[a]))
    d = os.path.join(CK, "ctx")
    for Ln in [0, 1, 6, 7, 8, 62, 63, 64, 65, 127, 128, 129]:
        p = ("abcdefghij" * 20)[:Ln]
        for n in [1, 2]:
            want = 0 if Ln + n <= 130 else 2
            w = gen(d, p, n, note=f"prompt {Ln} max {n}", r3=want)
            for P in [7, 8, 64, 130, 131, 1000]:
                t = gen(d, p, n, ["--pages", str(P)], note=f"prompt {Ln} max {n} pages {P}", r3=want)
                if want == 0: inv.append((t, w))
    gen(d, "x" * 129, 1, note="exactly the context")
    gen(d, "x" * 129, 2, note="one past the context", r3=2)
    gen(d, "x" * 60, 70, note="fills the context by decoding")
    gen(d, "x" * 60, 71, note="one past by decoding", r3=2)
    raw(["generate", "--model", d, "--prompt", "a", "--max-tokens", "0"], "max-tokens 0", 2)
    raw(["generate", "--model", d, "--prompt", "a", "--max-tokens", "2147483647"], "max-tokens int max", 2)
    raw(["generate", "--model", d, "--prompt", "a", "--max-tokens", "3", "--pages", "1048576"], "pages max", 0)
    for i, c in enumerate(PROMPT_FILES):
        out = f"@SIDE@/out dir {i}/r.json"   # round 3: a new folder with a space (one for all four)
        raw(["generate", "--model", d, "--prompt-file", os.path.join(IN, f"p file {i}.txt"), "--max-tokens", "3", "--out", out],
            f"prompt file {c[:8]!r}", 0, out)
        L[-1].meta["prompt_bytes"] = c
    for layers in ["1", "2", "64"]:
        gen(os.path.join(IN, f"mm {layers}"), "hi", 3, note=f"make-model tiny layers {layers}")
    for src, n in DRAFTS:
        gen(os.path.join(IN, f"draft {os.path.basename(src)} {n}"), "hello", 4, note=f"draft {os.path.basename(src)} {n}")
    return L, inv


P3 = ["import os\n", "def f(x):\n    return x\n", "class Q:\n"]
SBASE = {"name": "x", "model": "", "prompts": P3, "new_tokens": 8, "parallel": 2, "pages": [16, 7], "pages_all": True,
         "pool_pages": 20, "context": 64, "prefill_chunk": 16, "cache_formats": ["bf16"],
         "draft": {"layers": 1, "tokens": 3, "tree": [2, 2]}}
REAL = os.path.join(REPO, "fixtures", "models", "stdlib-bytes-3m")
# seconds on one core of a 2-core cpu here (the round-3 machine) for the slower lines; the rest ~0.3 s
EST = {"serve:pages-big-small": 15, "serve:many-prompts": 3, "serve:new-tokens-40": 2, "serve:draft-tokens-64": 3, "serve:parallel-8-values": 3,
       "serve:real-identical": 6, "serve:real-pages-1": 6, "serve:real-draft-self": 8, "serve:all-formats": 1.5,
       "serve:kv-cache-flag-all": 1.5, "kv:real-recall/fp8": 8, "kv:real-recall-q4/q4": 8, "kv:real-one-row/fp8": 6,
       "kv:ctx-far/fp8": 3, "kv:ctx-limit/fp8": 2, "kv:ctx-past/fp8": 2}


def serve_lines():
    L = []
    fdir = os.path.join(IN, "serve")
    os.makedirs(fdir, exist_ok=True)

    def serve(name, model="base", r3=None, extra=(), **over):
        fx = json.loads(json.dumps(SBASE)); fx.update(over); fx["name"] = name
        fx["model"] = model if os.path.isabs(model) else os.path.join(CK, model)
        if "draft" in over and "model" in over["draft"] and not os.path.isabs(over["draft"]["model"]):
            fx["draft"]["model"] = os.path.join(CK, over["draft"]["model"])
        f = os.path.join(fdir, name + ".json")
        json.dump(fx, open(f, "w"), indent=1)
        argv = ["serve-gate", f, "--backend", "@BK@", "--out", f"@SIDE@/serve/{name}.json"] + list(extra)
        L.append(Line("serve", name, argv, r3, est=EST.get(f"serve:{name}", 0.3), meta={"fixture": fx, "extra": list(extra)}))

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
    for P in [5, 6, 7, 8, 9]:
        held = (24 + 8 + P - 1) // P
        serve(f"pool-exact-p{P}", pages=[P], pool_pages=held)
        serve(f"pool-exact-p{P}-2", pages=[P, 16], pool_pages=max(held, 2))
    serve("pool-one-short", pages=[7], pool_pages=4)
    serve("prompt-page-len", prompts=["a" * 15, "b" * 16, "c" * 17], pages=[16, 17], pool_pages=10, context=64)
    serve("prompt-chunk-len", prompts=["a" * 15, "b" * 16, "c" * 31], prefill_chunk=16, context=64)
    serve("chunk-1", prefill_chunk=1)
    serve("chunk-4096", prefill_chunk=4096)
    serve("context-min-minus-1", context=24 + 8 + 6)
    serve("context-exact", context=24 + 8 + 6 + 1)
    serve("new-tokens-3", new_tokens=3)
    serve("new-tokens-40", new_tokens=40, context=100, pool_pages=40)
    serve("parallel-8-values", prompts=[f"x{i}\n" for i in range(10)], parallel=[2, 3, 4, 5, 6, 7, 8, 9], pool_pages=60)
    serve("parallel-desc", prompts=[f"x{i}\n" for i in range(6)], parallel=[5, 2])
    serve("draft-tokens-64", draft={"layers": 1, "tokens": 64}, context=24 + 8 + 128 + 1, pool_pages=40)
    serve("draft-tokens-1", draft={"layers": 1, "tokens": 1, "tree": [2]})
    serve("draft-tree-126", draft={"layers": 1, "tokens": 2, "tree": [2, 2, 2, 2, 2, 2]}, context=24 + 8 + 126 + 1)
    serve("draft-tree-62", draft={"layers": 1, "tokens": 2, "tree": [2, 2, 2, 2, 2]}, context=24 + 8 + 62 + 1)
    serve("draft-tree-72", draft={"layers": 1, "tokens": 2, "tree": [8, 8]}, context=24 + 8 + 72 + 1)
    serve("draft-tree-64", draft={"layers": 1, "tokens": 2, "tree": [8, 7]}, context=24 + 8 + 64 + 1)
    serve("draft-tree-deep", draft={"layers": 1, "tokens": 2, "tree": [1] * 15 + [2]}, context=24 + 8 + 17 + 1)
    serve("draft-tree-default", draft={"layers": 1, "tokens": 5})
    serve("draft-longer-than-budget", new_tokens=4, draft={"layers": 1, "tokens": 10, "tree": [3, 3]})
    for fmt in ["fp8", "q4", "mxfp4"]:
        serve(f"only-{fmt}", cache_formats=[fmt])
    serve("all-formats", cache_formats=["mxfp4", "q4", "fp8", "bf16"])
    serve("kv-cache-flag", extra=["--kv-cache", "q4,mxfp4"])
    serve("kv-cache-flag-all", extra=["--kv-cache", "bf16,fp8,q4,mxfp4"])
    for m in ["gqa1", "mqa32", "kv8", "hd64", "hd128", "hd256", "untied", "partial-half", "partial-tiny", "theta-tiny",
              "theta-huge", "eps-huge", "vocab258", "vocab-big", "bf16", "f16", "hidden-odd", "maxpos-small"]:
        serve(f"model-{m}", model=m, cache_formats=["bf16", "q4"])
    for m in ["const-eos", "const-a", "const-258", "shards-3"]:
        serve(f"model-{m}", model=m)
    serve("model-const-eos-golden", model="const-eos", golden={"bf16": ["cbf29ce484222325"] * 3})
    serve("model-const-a-golden-wrong", model="const-a", golden={"bf16": {"cpu": ["0000000000000000"] * 3}})
    serve("draft-other-shape", draft={"model": "hd128", "tokens": 3, "tree": [2, 2]})
    serve("draft-more-layers", model="one-layer", draft={"model": "kv8", "tokens": 3, "tree": [2, 2]})
    serve("draft-is-target", draft={"model": "base", "tokens": 3, "tree": [2, 2]})
    serve("draft-vocab-differs", draft={"model": "vocab-big", "tokens": 3})
    serve("draft-layers-too-many", draft={"layers": 2, "tokens": 3})
    serve("real-identical", model=REAL, prompts=["def __init__(self):\n"] * 3, new_tokens=12, context=64, pool_pages=20)
    serve("real-pages-1", model=REAL, pages=[1, 3], pool_pages=60, new_tokens=12, context=64, cache_formats=["fp8"])
    serve("real-draft-self", model=REAL, draft={"model": REAL, "tokens": 4, "tree": [3, 2]}, new_tokens=12, context=64)
    return L


def memory_lines():
    """serve-memory takes no --backend (no forward runs): memory.out's 28 lines run once, on side a,
    their exit codes checked against round 3's."""
    L = []
    for x in open(os.path.join(R3, "memory.out")):
        m = re.match(r"rc=(\d+)  (.*)$", x.rstrip("\n"))
        if not m: continue
        args = m.group(2).split()
        L.append(Line("serve-memory", f"{len(L):02d} {' '.join(args)[:60]}",
                      ["serve-memory"] + args + ["--out", f"@SIDE@/mem/{len(L):02d}.json"], int(m.group(1)), once=True,
                      est=10 if "1048000" in args else 0.05))
    return L


TEXT = os.path.join(REPO, "fixtures", "text", "stdlib-heldout-3.11.7.txt")


def kv_lines():
    L = []
    fdir = os.path.join(IN, "kv")
    os.makedirs(fdir, exist_ok=True)

    def tokfile(name, data):
        p = os.path.join(fdir, name); open(p, "wb").write(data); return p

    def kv(name, model="base", tf=None, fmt="fp8", **over):
        data = open(tf, "rb").read()
        fx = {"name": name, "model": model if os.path.isabs(model) else os.path.join(CK, model),
              "tokens": {"file": tf, "encoding": "bytes", "sha256": hashlib.sha256(data).hexdigest(), "source": "s", "licence": "l"},
              "depths": [8, 24], "rows": 8, "decode_steps": 2, "prefill_chunk": 8}
        fx.update(over)
        f = os.path.join(fdir, name + ".json")
        json.dump(fx, open(f, "w"), indent=1)
        argv = ["kv-gate", f, "--format", fmt, "--backend", "@BK@", "--bf16-cache", f"@SIDE@/kvcache/{name}",
                "--out", f"@SIDE@/kv/{name}-{fmt}.json"]
        lid = f"{name}/{fmt}"
        L.append(Line("kv", lid, argv, None, chain=f"kv:{name}", est=EST.get(f"kv:{lid}", 0.3), meta={"fixture": fx, "format": fmt}))

    small = tokfile("small.txt", open(TEXT, "rb").read()[:200])
    kv("base", tf=small)
    for fmt in ["q4", "mxfp4"]: kv("base", tf=small, fmt=fmt)
    kv("one-depth", tf=small, depths=[1], rows=1, decode_steps=0, prefill_chunk=1)
    kv("depth-1-chunk-1", tf=small, depths=[1, 3], rows=2, decode_steps=0, prefill_chunk=1)
    kv("decode-0", tf=small, decode_steps=0)
    kv("rows-exact-file", tf=tokfile("t33.txt", b"x" * 32), depths=[8], rows=24, decode_steps=0)
    kv("rows-one-past-file", tf=tokfile("t32.txt", b"x" * 31), depths=[8], rows=24, decode_steps=0)
    kv("depths-adjacent", tf=small, depths=[4, 14, 24], rows=8, decode_steps=2)
    kv("depths-one-short", tf=small, depths=[4, 13], rows=8, decode_steps=2)
    kv("control-depths-all", tf=small, control_depths=[8, 24])
    kv("control-depths-last", tf=small, control_depths=[24])
    kv("bar-tiny", tf=small, bar={"mean_kl": 5e-324, "worst_token_kl": 5e-324})
    kv("bar-huge", tf=small, bar={"mean_kl": 1e308, "worst_token_kl": 1e308})
    kv("bar-inverted", tf=small, bar={"mean_kl": 1.0, "worst_token_kl": 0.001})
    kv("bar-mean-only", tf=small, bar={"mean_kl": 0.5})
    kv("bar-zero", tf=small, bar={"mean_kl": 0, "worst_token_kl": 0.1})
    kv("chunk-big", tf=small, prefill_chunk=65536)
    kv("chunk-odd", tf=small, prefill_chunk=3)
    kv("all-newlines", tf=tokfile("nl.txt", b"\n" * 100))
    kv("all-nul", tf=tokfile("nul.txt", b"\x00" * 100))
    kv("high-bytes", tf=tokfile("hi.txt", bytes(range(256)) * 2))
    big = tokfile("big.txt", open(TEXT, "rb").read()[:4000])
    kv("ctx-limit", tf=big, depths=[200], rows=55, decode_steps=1)
    kv("ctx-past", tf=big, depths=[200], rows=60, decode_steps=4)
    kv("ctx-far", tf=big, depths=[1000], rows=8, decode_steps=1)
    kv("maxpos17", model="maxpos-small", tf=small, depths=[8, 24])
    plant = "\n# The passphrase is ab.\n"; ask = "\n# What? "
    minimum = 2 * (len(plant) + len(ask) + 2) + 2
    rp = lambda depths: [{"name": "p", "passphrase": "ab", "plant": plant, "ask": ask, "depths": depths}]
    kv("recall-min", tf=big, depths=[8, 100], recall=rp([minimum]))
    kv("recall-min-1", tf=big, depths=[8, 100], recall=rp([minimum - 1]))
    end = 100 + 8 + 2
    kv("recall-at-twice-end", tf=big, depths=[8, 100], recall=rp([2 * end]))
    kv("recall-at-twice-end-plus-1", tf=big, depths=[8, 100], recall=rp([2 * end + 1]))
    kv("recall-past-twice-end", tf=big, depths=[8, 100], recall=rp([2 * end + 2]))
    kv("recall-odd-depth", tf=big, depths=[8, 100], recall=rp([minimum + 1, 101]))
    many = lambda depths: [{"name": "p", "passphrases": [f"w{i}" for i in range(40)], "plant": "\n# The passphrase is {passphrase}.\n", "ask": ask, "depths": depths}]
    kv("recall-many", tf=big, depths=[8, 100], recall=many([74, 120]))
    kv("recall-many-short", tf=big, depths=[8, 100], recall=many([73]))
    one = lambda depths: [{"name": "p", "passphrase": "x", "plant": "x", "ask": "?", "depths": depths}]
    kv("recall-1byte", tf=big, depths=[8, 100], recall=one([8, 9, 10]))
    kv("recall-1byte-short", tf=big, depths=[8, 100], recall=one([7]))
    ci = json.load(open(os.path.join(REPO, "fixtures", "kv", "ci.json")))
    kv("real-recall", model=REAL, tf=TEXT, depths=[32, 160], rows=32, decode_steps=4, prefill_chunk=32, recall=ci["recall"])
    kv("real-recall-q4", model=REAL, tf=TEXT, fmt="q4", depths=[32, 160], rows=32, decode_steps=4, prefill_chunk=32, recall=ci["recall"])
    kv("real-one-row", model=REAL, tf=TEXT, depths=[511], rows=1, decode_steps=1, prefill_chunk=512)
    return L


# ------------------------------------------------------------------ round 3's logs: exit codes, and the replay's faithfulness
def r3_logs(gl, sl, kl):
    """Sets each line's r3 (round 3's exit code) from the committed logs and returns the mismatches
    between the replay's lines and the logged ones (argv for generate, fixture and extra / format)."""
    bad = []
    glog = [json.loads(x) for x in open(os.path.join(R3, "generate.log"))]
    glog = [x for x in glog if x["argv"][0] == "generate"]

    def canon(argv):
        out, skip = [], False
        for i, a in enumerate(argv):
            if skip: skip = False; continue
            if a == "--backend": skip = True; continue
            if i > 0 and argv[i - 1] == "--out": a = "<OUT>"
            out.append(a.replace("/tmp/u3/gen/", "<WD>/").replace(IN + "/", "<WD>/").replace(CK + "/", "<WD>/ck/")
                       .replace("<WD>/p file.txt", "<WD>/p file"))
        return [re.sub(r"<WD>/p file( \d+)?\.txt", "<WD>/p file", a) for a in out]
    if len(glog) != len(gl): bad.append(f"generate: {len(gl)} lines, round 3 logged {len(glog)}")
    for line, x in zip(gl, glog):
        if canon(line.argv) != canon(x["argv"]): bad.append(f"{line.id}: {canon(line.argv)} != {canon(x['argv'])}")
        line.r3 = x["rc"]
    slog = [json.loads(x) for x in open(os.path.join(R3, "serve.log"))]
    if len(slog) != len(sl): bad.append(f"serve: {len(sl)} lines, round 3 logged {len(slog)}")
    for line, x in zip(sl, slog):
        if (line.name, line.meta["extra"]) != (x["fixture"], x["extra"]): bad.append(f"{line.id}: round 3 {x['fixture']} {x['extra']}")
        line.r3 = x["rc"]
    klog = [json.loads(x) for x in open(os.path.join(R3, "kv.log"))]
    if len(klog) != len(kl): bad.append(f"kv: {len(kl)} lines, round 3 logged {len(klog)}")
    for line, x in zip(kl, klog):
        if line.name != f"{x['fixture']}/{x['format']}": bad.append(f"{line.id}: round 3 {x['fixture']}/{x['format']}")
        line.r3 = x["rc"]
    return bad


# ------------------------------------------------------------------ running one side of one line
def run_side(line, side, backend):
    argv = side_argv(line, side, backend)
    out = next((a for i, a in enumerate(argv) if i > 0 and argv[i - 1] == "--out"), None)
    if out and os.path.exists(out): os.remove(out)
    left = DEADLINE - time.time()
    if left < 2:
        return {"rc": "not-run"}
    tmo = min(300 if line.cmd in ("serve", "kv") else 120, left)
    t = time.time()
    try:
        p = subprocess.run(argv, capture_output=True, timeout=tmo)
        rc, so, se = p.returncode, p.stdout, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, so, se = ("not-run" if tmo < (300 if line.cmd in ("serve", "kv") else 120) else "timeout"), b"", ""
    r = {"rc": rc, "dt": round(time.time() - t, 3), "stdout": so, "stderr": se, "out": out, "receipt": None}
    if out and os.path.exists(out):
        try:
            r["receipt"] = json.load(open(out))
        except ValueError as e:
            r["receipt_error"] = str(e)
    return r


# ------------------------------------------------------------------ comparing the two sides
def norm_msg(s, side):
    return s.replace(os.path.join(WD, side), "<SIDE>").strip()


def out_text(r, side):
    """stdout with the side's folder named <SIDE> (generate prints "receipt: PATH" after the text)"""
    return r["stdout"].replace(os.path.join(WD, side).encode(), b"<SIDE>")


def first_diff(x, y):
    for i, (p, q) in enumerate(zip(x, y)):
        if p != q: return i
    return min(len(x), len(y)) if len(x) != len(y) else None


MODELS = {}
MODEL_LOCK = threading.Lock()


def tie_check(model, prompt_tokens, ta, tb, fmt):
    """Where two greedy token lists part: the float64 margin between the two picks, by-design if a near-tie."""
    i = first_diff(ta, tb)
    if i is None: return True, "equal"
    if i >= len(ta) or i >= len(tb):
        # one stopped (at <|eos|>) where the other went on: the other's pick there was not 257
        a, b = (257, tb[i]) if i >= len(ta) else (ta[i], 257)
    else:
        a, b = ta[i], tb[i]
    if f64.np is None:
        return False, f"tokens part at {i} ({a} vs {b}); no numpy for the float64 margin"
    try:
        with MODEL_LOCK:
            if model not in MODELS: MODELS[model] = f64.load(model)
        t = f64.near_tie(model, list(prompt_tokens) + list(ta[:i]), a, b, MODELS[model])
    except Exception as e:  # noqa: BLE001 - reported, never fatal
        return False, f"tokens part at {i} ({a} vs {b}); float64 margin failed: {e}"
    tol = TIE.get(fmt, 0.2)
    ok = t["rel"] <= tol
    return ok, (f"tokens part at {i} ({a} vs {b}): float64 margin {t['margin']:.3g} = {t['rel']:.3g} std "
                f"({'near-tie, <=' if ok else 'NOT a near-tie, >'} {tol} for {fmt}; float64 argmax {t['f64_argmax']})")


def gates_of(r): return {g["name"]: (g.get("status"), g.get("failed")) for g in r.get("gates", [])}
def ctls_of(r): return {c["name"]: c.get("red") for c in r.get("controls", [])}


def dict_diff(tag, x, y, out):
    for k in sorted(set(x) | set(y)):
        if x.get(k) != y.get(k): out.append((tag, k, x.get(k), y.get(k)))


def compare(line, ra, rb):
    """-> (class, diffs, why): diffs are (what, key, side a, side b); why explains a by-design class."""
    D, why, finding = [], [], []
    ba, bb = A.a, A.b
    for side, r in (("a", ra), ("b", rb)):
        if r["rc"] not in (0, 1, 2): finding.append(f"side {side}: exit {r['rc']}")
        if r["rc"] not in (0, 1) and r["receipt"] is not None: finding.append(f"side {side}: receipt written on exit {r['rc']}")
        if r["rc"] in (0, 1) and r["out"] and r["receipt"] is None: finding.append(f"side {side}: no receipt on exit {r['rc']}")
    if ra["rc"] != rb["rc"]:
        D.append(("rc", "", ra["rc"], rb["rc"]))
        if not (ra["rc"] in (0, 1) and rb["rc"] in (0, 1)):
            D.append(("stderr", "", norm_msg(ra["stderr"], "a")[-200:], norm_msg(rb["stderr"], "b")[-200:]))
    ea, eb = ra.get("receipt"), rb.get("receipt")
    if ra["rc"] == rb["rc"] == 2 or (ra["rc"] not in (0, 1) and rb["rc"] not in (0, 1)):
        ma, mb = norm_msg(ra["stderr"], "a"), norm_msg(rb["stderr"], "b")
        if ma != mb:
            if ma.replace(ba, "<BK>") == mb.replace(bb, "<BK>"):
                why.append("the refusal names the backend")
            else:
                D.append(("stderr", "", ma[-300:], mb[-300:]))
    if ea is None or eb is None:
        if line.cmd == "generate" and ra["rc"] == rb["rc"] == 0 and out_text(ra, "a") != out_text(rb, "b"):
            D.append(("stdout", "", ra["stdout"][:80], rb["stdout"][:80]))
        return classify(D, why, finding)
    # with both receipts, exit 0 / 1 is the verdict (checked on each side): its difference is the verdict's
    if ra["rc"] in (0, 1) and rb["rc"] in (0, 1):
        D = [d for d in D if d[0] not in ("rc", "stderr")]
        for s, r, e in (("a", ra, ea), ("b", rb, eb)):
            if (e.get("verdict") == "pass") != (r["rc"] == 0): finding.append(f"side {s}: verdict {e.get('verdict')} on exit {r['rc']}")
    for k in ("verdict", "kind", "errors"):
        if ea.get(k) != eb.get(k): D.append((k, "", ea.get(k), eb.get(k)))
    dict_diff("gate", gates_of(ea), gates_of(eb), D)
    dict_diff("control", ctls_of(ea), ctls_of(eb), D)
    if line.cmd == "generate":
        ga, gb = ea["generate"], eb["generate"]
        for k in ("tokens", "text", "stopped_at_eos", "prompt_tokens", "cache_bytes", "kv_cache", "pages", "decode_tokens",
                  "decode_steps", "checkpoint_sha256"):
            if ga.get(k) != gb.get(k): D.append(("generate", k, ga.get(k), gb.get(k)))
        if out_text(ra, "a") != out_text(rb, "b"): D.append(("stdout", "", ra["stdout"][:80], rb["stdout"][:80]))
        if ga.get("tokens") != gb.get("tokens"):
            ok, msg = tie_check(line.meta["model"], ga["prompt_tokens"], ga["tokens"], gb["tokens"], line.meta["format"])
            (why if ok else finding).append(msg)
            if ok:  # what follows from the tokens is by design too
                D = [d for d in D if not (d[0] in ("stdout",) or (d[0] == "generate" and d[1] in ("tokens", "text", "stopped_at_eos", "decode_tokens", "decode_steps")))]
    elif line.cmd == "serve":
        D, w2, f2 = compare_serve(line, ea, eb, D)
        why += w2; finding += f2
    elif line.cmd == "kv":
        D, w2, f2 = compare_kv(line, ea, eb, D)
        why += w2; finding += f2
    return classify(D, why, finding)


def classify(D, why, finding):
    if finding: return "finding", D, why + finding
    if D: return "finding", D, why + ["unexplained difference"]
    return ("by-design" if why else "equal"), D, why


SCHED = ("admission_order", "pages_taken", "rounds", "rounds_mixing_prefill_and_decode", "rounds_mixing_window_and_paged_lanes",
         "rounds_with_requests_waiting_for_room")
TIMED = re.compile(r"(_s$|tok_s|wall|memory|_per_request)")


def compare_serve(line, ea, eb, D):
    why, finding = [], []
    fx = line.meta["fixture"]
    arms_a = {(x["format"], x["arm"]): x for x in ea.get("arms", [])}
    arms_b = {(x["format"], x["arm"]): x for x in eb.get("arms", [])}
    if set(arms_a) != set(arms_b): D.append(("arms", "", sorted(arms_a), sorted(arms_b)))
    sched, tok = [], []
    for k in sorted(set(arms_a) & set(arms_b)):
        xa, xb = arms_a[k], arms_b[k]
        for f in sorted(set(xa) | set(xb)):
            if TIMED.search(f): continue
            va, vb = xa.get(f), xb.get(f)
            if isinstance(va, dict) and isinstance(vb, dict):
                va = {q: v for q, v in va.items() if not TIMED.search(q)}; vb = {q: v for q, v in vb.items() if not TIMED.search(q)}
            if va != vb:
                (sched if f in SCHED else tok if f == "tokens" else D).append((f"arm {k[0]}.{k[1]}", f, va, vb))
    ha = (ea.get("numbers") or {}).get("token_hashes"); hb = (eb.get("numbers") or {}).get("token_hashes")
    # goldens keyed by backend: the golden gate and its control differ by design where the sides' goldens differ
    g = fx.get("golden") or {}
    fmts = line.meta["extra"][1].split(",") if line.meta["extra"] else fx["cache_formats"]
    def golden_for(f, b):
        x = g.get(f)
        return x if isinstance(x, list) or x is None else x.get(b)
    golden_differs = any(golden_for(f, A.a) != golden_for(f, A.b) for f in fmts)
    gold = [d for d in D if d[1] in ("golden", "golden-last-token-changed")]
    if gold and golden_differs:
        why.append(f"the fixture's goldens differ by backend ({A.a}: {[golden_for(f, A.a) is not None for f in fmts]}, "
                   f"{A.b}: {[golden_for(f, A.b) is not None for f in fmts]})")
        D = [d for d in D if d not in gold]
        if [d for d in D if d[0] == "verdict"] and not [d for d in D if d[0] in ("gate", "control") ]:
            D = [d for d in D if d[0] != "verdict"]
    # tokens of an arm that differ between backends: each solo request's first parting a near-tie?
    if tok or ha != hb:
        ties, bad = [], []
        solo = [k for k in set(arms_a) & set(arms_b) if k[1] == "solo"]
        for f, _ in sorted(solo):
            ta, tb = arms_a[(f, "solo")]["tokens"], arms_b[(f, "solo")]["tokens"]
            for i, (x, y) in enumerate(zip(ta, tb)):
                if x != y:
                    ok, msg = tie_check(fx["model"], [257] + list(fx["prompts"][i].encode()), x, y, f)
                    (ties if ok else bad).append(f"{f} prompt {i}: {msg}")
        if ties and not bad:
            why += ties + ["the arms' tokens and draft counts, gates and controls that follow from a near-tie differ by design"]
            D = [d for d in D if d[0] not in ("gate", "control", "verdict") and not d[0].startswith("arm ")]
            tok, sched = [], []
        elif bad:
            finding += bad
        else:
            finding.append("an arm's tokens differ while every solo arm's are equal")
        D += tok
    if sched:
        if "cuda" in (A.a, A.b) and A.a != A.b:
            why.append(f"scheduling of {len(sched)} arm field(s) ({', '.join(sorted(set(d[1] for d in sched)))}): fenced "
                       "release on cuda retires pages when the device's fence completes (timing), on cpu at once")
        else:
            D += sched
    return D, why, finding


def compare_kv(line, ea, eb, D):
    why, finding = [], []
    ka, kb = ea["kv"], eb["kv"]
    bar = ka.get("bar", {})
    for f in ("format", "tokens", "rows_per_depth", "decode_steps", "control_depths", "training_context", "memory",
              "model_max_position_embeddings", "recall_summary"):
        xa, xb = ka.get(f), kb.get(f)
        if f == "memory" and isinstance(xa, dict) and isinstance(xb, dict):
            # the process's peak of device memory (and its note) is null on cpu and measured on cuda: by
            # nature, as serve-gate's device memory; the table of bytes per position and per lane must agree
            dev = ("peak_device_memory", "peak_device_memory_note")
            if any(xa.get(k) != xb.get(k) for k in dev) and A.a != A.b:
                why.append("memory: the peak of device memory is the backend's own (null on cpu)")
            xa = {k: v for k, v in xa.items() if k not in dev}
            xb = {k: v for k, v in xb.items() if k not in dev}
        if xa != xb: D.append(("kv", f, xa, xb))
    near, numbers = [], []

    def close(x, b):
        return isinstance(x, (int, float)) and isinstance(b, (int, float)) and b > 0 and abs(x - b) <= 0.01 * b
    for da, db in zip(ka["depths"], kb["depths"]):
        dd = da["depth"]
        for f in ("depth", "positions", "rows", "beyond_training", "verdict", "top1_agreement"):
            if da.get(f) != db.get(f): D.append((f"depth {dd}", f, da.get(f), db.get(f)))
        pa = sorted(x.get("pos") for x in da.get("top1_differences", [])); pb = sorted(x.get("pos") for x in db.get("top1_differences", []))
        if pa != pb: D.append((f"depth {dd}", "top1_differences", pa, pb))
        if close(da["mean_kl"], bar.get("mean_kl")) or close(db["mean_kl"], bar.get("mean_kl")) or \
           close(da["worst_kl"], bar.get("worst_token_kl")) or close(db["worst_kl"], bar.get("worst_token_kl")):
            near.append(dd)
        for f in ("mean_kl", "worst_kl"):
            numbers.append(rel(da[f], db[f]))
        for f in ("bf16", "quant"):
            numbers.append(rel(da["perplexity"][f], db["perplexity"][f]))
    if len(ka["depths"]) != len(kb["depths"]): D.append(("kv", "depths", len(ka["depths"]), len(kb["depths"])))
    ra = {(x["probe"], x["depth"]): x for x in ka.get("recall", [])}; rb_ = {(x["probe"], x["depth"]): x for x in kb.get("recall", [])}
    for k in sorted(set(ra) | set(rb_)):
        xa, xb = ra.get(k, {}), rb_.get(k, {})
        for f in ("outcome", "bf16", "quant", "beyond_training"):
            if xa.get(f) != xb.get(f): D.append((f"recall {k[0]}@{k[1]}", f, xa.get(f), xb.get(f)))
    numbers = [x for x in numbers if x is not None]
    mx = max(numbers) if numbers else 0.0
    if mx > 0:
        if A.a == A.b: D.append(("kv numbers", "max relative difference", 0, mx))
        else: why.append(f"per-depth numbers differ by up to {mx:.2g} relative (kernels within their float64 bounds, not bytes)")
    # a gate, verdict or control that flips next to the bar is by design; elsewhere a finding
    flips = [d for d in D if d[0] in ("gate", "control", "verdict") or (d[0].startswith("depth") and d[1] in ("verdict",))]
    if flips and A.a != A.b:
        ctl_near = []
        for c in ea.get("controls", []):
            cb = next((x for x in eb.get("controls", []) if x["name"] == c["name"]), {})
            if c.get("red") != cb.get("red"):
                for s in c.get("seen", []) + cb.get("seen", []):
                    if close(s.get("mean_kl"), bar.get("mean_kl")) or close(s.get("worst_kl"), bar.get("worst_token_kl")):
                        ctl_near.append(c["name"])
        if near or ctl_near:
            why.append(f"verdicts next to the bar (within 1 %): depths {near}, controls {sorted(set(ctl_near))}")
            D = [d for d in D if d not in flips]
    t1 = [d for d in D if d[1] in ("top1_agreement", "top1_differences")]
    if t1 and A.a != A.b:
        small = True
        for da, db in zip(ka["depths"], kb["depths"]):
            pa = {x.get("pos"): x for x in da.get("top1_differences", [])}; pb = {x.get("pos"): x for x in db.get("top1_differences", [])}
            for p in set(pa) ^ set(pb):
                x = pa.get(p) or pb.get(p)
                m = [abs(v) for kk, v in x.items() if "margin" in kk and isinstance(v, (int, float))]
                if not m or min(m) > 1e-3: small = False
        if small:
            why.append("top-token differences only at rows whose margin is below 1e-3 (a near-tie)")
            D = [d for d in D if d not in t1]
    return D, why, finding


def rel(x, y):
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (x, y)): return None if x == y else float("inf")
    if x == y: return 0.0
    return abs(x - y) / max(abs(x), abs(y), 1e-300)


# ------------------------------------------------------------------ invariants of round 3, per side
def invariants(res, inv, gl):
    """generate: a paged run's tokens equal the window's, the same weights give the same tokens, stdout
    is the receipt's text, prompt tokens are <|eos|> + the bytes, the token count is max-tokens unless
    <|eos|>. -> {line id: [problems on side a / b]}"""
    bad = {}
    byid = {l.id: l for l in gl}
    for lid, r in res.items():
        line = byid.get(lid)
        if line is None: continue
        for s in ("a", "b"):
            x = r.get(s)
            if not x or x["rc"] != 0 or x["receipt"] is None: continue
            g = x["receipt"]["generate"]
            toks = g["tokens"]
            text = bytes(t for t in toks if t < 256)
            exp = text + (b"\n" if text and not text.endswith(b"\n") else b"")
            if line.meta.get("out") is None and not x["stdout"].startswith(exp):
                bad.setdefault(lid, []).append(f"side {s}: stdout != receipt tokens")
            n = line.meta.get("n")
            if n is not None and not g["stopped_at_eos"] and len(toks) != n:
                bad.setdefault(lid, []).append(f"side {s}: {len(toks)} tokens, not stopped, max {n}")
            pb = line.meta["prompt_bytes"] if "prompt_bytes" in line.meta else line.meta.get("prompt", "").encode()
            if g["prompt_tokens"] != [257] + list(pb):
                bad.setdefault(lid, []).append(f"side {s}: prompt tokens")
    for lid, ref in inv:
        for s in ("a", "b"):
            x, y = res.get(lid, {}).get(s), res.get(ref, {}).get(s)
            if not x or not y or x["receipt"] is None or y["receipt"] is None: continue
            if x["receipt"]["generate"]["tokens"] != y["receipt"]["generate"]["tokens"]:
                bad.setdefault(lid, []).append(f"side {s}: tokens {x['receipt']['generate']['tokens']} != {ref}'s "
                                               f"{y['receipt']['generate']['tokens']}")
    return bad


# ------------------------------------------------------------------ the judge on fabricated pairs
def selftest():
    """compare() on fabricated sides (as cpu against cuda): each case must get its class. -> failures"""
    saved = (A.a, A.b)
    A.a, A.b = "cpu", "cuda"
    fails = []

    def side(rc=0, receipt=None, stdout=b"", stderr=""):
        return {"rc": rc, "stdout": stdout, "stderr": stderr, "out": "x" if receipt is not None else None, "receipt": receipt}

    def gen(tokens, pt=(257, 104, 105)):
        return {"verdict": "pass", "kind": "generate", "errors": None, "gates": [], "controls": [],
                "generate": {"tokens": list(tokens), "prompt_tokens": list(pt), "text": "", "stopped_at_eos": False}}

    ca = Line("generate", "t", [], meta={"model": os.path.join(CK, "const-a"), "format": "bf16"})
    cases = [("equal", "generate equal", ca, side(0, gen([97, 97])), side(0, gen([97, 97])))]
    if f64.np is not None:
        # const-a: logit 97 > 0, every other logit exactly 0 (an exact tie between 0 and 1)
        cases += [("by-design", "tokens part at an exact tie", ca, side(0, gen([97, 0])), side(0, gen([97, 1]))),
                  ("finding", "tokens part far from a tie", ca, side(0, gen([97, 97])), side(0, gen([97, 0])))]
    cases += [("finding", "a crash", ca, side(0, gen([97])), side(-11)),
              ("by-design", "a refusal that names the backend", ca, side(2, stderr="x: cpu: no"), side(2, stderr="x: cuda: no")),
              ("finding", "refusals that differ", ca, side(2, stderr="x: a"), side(2, stderr="x: b")),
              ("finding", "exit 0 against 2", ca, side(0, gen([97])), side(2, stderr="no"))]

    def sv(golden_gate=("ok", 0), golden_ctl=True, rounds=9, toks=((5, 6),), extra_gate=None):
        g = [{"name": "concurrent == solo", "status": "ok", "failed": 0}, {"name": "golden", "status": golden_gate[0], "failed": golden_gate[1]}]
        if extra_gate: g.append(extra_gate)
        c = [{"name": "paged-batch-other-path", "red": True}]
        if golden_ctl is not None: c.append({"name": "golden-last-token-changed", "red": golden_ctl})
        arms = [{"format": "bf16", "arm": "solo", "tokens": [list(t) for t in toks], "rounds": rounds, "tok_s": 1.0},
                {"format": "bf16", "arm": "concurrent-forward", "tokens": [list(t) for t in toks], "rounds": rounds}]
        return {"verdict": "pass" if golden_gate[0] != "FAIL" else "fail", "kind": "serve-gate", "errors": [], "gates": g,
                "controls": c, "arms": arms, "numbers": {"token_hashes": {"bf16": [str(toks)]}}}
    fx = {"model": os.path.join(CK, "const-a"), "prompts": ["hi"], "cache_formats": ["bf16"], "golden": {"bf16": {"cpu": ["0"]}}}
    sl = Line("serve", "t", [], meta={"fixture": fx, "extra": []})
    fx2 = dict(fx, golden={"bf16": ["0"]})
    sl2 = Line("serve", "t2", [], meta={"fixture": fx2, "extra": []})
    cases += [("equal", "serve equal", sl, side(0, sv()), side(0, sv())),
              ("by-design", "a golden for cpu only", sl, side(1, sv(("FAIL", 1))), side(0, sv(("skipped", 0), None))),
              ("finding", "a golden for both backends", sl2, side(1, sv(("FAIL", 1))), side(0, sv(("skipped", 0), None))),
              ("by-design", "scheduling only", sl, side(0, sv(rounds=9)), side(0, sv(rounds=10))),
              ("finding", "a gate fails on one side", sl, side(0, sv()), side(1, sv(extra_gate={"name": "paged == contiguous", "status": "FAIL", "failed": 1})))]
    if f64.np is not None:
        cases += [("by-design", "serve tokens part at an exact tie", sl, side(0, sv(toks=((97, 0),))), side(0, sv(toks=((97, 1),), rounds=10))),
                  ("finding", "serve tokens part far from a tie", sl, side(0, sv(toks=((97, 97),))), side(0, sv(toks=((97, 0),))))]

    def kvr(mean, verdict, red=True, mem=None):
        d = {"depth": 8, "positions": [8, 15], "rows": 8, "beyond_training": False, "verdict": verdict, "top1_agreement": 1.0,
             "top1_differences": [], "mean_kl": mean, "worst_kl": mean, "perplexity": {"bf16": 2.0, "quant": 2.0}}
        return {"verdict": verdict, "kind": "kv-gate", "errors": [], "gates": [{"name": "mean KL", "status": "ok" if verdict == "pass" else "FAIL", "failed": int(verdict != "pass")}],
                "controls": [{"name": "bar-one-bad-depth", "red": red}],
                "kv": {"bar": {"mean_kl": 0.01, "worst_token_kl": 0.1}, "depths": [d], "recall": [], "format": "fp8",
                       "memory": mem or {"bytes_per_position": {"fp8": 288}, "peak_device_memory": None, "peak_device_memory_note": "null"}}}
    kl = Line("kv", "t", [], meta={"format": "fp8"})
    cases += [("by-design", "kv numbers alone", kl, side(0, kvr(0.001, "pass")), side(0, kvr(0.0010001, "pass"))),
              ("by-design", "a depth's verdict next to the bar", kl, side(0, kvr(0.00999, "pass")), side(1, kvr(0.01001, "fail"))),
              ("finding", "a depth's verdict far from the bar", kl, side(0, kvr(0.001, "pass")), side(1, kvr(0.5, "fail"))),
              ("by-design", "kv device memory alone", kl, side(0, kvr(0.001, "pass")),
               side(0, kvr(0.001, "pass", mem={"bytes_per_position": {"fp8": 288}, "peak_device_memory": 5, "peak_device_memory_note": "bytes"}))),
              ("finding", "kv bytes per position differ", kl, side(0, kvr(0.001, "pass")),
               side(0, kvr(0.001, "pass", mem={"bytes_per_position": {"fp8": 289}, "peak_device_memory": 5, "peak_device_memory_note": "bytes"})))]
    for want, what, line, ra, rb in cases:
        try:
            got, D, why = compare(line, ra, rb)
        except Exception as e:  # noqa: BLE001
            got, D, why = f"error {type(e).__name__}: {e}", [], []
        if got != want: fails.append(f"{what}: {got}, want {want} ({why} {D})")
    A.a, A.b = saved
    return fails, len(cases)


# ------------------------------------------------------------------ main
def main():
    os.makedirs(CK, exist_ok=True)
    gl, inv = generate_lines()
    sl, kl = serve_lines(), kv_lines()
    drift = r3_logs(gl, sl, kl)
    lines = gl + sl + kl + memory_lines()
    if A.only: lines = [l for l in lines if re.search(A.only, l.id)]
    lines = lines[::A.every] if A.every > 1 else lines
    chains = {}
    for l in lines: chains.setdefault(l.chain, []).append(l)
    if A.list:
        for l in lines: print(f"{l.id}\tr3 rc {l.r3}\t{' '.join(l.argv)}")
        print(f"{len(lines)} lines; replay against round 3's logs: {len(drift)} mismatches")
        for d in drift: print(" -", d)
        return
    for s, _ in SIDES:
        shutil.rmtree(os.path.join(WD, s), ignore_errors=True)
        for sub in ("gen", "serve", "kv", "mem"): os.makedirs(os.path.join(WD, s, sub))
    t = time.time(); make_checkpoints()
    once = run_setup()
    print(f"inputs: {len(FAMILIES) + len(EXTRA_CK)} checkpoints, {len(once)} make-model / make-draft lines in {time.time() - t:.1f} s; "
          f"{sum(not l.once for l in lines)} lines x 2 sides ({A.a}, {A.b}) and {sum(l.once for l in lines)} once; the replay "
          f"against round 3's logs: {len(drift)} mismatches", flush=True)
    fails, n = selftest()
    print(f"the judge on {n} fabricated pairs: {len(fails)} wrong" + ("" if f64.np else " (no numpy: the near-tie cases left out)"), flush=True)
    for f in fails: print("  JUDGE WRONG:", f, flush=True)
    RES = open(os.path.join(WD, "results.jsonl"), "w")
    for o in once:
        o["r3_drift"] = o["rc"] != o["r3_rc"]
        RES.write(json.dumps(o) + "\n")
    RES.flush()
    res, lock = {}, threading.Lock()
    done = {"n": 0}
    # the slow lines first; lines of one cost interleaved (every 5th, then the next ...), so that a run cut
    # short by the deadline leaves out a spread of the cheap lines, not the last families
    ch = list(chains.values())
    order = [c for _, _, c in sorted(((-sum(l.est for l in c), i % 5, i), i, c) for i, c in enumerate(ch))]

    def run_chain(chain, side, backend):
        for l in chain:
            if l.once and side == "b": continue
            r = run_side(l, side, backend)
            with lock:
                res.setdefault(l.id, {})[side] = r
                if l.once: res[l.id]["b"] = r
                if len(res[l.id]) == 2: finish(l)

    def finish(l):
        ra, rb = res[l.id]["a"], res[l.id]["b"]
        if l.once:
            rec = {"id": l.id, "cmd": l.cmd, "class": "once" if ra["rc"] != "not-run" else "not-run", "r3_rc": l.r3,
                   "rc": ra["rc"], "dt": ra.get("dt"), "r3_drift": ra["rc"] not in ("not-run",) and ra["rc"] != l.r3,
                   "stderr": ra.get("stderr", "")[-300:]}
            res[l.id]["rec"] = rec
            RES.write(json.dumps(rec) + "\n"); RES.flush()
            return
        if "not-run" in (ra["rc"], rb["rc"]):
            cls, D, why = "not-run", [], ["the deadline came first"]
        else:
            try:
                cls, D, why = compare(l, ra, rb)
            except Exception as e:  # noqa: BLE001 - a broken comparison is reported, not fatal
                cls, D, why = "finding", [], [f"comparison failed: {type(e).__name__}: {e}"]
        rec = {"id": l.id, "cmd": l.cmd, "class": cls, "r3_rc": l.r3, "rc": [ra["rc"], rb["rc"]],
               "dt": [ra.get("dt"), rb.get("dt")], "r3_drift": ra["rc"] not in ("not-run",) and l.r3 is not None and ra["rc"] != l.r3,
               "diffs": [list(map(short, d)) for d in D], "why": why}
        res[l.id]["rec"] = rec
        RES.write(json.dumps(rec) + "\n"); RES.flush()
        done["n"] += 1
        if done["n"] % 50 == 0:
            print(f"  {done['n']} of {len(lines)} lines compared at {time.time() - T0:.0f} s", flush=True)

    with cf.ThreadPoolExecutor(A.jobs_a) as xa, cf.ThreadPoolExecutor(A.jobs_b) as xb:
        futs = []
        for c in order:
            futs.append(xa.submit(run_chain, c, "a", A.a))
            futs.append(xb.submit(run_chain, c, "b", A.b))
        for f in cf.as_completed(futs):
            f.result()
    bad = invariants(res, inv, gl)
    RES.close()
    recs = [res[l.id]["rec"] for l in lines if "rec" in res.get(l.id, {})]
    for r in recs:
        for p in bad.get(r["id"], []):
            r["why"].append(f"invariant: {p}")
            r["class"] = "finding"
    with open(os.path.join(WD, "results.jsonl"), "w") as f:
        for o in once: f.write(json.dumps(o) + "\n")
        for r in recs: f.write(json.dumps(r) + "\n")
    summary(recs, once, drift)


def short(x):
    s = x if isinstance(x, str) else json.dumps(x) if not isinstance(x, bytes) else repr(x)
    return s if len(s) <= 300 else s[:300] + "..."


def summary(recs, once, drift):
    cmds = ["generate", "make-model", "make-draft", "serve", "kv", "serve-memory"]
    ran = [r for r in recs if r["class"] not in ("not-run",)]
    dts = lambda i: [r["dt"][i] for r in ran if isinstance(r.get("dt"), list) and isinstance(r["dt"][i], (int, float))]
    out = [f"round 3 replayed: side a --backend {A.a}, side b --backend {A.b}; {time.time() - T0:.0f} s wall; processes: "
           f"side a {len(dts(0))}, {sum(dts(0)):.0f} s in all (longest {max(dts(0), default=0):.1f}), side b {len(dts(1))}, "
           f"{sum(dts(1)):.0f} s in all (longest {max(dts(1), default=0):.1f}); jobs {A.jobs_a} / {A.jobs_b}",
           f"{'command':<12} {'lines':>6} {'equal':>6} {'by-design':>9} {'findings':>8} {'not run':>7} {'a!=r3':>6}"]
    tot = [0] * 6
    for c in cmds:
        rs = [r for r in recs if r["cmd"] == c and r["class"] != "once"]
        os_ = [o for o in once + recs if o["cmd"] == c and o["class"] == "once"]
        row = [len(rs) + len(os_), sum(r["class"] == "equal" for r in rs), sum(r["class"] == "by-design" for r in rs),
               sum(r["class"] == "finding" for r in rs), sum(r["class"] == "not-run" for r in rs),
               sum(bool(r.get("r3_drift")) for r in rs + os_)]
        if os_: row[1] = f"once:{len(os_)}"
        out.append(f"{c:<12} " + " ".join(f"{v:>{w}}" for v, w in zip(row, (6, 6, 9, 8, 7, 6))))
        for i, v in enumerate(row):
            if isinstance(v, int): tot[i] += v
    out.append(f"{'total':<12} " + " ".join(f"{v:>{w}}" for v, w in zip(tot, (6, 6, 9, 8, 7, 6))))
    out.append("(once: make-model, make-draft and serve-memory take no --backend; they run once, on side a, their exit"
               " codes checked against round 3's)")
    open(os.path.join(WD, "table.txt"), "w").write("\n".join(out) + "\n")
    if drift:
        out.append(f"the replay's lines against round 3's logs: {len(drift)} mismatches (first: {drift[0]})")
    for cls in ("finding", "by-design"):
        rs = [r for r in recs if r["class"] == cls]
        if rs: out.append(f"{cls}:")
        for r in rs[:40]:
            out.append(f"  {r['id']}: rc {r['rc']}: {'; '.join(r['why'])[:400]}")
            for d in r["diffs"][:4]: out.append(f"      {d[0]} {d[1]}: {d[2][:120]} | {d[3][:120]}".replace("\n", " / "))
    dr = [r for r in recs + once if r.get("r3_drift")]
    nr = [r for r in recs if r["class"] == "not-run"]
    if nr: out.append(f"not run (the deadline came first): {len(nr)}, e.g. {', '.join(r['id'] for r in nr[:5])}")
    if dr:
        out.append("side a's exit code differs from round 3's log:")
        for r in dr[:20]: out.append(f"  {r['id']}: round 3 {r['r3_rc']}, now {r['rc']}")
    text = "\n".join(out)
    open(os.path.join(WD, "summary.txt"), "w").write(text + "\n")
    print(text)


main()
