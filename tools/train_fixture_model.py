#!/usr/bin/env python3
"""Train the byte-level Qwen3 fixture model of issue 16 (runs on the GPU machine).

A transformers `Qwen3ForCausalLM` with a byte vocabulary (ids 0..255 are the bytes, then
four specials, 260 in all: the vocabulary of make-model's presets), trained for a few
minutes on the .py files of CPython's standard library (PSF licence) found on the machine,
and saved with `save_pretrained` (bf16 safetensors, at most 8 MB of weights) to
fixtures/models/<name>/ together with:

  corpus.json       every corpus file (path relative to the stdlib root, sha256, bytes),
                    split into train and held-out (by a hash of the path, about 5%)
  train_log.jsonl   one line per logged step (loss, bits/byte, lr, seconds) and each eval
  fixture.json      the model's shape, tokenizer, hyperparameters, versions, device, seed,
                    and the held-out bits/byte of the saved bf16 weights (fp32 compute)
  CORPUS_LICENSE.txt where the training text came from and under what licence

Nothing is downloaded: the model is built from a config, the text is read from disk.

  python3 tools/train_fixture_model.py --name stdlib-bytes-3m --max-seconds 150
"""
import argparse
import hashlib
import json
import math
import os
import pathlib
import sys
import sysconfig
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

SPECIALS = {"<|bos|>": 256, "<|eos|>": 257, "<|pad|>": 258, "<|sep|>": 259}
VOCAB = 260
MAX_WEIGHT_BYTES = 8 * 1024 * 1024
HELDOUT_PER_256 = 13  # about 5% of files, chosen by the first byte of sha256(path)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default="stdlib-bytes-3m", help="fixtures/models/<name>/")
    p.add_argument("--out-root", default="fixtures/models")
    p.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"], help="corpus root")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--intermediate", type=int, default=768)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--steps", type=int, default=6000, help="upper bound; --max-seconds usually ends training")
    p.add_argument("--max-seconds", type=float, default=150.0)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-windows", type=int, default=256)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--force", action="store_true", help="replace an existing fixtures/models/<name>/")
    return p.parse_args()


