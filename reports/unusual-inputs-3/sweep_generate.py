#!/usr/bin/env python3
"""Round 3, generate / make-model / make-draft: unusual valid checkpoints and prompts (cpu backend).

usage: sweep_generate.py TF_CUDA_TEST WORKDIR   (log: WORKDIR/generate.log, one JSON line per command)
Checks: exit code; the receipt's tokens against stdout's text; invariances that must hold exactly
(paged == window for every page size, the same weights tied / untied / sharded / other dtype / explicit
defaults give the same tokens); refusals exit 2 naming the field.
"""
import json, os, subprocess, sys, shutil

TF, WD = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
os.makedirs(WD, exist_ok=True)
LOG = open(os.path.join(WD, "generate.log"), "w")
COUNT = {}
PROBLEMS = []

def run(args, expect_rc=None, note=""):
    cmd = args[0]
    COUNT[cmd] = COUNT.get(cmd, 0) + 1
    try:
        p = subprocess.run([TF] + args, capture_output=True, timeout=120)
        rc, so, se = p.returncode, p.stdout, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, so, se = "timeout", b"", ""
    LOG.write(json.dumps({"argv": args, "rc": rc, "stderr": se[-600:], "note": note}) + "\n"); LOG.flush()
    if expect_rc is not None and rc != expect_rc:
        PROBLEMS.append(f"rc {rc} (want {expect_rc}) {note}: {args}\n   {se.strip()[-400:]}")
    return rc, so, se

def ck(name, **cfg):
    d = os.path.join(WD, "ck", name)
    shutil.rmtree(d, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(HERE, "mkckpt.py"), d] + [f"{k}={json.dumps(v)}" for k, v in cfg.items()], check=True)
    return d

def gen(model, prompt, n, extra=(), expect_rc=0, note=""):
    out = os.path.join(WD, "g.json")
    if os.path.exists(out): os.remove(out)
    rc, so, se = run(["generate", "--model", model, "--prompt", prompt, "--max-tokens", str(n), "--backend", "cpu", "--out", out] + list(extra), expect_rc, note)
    if rc != 0:
        if os.path.exists(out): PROBLEMS.append(f"receipt written on rc {rc}: {note}")
        return None
    r = json.load(open(out))["generate"]
    toks = r["tokens"]
    text = bytes(t for t in toks if t < 256)
    exp = text + (b"\n" if text and not text.endswith(b"\n") else b"")
    if not so.startswith(exp):
        PROBLEMS.append(f"stdout != receipt tokens: {note} {so[:80]!r} vs {exp[:80]!r}")
    if len(toks) > n: PROBLEMS.append(f"{len(toks)} tokens > max {n}: {note}")
    if not r["stopped_at_eos"] and len(toks) != n: PROBLEMS.append(f"{len(toks)} tokens, not stopped, max {n}: {note}")
    if r["prompt_tokens"] != [257] + list(prompt.encode()): PROBLEMS.append(f"prompt tokens: {note}")
    return toks

# --- checkpoint families: each runs window and pages 1, 7, 16, a prompt of each edge length, every format
families = {
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
    "const-eos": {"tie_word_embeddings": False, "const": 257},   # every answer <|eos|> at once
    "const-a": {"tie_word_embeddings": False, "const": 97},      # every token 'a'
    "const-258": {"tie_word_embeddings": False, "const": 258},   # a token above the bytes, not <|eos|>
    "shards-3": {"shards": 3},
    "shards-1": {"shards": 1},
}
results = {}
for name, cfg in families.items():
    d = ck(name, **cfg)
    base = gen(d, "hello world", 6, note=f"{name} window")
    results[name] = base
    for fmt in ["fp8", "q4", "mxfp4"]:
        gen(d, "hello world", 4, ["--kv-cache", fmt], note=f"{name} {fmt}")
    for P in [1, 7, 12, 16, 64]:
        t = gen(d, "hello world", 6, ["--pages", str(P)], note=f"{name} pages {P}")
        if base is not None and t is not None and t != base:
            PROBLEMS.append(f"{name}: pages {P} tokens {t} != window {base}")

# equalities between families that hold the same function
if results.get("headdim-null") is not None: pass
# the same weights written another way: mkckpt's rng draws the same stream for the same shapes
for a, b in [("base", "torch_dtype"), ("base", "shards-3"), ("base", "shards-1")]:
    if results.get(a) != results.get(b):
        PROBLEMS.append(f"{a} {results.get(a)} != {b} {results.get(b)} (same weights)")

# --- prompt lengths around the prefill chunk (64), page sizes and the context limit
d = ck("ctx", max_position_embeddings=130)
for L in [0, 1, 6, 7, 8, 62, 63, 64, 65, 127, 128, 129]:
    p = ("abcdefghij" * 20)[:L]
    for n in [1, 2]:
        total = L + 1 + n - 1
        want = 0 if total <= 130 else 2
        w = gen(d, p, n, expect_rc=want, note=f"prompt {L} max {n}")
        for P in [7, 8, 64, 130, 131, 1000]:
            t = gen(d, p, n, ["--pages", str(P)], expect_rc=want, note=f"prompt {L} max {n} pages {P}")
            if w is not None and t != w: PROBLEMS.append(f"prompt {L} max {n}: pages {P} {t} != {w}")
