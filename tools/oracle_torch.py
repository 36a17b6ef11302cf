#!/usr/bin/env python3
"""An independent oracle for the rope store and attention: recomputes what
`tf-cuda-test export qwen-pages --out DIR` wrote with code nobody in this project wrote,
and writes a receipt of what agreed.

    python3 tools/oracle_torch.py DIR [--out reports/h200/oracle.json]

Needs torch, transformers and safetensors (the GPU machine has them). Everything runs in
float64 on the CPU. Per case (the manifest names its parameters):

  rope-q        our rotated queries (fp32) against transformers' Qwen3 `apply_rotary_pos_emb`
                (rotate-half pairing) applied in float64 to the first rot_dims dims, with cos/sin
                of pos * base^(-2i/r) in float64; bound 8u (|x_i| + |x_pair|), u = 2^-24.
  rope-k        our stored K rows, decoded by PyTorch (bfloat16 view; float8_e4m3fn view times
                the row scale), against the same rotation of k: bf16 within 2^-8 |y| plus the fp32
                rotation's bound; fp8 within 2^-4 |y| + 2^-10 scale plus it, and the scale within
                2^-22 of amax/448 of the float64 rotation.
  pass-bytes    dims >= rot_dims of K (not rotated) and every dim of V: bytes equal to PyTorch's
                own conversion of our fp32 inputs (bf16: `.to(torch.bfloat16)`; fp8: the row scale
                `amax / 448` in float32 and codes `(x / scale).to(torch.float8_e4m3fn)`).
  attention     our output against `scaled_dot_product_attention(..., scale=, enable_gqa=True)` in
                float64 over the K and V PyTorch decoded, our rotated q, causal mask; per element
                |ours - ref| <= (4e/(1-e) + gamma(len + 64)) * sum_i p_i |v_i|, with
                e = exp(2 ds + 8u) - 1 and ds = |scale| gamma(d + 40) max_i sum_j |q_j k_ij|
                (fp32 dot products of any order, tensor-core splits included).

Controls: the same checks with a convention changed on the oracle's side must fail
somewhere (interleaved GPT-J pairing for rope-k; query head h on kv head h mod kv_heads for
attention; the scale fixed at 1/sqrt(d); bf16 by truncation for pass-bytes). A control that
stays green means these cases cannot tell the conventions apart, and fails the receipt.

Exit 0 when every gate holds and every control is red, 1 otherwise, 2 for a bad folder.
"""
import argparse
import json
import math
import os
import sys
import time

U = 2.0 ** -24


