#!/usr/bin/env python3
"""Greedy continuations of a fixture model from transformers (the outside oracle).

For the first PROMPT_BYTES bytes of N held-out files of the model's corpus (corpus.json,
split "heldout", read from the corpus root on this machine), runs transformers'
Qwen3ForCausalLM in float32 (TF32 off) and decodes greedily for --new tokens, the prompt
starting with <|eos|> (257) as the engine's does. Writes OUT (JSON): every prompt's bytes
(hex), its source path and sha256 of the file, and the continuation's token ids, plus the
top-1 minus top-2 logit margin at every generated step (a step with a small margin may
flip under a different but correct summation order). The engine tests replay the prompts
on the cpu backend and count the continuations that agree token for token.

  python3 tools/transformers_greedy.py fixtures/models/stdlib-bytes-3m --out fixtures/models/stdlib-bytes-3m/transformers-greedy.json

Exit 0 written; 2 bad input (a model folder without corpus.json naming a root folder and its
files, --prompts, --prompt-bytes or --new below 1, an --out whose folder is missing or not
writable, no held-out file of --prompt-bytes bytes), one line naming it, nothing written.
"""
import argparse
import hashlib
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3ForCausalLM  # noqa: E402

START = 257


def fail(msg):
    print(f"transformers_greedy: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--out", required=True)
    p.add_argument("--prompts", type=int, default=20)
    p.add_argument("--prompt-bytes", type=int, default=48)
    p.add_argument("--new", type=int, default=128)
    a = p.parse_args()
    for name in ("prompts", "prompt_bytes", "new"):
        if getattr(a, name) < 1:
            fail(f"--{name.replace('_', '-')}: {getattr(a, name)} is below 1")
    cpath = os.path.join(a.model, "corpus.json")
    try:
        with open(cpath) as f:
            corpus = json.load(f)
        if not isinstance(corpus, dict) or not isinstance(corpus.get("root"), str) or not isinstance(
                corpus.get("files"), list) or not all(isinstance(f, dict) and all(
                    isinstance(f.get(k), str) for k in ("path", "split", "sha256")) for f in corpus["files"]):
            raise ValueError("not an object with root and files (path, split, sha256)")
    except (OSError, ValueError) as e:
        fail(f"model: {cpath}: {e}")
    root = corpus["root"]
    if not os.path.isdir(root):
        fail(f"model: {cpath}: root {root} is not a folder on this machine")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        fail(f"--out: {out_dir} is not a writable folder")
    files = [f for f in corpus["files"] if f["split"] != "train"]
    files = sorted(files, key=lambda f: f["path"])
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m = Qwen3ForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(dev).eval()
    rows = []
    for f in files:
        if len(rows) == a.prompts:
            break
        data = open(os.path.join(root, f["path"]), "rb").read()
        if len(data) < a.prompt_bytes:
            continue
        prompt = data[: a.prompt_bytes]
        ids = [START] + list(prompt)
        out, margins = [], []
        with torch.no_grad():
            x = torch.tensor([ids], device=dev)
            past = None
            for _ in range(a.new):
                r = m(x, past_key_values=past, use_cache=True)
                past = r.past_key_values
                logits = r.logits[0, -1].float()
                top = torch.topk(logits, 2)
                t = int(torch.argmax(logits))  # the first maximum: the lowest index wins a tie
                out.append(t)
                margins.append(round(float(top.values[0] - top.values[1]), 6))
                if t == 257:  # <|eos|>: the engine stops there too
                    break
                x = torch.tensor([[t]], device=dev)
        rows.append({"path": f["path"], "file_sha256": f["sha256"], "prompt_hex": prompt.hex(),
                     "tokens": out, "margins": margins})
    meta = {"model": a.model, "start_token": START, "prompt_bytes": a.prompt_bytes, "new_tokens": a.new,
            "precision": "float32 weights (bf16 checkpoint upcast), float32 compute, TF32 off, KV cache fp32",
            "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", "torch": torch.__version__,
            "transformers": transformers.__version__, "prompts": rows}
    if not rows:
        fail(f"model: {cpath}: no held-out file of --prompt-bytes {a.prompt_bytes} bytes in {root}")
    with open(a.out, "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({"prompts": len(rows), "min_margin": min(min(r["margins"]) for r in rows)}))


if __name__ == "__main__":
    main()
