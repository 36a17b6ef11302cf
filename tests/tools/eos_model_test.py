#!/usr/bin/env python3
"""A model whose every answer is <|eos|> at once (unusual inputs round 3, reports/unusual-inputs-3/).

usage: eos_model_test.py TF_CUDA_TEST

Writes a 2-layer F32 checkpoint whose output is <|eos|> at every position (every embedding row
e_0, every layer's projections zero, lm_head row 257 = e_0, every other row zero), then:
- generate: exit 0, 0 tokens, stopped_at_eos, decode 0 tok/s;
- serve-gate on a 3-prompt fixture: exit 1 (the drafted arms never verified a draft, as
  design.md says, and the plants cannot change an empty answer), a receipt whose arms all hold
  0 tokens and a decode_tok_s that is finite and not negative (it was -(requests) / time:
  each request's first token was subtracted though the request had none).
"""
import json, math, os, struct, subprocess, sys, tempfile

TF = sys.argv[1]
H, I, L, QH, KH, D, V = 64, 96, 2, 4, 2, 32, 260

def checkpoint(d):
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": H, "intermediate_size": I,
           "num_hidden_layers": L, "num_attention_heads": QH, "num_key_value_heads": KH, "head_dim": D,
           "vocab_size": V, "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "dtype": "float32", "hidden_act": "silu", "attention_bias": False}
    ts = [("model.embed_tokens.weight", [V, H])]
    for i in range(L):
        p = f"model.layers.{i}."
        ts += [(p + "input_layernorm.weight", [H]), (p + "self_attn.q_proj.weight", [QH * D, H]),
               (p + "self_attn.k_proj.weight", [KH * D, H]), (p + "self_attn.v_proj.weight", [KH * D, H]),
               (p + "self_attn.o_proj.weight", [H, QH * D]), (p + "self_attn.q_norm.weight", [D]),
               (p + "self_attn.k_norm.weight", [D]), (p + "post_attention_layernorm.weight", [H]),
               (p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
               (p + "mlp.down_proj.weight", [H, I])]
    ts += [("model.norm.weight", [H]), ("lm_head.weight", [V, H])]
    header, blobs, off = {}, [], 0
    for name, shape in ts:
        n = math.prod(shape)
        if len(shape) == 1:
            vals = [1.0] * n  # norm weights
        else:
            vals = [0.0] * n
            if name == "model.embed_tokens.weight":
                for r in range(V): vals[r * H] = 1.0
            if name == "lm_head.weight":
                vals[257 * H] = 1.0  # <|eos|>
        b = struct.pack(f"<{n}f", *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    os.makedirs(d)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))

def main():
    fails = []
    with tempfile.TemporaryDirectory() as t:
        model = os.path.join(t, "eos")
        checkpoint(model)
        g = os.path.join(t, "g.json")
        p = subprocess.run([TF, "generate", "--model", model, "--prompt", "hello", "--max-tokens", "4", "--backend", "cpu",
                            "--out", g], capture_output=True, text=True)
        if p.returncode != 0:
            fails.append(f"generate: exit {p.returncode}: {p.stderr.strip()}")
        else:
            r = json.load(open(g))["generate"]
            if r["tokens"] != [] or not r["stopped_at_eos"] or r["decode_tok_s"] != 0:
                fails.append(f"generate: tokens {r['tokens']} stopped_at_eos {r['stopped_at_eos']} decode_tok_s {r['decode_tok_s']}")
        fx = {"name": "eos", "model": "eos", "prompts": ["import os\n", "def f(x):\n", "class Q:\n"], "new_tokens": 8,
              "parallel": 2, "pages": [16, 7], "pages_all": True, "pool_pages": 20, "context": 64, "prefill_chunk": 16,
              "cache_formats": ["bf16"], "draft": {"layers": 1, "tokens": 3, "tree": [2, 2]}}
        fxp = os.path.join(t, "eos.json")
        json.dump(fx, open(fxp, "w"))
        out = os.path.join(t, "s.json")
        p = subprocess.run([TF, "serve-gate", fxp, "--backend", "cpu", "--out", out], capture_output=True, text=True)
        if p.returncode != 1 or not os.path.exists(out):
            fails.append(f"serve-gate: exit {p.returncode} (want 1 with a receipt): {p.stderr.strip()[-400:]}")
        else:
            r = json.load(open(out))
            for a in r["arms"]:
                if a["tokens_total"] != 0:
                    fails.append(f"serve-gate: arm {a['arm']}: {a['tokens_total']} tokens (the model only says <|eos|>)")
                v = a["decode_tok_s"]
                if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                    fails.append(f"serve-gate: arm {a['arm']}: decode_tok_s {v}")
            for k, v in r["numbers"].items():
                if k.endswith("decode_tok_s") and not (isinstance(v, (int, float)) and v >= 0):
                    fails.append(f"serve-gate: numbers.{k} {v}")
    for f in fails:
        print("FAIL:", f)
    print("eos_model_test:", "FAIL" if fails else "ok")
    return 1 if fails else 0

sys.exit(main())
