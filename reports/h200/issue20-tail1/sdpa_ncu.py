#!/usr/bin/env python3
"""One SDPA decode call (as tools/bench_sdpa.py times it: bf16, one query row per sequence,
dense K/V, enable_gqa=True) between cudaProfilerStart/Stop, for ncu --profile-from-start off.
argv: backend (cudnn|flash) q_heads kv_heads head_dim batch ctx."""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[sys.argv[1]]
hq, hkv, d, b, ctx = map(int, sys.argv[2:7])
q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
v = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
with sdpa_kernel([be]):
    for _ in range(3):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    e.record()
    torch.cuda.synchronize()
    print(f"sdpa {sys.argv[1]} {hq}q/{hkv}kv/d{d}/b{b}/ctx{ctx}: {s.elapsed_time(e) * 1e3:.1f} us (events, one call)", flush=True)
    torch.cuda.profiler.start()
    torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