def gamma(n):
    return n * U / (1 - n * U)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--out", default=None, help="receipt path (default DIR/oracle.json)")
    a = ap.parse_args()
    try:
        with open(os.path.join(a.dir, "manifest.json")) as f:
            man = json.load(f)
    except (OSError, ValueError) as e:
        print(f"oracle: {a.dir}/manifest.json: {e}", file=sys.stderr)
        return 2
    if man.get("schema") != "kernel-contracts/export/1":
        print(f"oracle: {a.dir}/manifest.json: schema: not kernel-contracts/export/1", file=sys.stderr)
        return 2

    import torch
    from safetensors.torch import load_file
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb
    torch.set_grad_enabled(False)
    F = torch.nn.functional

    t0 = time.monotonic()
    names = ["rope-q", "rope-k", "pass-bytes", "attention"]
    gates = {n: {"name": n, "passed": 0, "failed": 0, "skipped": 0, "worst": {"ratio": 0.0, "case": ""},
                 "failures": []} for n in names}
    ctl_names = ["rope-interleaved", "gqa-modulo", "scale-fixed", "bf16-truncate"]
    ctl_hits = {n: 0 for n in ctl_names}
    ctl_tried = {n: 0 for n in ctl_names}
    descriptions = {
        "rope-q": "our rotated q against transformers' apply_rotary_pos_emb in float64",
        "rope-k": "our stored K rows (decoded by PyTorch) against the float64 rotation, within the bf16/fp8 bound",
        "pass-bytes": "K dims past rot_dims and all of V: bytes equal to PyTorch's bf16 / float8_e4m3fn conversion",
        "attention": "our output against SDPA float64 (enable_gqa, causal) over the rows PyTorch decoded",
    }
    ctl_desc = {
        "rope-interleaved": "rope-k with GPT-J pairing (x_2i, x_2i+1) in the oracle",
        "gqa-modulo": "attention with query head h on kv head h mod kv_heads in the oracle",
        "scale-fixed": "attention with the scale fixed at 1/sqrt(d) in the oracle",
        "bf16-truncate": "pass-bytes with bf16 by truncation in the oracle",
    }

    def record(gate, case, ratio, detail=None):
        g = gates[gate]
        ok = ratio <= 1.0
        if ok:
            g["passed"] += 1
        else:
            g["failed"] += 1
            if len(g["failures"]) < 5:
                g["failures"].append(f"{case}: ratio {ratio:.4g}" + (f" ({detail})" if detail else ""))
        if ratio > g["worst"]["ratio"] or not g["worst"]["case"]:
            g["worst"] = {"case": case, "ratio": float(ratio)}

    def rotate(x, pos, rot, base, interleaved=False):
        """x [rows, heads, d] float64; rows at positions pos [rows]."""
        half = rot // 2
        theta = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / rot)
        ang = pos.to(torch.float64)[:, None] * theta[None, :]
        xr, xp = x[..., :rot], x[..., rot:]
        if interleaved:
            c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
            e, o = xr[..., 0::2], xr[..., 1::2]
            y = torch.stack([e * c - o * s, o * c + e * s], dim=-1).flatten(-2)
        else:
            emb = torch.cat([ang, ang], dim=-1)
            cos, sin = torch.cos(emb), torch.sin(emb)  # [rows, rot]
            # transformers' layout: [batch, heads, seq, dim], cos [batch, seq, dim]
            t = xr.permute(1, 0, 2).unsqueeze(0)
            y, _ = apply_rotary_pos_emb(t, t, cos.unsqueeze(0), sin.unsqueeze(0))
            y = y.squeeze(0).permute(1, 0, 2)
        return torch.cat([y, xp], dim=-1)

    def pair_abs(x, rot):
        xr = x[..., :rot].abs()
        half = rot // 2
        return torch.cat([xr[..., :half] + xr[..., half:], xr[..., half:] + xr[..., :half]], dim=-1)

    def fp8_codes(x32, scale32):
        q = (x32 / scale32[..., None]).to(torch.float8_e4m3fn)
        return q.view(torch.uint8)

    for c in man["cases"]:
        case = c["case"]
        t = load_file(os.path.join(a.dir, c["file"]))
        d, rot, base, L, Q = c["head_dim"], c["rot_dims"], c["rope_base"], c["len"], c["queries"]
        qh, kh = c["q_heads"], c["kv_heads"]
        fmt, first_q = c["format"], c["first_query_pos"]
        q, k, v = t["q"].double(), t["k"].double(), t["v"].double()
        off = c.get("pos_offset", 0)  # RoPE angle = off + cache position
        kpos = torch.arange(L)
        qpos = torch.arange(first_q, first_q + Q)

        # rope-q
        ref_q = rotate(q, qpos + off, rot, base)
        tol_q = 8 * U * torch.cat([pair_abs(q, rot), torch.zeros_like(q[..., rot:])], dim=-1) + 1e-300
        ratio = ((t["q_rot"].double() - ref_q).abs() / tol_q).max().item()
        record("rope-q", case, ratio)

        # K and V as stored, decoded by PyTorch
        ref_k = rotate(k, kpos + off, rot, base)
        dk = 8 * U * torch.cat([pair_abs(k, rot), torch.zeros_like(k[..., rot:])], dim=-1)
        if fmt == "bf16":
            kc, vc = t["k_cache"], t["v_cache"]
            kd, vd = kc.double(), vc.double()
            tol_k = 2.0 ** -8 * (ref_k.abs() + dk) + dk
            scale_ratio = 0.0
            # pass-through: exact bytes
            kp_ours = kc[..., rot:].contiguous().view(torch.int16)
            kp_ref = t["k"][..., rot:].to(torch.bfloat16).contiguous().view(torch.int16)
            vp_ref = t["v"].to(torch.bfloat16).view(torch.int16)
            bad = int((kp_ours != kp_ref).sum()) + int((vc.view(torch.int16) != vp_ref).sum())
            # control: bf16 by truncation
            trunc = (t["v"].view(torch.int32) >> 16).to(torch.int16)
            ctl_tried["bf16-truncate"] += 1
            ctl_hits["bf16-truncate"] += int((vc.view(torch.int16) != trunc).any())
        else:
            kcode = t["k_codes"].to(torch.uint8)
            vcode = t["v_codes"].to(torch.uint8)
            ks, vs = t["k_scale"], t["v_scale"]
            kd = kcode.view(torch.float8_e4m3fn).double() * ks.double()[..., None]
            vd = vcode.view(torch.float8_e4m3fn).double() * vs.double()[..., None]
            tol_k = 2.0 ** -4 * (ref_k.abs() + dk) + 2.0 ** -10 * ks.double()[..., None] + dk
            amax_ref = ref_k.abs().amax(dim=-1)
            dk_amax = dk.amax(dim=-1)
            scale_tol = 2.0 ** -22 * amax_ref / 448 + dk_amax / 448 + 1e-300
            scale_ratio = ((ks.double() - amax_ref / 448).abs() / scale_tol).max().item()
            kp_ours = kcode[..., rot:]
            kp_ref = fp8_codes(t["k"][..., rot:], ks)
            vs_ref = t["v"].abs().amax(dim=-1) / 448.0  # float32 division, as PyTorch does it
            bad = int((kp_ours != kp_ref).sum()) + int((vcode != fp8_codes(t["v"], vs_ref)).sum())
            bad += int((vs.view(torch.int32) != vs_ref.view(torch.int32)).sum())
        ratio_k = ((kd - ref_k).abs() / (tol_k + 1e-300)).max().item()
        record("rope-k", case, max(ratio_k, scale_ratio),
               f"scale ratio {scale_ratio:.3g}" if scale_ratio > 1 else None)
        # every element compared, so a mismatch count of 0 is the gate; ratio 1 + count otherwise
        record("pass-bytes", case, 0.0 if bad == 0 else 1.0 + bad, f"{bad} bytes differ" if bad else None)
        # control: GPT-J pairing (only informative where rot > 2)
        if rot > 2:
            alt = rotate(k, kpos + off, rot, base, interleaved=True)
            ctl_tried["rope-interleaved"] += 1
            ctl_hits["rope-interleaved"] += int((((kd - alt).abs() / (tol_k + 1e-300)).max().item()) > 1)

        # attention
        qr = t["q_rot"].double()
        o = t["out"].double()
        mask = kpos[None, :] <= qpos[:, None]  # [Q, L]

        def sdpa(kv_map, scale):
            qq = qr.permute(1, 0, 2).unsqueeze(0)  # [1, qh, Q, d]
            kk = kd.permute(1, 0, 2).unsqueeze(0)
            vv = vd.permute(1, 0, 2).unsqueeze(0)
            if kv_map == "block":
                return F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask, scale=scale,
                                                      enable_gqa=True).squeeze(0).permute(1, 0, 2)
            idx = torch.arange(qh) % kh
            return F.scaled_dot_product_attention(qq, kk[:, idx], vv[:, idx], attn_mask=mask,
                                                  scale=scale).squeeze(0).permute(1, 0, 2)

        scale = c["scale"]
        ref = sdpa("block", scale)
        # the bound's terms, per (query, head)
        grp = qh // kh
        kd_h = kd.repeat_interleave(grp, dim=1)  # [L, qh, d]
        vd_h = vd.repeat_interleave(grp, dim=1)
        qk_abs = torch.einsum("qhd,lhd->qhl", qr.abs(), kd_h.abs())  # [Q, qh, L]
        qk_abs = qk_abs.masked_fill(~mask[:, None, :], 0.0)
        ds = abs(scale) * gamma(d + 40) * qk_abs.amax(dim=-1)  # [Q, qh]
        e = torch.exp(2 * ds + 8 * U) - 1
        s = torch.einsum("qhd,lhd->qhl", qr, kd_h) * scale
        s = s.masked_fill(~mask[:, None, :], float("-inf"))
        p = torch.softmax(s, dim=-1)  # [Q, qh, L]
        pv = torch.einsum("qhl,lhd->qhd", p, vd_h.abs())
        tol = (4 * e / (1 - e) + gamma(L + 64))[..., None] * pv + 1e-300
        ratio = ((o - ref).abs() / tol).max().item()
        record("attention", case, ratio)
        if kh > 1 and grp > 1:
            ctl_tried["gqa-modulo"] += 1
            ctl_hits["gqa-modulo"] += int(((o - sdpa("modulo", scale)).abs() / tol).max().item() > 1)
        if abs(scale - 1 / math.sqrt(d)) > 1e-6 * scale and L > 1:
            ctl_tried["scale-fixed"] += 1
            ctl_hits["scale-fixed"] += int(((o - sdpa("block", 1 / math.sqrt(d))).abs() / tol).max().item() > 1)
        print(f"{case}: rope-q/k ok={gates['rope-q']['failed'] == 0}/{gates['rope-k']['failed'] == 0} "
              f"attention ratio {ratio:.3g}", flush=True)

    reasons = []
    gate_list = []
    for n in names:
        g = gates[n]
        g["total"] = g["passed"] + g["failed"]
        g["ok"] = g["failed"] == 0 and g["total"] > 0
        g["status"] = "FAIL" if g["failed"] else ("ok" if g["passed"] else "not run")
        g["description"] = descriptions[n]
        if not g["failures"]:
            del g["failures"]
        if g["status"] != "ok":
            reasons.append(f"gate {n}: {g['status']}")
        gate_list.append(g)
    controls = []
    for n in ctl_names:
        red = ctl_hits[n] > 0
        controls.append({"name": n, "description": ctl_desc[n], "red": red,
                         "caught_by": [{"rope-interleaved": "rope-k", "gqa-modulo": "attention",
                                        "scale-fixed": "attention", "bf16-truncate": "pass-bytes"}[n]] if red else [],
                         "cases": ctl_tried[n], "cases_caught": ctl_hits[n]})
        if not red:
            reasons.append(f"control {n}: green ({ctl_tried[n]} cases could not tell the conventions apart)")
    head = man.get("receipt_head", {})
    receipt = dict(head)
    receipt.update({
        "schema": "kernel-contracts/receipt/1", "kind": "contract", "name": "oracle",
        "verdict": "fail" if reasons else "pass", "verdict_reasons": reasons,
        "gates": gate_list, "controls": controls, "errors": [],
        "cases": {"requested": len(man["cases"]), "run": len(man["cases"])},
        "numbers": {"oracle": "PyTorch " + torch.__version__ + ", transformers apply_rotary_pos_emb, SDPA float64",
                    "export_dir": os.path.basename(os.path.abspath(a.dir))},
        "timings": {"total_s": time.monotonic() - t0},
    })
    receipt.setdefault("argv", [])
    out = a.out or os.path.join(a.dir, "oracle.json")
    with open(out + ".tmp", "w") as f:
        json.dump(receipt, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)
    for g in gate_list:
        print(f"{g['name']:12s} {g['status']:5s} {g['passed']}/{g['total']} worst {g['worst']['ratio']:.4g}")
    for ctl in controls:
        print(f"control {ctl['name']:18s} {'red' if ctl['red'] else 'GREEN'} ({ctl['cases_caught']}/{ctl['cases']})")
    print(f"oracle: {receipt['verdict']} -> {out}")
    return 0 if receipt["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
