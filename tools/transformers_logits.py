#!/usr/bin/env python3
"""Teacher-forced logits of a fixture model from transformers (the outside oracle).

Runs Qwen3ForCausalLM from transformers on a byte file (the model's byte vocabulary:
<|bos|> then one token per byte) in float32 on the GPU, and writes
  OUT.f32   the logits, float32 little-endian, [tokens][vocab] row-major
  OUT.json  the model, the text file and its sha256, the token count, the versions,
            and the mean bits/byte of the next-byte predictions
The engine tests compare the project's own loader and float64 forward with these logits
(tests/engine/fixture_model_test.cpp), on a machine without a GPU.

  python3 tools/transformers_logits.py fixtures/models/stdlib-bytes-3m fixtures/text/sched.py.head \
      --bytes 384 --out fixtures/models/stdlib-bytes-3m/transformers-sched

--bytes is the count of the text's first bytes to run, at least 1 and at most the file's length.
Exit 0 written; 2 bad input (a model folder without config.json, an unreadable text, --bytes
out of range, an --out whose folder is missing or not writable), one line naming it, before
the model is loaded.
"""
import argparse
import hashlib
import json
import math
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3ForCausalLM  # noqa: E402

BOS = 256


def fail(msg):
    print(f"transformers_logits: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("text")
    p.add_argument("--bytes", type=int, default=384)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if not os.path.isfile(os.path.join(a.model, "config.json")):
        fail(f"model: {a.model}: no config.json (not a checkpoint folder)")
    try:
        with open(a.text, "rb") as f:
            whole = f.read()
    except OSError as e:
        fail(f"text: {a.text}: {e.strerror}")
    if not 1 <= a.bytes <= len(whole):
        fail(f"--bytes: {a.bytes} is not in 1..{len(whole)} (the length of {a.text})")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        fail(f"--out: {out_dir} is not a writable folder")
    data = whole[: a.bytes]
    tokens = [BOS] + list(data)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m = Qwen3ForCausalLM.from_pretrained(a.model, dtype=torch.float32).to(dev).eval()
    with torch.no_grad():
        logits = m(torch.tensor([tokens], device=dev)).logits[0].float().cpu().numpy()
    lp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    bits = -sum(lp[t, tokens[t + 1]] for t in range(len(tokens) - 1)) / (len(tokens) - 1) / math.log(2)
    logits.astype("<f4").tofile(a.out + ".f32")
    meta = {
        "model": a.model,
        "text": a.text,
        "text_sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "tokens": len(tokens),
        "vocab": int(logits.shape[1]),
        "layout": "float32 little-endian [tokens][vocab], token 0 is <|bos|> (256), then one token per byte",
        "precision": "float32 weights (bf16 checkpoint upcast), float32 compute, TF32 off",
        "bits_per_byte": round(float(bits), 6),
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    with open(a.out + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