gen(d, "x" * 129, 1, expect_rc=0, note="exactly the context")
gen(d, "x" * 129, 2, expect_rc=2, note="one past the context")
gen(d, "x" * 60, 70, expect_rc=0, note="fills the context by decoding")
gen(d, "x" * 60, 71, expect_rc=2, note="one past by decoding")
run(["generate", "--model", d, "--prompt", "a", "--max-tokens", "0"], 2, "max-tokens 0")
run(["generate", "--model", d, "--prompt", "a", "--max-tokens", "2147483647"], 2, "max-tokens int max")
run(["generate", "--model", d, "--prompt", "a", "--max-tokens", "3", "--pages", "1048576"], 0, "pages max")
# prompt file: empty, binary, NUL bytes
pf = os.path.join(WD, "p file.txt")
for content in [b"", b"\x00", b"\x00\xff\x80abc", bytes(range(256))[:120]]:
    open(pf, "wb").write(content)
    rc, so, se = run(["generate", "--model", d, "--prompt-file", pf, "--max-tokens", "3", "--out", os.path.join(WD, "out dir", "r.json")], 0, f"prompt file {content[:8]!r}")
    if rc == 0:
        r = json.load(open(os.path.join(WD, "out dir", "r.json")))["generate"]
        if r["prompt_tokens"] != [257] + list(content): PROBLEMS.append(f"prompt-file tokens differ for {content[:8]!r}")

# --- make-model: every preset layer edge, empty existing folder, spaces
for layers in ["1", "2", "64"]:
    o = os.path.join(WD, f"mm {layers}")
    shutil.rmtree(o, ignore_errors=True)
    rc, _, _ = run(["make-model", "--preset", "tiny", "--layers", layers, "--out", o], 0, f"make-model layers {layers}")
    if rc == 0: gen(o, "hi", 3, note=f"make-model tiny layers {layers}")
o = os.path.join(WD, "mm empty"); shutil.rmtree(o, ignore_errors=True); os.makedirs(o)
run(["make-model", "--preset", "tiny", "--out", o], 0, "existing empty folder")
run(["make-model", "--preset", "tiny", "--out", o], 2, "folder now holds files")
run(["make-model", "--preset", "tiny", "--seed", "18446744073709551615", "--out", os.path.join(WD, "mm seedmax")], 0, "seed max")
o = os.path.join(WD, "mm 1"); 
# --- make-draft: layers 1 and layers-1, from make-model and from the mkckpt families
for src, L in [(os.path.join(WD, "mm 64"), 1), (os.path.join(WD, "mm 64"), 63), (os.path.join(WD, "mm 2"), 1),
               (ck("untied-3", tie_word_embeddings=False, num_hidden_layers=3), 2),
               (ck("sharded-3", shards=3, num_hidden_layers=3), 2),
               (ck("partial-3", partial_rotary_factor=0.25, num_hidden_layers=3, dtype="float16"), 1),
               (ck("theta-rp", num_hidden_layers=2, **{"-rope_theta": None}, rope_parameters={"rope_type": "default", "rope_theta": 500.0}), 1)]:
    o = os.path.join(WD, f"draft {os.path.basename(src)} {L}")
    shutil.rmtree(o, ignore_errors=True)
    rc, _, _ = run(["make-draft", "--from", src, "--layers", str(L), "--out", o], 0, f"make-draft {src} {L}")
    if rc == 0:
        gen(o, "hello", 4, note=f"draft {src} {L}")
        # a draft's config must keep every field of the target the engine reads
        s = json.load(open(os.path.join(src, "config.json"))); t = json.load(open(os.path.join(o, "config.json")))
        for k in ["hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings"]:
            if s.get(k) != t.get(k): PROBLEMS.append(f"make-draft {src}: {k} {s.get(k)} -> {t.get(k)}")
run(["make-draft", "--from", os.path.join(WD, "mm 1"), "--layers", "1", "--out", os.path.join(WD, "d1")], 2, "from 1 layer")
run(["make-draft", "--from", os.path.join(WD, "mm 2"), "--layers", "2", "--out", os.path.join(WD, "d2")], 2, "layers == source")
run(["make-draft", "--from", os.path.join(WD, "mm 2"), "--layers", "0", "--out", os.path.join(WD, "d0")], 2, "layers 0")
for p in ["d1", "d2", "d0"]:
    if os.path.exists(os.path.join(WD, p)): PROBLEMS.append(f"refused make-draft left {p}")

print(json.dumps(COUNT)); print(f"{len(PROBLEMS)} problems")
for p in PROBLEMS: print(" -", p)
