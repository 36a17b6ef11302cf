// The tensor-core partial's shared-memory layout (kernels/attention/mma_smem.h) for every chunk width
// the command line accepts (1 .. 1024), both formats and both head_dims it serves: the V
// ring's stages issued before the softmax never overlap q's fragments or the scores; no
// stage overlaps the arrays the p.v still reads; the p.v's group-sum exchange fits in q's
// fragment space; every array holds what the kernel puts there; alignment; the per-block
// limit of sm_90; the size the launch asks for is the kernel's own layout; and, at the bench's
// chunk of 512, the resident blocks per SM the register budget asks for still fit in shared memory.
#include <gtest/gtest.h>

#include <algorithm>

#include <string>

#include "kernels/attention/mma_smem.h"

namespace kc {
namespace {

constexpr size_t kMaxSmemPerBlock = 227 * 1024;  // sm_90 dynamic shared memory per block
constexpr size_t kSmemPerSm = 228 * 1024, kReservedPerBlock = 1024;

template <int D, Format F>
void check_all_widths() {
  using T = MmaTune<D, F>;
  const std::string what = std::string(format_name(F)) + " d" + std::to_string(D);
  const size_t sb = size_t(T::stage_bytes), rs = size_t(T::ring_stages), pre = size_t(T::ring_pre);
  ASSERT_GE(T::ring_pre, 1) << what;
  ASSERT_GE(rs, 2u) << what;
  ASSERT_LT(pre, rs) << what;  // the loop issues stage st + RS - 1, so at most RS - 1 go out first
  ASSERT_EQ(sb % 128, 0u) << what;
  for (int w = 1; w <= 1024; ++w) {
    const MmaSmem m = T::smem(w);
    const size_t qf_end = m.ss + mma_ss_bytes(w);  // q fragments, then scores
    SCOPED_TRACE(what + " chunk " + std::to_string(w));
    ASSERT_EQ(m.ring, 0u);
    ASSERT_GE(m.qf, pre * sb) << "stages before the softmax overlap q's fragments";
    ASSERT_LE(m.qf, m.ss);
    ASSERT_GE(m.pf, qf_end) << "scores overlap p's fragments";
    ASSERT_GE(m.pf, rs * sb) << "a ring stage overlaps p's fragments";
    ASSERT_LE(m.pf, m.vrows);
    ASSERT_LE(m.vrows, m.ksc);
    ASSERT_LE(m.psh, m.total);
    // Each array after the scores holds what the kernel puts there (a width that is not a
    // multiple of 16 still has its last, partial key tile).
    ASSERT_GE(m.vrows - m.pf, size_t((w + 15) / 16) * attn_mma_parts(F) * 32 * 8) << "p's fragments";
    ASSERT_GE(m.ksc - m.vrows, size_t((w + 15) / 16 * 16) * 8) << "V row pointers";
    ASSERT_GE(m.vsc - m.ksc, size_t(w) * 4) << "K row scales";
    ASSERT_GE(m.qsh - m.vsc, size_t(w) * 4) << "V row scales";
    ASSERT_GE(m.psh - m.qsh, size_t(kAttnHeadsPerBlock) * 4) << "q's shifts";
    ASSERT_GE(m.total - m.psh, size_t(kAttnHeadsPerBlock) * 4) << "p's shifts";
    ASSERT_EQ(m.qf % 16, 0u);
    ASSERT_EQ(m.ss % 16, 0u);
    ASSERT_EQ(m.pf % 16, 0u);
    ASSERT_EQ(m.vrows % 8, 0u);
    ASSERT_LE(m.total, kMaxSmemPerBlock);
  }
  // The p.v's key groups hand their sums over through q's fragment space.
  constexpr int KG = attn_mma_key_groups(D), WPG = 8 / KG, MT = D / 16 / WPG;
  EXPECT_GE(mma_qf_bytes(D, attn_mma_parts(F)), size_t(WPG) * 32 * MT * 16) << what;
  // At the bench's chunk the blocks the register budget allows still fit in shared memory.
  const size_t per_block = T::smem(512).total + kReservedPerBlock;
  EXPECT_GE(kSmemPerSm / per_block, size_t(T::min_blocks)) << what << ": " << per_block << " bytes per block";
}

// The q4 partial's layout (MmaQ4Smem): arrays in order and aligned, the scores' rows hold
// q's staging (8 x D floats), the key groups' exchange fits in q's fragments, the sm_90
// limit, and the blocks the register budget asks for at the bench's chunk; PK: the packed
// d128 kernel (MmaQ4PackedTune: its own ring stages and blocks per SM).
template <int D, bool PK>
void check_q4_widths() {
  const std::string what = "q4 d" + std::to_string(D) + (PK ? " packed" : "");
  constexpr int stages = mma_q4_ring_stages<D, PK>(), min_blocks = mma_q4_min_blocks<D, PK>();
  ASSERT_GE(stages, 2) << what;
  for (int w = 1; w <= 1024; ++w) {
    const MmaQ4Smem m = mma_q4_smem<D, PK>(w);
    SCOPED_TRACE(what + " chunk " + std::to_string(w));
    ASSERT_EQ(m.ring, 0u);
    ASSERT_EQ(m.ss, size_t(MmaQ4Tune<D>::stage_bytes) * stages);
    ASSERT_GE(m.ss_stride, w);
    ASSERT_EQ(m.ss_stride % 32, 8);  // (head g, keys 2t, 2t+1) 8-byte reads: distinct banks
    ASSERT_GE(m.qf - m.ss, size_t(8) * 4 * std::max(m.ss_stride, D));
    ASSERT_GE(m.qf - m.ss, size_t(8) * 4 * D);  // q's staging
    ASSERT_GE(m.vsc - m.qf, size_t(D / 16) * 32 * 16);  // q's fragments, both parts
    ASSERT_GE(m.vsc - m.qf, size_t(attn_mma_key_groups(D) == 2 ? 4 : 0) * 32 * 2 * 16);  // exchange
    ASSERT_GE(m.pgb - m.vsc, size_t(D / 32) * m.w16 * 4);  // fp32 scales
    ASSERT_GE(m.w16, w);
    ASSERT_GE(m.slot - m.pgb, size_t(m.w16) * 8);
    ASSERT_GE(m.wm - m.slot, size_t(m.w16) * 4);
    ASSERT_LE(m.qsh, m.total);
    ASSERT_GE(m.qsh - m.wm, size_t(kAttnThreads / 32) * (D / 32) * 4) << "every warp's largest V scales";
    ASSERT_GE(m.total - m.qsh, size_t(kAttnHeadsPerBlock) * 4) << "q's shifts end inside the total";
    for (size_t off : {m.ss, m.qf, m.vsc, m.pgb, m.slot, m.wm}) ASSERT_EQ(off % 16, 0u);
    ASSERT_LE(m.total, kMaxSmemPerBlock);
  }
  const size_t per_block = mma_q4_smem<D, PK>(512).total + kReservedPerBlock;
  EXPECT_GE(kSmemPerSm / per_block, size_t(min_blocks)) << what << ": " << per_block << " bytes per block";
}

TEST(MmaSmem, Q4LayoutHoldsForEveryChunkWidth) {
  check_q4_widths<128, false>();
  check_q4_widths<128, true>();
  check_q4_widths<256, false>();
}

TEST(MmaSmem, LayoutHoldsForEveryChunkWidth) {
  check_all_widths<128, Format::bf16>();
  check_all_widths<128, Format::fp8>();
  check_all_widths<256, Format::bf16>();
  check_all_widths<256, Format::fp8>();
}

// The short-row path's layouts (MmaShortSmem, mma_q4_short_smem): the V slice of every key
// of the chunk before anything else, arrays in order and aligned (16 bytes where cp.async,
// ldmatrix or 16-byte loads use them), the p.v exchange in q's fragments, and at the bench's
// chunk of 512 the rank counts the launcher offers fit the sm_90 per-block limit (a width
// whose layout does not fit is never picked: attn_short_pick).
template <int D, Format F, int CL>
void check_short_widths() {
  using T = MmaShortTune<D, F, CL>;
  const std::string what = std::string(format_name(F)) + " d" + std::to_string(D) + " cl" + std::to_string(CL);
  ASSERT_EQ(T::slice_bytes % 16, 0) << what;
  ASSERT_EQ(T::E % 16, 0) << what;
  ASSERT_LE(T::E / 16 * attn_mma_key_groups(D), 8) << what;  // p.v warps: one m-tile each
  for (int w = 1; w <= 1024; ++w) {
    const MmaShortSmem m = T::smem(w);
    SCOPED_TRACE(what + " chunk " + std::to_string(w));
    ASSERT_EQ(m.ring, 0u);
    ASSERT_GE(m.qf, size_t((w + 15) / 16) * 16 * T::slice_bytes);
    ASSERT_GE(m.ss - m.qf, mma_qf_bytes(D, attn_mma_parts(F)));
    ASSERT_GE(m.ss - m.qf, size_t(T::E / 16) * 32 * 16);  // the key groups' exchange
    ASSERT_GE(m.pf - m.ss, mma_ss_bytes(w));
    ASSERT_GE(m.vrows - m.pf, size_t((w + 15) / 16) * attn_mma_parts(F) * 32 * 8);
    ASSERT_GE(m.ksc - m.vrows, size_t((w + 15) / 16 * 16) * 8);
    ASSERT_LE(m.psh + 32, m.total);
    for (size_t off : {m.qf, m.ss, m.pf, m.vrows}) ASSERT_EQ(off % 16, 0u);
  }
  EXPECT_LE(T::smem(512).total, kMaxSmemPerBlock) << what;
}
template <int D, int CL>
void check_q4_short_widths() {
  const std::string what = "q4 d" + std::to_string(D) + " cl" + std::to_string(CL);
  for (int w = 1; w <= 1024; ++w) {
    const MmaQ4Smem m = mma_q4_short_smem<D>(w, CL);
    SCOPED_TRACE(what + " chunk " + std::to_string(w));
    ASSERT_EQ(m.ss, size_t((w + 15) / 16) * 16 * (D / 2 / CL));  // every key's chunks of the rank's groups
    ASSERT_GE(m.qf - m.ss, size_t(8) * 4 * std::max(m.ss_stride, D));
    ASSERT_GE(m.vsc - m.qf, size_t(D / 16) * 32 * 16);
    for (size_t off : {m.ss, m.qf, m.vsc, m.pgb, m.slot, m.wm}) ASSERT_EQ(off % 16, 0u);
  }
  EXPECT_LE(mma_q4_short_smem<D>(512, CL).total, kMaxSmemPerBlock) << what;
}

TEST(MmaSmem, ShortPathLayoutsHoldForEveryChunkWidth) {
  check_short_widths<128, Format::bf16, 2>();
  check_short_widths<128, Format::bf16, 4>();
  check_short_widths<128, Format::bf16, 8>();
  check_short_widths<128, Format::fp8, 2>();
  check_short_widths<128, Format::fp8, 4>();
  check_short_widths<128, Format::fp8, 8>();
  check_short_widths<256, Format::bf16, 2>();
  check_short_widths<256, Format::bf16, 4>();
  check_short_widths<256, Format::bf16, 8>();
  check_short_widths<256, Format::fp8, 2>();
  check_short_widths<256, Format::fp8, 4>();
  check_short_widths<256, Format::fp8, 8>();
  check_q4_short_widths<128, 2>();
  check_q4_short_widths<128, 4>();
  check_q4_short_widths<256, 2>();
  check_q4_short_widths<256, 4>();
  check_q4_short_widths<256, 8>();
}

// mma_smem(), the size the launch asks for (attention/partial_mma.cu), is the layout the
// kernel of that format and head_dim computes for itself (MmaTune<D, F>::smem), field by field.
template <int D, Format F>
void check_launch_layout() {
  for (int w = 1; w <= 1024; ++w) {
    const MmaSmem a = mma_smem(w, D, F), b = MmaTune<D, F>::smem(w);
    SCOPED_TRACE(std::string(format_name(F)) + " d" + std::to_string(D) + " chunk " + std::to_string(w));
    const size_t fa[] = {a.ring, a.qf, a.ss, a.pf, a.vrows, a.ksc, a.vsc, a.qsh, a.psh, a.total};
    const size_t fb[] = {b.ring, b.qf, b.ss, b.pf, b.vrows, b.ksc, b.vsc, b.qsh, b.psh, b.total};
    for (int i = 0; i < 10; ++i) ASSERT_EQ(fa[i], fb[i]) << "field " << i;
  }
}

TEST(MmaSmem, LaunchSizeIsTheKernelsOwnLayout) {
  check_launch_layout<128, Format::bf16>();
  check_launch_layout<128, Format::fp8>();
  check_launch_layout<256, Format::bf16>();
  check_launch_layout<256, Format::fp8>();
  // The four layouts differ at the bench's chunk, so a swapped pair cannot agree by chance.
  EXPECT_NE((MmaTune<256, Format::bf16>::smem(512).total), (MmaTune<256, Format::fp8>::smem(512).total));
  EXPECT_NE((MmaTune<128, Format::bf16>::smem(512).total), (MmaTune<128, Format::fp8>::smem(512).total));
}

// The layout's arithmetic itself: with pre > 1 q's fragments and the scores sit at the
// ring's end when they fit past the early stages, otherwise right after them.
TEST(MmaSmem, EarlyStagesPushTheScoresToTheRingsEnd) {
  const int parts = 2, d = 256, w = 512;
  const size_t q_and_s = mma_qf_bytes(d, parts) + mma_ss_bytes(w);  // 24 KB
  const MmaSmem end(w, d, parts, 4096, 12, 4);  // 48 KB of stages, 16 KB before the softmax
  EXPECT_EQ(end.qf, 12 * 4096 - q_and_s);
  const MmaSmem after(w, d, parts, 4096, 10, 4);  // 40 KB: exactly 16 KB + 24 KB
  EXPECT_EQ(after.qf, 4 * 4096u);
  EXPECT_EQ(after.pf, 10 * 4096u);
  const MmaSmem one(w, d, parts, 4096, 12, 1);  // one stage first: right after it
  EXPECT_EQ(one.qf, 4096u);
}

}  // namespace
}  // namespace kc