def corpus(stdlib):
    """The stdlib's .py files (no site-packages), sorted, each with its sha256 and split."""
    root = pathlib.Path(stdlib)
    if not root.is_dir():
        sys.exit(f"train_fixture_model: --stdlib {stdlib}: not a directory")
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "site-packages" in rel.split("/") or "dist-packages" in rel.split("/"):
            continue
        if not path.is_file():
            continue
        data = path.read_bytes()
        heldout = hashlib.sha256(rel.encode()).digest()[0] < HELDOUT_PER_256
        files.append({"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                      "split": "heldout" if heldout else "train", "data": data})
    if not files:
        sys.exit(f"train_fixture_model: no .py files under {stdlib}")
    return files


def tokens(files, split):
    """The split's files as one id stream: each file's bytes followed by <|eos|>."""
    out = bytearray()
    ids = []
    for f in files:
        if f["split"] != split:
            continue
        out += f["data"]
        ids.append(len(out))
        out += b"\x00"  # placeholder for the separator, replaced below
    if not out:
        return torch.zeros(0, dtype=torch.int16)
    t = torch.frombuffer(out, dtype=torch.uint8).to(torch.int16)
    t[torch.tensor(ids)] = SPECIALS["<|eos|>"]
    return t


def make_config(a):
    common = dict(vocab_size=VOCAB, hidden_size=a.hidden, intermediate_size=a.intermediate,
                  num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                  head_dim=a.head_dim, max_position_embeddings=4096, rms_norm_eps=1e-6,
                  tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
                  hidden_act="silu", bos_token_id=SPECIALS["<|bos|>"], eos_token_id=SPECIALS["<|eos|>"],
                  pad_token_id=SPECIALS["<|pad|>"])
    if int(transformers.__version__.split(".")[0]) >= 5:
        return Qwen3Config(rope_parameters={"rope_type": "default", "rope_theta": a.rope_theta}, **common)
    return Qwen3Config(rope_theta=a.rope_theta, **common)


def lr_at(step, progress, a):
    """Linear warm-up over the first steps, then cosine from lr to lr/10 over `progress`
    (the larger of the fractions of --steps and of --max-seconds used)."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@torch.no_grad()
def heldout_bits_per_byte(model, data, seq, windows, autocast):
    """Teacher-forced cross-entropy over non-overlapping windows, bits per byte target
    (separator targets are not bytes and are left out)."""
    model.eval()
    n = min(windows, (len(data) - 1) // seq)
    total_nats, total_bytes = 0.0, 0
    for i in range(0, n, 16):
        starts = torch.arange(i, min(n, i + 16), device=data.device) * seq
        x = data[starts[:, None] + torch.arange(seq + 1, device=data.device)].long()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=x[:, :-1]).logits
        target = x[:, 1:]
        nll = F.cross_entropy(logits.float().reshape(-1, VOCAB), target.reshape(-1), reduction="none")
        keep = (target.reshape(-1) < 256)
        total_nats += nll[keep].sum().item()
        total_bytes += int(keep.sum().item())
    model.train()
    return total_nats / max(1, total_bytes) / math.log(2)


def patch_config(out_dir, a, log):
    """Make sure config.json carries every field the engine's reader requires (it refuses a
    missing field rather than guessing); record any field added."""
    path = out_dir / "config.json"
    cfg = json.loads(path.read_text())
    added = {}
    if "tie_word_embeddings" not in cfg:
        added["tie_word_embeddings"] = True
    has_theta = "rope_theta" in cfg or any(
        isinstance(cfg.get(k), dict) and "rope_theta" in cfg[k] for k in ("rope_parameters", "rope_scaling"))
    if not has_theta:
        added["rope_theta"] = a.rope_theta
    if "dtype" not in cfg and "torch_dtype" not in cfg:
        added["dtype"] = "bfloat16"
    if "head_dim" not in cfg:
        added["head_dim"] = a.head_dim
    if "num_key_value_heads" not in cfg:
        added["num_key_value_heads"] = a.kv_heads
    if added:
        cfg.update(added)
        path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
        log({"event": "config_patched", "added": added})
    return cfg


def check_weights_file(path, a):
    """The saved safetensors holds exactly the tensors the engine's loader asks for
    (engine/checkpoint.h): names, BF16, shapes; no lm_head.weight since embeddings are tied."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    h, q, kv, d, i = a.hidden, a.heads * a.head_dim, a.kv_heads * a.head_dim, a.head_dim, a.intermediate
    want = {"model.embed_tokens.weight": [VOCAB, h], "model.norm.weight": [h]}
    for layer in range(a.layers):
        p = f"model.layers.{layer}."
        want.update({p + "input_layernorm.weight": [h], p + "self_attn.q_proj.weight": [q, h],
                     p + "self_attn.k_proj.weight": [kv, h], p + "self_attn.v_proj.weight": [kv, h],
                     p + "self_attn.o_proj.weight": [h, q], p + "self_attn.q_norm.weight": [d],
                     p + "self_attn.k_norm.weight": [d], p + "post_attention_layernorm.weight": [h],
                     p + "mlp.gate_proj.weight": [i, h], p + "mlp.up_proj.weight": [i, h],
                     p + "mlp.down_proj.weight": [h, i]})
    problems = [f"missing {k}" for k in sorted(set(want) - set(header))]
    problems += [f"unexpected {k}" for k in sorted(set(header) - set(want))]
    problems += [f"{k}: {v['dtype']} {v['shape']}, want BF16 {want[k]}" for k, v in sorted(header.items())
                 if k in want and (v["dtype"] != "BF16" or v["shape"] != want[k])]
    if problems:
        sys.exit(f"train_fixture_model: {path} is not what the engine loads: " + "; ".join(problems))


def main():
    a = parse_args()
    if not torch.cuda.is_available():
        sys.exit("train_fixture_model: needs a CUDA device")
    out_dir = pathlib.Path(a.out_root) / a.name
    if out_dir.exists() and any(out_dir.iterdir()) and not a.force:
        sys.exit(f"train_fixture_model: {out_dir} exists and is not empty (--force replaces it)")
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("model.safetensors", "config.json", "train_log.jsonl"):
        (out_dir / stale).unlink(missing_ok=True)

    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda")
    log_file = open(out_dir / "train_log.jsonl", "w")

    def log(rec):
        line = json.dumps(rec, sort_keys=True)
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    files = corpus(a.stdlib)
    train = tokens(files, "train").to(device)
    held = tokens(files, "heldout").to(device)
    if train.numel() <= a.seq + 1 or held.numel() <= a.seq + 1:
        sys.exit(f"train_fixture_model: corpus too small ({train.numel()} train, {held.numel()} held-out bytes)")
    log({"event": "corpus", "root": a.stdlib, "files": len(files),
         "train_bytes": int(train.numel()), "heldout_bytes": int(held.numel())})

    config = make_config(a)
    model = Qwen3ForCausalLM(config).to(device)
    params = sum(p.numel() for p in model.parameters())
    if params * 2 > MAX_WEIGHT_BYTES:
        sys.exit(f"train_fixture_model: {params} parameters are {params * 2} bytes of bf16, over 8 MB")
    log({"event": "model", "parameters": params, "bf16_bytes": params * 2})

    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    gen = torch.Generator(device=device)
    gen.manual_seed(a.seed)
    offsets = torch.arange(a.seq + 1, device=device)
    start = time.time()
    step = 0
    model.train()
    while step < a.steps and time.time() - start < a.max_seconds:
        lr = lr_at(step, max(step / a.steps, (time.time() - start) / a.max_seconds), a)
        for g in opt.param_groups:
            g["lr"] = lr
        idx = torch.randint(0, train.numel() - a.seq - 1, (a.batch,), device=device, generator=gen)
        x = train[idx[:, None] + offsets].long()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % a.log_every == 0:
            log({"event": "train", "step": step, "loss": round(loss.item(), 5),
                 "bits_per_token": round(loss.item() / math.log(2), 5), "lr": lr,
                 "seconds": round(time.time() - start, 2)})
        if step > 0 and step % a.eval_every == 0:
            log({"event": "eval", "step": step, "seconds": round(time.time() - start, 2),
                 "heldout_bits_per_byte": round(heldout_bits_per_byte(model, held, a.seq, a.eval_windows, True), 5)})
        step += 1
    train_seconds = time.time() - start

    # What is saved is bf16; measure the held-out rate of exactly those weights, in fp32.
    model = model.to(torch.bfloat16)
    bf16_state = {k: v.clone() for k, v in model.state_dict().items()}
    model_fp32 = Qwen3ForCausalLM(config).to(device)
    model_fp32.load_state_dict({k: v.float() for k, v in bf16_state.items()})
    final_bpb = heldout_bits_per_byte(model_fp32, held, a.seq, a.eval_windows, False)
    log({"event": "final", "steps": step, "train_seconds": round(train_seconds, 2),
         "heldout_bits_per_byte_bf16_weights_fp32_compute": round(final_bpb, 5)})

    model.save_pretrained(out_dir, safe_serialization=True)
    cfg = patch_config(out_dir, a, log)
    weights = out_dir / "model.safetensors"
    if not weights.exists():
        sys.exit(f"train_fixture_model: save_pretrained wrote no {weights} (sharded?); the fixture must be one file")
    if weights.stat().st_size > MAX_WEIGHT_BYTES + (1 << 16):
        sys.exit(f"train_fixture_model: {weights} is {weights.stat().st_size} bytes, over 8 MB")
    check_weights_file(weights, a)

    (out_dir / "corpus.json").write_text(json.dumps({
        "root": a.stdlib,
        "python": sys.version,
        "licence": "PSF-2.0 (CPython standard library)",
        "heldout_rule": f"sha256(path)[0] < {HELDOUT_PER_256}",
        "files": [{k: f[k] for k in ("path", "sha256", "bytes", "split")} for f in files],
    }, indent=1) + "\n")
    (out_dir / "CORPUS_LICENSE.txt").write_text(
        "The weights in this folder were trained on the .py files of the CPython standard library\n"
        f"({a.stdlib}, Python {sys.version.split()[0]}), distributed under the Python Software Foundation\n"
        "License Version 2. corpus.json lists every file with its sha256.\n")
    (out_dir / "fixture.json").write_text(json.dumps({
        "name": a.name,
        "architecture": "Qwen3ForCausalLM",
        "tokenizer": {"type": "bytes", "vocab_size": VOCAB, "bytes": "id = byte value, 0..255",
                      "specials": SPECIALS, "file_separator": "<|eos|>"},
        "shape": {"hidden": a.hidden, "layers": a.layers, "heads": a.heads, "kv_heads": a.kv_heads,
                  "head_dim": a.head_dim, "intermediate": a.intermediate, "rope_theta": a.rope_theta,
                  "tied": True, "parameters": params},
        "training": {"seq": a.seq, "batch": a.batch, "lr": a.lr, "warmup": a.warmup, "steps": step,
                     "max_seconds": a.max_seconds, "seconds": round(train_seconds, 2), "seed": a.seed,
                     "optimizer": "AdamW(0.9, 0.95), weight decay 0.1, clip 1.0, cosine to 10%",
                     "precision": "fp32 master weights, bf16 autocast"},
        "results": {"heldout_bits_per_byte": round(final_bpb, 5),
                    "measured_on": "saved bf16 weights, fp32 compute, "
                                   f"{a.eval_windows} windows of {a.seq} bytes"},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": sys.version.split()[0]},
        "device": torch.cuda.get_device_name(0),
        "config_json_dtype": cfg.get("dtype", cfg.get("torch_dtype")),
        "argv": sys.argv,
    }, indent=2) + "\n")
    log_file.close()
    print(f"train_fixture_model: wrote {out_dir} ({params} parameters, held-out {final_bpb:.3f} bits/byte)")


if __name__ == "__main__":
    main()
