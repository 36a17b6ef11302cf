#!/usr/bin/env python3
"""The checkpoint reader (check_qwen3_checkpoint, then load_qwen3_checkpoint) on mutated model
folders.

    checkpoint_fuzz.py PROBE TOOL [--count N] [--seed S] [--show K]

TOOL (tf-cuda-test) writes a base with `make-model --preset tiny --layers 1`. Each of N mutants
(default 300; seed S, default 1) edits the base once or twice:
  - config.json: a field deleted, added, retyped, moved by one or set to a bound, as in
    fixture_fuzz.py; or its bytes truncated or emptied;
  - the safetensors header: the same edits on its JSON (lengths rewritten to match), or the
    header padded with spaces (which the format allows: files written by Hugging Face do it);
  - the safetensors bytes: the length prefix set to another value, the file cut short or
    lengthened, a byte of the header flipped;
  - a file removed, or a sharded index written beside the single file.
PROBE (tests/tools/fixture_probe) answers for each folder. A defect is:
  - an exception or a crash (under KC_SANITIZE_HOST, a sanitizer's report is a crash);
  - a refusal that does not begin with the folder (it must name the file it is about);
  - accepted where it must not be: a tensor's name, dtype or shape other than the base's, the
    length prefix changed, the data cut short or its ranges not tiling it exactly, or a config
    field that sets a shape changed to another value (null may mean its default);
  - refused where it must not be: the header padded with spaces and nothing else.
Exit 0 with no defect, 1 with any (the first K printed, default 12), 2 for bad usage."""
import copy
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_fuzz import NUMBERS, mutate_once, parse_args  # noqa: E402

SHAPE_KEYS = {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "dtype", "torch_dtype", "tie_word_embeddings"}


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write_st(path, header, data, pad=0):
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


def tensors(header):
    return {k: (v.get("dtype"), v.get("shape")) if isinstance(v, dict) else v
            for k, v in header.items() if k != "__metadata__"} if isinstance(header, dict) else header


def tiles(header, nbytes):
    """Whether the header's tensors' ranges tile the data exactly (sizes from their shapes)."""
    try:
        spans = []
        for k, v in header.items():
            if k == "__metadata__":
                continue
            b, e = v["data_offsets"]
            n = 1
            for d in v["shape"]:
                n *= d
            if not (isinstance(b, int) and isinstance(e, int) and 0 <= b <= e and e - b == n * 2):
                return False
            spans.append((b, e))
        spans.sort()
        at = 0
        for b, e in spans:
            if b != at:
                return False
            at = e
        return at == nbytes
    except (TypeError, ValueError, KeyError, AttributeError):
        return False


