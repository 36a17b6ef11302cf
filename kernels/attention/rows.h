// Row helpers shared by the rope store, split-K attention and compaction kernels and
// their host twins: RoPE angles, key slots and the fixed reduction order of a 32-lane dot
// product. What differs by cache format (store, dequantised loads, rotation) is the
// format's Codec<F> traits (codecs/codec.h), chosen once by with_format (codecs/rows.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/codecs/rows.h"
#include "kernels/layout/kc_hd.h"
#include "kernels/layout/kv_layout.h"

namespace kc {

// A cache row as attention reads it (dequantised; q4 in rotated space): the format's
// Codec<F>::attn_row (codecs/), for callers that hold a runtime format.
inline void dequant_row(const KvView& v, int layer, int kv, int head, int64_t pos, float* out) {
  with_format(v.lay.format, [&](auto c) { decltype(c)::attn_row(v, RowRef{0, layer, kv, head, int32_t(pos)}, out); });
}

// RoPE (neox pairing) angle of pair i at position pos: theta_i = base^(-2i/r), the
// angle pos * theta_i and its cos / sin in float64, rounded once to fp32. An fp32
// pos * theta would be off by up to ~0.016 rad at pos 2^18.
// theta_i, once per pair (the rope store's blocks keep it across their rows).
KC_HD double rope_theta(int i, int rot_dims, double base) { return pow(base, -2.0 * double(i) / double(rot_dims)); }
// cos / sin of pos * theta_i (theta_i from rope_theta).
KC_HD void rope_cos_sin_theta(int64_t pos, double theta, float* c, float* s) {
#ifdef KC_PLANT_ROPE_FP32_ANGLE
  const double ang = double(float(pos) * float(theta));  // planted bug (test builds only): fp32 angle
#else
  const double ang = double(pos) * theta;
#endif
  *c = float(cos(ang));
  *s = float(sin(ang));
}
KC_HD void rope_cos_sin(int64_t pos, int i, int rot_dims, double base, float* c, float* s) {
  rope_cos_sin_theta(pos, rope_theta(i, rot_dims, base), c, s);
}

// Logical key position -> cache position of a row with `len` committed keys and a tail
// (draft-tree ancestors and itself) stored at tail[0 .. tail_len).
KC_HD int32_t key_slot(int32_t p, int32_t len, const int32_t* tail) {
#ifdef KC_PLANT_KEY_SLOT_TAIL_OFF_BY_ONE
  return p <= len ? p : tail[p - len];  // planted bug (test builds only): tail[0] read from slot len
#else
  return p < len ? p : tail[p - len];
#endif
}

// A 32-lane dot product in its one fixed order: lane l sums its d/32 contiguous
// elements [l*d/32, (l+1)*d/32) sequentially (one vector load per row on the device);
// the 32 partials combine in an xor butterfly (offsets 16, 8, 4, 2, 1), which leaves
// the same bits in every lane. The host twin replays this order.
constexpr int kLanes = 32;

KC_HD void butterfly_sum(float* p) {
  for (int off = 16; off > 0; off >>= 1) {
    float t[kLanes];
    for (int l = 0; l < kLanes; ++l) t[l] = p[l] + p[l ^ off];
    for (int l = 0; l < kLanes; ++l) p[l] = t[l];
  }
}

// Split-K partial state of one (row, q head, chunk): running max m, denominator l and
// unnormalised output o, fp32. An empty chunk has m = -inf, l = 0, o = 0.
constexpr int kMaxHeadDim = 256;

// The partial kernel's fixed arithmetic order (device and host twin alike):
//  - score of key i: s_i = (sum_{e=0..d-1} q_e k_ie) * scale, one fmaf per element in
//    element order (dot depth d);
//  - m = max_i s_i; p_i = expf(s_i - m); l: lane L of a warp sums p_L, p_{L+32}, ...
//    in key order, then the 32 partials combine in the xor butterfly (butterfly_sum);
//  - o: the chunk's keys are dealt to kAttnKeyGroups(d) key groups (key i to group
//    i % G); group g sums p_i v_i over its keys in key order (fmaf per element), then
//    the groups combine in a halving tree: for s = G/2, G/4, .., 1: o_g += o_{g+s}.
constexpr int kAttnThreads = 256;   // threads of one partial block
constexpr int kAttnHeadsPerBlock = 8;  // q heads of one block (a larger GQA group is split)
constexpr int kAttnElems = 4;       // elements of a V row one thread accumulates
KC_HD constexpr int attn_key_groups(int d) { return kAttnThreads * kAttnElems / d; }
// Depth of the p.v accumulation of one chunk of width w (for the float64 bound).
KC_HD constexpr int attn_pv_depth(int w, int d) {
  int g = attn_key_groups(d), levels = 0;
  for (int t = g; t > 1; t >>= 1) ++levels;
  return (w + g - 1) / g + levels;
}

// The cuda backend's tensor-core partial (attention_partial_mma_kernel, bf16 and fp8
// caches, and attention_partial_mma_q4_kernel, q4 caches in rotated space, with head_dim
// 128 or 256; every other case runs the order above on both backends). Keys, chunks, the
// softmax (m, p, l) and the merge are as above; the two products differ:
//  - q (fp32; q4: rotated as the fma order rotates it) is split into parts, each rounded
//    to nearest from what the parts before it left: bf16 caches three bf16 parts hi + mid
//    + lo, exact for normal numbers (24 = 8 + 8 + 8 significant bits); fp8 and q4 caches
//    two fp16 parts hi + lo (below). K elements are exact in bf16 (fp8 codes and q4 codes
//    in fp16). Score of key i: for each 16-element k-step in element order (q4: each lies
//    inside one 32-element group; the kernel assigns elements to k slots in its own order),
//    c = 0, then c += mma(K, part) from the last part to hi (m16n8k16, fp32 accumulate),
//    then s += c in fp32 (q4: s = fmaf(c, the key's scale of the step's group, s), the
//    group's scale on its partial dot); s = s * scale (fp8: (s * row scale) * scale).
//  - p.v: p (fp8: p * V row scale; q4: p * (the key's V scale of the element group times
//    the group's power of two below), one fp32 product each) is split the same way. The
//    chunk's 16-key tiles are dealt to
//    attn_mma_key_groups(d) key groups (tile j to group j % G); group g, for each of its
//    tiles in key order: c = 0, c += mma(V^T, p part) .. hi, then o_g += c in fp32; with
//    two groups o = o_0 + o_1 at last.
// Error model of one mma step (for the float64 bound): the sum of its 16 exact products
// and c, significands aligned to the largest and cut to 24 bits, then truncated to fp32:
// error <= (17 + 1) * 2^-23 = 36 u times (|c| + sum |a b|). Over the split steps of a
// k-step or tile (the carried c is at most 2^-7 of the sum) that is < 37 u of sum |a b|,
// and the fp32 sums over k-steps / a group's tiles and the groups' sum add one u each,
// so the bound uses depths 37 + d/16 (scores) and 37 + ceil(tiles / G) (+1 for the groups'
// sum when G = 2, +1 for the fp8 / q4 p * scale product) for the p.v, tiles = ceil(w / 16).
// q4's scale enters each k-step's fmaf exactly (the product is exact, the one rounding is
// the sum's), so its depths are fp8's.
// fp8 and q4 caches run on fp16 inputs (E4M3 codes and q4 codes are exact in fp16; the
// scales apply after the products): q and p' of each head (q4: of each element group, from
// the chunk's largest V scale of the group, p <= 1) are first scaled by
// 2^attn_f16_shift(their max magnitude), exactly, and the products unscaled by the same
// power after. Two fp16 parts (11 significant bits each) leave at most 2^-22 = 4 u of
// each scaled value (a depth of 4 more in both products), and a part below fp16's normal
// range at most 2^-25 of the scaled value, i.e. 2^-39 of the head's max magnitude (a term
// of the bound). Two parts rather than three: a third part cost 9 % of the fp8 partial's
// time (H200, 32K x b8) for 4 u of depth.
enum class AttnArith { fma_chain, mma_split };
// The power of two that puts amax in [2^14, 2^15); 0 when amax is 0 or not finite.
KC_HD int attn_f16_shift(float amax) {
  if (!(amax > 0.0f) || !(amax < INFINITY)) return 0;
  int e;
  (void)frexpf(amax, &e);  // amax in [2^(e-1), 2^e)
  return 15 - e;
}
inline bool attn_uses_mma(Format f, int d) {
  return with_format(f, [](auto c) { return decltype(c)::kAttnMma; }) && d >= 128;
}
constexpr int kMmaStepDepth = 37;
// Key groups of the p.v: two for head_dim 128, one for 256 (measured on the H200 at 32K x
// b8: 128 went from 315 / 308 to 298 / 239 us bf16 / fp8 with two; 256 was slower with
// two, 307 / 201 against 297 / 197 us).
KC_HD constexpr int attn_mma_key_groups(int d) { return d == 128 ? 2 : 1; }
// Parts of q and p on the tensor cores (fp16 inputs: fp8 and q4 caches), and the depth the
// last part's remainder adds.
KC_HD constexpr bool attn_mma_f16(Format f) { return f == Format::fp8 || f == Format::q4; }
KC_HD constexpr int attn_mma_parts(Format f) { return attn_mma_f16(f) ? 2 : 3; }
KC_HD constexpr int attn_mma_split_depth(Format f) { return attn_mma_f16(f) ? 4 : 0; }
KC_HD constexpr int attn_mma_dot_depth(int d, Format f) { return kMmaStepDepth + attn_mma_split_depth(f) + d / 16; }
KC_HD constexpr int attn_mma_pv_depth(int w, int d, Format f) {
  const int kg = attn_mma_key_groups(d), tiles = (w + 15) / 16;
  return kMmaStepDepth + attn_mma_split_depth(f) + (tiles + kg - 1) / kg + (kg > 1 ? 1 : 0) + (attn_mma_f16(f) ? 1 : 0);
}
// q4 at head_dim 128 with a GQA group of at most 4 q heads (so at most 4 per block; d 256
// stays unpacked: the contract's d 256 shapes have groups of 6 and 8, so a packed d 256
// kernel would run unchecked): q's and p's two fp16
// parts go side by side into the mma's 8 columns (hi of heads 0..3, lo of heads 0..3), one
// mma per k-step (per tile and m-tile in the p.v) where two run otherwise. Each part's
// products then sum on their own: per k-step c_part = mma(K, part) from 0, s_part =
// fmaf(c_part, scale, s_part); per tile c_part = mma(V^T, p' part) from 0, o_part += c_part
// (the key groups' sum per part), and the parts meet in one fp32 add at the end: s = s_hi +
// s_lo, o = o_hi + o_lo. The mma steps' error stays < 37 u of sum |a b| over both parts (36
// u of each part's sum, the lo part's sum at most 2^-11 of the hi's); the final add is one
// more rounding: depth + 1 in both products.
KC_HD constexpr bool attn_mma_q4_packed(Format f, int d, int group) {
  return f == Format::q4 && d == 128 && group <= kAttnHeadsPerBlock / 2;
}
KC_HD constexpr int attn_mma_dot_depth(int d, Format f, int group) {
  return attn_mma_dot_depth(d, f) + (attn_mma_q4_packed(f, d, group) ? 1 : 0);
}
KC_HD constexpr int attn_mma_pv_depth(int w, int d, Format f, int group) {
  return attn_mma_pv_depth(w, d, f) + (attn_mma_q4_packed(f, d, group) ? 1 : 0);
}

}  // namespace kc
