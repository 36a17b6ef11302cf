#!/usr/bin/env python3
"""A float64 Qwen3 forward (numpy) for the near-tie test of replay.py: the logits after a token
sequence, from a checkpoint folder as the engine reads it (weights rounded to bf16, norm weights too;
head_dim, rope_theta and partial_rotary_factor from the top level, rope_parameters or rope_scaling;
rotary dims the first head_dim * factor, rotated in halves as reference/qwen3_ref.cpp does). The cache
is not quantized: on a bf16 cache the engine's logits sit within about 1e-3 of these, on fp8 / q4 /
mxfp4 further.

usage: f64.py MODEL_DIR TOKEN ...   (prints the top 5 tokens and logits after the sequence)
"""
import json, os, struct, sys

try:
    import numpy as np
except ImportError:  # replay.py reports "no numpy" for a difference it cannot measure
    np = None


def _bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def load(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    w = {}
    for fn in files:
        raw = open(os.path.join(d, fn), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        for name, h in hdr.items():
            if name == "__metadata__":
                continue
            a, b = h["data_offsets"]
            buf = raw[8 + n + a:8 + n + b]
            if h["dtype"] == "F32":
                x = np.frombuffer(buf, "<f4")
            elif h["dtype"] == "F16":
                x = np.frombuffer(buf, "<f2").astype(np.float32)
            elif h["dtype"] == "BF16":
                x = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                raise ValueError(f"{fn}: {name}: dtype {h['dtype']}")
            w[name] = _bf16(x).astype(np.float64).reshape(h["shape"])
    return cfg, w


def _rope_params(cfg):
    theta, factor = cfg.get("rope_theta"), cfg.get("partial_rotary_factor")
    for block in ("rope_parameters", "rope_scaling"):
        b = cfg.get(block) or {}
        theta = theta if theta is not None else b.get("rope_theta")
        factor = factor if factor is not None else b.get("partial_rotary_factor")
    return float(theta), float(factor if factor is not None else 1.0)


def logits(d, tokens, model=None):
    """float64 logits [len(tokens), vocab]; model = load(d) to reuse."""
    cfg, w = model or load(d)
    H, QH, KH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or H // QH
    eps = float(cfg["rms_norm_eps"])
    theta, factor = _rope_params(cfg)
    rot = int(D * factor)
    half = rot // 2
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)
    inv = theta ** (-2.0 * np.arange(half, dtype=np.float64) / rot) if half else np.zeros(0)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def norm(x, g):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * g

    def rope(x):  # [T, heads, D]
        if not half:
            return x
        x = x.copy()
        x1, x2 = x[..., :half].copy(), x[..., half:rot].copy()
        x[..., :half] = x1 * cos[:, None, :] - x2 * sin[:, None, :]
        x[..., half:rot] = x2 * cos[:, None, :] + x1 * sin[:, None, :]
        return x

    h = w["model.embed_tokens.weight"][np.asarray(tokens)]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = norm(h, w[p + "input_layernorm.weight"])
        q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(T, QH, D)
        k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KH, D)
        v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KH, D)
        q = rope(norm(q, w[p + "self_attn.q_norm.weight"]))
        k = rope(norm(k, w[p + "self_attn.k_norm.weight"]))
        g = QH // KH
        out = np.empty((T, QH, D))
        for hq in range(QH):
            s = q[:, hq, :] @ k[:, hq // g, :].T / np.sqrt(D) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hq, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, hq // g, :]
        h = h + out.reshape(T, QH * D) @ w[p + "self_attn.o_proj.weight"].T
        x = norm(h, w[p + "post_attention_layernorm.weight"])
        gt = x @ w[p + "mlp.gate_proj.weight"].T
        up = x @ w[p + "mlp.up_proj.weight"].T
        h = h + (gt / (1.0 + np.exp(-gt)) * up) @ w[p + "mlp.down_proj.weight"].T
    h = norm(h, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return h @ head.T


def near_tie(d, seq, a, b, model=None):
    """The float64 logits after seq: {a, b, logit[a] - logit[b], std of the row, their ratio, the argmax}."""
    row = logits(d, seq, model)[-1]
    std = float(row.std()) or 1.0
    m = float(row[a] - row[b])
    return {"a": int(a), "b": int(b), "margin": m, "std": std, "rel": abs(m) / std, "f64_argmax": int(row.argmax())}


if __name__ == "__main__":
    if np is None:
        sys.exit("f64.py: needs numpy")
    row = logits(sys.argv[1], [int(t) for t in sys.argv[2:]])[-1]
    for t in np.argsort(-row)[:5]:
        print(int(t), float(row[t]))