def same_value(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b and type(a) in (int, float, str, type(None)) and type(b) in (int, float, str, type(None))


def mutate(rng, base_cfg, base_hdr, base_data, d, nums):
    """Writes one mutant into folder d; returns (edits, must) where must is 'refuse', 'accept'
    or None (either is right)."""
    cfg, hdr, data = copy.deepcopy(base_cfg), copy.deepcopy(base_hdr), base_data
    edits, must = [], None
    os.makedirs(d, exist_ok=True)
    cfg_bytes = None
    raw = None  # final safetensors bytes when edited at the byte level
    pad = 0
    for _ in range(rng.choice([1, 1, 2])):
        fam = rng.choice(["config", "config", "header", "header", "bytes", "pad", "files"])
        if fam == "config":
            cfg, p, what = mutate_once(rng, cfg, nums, sorted(base_cfg))
            edits.append("config.json " + what)
        elif fam == "header":
            hdr, p, what = mutate_once(rng, hdr, nums, ["dtype", "shape", "data_offsets", "zz_unknown"])
            edits.append("header " + what)
        elif fam == "bytes":
            op = rng.choice(["prefix", "cut", "grow", "flip"])
            h = json.dumps(hdr, separators=(",", ":")).encode()
            raw = bytearray(struct.pack("<Q", len(h)) + h + data)
            if op == "prefix":
                v = rng.choice([0, 1, 2, len(h) - 1, len(h) + 1, len(raw), 2**32, 2**63, 2**64 - 1])
                raw[:8] = struct.pack("<Q", v)
                edits.append("length prefix -> %d (header %d)" % (v, len(h)))
                must = "refuse"
            elif op == "cut":
                at = rng.randrange(0, len(raw))
                raw = raw[:at]
                edits.append("file cut at byte %d of %d" % (at, 8 + len(h) + len(data)))
                must = "refuse"
            elif op == "grow":
                extra = rng.choice([1, 2, 7, 4096])
                raw += b"\0" * extra
                edits.append("%d bytes appended after the data" % extra)
                must = "refuse"  # the ranges no longer tile the data
            else:
                at = rng.randrange(8, 8 + len(h))
                raw[at] ^= 1 << rng.randrange(8)
                edits.append("header byte %d flipped" % at)
        elif fam == "pad":
            pad = rng.choice([1, 7, 8, 1000])
            edits.append("header padded with %d spaces" % pad)
        else:
            op = rng.choice(["no-config", "no-weights", "both-layouts", "config-cut", "config-empty"])
            edits.append(op)
            must = "refuse"
            if op == "config-cut":
                t = json.dumps(cfg, indent=2).encode()
                cfg_bytes = t[:rng.randrange(0, len(t))]
            elif op == "config-empty":
                cfg_bytes = b""
            else:
                edits[-1] = op
                open(os.path.join(d, "." + op), "w").close()
    if not os.path.exists(os.path.join(d, ".no-config")):
        open(os.path.join(d, "config.json"), "wb").write(
            cfg_bytes if cfg_bytes is not None else json.dumps(cfg, indent=2).encode())
    if not os.path.exists(os.path.join(d, ".no-weights")):
        st = os.path.join(d, "model.safetensors")
        if raw is not None:
            open(st, "wb").write(bytes(raw))
        else:
            write_st(st, hdr, data, pad)
    if os.path.exists(os.path.join(d, ".both-layouts")):
        names = {k: "model.safetensors" for k in base_hdr if k != "__metadata__"}
        json.dump({"weight_map": names}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    for f in (".no-config", ".no-weights", ".both-layouts"):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    # What the config edits imply: a field that sets a shape, present with another value (not a
    # bool for a number, nor the reverse), leaves no tensor as the config wants it.
    if not isinstance(cfg, dict):
        must = "refuse"
    else:
        for k in SHAPE_KEYS:
            # null may stand for the field's default (Hugging Face reads head_dim: null so).
            if k in cfg and k in base_cfg and cfg[k] is not None and not same_value(cfg[k], base_cfg[k]):
                must = "refuse"
    # What the header edits imply.
    if raw is None and must != "refuse":
        if tensors(hdr) != tensors(base_hdr) or not isinstance(hdr, dict):
            must = "refuse"
        elif not tiles(hdr, len(data)):
            must = "refuse"
        elif all(e.startswith("header padded") for e in edits):
            must = "accept"
    return edits, must


def main():
    opts, rest = parse_args(sys.argv[1:], {"--count": 300, "--seed": 1, "--show": 12})
    if len(rest) != 2:
        print(__doc__)
        return 2
    probe, tool = rest
    rng = random.Random(opts["--seed"])
    tmp = tempfile.mkdtemp(prefix="kc-ckpt-fuzz-")
    try:
        base = os.path.join(tmp, "base")
        subprocess.run([tool, "make-model", "--preset", "tiny", "--layers", "1", "--out", base], check=True,
                       capture_output=True)
        base_cfg = json.load(open(os.path.join(base, "config.json")))
        base_hdr, base_data = read_st(os.path.join(base, "model.safetensors"))
        nums = sorted(set(NUMBERS) | {0, 1, 2, 31, 32, 33, 127, 128, 129, 259, 260, 261, 383, 384, 385},
                      key=lambda x: (float(x), str(type(x))))
        items = [(base, [], "accept")]
        for i in range(opts["--count"]):
            d = os.path.join(tmp, "m%04d" % i)
            edits, must = mutate(rng, base_cfg, base_hdr, base_data, d, nums)
            items.append((d, edits, must))
        lines = "".join(json.dumps({"kind": "checkpoint", "dir": d, "fixture": None}) + "\n" for d, _, _ in items)
        run = subprocess.run([probe], input=lines, capture_output=True, text=True)
        answers = [json.loads(x) for x in run.stdout.splitlines()]
        defects = []
        if run.returncode != 0 or len(answers) != len(items):
            d, edits, _ = items[len(answers)] if len(answers) < len(items) else items[-1]
            defects.append(("crash", "the probe answered %d of %d (exit %d): %s" % (
                len(answers), len(items), run.returncode, run.stderr.strip()[-1500:]), d, edits))
        tally = {}
        for (d, edits, must), ans in zip(items, answers):
            got = "exception" if "exception" in ans else "accept" if ans.get("ok") else "refuse"
            tally[got] = tally.get(got, 0) + 1
            if got == "exception":
                defects.append(("exception", ans["exception"], d, edits))
            elif got == "refuse" and not ans.get("err", "").startswith((d + "/", d + ": ")):
                defects.append(("unnamed", ans.get("err", ""), d, edits))
            elif must and got != must:
                defects.append(("%sed, must %s" % (got, must), ans.get("err", ""), d, edits))
        print("checkpoint fuzz: %d mutants of a tiny checkpoint (seed %d): %s" % (
            len(items) - 1, opts["--seed"], ", ".join("%s %d" % kv for kv in sorted(tally.items()))))
        for k in ("accept", "refuse"):
            if tally.get(k, 0) == 0:
                defects.append(("one-sided", "no mutant was %sed: the fuzz tests nothing" % k, "", []))
        if not defects:
            print("no defect: every mutant refused naming its file, or accepted as the format allows")
            return 0
        print("%d defects" % len(defects))
        for kind, msg, d, edits in defects[:opts["--show"]]:
            print("- %s: %s\n    folder %s, edits: %s" % (kind, msg[:300], os.path.basename(d), "; ".join(edits)))
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
