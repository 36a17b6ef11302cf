#!/usr/bin/env python3
"""Round 3, kv-gate: fixtures at the edges of the schema (cpu backend).

usage: sweep_kv.py TF_CUDA_TEST WORKDIR MODELS_DIR
Checks: exit code (0/1 on a valid fixture, 2 only where expected, nothing written on 2), the receipt's verdict
against the exit code, every per-depth number finite, gate FAILs only where the depth's numbers break the bar,
positions and beyond_training as the fixture says. Log: WORKDIR/kv.log.
"""
import hashlib, json, math, os, subprocess, sys

TF, WD, CK = sys.argv[1], sys.argv[2], sys.argv[3]
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.makedirs(os.path.join(WD, "fixtures"), exist_ok=True)
LOG = open(os.path.join(WD, "kv.log"), "w")
N = 0
PROBLEMS, NOTES = [], []
TEXT = os.path.join(REPO, "fixtures", "text", "stdlib-heldout-3.11.7.txt")

def tokfile(name, data):
    p = os.path.join(WD, "fixtures", name); open(p, "wb").write(data); return p

def fixture(name, model, tf, **over):
    data = open(tf, "rb").read()
    fx = {"name": name, "model": model if os.path.isabs(model) else os.path.join(CK, model),
          "tokens": {"file": tf, "encoding": "bytes", "sha256": hashlib.sha256(data).hexdigest(), "source": "s", "licence": "l"},
          "depths": [8, 24], "rows": 8, "decode_steps": 2, "prefill_chunk": 8}
    fx.update(over)
    p = os.path.join(WD, "fixtures", name + ".json"); json.dump(fx, open(p, "w"), indent=1)
    return p

def kv(name, model="base", tf=TEXT, fmt="fp8", expect=(0, 1), extra=(), **over):
    global N
    f = fixture(name, model, tf, **over)
    out = os.path.join(WD, "receipts", name + "-" + fmt + ".json")
    if os.path.exists(out): os.remove(out)
    N += 1
    args = [TF, "kv-gate", f, "--format", fmt, "--backend", "cpu", "--bf16-cache", os.path.join(WD, "cache"), "--out", out] + list(extra)
    try:
        p = subprocess.run(args, capture_output=True, timeout=300)
        rc, se = p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, se = "timeout", ""
    LOG.write(json.dumps({"fixture": name, "format": fmt, "rc": rc, "stderr": se[-800:]}) + "\n"); LOG.flush()
    if rc not in expect:
        PROBLEMS.append(f"{name}/{fmt}: rc {rc} (want {expect}): {se.strip()[-500:]}"); return None
    if rc == 2:
        if os.path.exists(out): PROBLEMS.append(f"{name}: receipt written on exit 2")
        return None
    r = json.load(open(out))
    if (r["verdict"] == "pass") != (rc == 0): PROBLEMS.append(f"{name}/{fmt}: verdict {r['verdict']} on rc {rc}")
    if r.get("errors"): PROBLEMS.append(f"{name}/{fmt}: errors {r['errors']}")
    k = r["kv"]; bar = k["bar"]
    fx = json.load(open(f))
    if [d["depth"] for d in k["depths"]] != fx["depths"]: PROBLEMS.append(f"{name}/{fmt}: depths {[d['depth'] for d in k['depths']]}")
    for d in k["depths"]:
        for key in ["mean_kl", "worst_kl", "top1_agreement"]:
            if not isinstance(d[key], (int, float)) or not math.isfinite(d[key]): PROBLEMS.append(f"{name}/{fmt}: depth {d['depth']} {key} {d[key]}")
        for a in ["bf16", "quant"]:
            v = d["perplexity"][a]
            if not isinstance(v, (int, float)) or not math.isfinite(v): NOTES.append(f"{name}/{fmt}: depth {d['depth']} perplexity {a} {v}")
        if d["positions"] != [d["depth"], d["depth"] + fx["rows"] - 1]: PROBLEMS.append(f"{name}/{fmt}: positions {d['positions']}")
        want = d["mean_kl"] <= bar["mean_kl"] and d["worst_kl"] <= bar["worst_token_kl"]
        if want != (d["verdict"] == "pass"): PROBLEMS.append(f"{name}/{fmt}: depth {d['depth']} verdict {d['verdict']} with mean {d['mean_kl']} worst {d['worst_kl']} bar {bar}")
    green = [c["name"] for c in r["controls"] if not c["red"]]
    if green: NOTES.append(f"{name}/{fmt}: green {green} ({r['verdict']})")
    return r

