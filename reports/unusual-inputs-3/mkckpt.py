#!/usr/bin/env python3
"""Writes a small Qwen3 checkpoint (config.json + model.safetensors) with an arbitrary config.

usage: mkckpt.py OUT_DIR key=value ...   (values are JSON; e.g. head_dim=64 tie_word_embeddings=false)
Weights: deterministic pseudo-random, scale 0.05 (norm weights 1 +- 0.1), dtype from the config
(float32 / bfloat16 / float16).
"""
import json, os, random, struct, sys

def main():
    out = sys.argv[1]
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "vocab_size": 260, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "tie_word_embeddings": True, "dtype": "float32",
        "hidden_act": "silu", "attention_bias": False,
    }
    seed = 1
    const = None   # const=T: every output is token T (every embedding row e_0, every layer zero, lm_head row T = e_0)
    shards = 0     # shards=N: a sharded checkpoint (model.safetensors.index.json + N files)
    for kv in sys.argv[2:]:
        k, v = kv.split("=", 1)
        if k == "seed":
            seed = int(v); continue
        if k == "const":
            const = int(v); continue
        if k == "shards":
            shards = int(v); continue
        v = json.loads(v)
        if v is None and k.startswith("-"):
            cfg.pop(k[1:], None); continue
        cfg[k] = v
    rng = random.Random(seed)
    c = cfg
    H, I, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    QH, KH = c["num_attention_heads"], c["num_key_value_heads"]
    D = c.get("head_dim") or H // QH
    V = c["vocab_size"]
    ts = [("model.embed_tokens.weight", [V, H], 0)]
    for i in range(L):
        p = f"model.layers.{i}."
        ts += [(p + "input_layernorm.weight", [H], 1), (p + "self_attn.q_proj.weight", [QH * D, H], 0),
               (p + "self_attn.k_proj.weight", [KH * D, H], 0), (p + "self_attn.v_proj.weight", [KH * D, H], 0),
               (p + "self_attn.o_proj.weight", [H, QH * D], 0), (p + "self_attn.q_norm.weight", [D], 1),
               (p + "self_attn.k_norm.weight", [D], 1), (p + "post_attention_layernorm.weight", [H], 1),
               (p + "mlp.gate_proj.weight", [I, H], 0), (p + "mlp.up_proj.weight", [I, H], 0),
               (p + "mlp.down_proj.weight", [H, I], 0)]
    ts.append(("model.norm.weight", [H], 1))
    if not c["tie_word_embeddings"]:
        ts.append(("lm_head.weight", [V, H], 0))
    dt = {"float32": ("F32", 4), "bfloat16": ("BF16", 2), "float16": ("F16", 2)}[c.get("dtype") or c.get("torch_dtype")]
    header, blobs, off = {}, [], 0
    for name, shape, norm in ts:
        n = 1
        for s in shape: n *= s
        vals = [(1.0 + rng.uniform(-0.1, 0.1)) if norm else rng.gauss(0, 0.05) for _ in range(n)]
        if const is not None and not norm:
            vals = [0.0] * n
            if name == "model.embed_tokens.weight":
                for r in range(V): vals[r * H] = 1.0
            if name == "lm_head.weight": vals[const * H] = 1.0
        b = struct.pack(f"<{n}f", *vals)
        if dt[0] == "BF16":
            b = b"".join(b[j + 2:j + 4] for j in range(0, len(b), 4))
        elif dt[0] == "F16":
            b = struct.pack(f"<{n}e", *vals)
        header[name] = {"dtype": dt[0], "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    os.makedirs(out, exist_ok=True)
    def write(path, names):
        hdr, o, bl = {}, 0, []
        for (name, _, _), b in zip(ts, blobs):
            if name in names:
                h = dict(header[name]); h["data_offsets"] = [o, o + len(b)]; hdr[name] = h; o += len(b); bl.append(b)
        hj = json.dumps(hdr).encode()
        hj += b" " * ((8 - len(hj) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(hj))); f.write(hj)
            for b in bl: f.write(b)
    names = [t[0] for t in ts]
    if shards:
        wm = {}
        for i in range(shards):
            part = names[i::shards]
            fn = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            write(os.path.join(out, fn), set(part))
            for nm in part: wm[nm] = fn
        json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
    else:
        write(os.path.join(out, "model.safetensors"), set(names))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)

main()
