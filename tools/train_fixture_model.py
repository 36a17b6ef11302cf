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

The long-context model of issue 18 (the kv-gate's recall) adds a schedule of sequence
lengths at a fixed number of tokens per step, and synthetic passphrase-retrieval rows
(tools/passphrase_data.py: corpus filler with "The passphrase is XXXX-XXXX." planted at a
uniform position and the ask with the answer at the end; an extra loss term on the answer
bytes); after training it measures recall of the saved bf16 weights (bf16 compute) on
held-out filler at named depths, the kv-gate's probe layout (plant at half the depth):

  python3 tools/train_fixture_model.py --name stdlib-bytes-long --layers 4 --head-dim 128 \
      --seq-schedule 1024:0.3,4096:0.3,8192:0.4 --tokens-per-step 65536 --max-position 8192 \
      --rope-theta 1e6 --passphrase-frac 0.5 --recall-depths 1024,4096,8192,16384,32768 \
      --max-weight-mb 16 --max-seconds 120
"""
import argparse
import hashlib
import json
import math
import os
import pathlib
import random
import sys
import sysconfig
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import passphrase_data as ppd  # noqa: E402

SPECIALS = {"<|bos|>": 256, "<|eos|>": 257, "<|pad|>": 258, "<|sep|>": 259}
VOCAB = 260
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
    p.add_argument("--seq-schedule", default="",
                   help="SEQ:FRACTION,... sequence lengths by fraction of training (of the larger of the "
                        "fractions of --steps and --max-seconds); empty: --seq throughout")
    p.add_argument("--tokens-per-step", type=int, default=0,
                   help="tokens per step; the batch is this over the stage's sequence length (0: --batch x --seq)")
    p.add_argument("--max-position", type=int, default=4096, help="config.json max_position_embeddings")
    p.add_argument("--passphrase-frac", type=float, default=0.0,
                   help="fraction of each batch's rows that are passphrase-retrieval rows")
    p.add_argument("--answer-weight", type=float, default=1.0,
                   help="weight of the mean loss over the answer bytes of the passphrase rows")
    p.add_argument("--recall-depths", default="",
                   help="after training: recall of the saved bf16 weights at these probe lengths (comma-separated)")
    p.add_argument("--recall-probes", type=int, default=32, help="probes per recall depth")
    p.add_argument("--heldout-windows-long", type=int, default=32,
                   help="windows of the longest sequence length for the final held-out rate")
    p.add_argument("--max-weight-mb", type=float, default=8.0, help="largest bf16 weights file, MiB")
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
                  head_dim=a.head_dim, max_position_embeddings=a.max_position, rms_norm_eps=1e-6,
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


def parse_schedule(a):
    """[(seq, end fraction)], the fractions cumulated; --seq throughout when empty."""
    if not a.seq_schedule:
        return [(a.seq, 1.0)]
    stages, total = [], 0.0
    for part in a.seq_schedule.split(","):
        try:
            seq, frac = part.split(":")
            seq, frac = int(seq), float(frac)
        except ValueError:
            sys.exit(f"train_fixture_model: --seq-schedule {a.seq_schedule}: expected SEQ:FRACTION,...")
        if seq < 2 or frac <= 0:
            sys.exit(f"train_fixture_model: --seq-schedule {part}: sequence length >= 2 and fraction > 0")
        total += frac
        stages.append((seq, total))
    if abs(total - 1.0) > 1e-6:
        sys.exit(f"train_fixture_model: --seq-schedule fractions add up to {total}, not 1")
    stages[-1] = (stages[-1][0], 1.0)
    return stages


def stage_at(stages, progress):
    for seq, end in stages:
        if progress < end:
            return seq
    return stages[-1][0]


def passphrase_rows(train_cpu, n, length, rng):
    """n passphrase-retrieval rows of `length` tokens (tools/passphrase_data.py): corpus
    filler from a uniform offset, the plant at a uniform position, the ask and the answer
    last. Returns an int64 [n, length] tensor and the answer length."""
    rows = []
    for _ in range(n):
        p = ppd.make_passphrase(rng)
        fill = ppd.filler_len(length, p)
        off = rng.randrange(0, train_cpu.numel() - fill)
        at = rng.randint(0, fill)
        rows.append(ppd.build(length, p, at, train_cpu[off:off + fill].tolist()))
    return torch.tensor(rows, dtype=torch.long), ppd.passphrase_len()


@torch.no_grad()
def recall_rates(model, held_cpu, depths, probes, seed, device):
    """Teacher-forced recall of the model as given (bf16 weights, bf16 compute): probes of
    the kv-gate's layout (held-out filler from a per-probe offset, the plant after depth/2
    filler tokens, the ask and the passphrase last); recalled when every answer byte is the
    top token."""
    model.eval()
    rng = random.Random(seed)
    out = {}
    for depth in depths:
        rows, answers = [], []
        for _ in range(probes):
            p = ppd.make_passphrase(rng)
            fill = ppd.filler_len(depth, p)
            off = rng.randrange(0, held_cpu.numel() - fill)
            rows.append(ppd.build(depth, p, ppd.probe_plant_at(depth, p), held_cpu[off:off + fill].tolist()))
            answers.append(p)
        a = ppd.passphrase_len()
        per = max(1, (1 << 18) // depth)
        recalled, bytes_right, examples = 0, 0, []
        for i in range(0, probes, per):
            x = torch.tensor(rows[i:i + per], dtype=torch.long, device=device)
            try:
                logits = model(input_ids=x[:, :-1], logits_to_keep=a).logits
            except TypeError:
                logits = model(input_ids=x[:, :-1]).logits[:, -a:]
            top = logits[:, -a:].argmax(-1).cpu()
            want = x[:, -a:].cpu()
            for r in range(top.shape[0]):
                ok = bool((top[r] == want[r]).all())
                recalled += ok
                bytes_right += int((top[r] == want[r]).sum())
                if len(examples) < 4:
                    got = "".join(chr(t) if 32 <= t < 127 else "?" for t in top[r].tolist())
                    examples.append({"passphrase": answers[i + r], "got": got})
        out[str(depth)] = {"recalled": recalled, "probes": probes, "rate": recalled / probes,
                           "answer_bytes_right": bytes_right / (probes * a), "examples": examples}
    model.train()
    return out


@torch.no_grad()
def heldout_bits_per_byte(model, data, seq, windows, autocast):
    """Teacher-forced cross-entropy over non-overlapping windows, bits per byte target
    (separator targets are not bytes and are left out)."""
    model.eval()
    n = min(windows, (len(data) - 1) // seq)
    total_nats, total_bytes = 0.0, 0
    per = max(1, min(16, 65536 // seq))
    for i in range(0, n, per):
        starts = torch.arange(i, min(n, i + per), device=data.device) * seq
        x = data[starts[:, None] + torch.arange(seq + 1, device=data.device)].long()
        with torch.autocast(data.device.type, dtype=torch.bfloat16, enabled=autocast):
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
    stages = parse_schedule(a)
    longest = max(seq for seq, _ in stages)
    tokens_per_step = a.tokens_per_step or a.batch * a.seq
    if any(tokens_per_step < seq for seq, _ in stages):
        sys.exit(f"train_fixture_model: --tokens-per-step {tokens_per_step} is less than a sequence")
    if not 0.0 <= a.passphrase_frac <= 1.0:
        sys.exit("train_fixture_model: --passphrase-frac must be in [0, 1]")
    recall_depths = [int(d) for d in a.recall_depths.split(",") if d]
    max_weight_bytes = int(a.max_weight_mb * 1024 * 1024)
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
    train_cpu = tokens(files, "train")
    held_cpu = tokens(files, "heldout")
    train = train_cpu.to(device)
    held = held_cpu.to(device)
    if train.numel() <= longest + 1 or held.numel() <= longest + 1:
        sys.exit(f"train_fixture_model: corpus too small ({train.numel()} train, {held.numel()} held-out bytes)")
    log({"event": "corpus", "root": a.stdlib, "files": len(files),
         "train_bytes": int(train.numel()), "heldout_bytes": int(held.numel())})

    config = make_config(a)
    model = Qwen3ForCausalLM(config).to(device)
    params = sum(p.numel() for p in model.parameters())
    if params * 2 > max_weight_bytes:
        sys.exit(f"train_fixture_model: {params} parameters are {params * 2} bytes of bf16, over {a.max_weight_mb} MiB")
    log({"event": "model", "parameters": params, "bf16_bytes": params * 2})

    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    gen = torch.Generator(device=device)
    gen.manual_seed(a.seed)
    prng = random.Random(a.seed + 1)  # the passphrase rows: passphrases, offsets, plant positions
    start = time.time()
    step = 0
    seq = stages[0][0]
    model.train()
    while step < a.steps and time.time() - start < a.max_seconds:
        progress = max(step / a.steps, (time.time() - start) / a.max_seconds)
        lr = lr_at(step, progress, a)
        for g in opt.param_groups:
            g["lr"] = lr
        new_seq = stage_at(stages, progress)
        if new_seq != seq or step == 0:
            log({"event": "stage", "step": step, "seq": new_seq, "batch": tokens_per_step // new_seq,
                 "seconds": round(time.time() - start, 2)})
        seq = new_seq
        batch = tokens_per_step // seq
        n_pass = int(round(batch * a.passphrase_frac))
        offsets = torch.arange(seq + 1, device=device)
        idx = torch.randint(0, train.numel() - seq - 1, (batch - n_pass,), device=device, generator=gen)
        x = train[idx[:, None] + offsets].long()
        ans_len = 0
        if n_pass:
            px, ans_len = passphrase_rows(train_cpu, n_pass, seq + 1, prng)
            x = torch.cat([px.to(device, non_blocking=True), x])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1]).logits
        ce = F.cross_entropy(logits.float().reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="none").view(batch, seq)
        lm_loss = ce.mean()
        loss = lm_loss
        if n_pass:
            ans_loss = ce[:n_pass, -ans_len:].mean()
            loss = lm_loss + a.answer_weight * ans_loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % a.log_every == 0:
            rec = {"event": "train", "step": step, "seq": seq, "loss": round(lm_loss.item(), 5),
                   "bits_per_token": round(lm_loss.item() / math.log(2), 5), "lr": lr,
                   "seconds": round(time.time() - start, 2)}
            if n_pass:
                with torch.no_grad():
                    hit = (logits[:n_pass, -ans_len:].argmax(-1) == x[:n_pass, -ans_len:]).all(-1).float().mean()
                rec.update({"answer_loss": round(ans_loss.item(), 5), "answer_recalled": round(hit.item(), 4)})
            log(rec)
        if step > 0 and step % a.eval_every == 0:
            log({"event": "eval", "step": step, "seq": seq, "seconds": round(time.time() - start, 2),
                 "heldout_bits_per_byte": round(heldout_bits_per_byte(
                     model, held, seq, max(4, a.eval_windows * a.seq // seq), True), 5)})
        step += 1
    train_seconds = time.time() - start

    # What is saved is bf16; measure the held-out rate of exactly those weights, in fp32.
    model = model.to(torch.bfloat16)
    bf16_state = {k: v.clone() for k, v in model.state_dict().items()}
    model_fp32 = Qwen3ForCausalLM(config).to(device)
    model_fp32.load_state_dict({k: v.float() for k, v in bf16_state.items()})
    final_bpb = heldout_bits_per_byte(model_fp32, held, a.seq, a.eval_windows, False)
    final = {"event": "final", "steps": step, "train_seconds": round(train_seconds, 2),
             "heldout_bits_per_byte_bf16_weights_fp32_compute": round(final_bpb, 5)}
    long_bpb = None
    if longest != a.seq:
        long_bpb = heldout_bits_per_byte(model_fp32, held, longest, a.heldout_windows_long, False)
        final[f"heldout_bits_per_byte_at_{longest}"] = round(long_bpb, 5)
    log(final)
    del model_fp32
    recall = None
    if recall_depths:
        # The saved weights as they are: bf16 weights, bf16 compute (what the engine's bf16 arm holds).
        recall = recall_rates(model, held_cpu, recall_depths, a.recall_probes, a.seed + 2, device)
        log({"event": "recall", "seed": a.seed + 2, "probes": a.recall_probes,
             "rates": {d: r["rate"] for d, r in recall.items()},
             "answer_bytes_right": {d: round(r["answer_bytes_right"], 4) for d, r in recall.items()},
             "examples": {d: r["examples"] for d, r in recall.items()}})

    model.save_pretrained(out_dir, safe_serialization=True)
    cfg = patch_config(out_dir, a, log)
    weights = out_dir / "model.safetensors"
    if not weights.exists():
        sys.exit(f"train_fixture_model: save_pretrained wrote no {weights} (sharded?); the fixture must be one file")
    if weights.stat().st_size > max_weight_bytes + (1 << 16):
        sys.exit(f"train_fixture_model: {weights} is {weights.stat().st_size} bytes, over {a.max_weight_mb} MiB")
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
        "License Version 2. corpus.json lists every file with its sha256.\n"
        + ("Some training rows also held synthetic passphrase text generated by tools/passphrase_data.py\n"
           "(random characters, no outside source).\n" if a.passphrase_frac > 0 else ""))
    training = {"seq": longest}
    if a.seq_schedule or a.tokens_per_step:
        training.update({"seq_note": "the longest sequence length trained on: the training context",
                         "seq_schedule": [{"seq": s_, "until_fraction": round(f_, 6), "batch": tokens_per_step // s_}
                                          for s_, f_ in stages],
                         "tokens_per_step": tokens_per_step})
    else:
        training["batch"] = a.batch
    training.update({"lr": a.lr, "warmup": a.warmup, "steps": step,
                     "max_seconds": a.max_seconds, "seconds": round(train_seconds, 2), "seed": a.seed,
                     "optimizer": "AdamW(0.9, 0.95), weight decay 0.1, clip 1.0, cosine to 10%",
                     "precision": "fp32 master weights, bf16 autocast"})
    if a.passphrase_frac > 0:
        training["passphrase_rows"] = {
            "fraction_of_rows": a.passphrase_frac, "answer_loss_weight": a.answer_weight,
            "generator": "tools/passphrase_data.py (random.Random(seed + 1)): passphrase, filler offset, "
                         "plant position uniform over the filler",
            "plant": ppd.PLANT, "ask": ppd.ASK, "alphabet": ppd.ALPHABET, "groups": list(ppd.GROUPS)}
    results = {"heldout_bits_per_byte": round(final_bpb, 5),
               "measured_on": "saved bf16 weights, fp32 compute, "
                              f"{a.eval_windows} windows of {a.seq} bytes"}
    if long_bpb is not None:
        results[f"heldout_bits_per_byte_at_{longest}"] = round(long_bpb, 5)
        results["measured_on_long"] = f"saved bf16 weights, fp32 compute, {a.heldout_windows_long} windows of {longest} bytes"
    if recall is not None:
        results["recall"] = {"measured_on": "saved bf16 weights, bf16 compute (transformers, sdpa), held-out "
                                            "filler; the kv-gate's probe layout: the plant after depth/2 filler "
                                            "bytes, the ask and the passphrase last; recalled when every "
                                            "passphrase byte is the top token (teacher-forced)",
                             "seed": a.seed + 2, "by_depth": recall}
    (out_dir / "fixture.json").write_text(json.dumps({
        "name": a.name,
        "architecture": "Qwen3ForCausalLM",
        "tokenizer": {"type": "bytes", "vocab_size": VOCAB, "bytes": "id = byte value, 0..255",
                      "specials": SPECIALS, "file_separator": "<|eos|>"},
        "shape": {"hidden": a.hidden, "layers": a.layers, "heads": a.heads, "kv_heads": a.kv_heads,
                  "head_dim": a.head_dim, "intermediate": a.intermediate, "rope_theta": a.rope_theta,
                  "max_position_embeddings": a.max_position, "tied": True, "parameters": params},
        "training": training,
        "results": results,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": sys.version.split()[0]},
        "device": torch.cuda.get_device_name(0),
        "config_json_dtype": cfg.get("dtype", cfg.get("torch_dtype")),
        "argv": sys.argv,
    }, indent=2) + "\n")
    log_file.close()
    print(f"train_fixture_model: wrote {out_dir} ({params} parameters, held-out {final_bpb:.3f} bits/byte"
          + (f", recall {json.dumps({d: r['rate'] for d, r in recall.items()})}" if recall else "") + ")")


if __name__ == "__main__":
    main()
