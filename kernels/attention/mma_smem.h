// Shared-memory layout and tuning of the tensor-core attention partial
// (attention_partial_mma_kernel in attention/partial_mma.cu), host-visible so that the layout's
// invariants are unit-tested without a device (tests/kernels/attention/mma_smem_test.cpp).
#pragma once
#include <cstddef>

#include "kernels/attention/rows.h"

namespace kc {

// Bytes of q's B fragments ([k-steps][parts][32 lanes] uint2) and of the scores then p
// ([8 heads][W] fp32).
KC_HD constexpr size_t mma_qf_bytes(int D, int parts) { return size_t(D / 16) * parts * 32 * 8; }
KC_HD constexpr size_t mma_ss_bytes(int W) { return size_t(kAttnHeadsPerBlock) * W * 4; }
// Shared memory of the mma partial: byte offsets of its arrays, in order, and the total
// (the kernel's pointers and the launch's size both come from here). The V ring's stages
// from 0, and over them q's B fragments (the p.v's group sums reuse this space) and the
// scores then p: right after the `pre` stages issued before the softmax, or at the ring's
// end when they fit there past them (pre > 1); the later stages overwrite them once they
// are dead; then p's B fragments ([key tiles][parts][32] uint2), V row pointers [W
// rounded up to 16], fp8 K and V row scales [W] each, fp8 q and p shifts [8] each.
struct MmaSmem {
  size_t ring, qf, ss, pf, vrows, ksc, vsc, qsh, psh, total;
  KC_HD constexpr MmaSmem(int W, int D, int parts, int stage_bytes, int stages, int pre)
      : ring(0),
        qf(pre > 1 && size_t(stages) * stage_bytes > size_t(pre) * stage_bytes + mma_qf_bytes(D, parts) + mma_ss_bytes(W)
               ? size_t(stages) * stage_bytes - mma_qf_bytes(D, parts) - mma_ss_bytes(W)
               : size_t(pre) * stage_bytes),
        ss(qf + mma_qf_bytes(D, parts)),
        pf(ss + mma_ss_bytes(W) > size_t(stage_bytes) * stages ? ss + mma_ss_bytes(W) : size_t(stage_bytes) * stages),
        vrows(pf + size_t((W + 15) / 16) * parts * 32 * 8),
        ksc(vrows + size_t((W + 15) / 16 * 16) * 8),
        vsc(ksc + size_t(W) * 4),
        qsh(vsc + size_t(W) * 4),
        psh(qsh + size_t(kAttnHeadsPerBlock) * 4),
        total(psh + size_t(kAttnHeadsPerBlock) * 4) {}
};

// Whether the tensor-core partial of (format, head_dim) keeps its partial outputs in L2 for
// the merge: stores with an L2 evict_last policy, which the merge reads with evict_first
// (ptx.cuh; launch_attention picks the merge's reads to match). bf16 d256 only: on the H200,
// in one call, three rounds interleaved against main 6725561 (reports/h200/issue20-tail1/),
// every bf16 d256 row >= 32K was 0.3 to 4.5 % faster (32K x b8 window 275.7 / 274.9 / 278.0
// -> 272.1 / 273.3 / 272.0 us; b1 x 128K 157.9 -> 150.7), fp8 d256 unchanged (1.001), and
// bf16 d128 at b8 x 128K and b32 0.4 to 1.1 % slower. Same values either way.
KC_HD constexpr bool attn_keeps_partials(Format f, int d) { return f == Format::bf16 && d == 256; }

// Tuning of the mma partial per format and head_dim (measured on the H200 at 32K x b8):
// resident blocks per SM asked of the register allocator, and the V ring. The KC_MMA_*
// macros override them for experiments.
template <int D, Format F>
struct MmaTune {
#ifdef KC_MMA_MIN_BLOCKS
  static constexpr int min_blocks = KC_MMA_MIN_BLOCKS;
#else
  // fp8 d128: 4 (64 registers; 12 bytes of spills with a ring of 7 stages of two tiles, 4
  // with today's 3 stages of four): 194.9 / 193.5 us against 205.4 / 205.9 at 3 (12 stages;
  // reports/h200/issue20-bf16/).
  static constexpr int min_blocks = D == 256 && F == Format::bf16 ? 2 : D == 128 && F == Format::fp8 ? 4 : 3;
#endif
  // V tiles through a shared-memory ring (stages of ring_tiles key tiles; before 933afba
  // (fp8) and e3327ec (bf16) they went to registers), and the stages issued before the
  // softmax (pre; with
  // pre > 1 q's fragments and the scores sit at the ring's end, past them). H200, 32K x b8,
  // alternating rounds (reports/h200/issue3-experiments-2026-11-30b.md):
  //  - fp8 d256: 10 stages of one tile (40 KB), pre 4: 169.7 / 170.5 us; 12 stages with
  //    pre 6: 179.3 / 177.5 (and 186.4 / 184.1 / 184.2 with pre 1); register loads 191 to
  //    194; fewer stages leave more of the SM's memory to L1.
  //  - fp8 d128: 12 stages of two tiles, pre 1: 203.7 / 206.3 against 212.3 / 215.0.
  //  - bf16: 8 stages of one tile (d256 64 KB at 2 blocks per SM, d128 32 KB at 3), pre 3 /
  //    1: d256 276.5 / 275.5 against 292.2 / 291.5 / 289.9 with register loads, d128 280.2
  //    / 279.5 against 296.7 / 297.8 / 297.2; 10 stages were slower (300, 294).
  //  - bf16, stages of two tiles (one barrier per two tiles; at d128 each of the two key
  //    groups gets a tile of every stage), 4 stages (the same bytes), pre 2 (d256) / 1
  //    (d128): d256 279.2 / 279.6 against 281.1 / 282.0, d128 278.9 / 277.7 against 280.8
  //    / 282.0, d128 b1 x 128K 159.8 / 158.6 against 163.6 / 163.8
  //    (reports/h200/issue20-bf16/).
  //  - fp8 d128 at 4 blocks per SM (min_blocks): 7 stages of two tiles, pre 1: 193.2 /
  //    194.8 (reports/h200/issue20-bf16/); 3 stages of four tiles (the same 24 KB in fewer,
  //    larger stages; 4 bytes of spills): 188.4 us median of 6 rounds against 194.5
  //    (reports/h200/issue20-tune3/; 4 stages of two tiles: 196.4).
#ifdef KC_MMA_VRING_STAGES
  static constexpr int fp8_ring_stages = D == 128 ? KC_MMA_VRING_STAGES128 : KC_MMA_VRING_STAGES;
  static constexpr int fp8_ring_tiles = D == 128 ? KC_MMA_VRING_TILES128 : KC_MMA_VRING_TILES;
#else
  static constexpr int fp8_ring_stages = D == 128 ? 3 : 10;
  static constexpr int fp8_ring_tiles = D == 128 ? 4 : 1;
#endif
#ifdef KC_MMA_BRING
  static constexpr int bf16_ring_stages = D == 128 ? KC_MMA_BRING128 : KC_MMA_BRING;
#else
  static constexpr int bf16_ring_stages = 4;
#endif
  static constexpr int bf16_ring_tiles = 2;
  static constexpr int ring_stages = F == Format::fp8 ? fp8_ring_stages : bf16_ring_stages;
  static constexpr int ring_tiles = F == Format::fp8 ? fp8_ring_tiles : bf16_ring_tiles;
  static constexpr int stage_bytes = ring_tiles * 16 * D * (F == Format::fp8 ? 1 : 2);
#ifdef KC_MMA_VRING_PRE
  static constexpr int fp8_ring_pre = D == 128 ? KC_MMA_VRING_PRE128 : KC_MMA_VRING_PRE;
#else
  static constexpr int fp8_ring_pre = D == 256 ? 4 : 1;
#endif
#ifdef KC_MMA_BPRE
  static constexpr int bf16_ring_pre = D == 128 ? KC_MMA_BPRE128 : KC_MMA_BPRE;
#else
  static constexpr int bf16_ring_pre = D == 256 ? 2 : 1;
#endif
  static constexpr int ring_pre = F == Format::fp8 ? fp8_ring_pre : bf16_ring_pre;
  // The K loads' 256-byte L2 prefetch hint (ldg_mma): bf16 without it (the kernel is L2-bound,
  // 93 % L2 against 84 % DRAM; 6 rounds, 32K x b8: d128 273.2 against 275.7 us, d256 276.1
  // against 277.9; 128-byte hint alike), fp8 with it (d128 without: 196.4 against 194.5;
  // d256 alike). reports/h200/issue20-tune3/.
#ifdef KC_MMA_K_L2_HINT
  static constexpr bool k_l2_hint = KC_MMA_K_L2_HINT;
#else
  static constexpr bool k_l2_hint = F == Format::fp8;
#endif
  static MmaSmem smem(int W) { return MmaSmem(W, D, attn_mma_parts(F), stage_bytes, ring_stages, ring_pre); }
};
// The q4 tensor-core partial (attention/partial_mma_q4.cu): its V ring (stages of
// ring_tiles 16-key tiles of q4 code rows; one tile per warp and stage) and blocks per SM
// asked of the register allocator (the packed d128 kernel: MmaQ4PackedTune below).
template <int D>
struct MmaQ4Tune {
  static constexpr int min_blocks = 3;
  static constexpr int ring_stages = 6;
  static constexpr int ring_tiles = D == 128 ? 4 : 2;
  static constexpr int stage_bytes = ring_tiles * 16 * D / 2;
};
// Its shared memory, byte offsets in order: the V ring; the scores then p ([8 heads] rows of
// ss_stride floats: the width rounded up to 32, plus 8, so that the p.v's 8-byte reads of
// (head g, keys 2t, 2t+1) hit distinct banks; at least 8 x D floats, as q is rotated there
// first); q's B fragments ([k-steps][32] uint4, both fp16 parts; the key groups' exchange
// after the p.v); V group scales as fp32 (times the group's p' power of two once the
// scores are done; 0 past the chunk's keys), group-major [D / 32][W rounded up to 16]; each
// key's position (KvPos: page byte offsets [W rounded up to 16] as uint64, then slots as
// uint32: every plane's row address from one split); each warp's largest V scale per group
// (fp16 magnitude bits); q's shifts [8].
struct MmaQ4Smem {
  int ss_stride, w16;
  size_t ring, ss, qf, vsc, pgb, slot, wm, qsh, total;
  KC_HD constexpr MmaQ4Smem(int W, int D, int stage_bytes, int stages)
      : ss_stride((W + 31) / 32 * 32 + 8),
        w16((W + 15) / 16 * 16),
        ring(0),
        ss(size_t(stage_bytes) * stages),
        qf(ss + size_t(kAttnHeadsPerBlock) * 4 * (ss_stride > D ? ss_stride : D)),
        vsc(qf + size_t(D / 16) * 32 * 16),
        pgb(vsc + size_t(D / 32) * w16 * 4),
        slot(pgb + size_t(w16) * 8),
        wm(slot + size_t(w16) * 4),
        qsh(wm + size_t(kAttnThreads / 32) * (D / 32) * 4),
        total(qsh + size_t(kAttnHeadsPerBlock) * 4) {}
};
// The packed q4 partial (head_dim 128, GQA group <= 4: attn_mma_q4_packed; the bench's
// 32q/8kv shape): 4 blocks per SM (64 registers, no spills, ptxas sm_90) with a V ring of
// 5 stages (6 would not fit 4 blocks at chunk 512): 172.6 us median of 6 rounds at 32K x b8
// against 187.5 at 3 blocks and 6 stages (4 stages: 173.1; reports/h200/issue20-tune3/).
// KC_Q4_PACKED_* override them for experiments.
struct MmaQ4PackedTune {
#ifdef KC_Q4_PACKED_MIN_BLOCKS
  static constexpr int min_blocks = KC_Q4_PACKED_MIN_BLOCKS;
  static constexpr int ring_stages = KC_Q4_PACKED_RING_STAGES;
#else
  static constexpr int min_blocks = 4;
  static constexpr int ring_stages = 5;
#endif
};
template <int D, bool PK>
KC_HD constexpr int mma_q4_ring_stages() {
  return PK ? MmaQ4PackedTune::ring_stages : MmaQ4Tune<D>::ring_stages;
}
template <int D, bool PK>
KC_HD constexpr int mma_q4_min_blocks() {
  return PK ? MmaQ4PackedTune::min_blocks : MmaQ4Tune<D>::min_blocks;
}
template <int D, bool PK = false>
KC_HD constexpr MmaQ4Smem mma_q4_smem(int W) {
  return MmaQ4Smem(W, D, MmaQ4Tune<D>::stage_bytes, mma_q4_ring_stages<D, PK>());
}

// ---- The short-row path (attention/short_path.cuh): a chunk on the CL blocks of a cluster.
// Separate from MmaTune / MmaQ4Tune above; nothing here changes the regular kernels.
// Its shared memory (bf16 / fp8), byte offsets in order: the block's V slice of every key
// of the chunk (tiles x 16 keys x slice_bytes, loaded once, no ring), q's B fragments, the
// scores then p ([8 heads][W] fp32; the cluster's ranks write theirs into every rank's),
// p's B fragments, V row pointers, fp8 K and V row scales, fp8 q and p shifts (as MmaSmem).
struct MmaShortSmem {
  size_t ring, qf, ss, pf, vrows, ksc, vsc, qsh, psh, total;
  KC_HD constexpr MmaShortSmem(int W, int D, int parts, int slice_bytes)
      : ring(0),
        qf(size_t((W + 15) / 16) * 16 * slice_bytes),
        ss(qf + mma_qf_bytes(D, parts)),
        pf(ss + mma_ss_bytes(W)),
        vrows(pf + size_t((W + 15) / 16) * parts * 32 * 8),
        ksc(vrows + size_t((W + 15) / 16 * 16) * 8),
        vsc(ksc + size_t(W) * 4),
        qsh(vsc + size_t(W) * 4),
        psh(qsh + size_t(kAttnHeadsPerBlock) * 4),
        total(psh + size_t(kAttnHeadsPerBlock) * 4) {}
};
// The short path's geometry of (D, F) on CL ranks: each rank's slice of E = D / CL elements
// (slice_bytes per key), and the K tiles a warp keeps in flight (its first KT tiles are
// issued at once; a chunk of 512 keys gives each warp 4 / CL tiles).
template <int D, Format F, int CL>
struct MmaShortTune {
  static constexpr int E = D / CL;
  static constexpr int slice_bytes = E * (F == Format::fp8 ? 1 : 2);
  static constexpr int k_tiles = CL == 2 ? 2 : 1;
  KC_HD static constexpr MmaShortSmem smem(int W) { return MmaShortSmem(W, D, attn_mma_parts(F), slice_bytes); }
};
// q4 (MmaQ4Smem's layout): the ring holds the rank's groups of every key, whole
// (tiles of 16 keys x D / 2 / CL code bytes).
template <int D>
KC_HD constexpr MmaQ4Smem mma_q4_short_smem(int W, int CL) {
  return MmaQ4Smem(W, D, 16 * (D / 2 / CL), (W + 15) / 16);
}

inline MmaSmem mma_smem(int W, int d, Format f) {
  return d == 128 ? (f == Format::fp8 ? MmaTune<128, Format::fp8>::smem(W) : MmaTune<128, Format::bf16>::smem(W))
                  : (f == Format::fp8 ? MmaTune<256, Format::fp8>::smem(W) : MmaTune<256, Format::bf16>::smem(W));
}

}  // namespace kc
