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
"""
import argparse
import hashlib
import json
import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3ForCausalLM  # noqa: E402

BOS = 256


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("text")
    p.add_argument("--bytes", type=int, default=384)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    data = open(a.text, "rb").read()[: a.bytes]
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
    json.dump(meta, open(a.out + ".json", "w"), indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
