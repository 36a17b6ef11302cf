#!/usr/bin/env python3
"""transformers' greedy `generate` timed for `tf-cuda-test bench engine` (run on the GPU machine).

Reads IN (JSON, written by the bench):
  {"models": [{"name": N, "dir": D, "parallel": [1, 4, 8], "prompt": [ids], "new_tokens": T, "reps": R}]}
and for every model and batch size P runs Qwen3ForCausalLM.generate on P copies of the prompt:
bf16 weights (the checkpoint's) and bf16 compute, SDPA attention, static cache
(cache_implementation="static"), greedy (do_sample=False), exactly T new tokens (no stop at
<|eos|>: the model's eos_token_id is cleared, as the engine's bench does not stop either).

Decode time = median time of generate(T new tokens) - median time of generate(1 new token)
(both include the same prefill), over T - 1 decode steps; decode tok/s = P (T - 1) / decode
time. One warm-up of each before timing. Writes OUT (JSON): versions, device, precision,
notes, and one row per (model, P). A model that fails to load or run gets an "error" row;
the bench reports its targets as not measured then.

transformers' Qwen3 rotates the whole head. A checkpoint with partial rotary (the synthetic
qwen35-27b-attn preset: 64 of 256 dims) is timed with its rotary widened to the whole head
(the same weights and shapes; the tokens differ, the time of the step barely: the rotary is
a few element-wise kernels either way); the row says so.

  python3 tools/transformers_decode_bench.py IN.json OUT.json [--device cuda|cpu]

Exit 0 written (rows that failed carry their error); 1 torch or transformers could not be
imported or sees no CUDA device (OUT says so); 2 bad input (IN not readable or not of the form
above: names, folders, batch sizes of at least 1, prompt token ids, new_tokens of at least 2,
reps of at least 1; an OUT whose folder is missing or not writable), one line naming it,
nothing written.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def fail(msg):
    print(f"transformers_decode_bench: {msg}", file=sys.stderr)
    sys.exit(2)


def read_in(path):
    def count(x, least):
        return isinstance(x, int) and not isinstance(x, bool) and x >= least
    try:
        with open(path) as f:
            cfg = json.load(f)
        if not isinstance(cfg, dict) or not isinstance(cfg.get("models"), list):
            raise ValueError("not an object with a models list")
        for i, m in enumerate(cfg["models"]):
            if not isinstance(m, dict):
                raise ValueError(f"models[{i}]: not an object")
            for k, ok in (("name", lambda x: isinstance(x, str) and x), ("dir", lambda x: isinstance(x, str) and x),
                          ("parallel", lambda x: isinstance(x, list) and x and all(count(p, 1) for p in x)),
                          ("prompt", lambda x: isinstance(x, list) and x and all(count(t, 0) for t in x)),
                          ("new_tokens", lambda x: count(x, 2)), ("reps", lambda x: count(x, 1))):
                if not ok(m.get(k)):
                    raise ValueError(f"models[{i}]: {k} {json.dumps(m.get(k))[:40]} is missing or out of range")
    except (OSError, ValueError) as e:
        fail(f"IN: {path}: {e}")
    return cfg


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inp")
    p.add_argument("out")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = p.parse_args()
    cfg = read_in(a.inp)
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if os.path.isdir(a.out) or not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        fail(f"OUT: {a.out}: not a file in a writable folder")
    res = {"rows": [], "notes": []}
    try:
        import torch
        import transformers
        from transformers import AutoConfig, Qwen3ForCausalLM
    except Exception as ex:  # noqa: BLE001 - reported, not raised
        res["error"] = f"import failed: {ex}"
        json.dump(res, open(a.out, "w"), indent=1)
        print(res["error"], file=sys.stderr)
        return 1
    dev = a.device
    if dev == "cuda" and not torch.cuda.is_available():
        res["error"] = "torch sees no CUDA device"
        json.dump(res, open(a.out, "w"), indent=1)
        print(res["error"], file=sys.stderr)
        return 1
    res.update({"torch": torch.__version__, "transformers": transformers.__version__,
                "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
                "precision": "bf16 weights (as in the checkpoint), bf16 compute, SDPA attention, static bf16 KV cache",
                "method": "generate(greedy, static cache, exactly T new tokens; transformers compiles the forward "
                          "with torch.compile for a static cache by itself: rows say compiled_forward); decode = median "
                          "t(T) - median t(1) over T - 1 steps; one warm-up each (the compilation happens there)"})

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    for m in cfg["models"]:
        name = m["name"]
        try:
            conf = AutoConfig.from_pretrained(m["dir"])
            note = None
            rp = getattr(conf, "rope_parameters", None) or {}
            prf = getattr(conf, "partial_rotary_factor", None) or rp.get("partial_rotary_factor") or 1.0
            if prf != 1.0:
                conf.partial_rotary_factor = 1.0
                if isinstance(rp, dict) and "partial_rotary_factor" in rp:
                    rp["partial_rotary_factor"] = 1.0
                note = f"partial rotary {prf} widened to the whole head (transformers' Qwen3 rotates every dim): timing only"
            model = Qwen3ForCausalLM.from_pretrained(m["dir"], config=conf, dtype=torch.bfloat16).to(dev).eval()
            gc = model.generation_config
            gc.eos_token_id = None  # every lane decodes exactly T tokens
            gc.pad_token_id = 258
            gc.do_sample = False
            for key in ("temperature", "top_p", "top_k"):
                if hasattr(gc, key):
                    setattr(gc, key, None)
        except Exception as ex:  # noqa: BLE001
            res["rows"].append({"model": name, "error": f"load failed: {type(ex).__name__}: {ex}"[:400]})
            print(res["rows"][-1], file=sys.stderr, flush=True)
            continue
        T, reps = int(m["new_tokens"]), int(m["reps"])
        for P in m["parallel"]:
            row = {"model": name, "parallel": P, "new_tokens": T}
            if note:
                row["note"] = note
            try:
                ids = torch.tensor([m["prompt"]] * P, device=dev)
                mask = torch.ones_like(ids)

                def run(new):
                    sync()
                    t0 = time.perf_counter()
                    with torch.no_grad():
                        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new,
                                             do_sample=False, cache_implementation="static", pad_token_id=258)
                    sync()
                    t = time.perf_counter() - t0
                    got = out.shape[1] - ids.shape[1]
                    if got != new:
                        raise RuntimeError(f"generate gave {got} new tokens, wanted {new}")
                    return t

                run(T), run(1)  # warm-up (static cache allocation, kernels' first launches)
                tT = [run(T) for _ in range(reps)]
                t1 = [run(1) for _ in range(reps)]
                dec = statistics.median(tT) - statistics.median(t1)
                # transformers compiles the forward (torch.compile) on its own for a static cache
                row["compiled_forward"] = getattr(model, "_compiled_call", None) is not None
                row.update({"t_all_s": statistics.median(tT), "t_first_s": statistics.median(t1),
                            "decode_s": dec, "steps": T - 1,
                            "step_us": dec / (T - 1) * 1e6 if dec > 0 else None,
                            "decode_tok_s": P * (T - 1) / dec if dec > 0 else None})
            except Exception as ex:  # noqa: BLE001
                row["error"] = f"{type(ex).__name__}: {ex}"[:400]
            res["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        del model
        if dev == "cuda":
            torch.cuda.empty_cache()
    json.dump(res, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