small = tokfile("small.txt", open(TEXT, "rb").read()[:200])
kv("base", tf=small)
for fmt in ["q4", "mxfp4"]: kv("base", tf=small, fmt=fmt)
kv("one-depth", tf=small, depths=[1], rows=1, decode_steps=0, prefill_chunk=1)
kv("depth-1-chunk-1", tf=small, depths=[1, 3], rows=2, decode_steps=0, prefill_chunk=1)
kv("decode-0", tf=small, decode_steps=0)
kv("rows-exact-file", tf=tokfile("t33.txt", b"x" * 32), depths=[8], rows=24, decode_steps=0)   # needs 8+24+1 = 33 tokens = eos + 32
kv("rows-one-past-file", tf=tokfile("t32.txt", b"x" * 31), depths=[8], rows=24, decode_steps=0, expect=(2,))
kv("depths-adjacent", tf=small, depths=[4, 14, 24], rows=8, decode_steps=2)
kv("depths-one-short", tf=small, depths=[4, 13], rows=8, decode_steps=2, expect=(2,))
kv("control-depths-all", tf=small, control_depths=[8, 24])
kv("control-depths-last", tf=small, control_depths=[24])
kv("bar-tiny", tf=small, bar={"mean_kl": 5e-324, "worst_token_kl": 5e-324})
kv("bar-huge", tf=small, bar={"mean_kl": 1e308, "worst_token_kl": 1e308})
kv("bar-inverted", tf=small, bar={"mean_kl": 1.0, "worst_token_kl": 0.001})
kv("bar-mean-only", tf=small, bar={"mean_kl": 0.5})
kv("bar-zero", tf=small, bar={"mean_kl": 0, "worst_token_kl": 0.1}, expect=(2,))
kv("chunk-big", tf=small, prefill_chunk=65536)
kv("chunk-odd", tf=small, prefill_chunk=3)
kv("all-newlines", tf=tokfile("nl.txt", b"\n" * 100))
kv("all-nul", tf=tokfile("nul.txt", b"\x00" * 100))
kv("high-bytes", tf=tokfile("hi.txt", bytes(range(256)) * 2))
# context limit: the model holds 256 positions (mkckpt's max_position_embeddings)
big = tokfile("big.txt", open(TEXT, "rb").read()[:4000])
kv("ctx-limit", tf=big, depths=[200], rows=55, decode_steps=1)  # 200..254 scored, decode at 255
kv("ctx-past", tf=big, depths=[200], rows=60, decode_steps=4)
kv("ctx-far", tf=big, depths=[1000], rows=8, decode_steps=1)
kv("maxpos17", model="maxpos-small", tf=small, depths=[8, 24])
# recall probes
plant = "\n# The passphrase is ab.\n"; ask = "\n# What? "
minimum = 2 * (len(plant) + len(ask) + 2) + 2
kv("recall-min", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "ab", "plant": plant, "ask": ask, "depths": [minimum]}])
kv("recall-min-1", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "ab", "plant": plant, "ask": ask, "depths": [minimum - 1]}], expect=(2,))
end = 100 + 8 + 2
kv("recall-at-twice-end", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "ab", "plant": plant, "ask": ask, "depths": [2 * end]}])
kv("recall-at-twice-end-plus-1", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "ab", "plant": plant, "ask": ask, "depths": [2 * end + 1]}])  # D/2 rounds down
kv("recall-past-twice-end", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "ab", "plant": plant, "ask": ask, "depths": [2 * end + 2]}], expect=(2,))
kv("recall-odd-depth", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "ab", "plant": plant, "ask": ask, "depths": [minimum + 1, 101]}])
kv("recall-many", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrases": [f"w{i}" for i in range(40)], "plant": "\n# The passphrase is {passphrase}.\n", "ask": ask, "depths": [74, 120]}])
kv("recall-many-short", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrases": [f"w{i}" for i in range(40)], "plant": "\n# The passphrase is {passphrase}.\n", "ask": ask, "depths": [73]}], expect=(2,))
kv("recall-1byte", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "x", "plant": "x", "ask": "?", "depths": [8, 9, 10]}])
kv("recall-1byte-short", tf=big, depths=[8, 100], recall=[{"name": "p", "passphrase": "x", "plant": "x", "ask": "?", "depths": [7]}], expect=(2,))
# the trained models: the recall control (both arms recall) and depth at the context limit
real = os.path.join(REPO, "fixtures", "models", "stdlib-bytes-3m")
ci = json.load(open(os.path.join(REPO, "fixtures", "kv", "ci.json")))
kv("real-recall", model=real, depths=[32, 160], rows=32, decode_steps=4, prefill_chunk=32, recall=ci["recall"])
kv("real-recall-q4", model=real, fmt="q4", depths=[32, 160], rows=32, decode_steps=4, prefill_chunk=32, recall=ci["recall"])
# (depths near the trained model's 4,096 positions took over 300 s each on this 2-core cpu: left out)
kv("real-one-row", model=real, depths=[511], rows=1, decode_steps=1, prefill_chunk=512)

print(json.dumps({"kv-gate": N})); print(f"{len(PROBLEMS)} problems")
for p in PROBLEMS: print(" -", p)
print(f"{len(NOTES)} notes:")
for p in NOTES: print(" -", p)
