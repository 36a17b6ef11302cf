// Compaction (keep) kernel. Host twin: keep_host (attention/twin.cpp); contract: qwen-pages;
// bench: bench compact.
//
// keep_kernel<128, 8>: a block per (code plane, lane group), 128 threads, 8 blocks per SM (so
// the blocks of a bench-sized keep run in about one wave), that also moves the code plane's
// scale plane where the layout has one: every block carries the same bytes. The lane group's
// moves run in batches of B moves (kKeepSetLoads 16-byte code pieces per thread, B =
// kKeepSetLoads * 128 / pieces per code row, at most kKeepTable; one scale row per thread per
// piece slot). Each batch's moves are resolved once per block into a shared table of row
// addresses (the move's load, the page split and the page table's load: kv_pos of src and
// dst, then kv_plane_at of the code and the scale plane), shared by every piece of a row (code
// and scale). The batches are pipelined through two register sets and four tables: step b
// reads batch b + 1 into one set, resolves batch b + 2 into its table and fetches batch b + 3's
// moves, one barrier, then writes batch b from the other set (KeepPipe::step), so the next
// batch's reads are in flight while a batch is written.
// This equals sequential in-order moves: a lane's moves ascend in src and in dst, with dst <
// src, so no move reads a row that an earlier move wrote (dst_i < src_i < src_j for i < j):
// a batch's reads may run ahead of every earlier batch's writes. A later move may write the
// row an earlier one reads (dst_j == src_i, j > i): every read of batch b is issued before the
// barrier of step b - 1 and every write of b comes after the barrier of step b. Every
// declared field (codes and scales) moves; addresses come from kv_pos and kv_plane_at.
// Layouts the table does not cover (code rows not 32-512 bytes in 16-byte pieces, a scale row
// not one aligned piece of 2-16 bytes) move one plane after the other (keep_moves: pieces of
// the widest width the plane's addresses allow, each thread resolving its own rows).
// Measured on the H200 (bench compact under the L2 rule, flush, bytes moved / copy ceiling
// from 64 MiB up, two runs each in one call, reports/h200/issue20-keep4/): bf16 0.86-0.93,
// fp8 0.81-0.86, q4 0.78-0.82, where the unpipelined table kernel (8 pieces per thread, a
// batch's reads, a barrier, its writes, the next table, a second barrier; issue20-keep3) gave
// 0.85-0.93, 0.80-0.86 and 0.75-0.81 in the same call.
// Tried (reports/h200/issue20-moves.md, issue20-moves2/, issue20-keep3/, issue20-keep4/): a
// warp per (lane, field, 64-byte column) with no block barrier: 0.55-0.71 (bf16), 0.41-0.55
// (fp8), 0.29-0.42 (q4); 64-thread blocks, 16 per SM: 0.66-0.79 (bf16); the pair kernel at 6
// blocks per SM: 0.52-0.63; the unpipelined table with the next batch's moves fetched after
// the writes: the same within noise; with streaming loads and stores (.cs): q4 0.67-0.73 from
// 256 MiB up; the pipeline with 8 pieces per set at 4 blocks per SM (two waves): q4 0.71-0.81,
// 64 MiB rows 3-8 % below the table's.
#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/attention/launch.h"

namespace kc {

constexpr int kKeepLoads = 8;  // keep_moves: pieces in flight per thread

template <int W>
struct KeepPiece;
template <> struct KeepPiece<16> { using T = uint4; };
template <> struct KeepPiece<8> { using T = uint2; };
template <> struct KeepPiece<4> { using T = uint32_t; };
template <> struct KeepPiece<2> { using T = uint16_t; };
template <> struct KeepPiece<1> { using T = uint8_t; };

// The moves [i0, i1) of one plane. Thread tid takes piece tid % per of moves tid / per,
// + NT / per, .. (per = pieces per row, a power of two up to NT: every row width is one),
// kKeepLoads of them per batch: consecutive threads, consecutive pieces of a row and then
// the next row. One barrier per batch, between its reads and its writes: a batch's writes
// never reach a later batch's reads (no move reads a row an earlier move wrote), and every
// thread's reads of batch b precede the barrier of batch b + 1, so every later write too.
template <int W, int NT>
__device__ __noinline__ void keep_moves(const KvPlane pl, const KeepMove* moves, int i0, int i1) {
  using T = typename KeepPiece<W>::T;
  const int per = int(pl.bytes / W);
  if (NT % per != 0) {  // no layout makes one (row widths are powers of two); kept correct: one move at a time
    for (int m = i0; m < i1; ++m) {
      const KeepMove mv = moves[m];
      for (int b = threadIdx.x; b < per; b += NT)
        *reinterpret_cast<T*>(kv_plane_row(pl, mv.dst) + b * W) = *reinterpret_cast<const T*>(kv_plane_row(pl, mv.src) + b * W);
      __syncthreads();
    }
    return;
  }
  const int mstep = NT / per;  // moves per load slot
  const int mi = threadIdx.x / per, off = (threadIdx.x % per) * W;
  for (int m0 = i0; m0 < i1; m0 += kKeepLoads * mstep) {  // the same trips in every thread
    T x[kKeepLoads] = {};  // a zero where no move: not the previous batch's register, kept live across the loop
    int32_t dst[kKeepLoads];
#pragma unroll
    for (int u = 0; u < kKeepLoads; ++u) {
      const int m = m0 + u * mstep + mi;
      dst[u] = -1;
      if (m < i1) {
        const KeepMove mv = moves[m];
        x[u] = *reinterpret_cast<const T*>(kv_plane_row(pl, mv.src) + off);
        dst[u] = mv.dst;
      }
    }
    __syncthreads();  // every read of the batch before any of its writes
#pragma unroll
    for (int u = 0; u < kKeepLoads; ++u)
      if (dst[u] >= 0) *reinterpret_cast<T*>(kv_plane_row(pl, dst[u]) + off) = x[u];
  }
}

// The widest piece every row address of a plane allows: base, page stride (paged), plane
// offset and row width all multiples of it.
__device__ __forceinline__ int keep_piece_width(const KvPlane& pl) {
  const uint64_t a = uint64_t(reinterpret_cast<uintptr_t>(pl.base)) | pl.plane_off | pl.bytes | (pl.pt ? pl.ps : 0) | 16u;
  return int(a & (~a + 1));
}
template <int NT>
__device__ void keep_plane(const KvPlane& pl, const KeepMove* moves, int i0, int i1) {
  switch (keep_piece_width(pl)) {
    case 16: keep_moves<16, NT>(pl, moves, i0, i1); break;
    case 8: keep_moves<8, NT>(pl, moves, i0, i1); break;
    case 4: keep_moves<4, NT>(pl, moves, i0, i1); break;
    case 2: keep_moves<2, NT>(pl, moves, i0, i1); break;
    default: keep_moves<1, NT>(pl, moves, i0, i1); break;
  }
}

// The block's lane group (blockIdx.y): its moves [*i0, *i1) (one lane's, in order) and that
// lane's view. False for an empty group.
__device__ __forceinline__ bool keep_group(const KvView* views, const KeepMove* moves, const int32_t* lane_off, int* i0,
                                           int* i1, KvView* v) {
  const int g = blockIdx.y;
  *i0 = lane_off[g];
  *i1 = lane_off[g + 1];
  if (*i0 >= *i1) return false;
#ifdef KC_PLANT_KEEP_FIRST_LANE
  *v = views[moves[0].lane];  // planted bug (test builds only): the first move's lane
#else
  *v = views[moves[*i0].lane];  // a group holds one lane's moves
#endif
  return true;
}

// ---- The table and the pipeline: a batch's moves resolved once per block ----
struct KeepPlanes {
  KvPlane c, s;  // the code plane and its scale plane (c again where the layout has none)
};
// A batch's moves, RM per thread (k = threadIdx.x + r * NT), fetched into registers, then
// resolved into a table (keep_fill): one kv_pos per position, kv_plane_at of both planes.
template <int RM>
struct KeepFetched {
  int32_t src[RM], dst[RM];
};
template <int NT, int RM>
__device__ __forceinline__ void keep_fetch(KeepFetched<RM>& f, const KeepMove* moves, int m0, int n) {
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int k = int(threadIdx.x) + r * NT;
    if (k < n) {
      f.src[r] = moves[m0 + k].src;
      f.dst[r] = moves[m0 + k].dst;
    }
  }
}
// Global loads and stores through the table's generic pointers (every arena is global memory).
template <typename T>
__device__ __forceinline__ T keep_load(const uint8_t* p) {
  __builtin_assume(__isGlobal(p));
  return *reinterpret_cast<const T*>(p);
}
template <typename T>
__device__ __forceinline__ void keep_store(uint8_t* p, const T& x) {
  __builtin_assume(__isGlobal(p));
  *reinterpret_cast<T*>(p) = x;
}

template <int R>
struct KeepTable {  // row addresses of a batch's moves, R at most
  uint8_t* src[R];  // code rows
  uint8_t* dst[R];
  uint8_t* ssrc[R];  // scale rows
  uint8_t* sdst[R];
};
template <int NT, int RM, bool SCALES, int R>
__device__ __forceinline__ void keep_fill(KeepTable<R>& t, const KeepPlanes& pp, const KeepFetched<RM>& f, int n) {
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int k = int(threadIdx.x) + r * NT;
    if (k < n) {
      const KvPos a = kv_pos(pp.c, f.src[r]), b = kv_pos(pp.c, f.dst[r]);  // the planes of a view share the split
      t.src[k] = kv_plane_at(pp.c, a);
      t.dst[k] = kv_plane_at(pp.c, b);
      if (SCALES) {
        t.ssrc[k] = kv_plane_at(pp.s, a);
        t.sdst[k] = kv_plane_at(pp.s, b);
      }
    }
  }
}
// The pipeline of one plane pair. PER 16-byte pieces per code row (PER divides NT), L per
// thread and set, B = L * NT / PER moves per batch; scale rows of WS bytes, one piece each
// (WS = 0: no scale plane), LS per thread and set. No move reads a row that an earlier move
// writes (dst_i < src_i < src_j for i < j), so a later batch's reads may run ahead of an
// earlier batch's writes; a batch's writes wait for every read of that batch and the ones
// before (WAR: dst_j == src_i, j > i). Step b: the reads of b + 1 into the other register set
// (table b + 1), the table of b + 2 filled, the moves of b + 3 fetched, one barrier (every
// read of b, issued a step ago, before any write of b; the table of b + 2 visible before its
// reads), the writes of b. Four tables: the one filled at step b was last read by the writes
// of b - 2, which every thread finished before the barrier of step b - 1. Guarded loads leave
// a zero, not the set's previous register.
template <int NT, int PER, int WS, int LP, int R>
struct KeepPipe {
  using TS = typename KeepPiece<WS ? WS : 1>::T;
  static constexpr int MSTEP = NT / PER;
  static constexpr int L = LP * MSTEP <= R ? LP : R / MSTEP;
  static constexpr int B = L * MSTEP, LS = WS ? (B + NT - 1) / NT : 0, RM = (B + NT - 1) / NT;
  static_assert(NT % PER == 0 && L >= 1 && B <= R, "batch exceeds the table");
  struct Regs {
    uint4 x[L];
    TS y[LS ? LS : 1];
  };
  // Reads of the n moves of table t (a zero where none).
  static __device__ __forceinline__ void read(Regs& g, const KeepTable<R>& t, int n) {
    const int mi = threadIdx.x / PER, off = (threadIdx.x % PER) * 16;
    const int lim = n - mi, slim = n - int(threadIdx.x);
#pragma unroll
    for (int u = 0; u < L; ++u) g.x[u] = u * MSTEP < lim ? keep_load<uint4>(t.src[u * MSTEP + mi] + off) : uint4{};
#pragma unroll
    for (int u = 0; u < LS; ++u) g.y[u] = u * NT < slim ? keep_load<TS>(t.ssrc[u * NT + threadIdx.x]) : TS{};
  }
  static __device__ __forceinline__ void write(const Regs& g, const KeepTable<R>& t, int n) {
    const int mi = threadIdx.x / PER, off = (threadIdx.x % PER) * 16;
    const int lim = n - mi, slim = n - int(threadIdx.x);
#pragma unroll
    for (int u = 0; u < L; ++u)
      if (u * MSTEP < lim) keep_store(t.dst[u * MSTEP + mi] + off, g.x[u]);
#pragma unroll
    for (int u = 0; u < LS; ++u)
      if (u * NT < slim) keep_store(t.sdst[u * NT + threadIdx.x], g.y[u]);
  }
  // Step b (moves from m0): cur holds b's reads; next gets b + 1's.
  static __device__ __forceinline__ void step(KeepTable<R>* tab, int b, Regs& cur, Regs& next, KeepFetched<RM>& f,
                                              const KeepPlanes& pp, const KeepMove* moves, int m0, int i1) {
    const int n1 = min(B, i1 - m0 - B), n2 = min(B, i1 - m0 - 2 * B), n3 = min(B, i1 - m0 - 3 * B);
    if (n1 > 0) read(next, tab[(b + 1) & 3], n1);
    if (n2 > 0) keep_fill<NT, RM, WS != 0>(tab[(b + 2) & 3], pp, f, n2);
    if (n3 > 0) keep_fetch<NT, RM>(f, moves, m0 + 3 * B, n3);
    __syncthreads();
    write(cur, tab[b & 3], min(B, i1 - m0));
  }
};
template <int NT, int PER, int WS, int LP, int R>
__device__ __noinline__ void keep_table_moves(KeepTable<R>* tab, const KeepPlanes& pp, const KeepMove* moves, int i0,
                                              int i1) {
  using P = KeepPipe<NT, PER, WS, LP, R>;
  constexpr int B = P::B, RM = P::RM;
  KeepFetched<RM> f;
  keep_fetch<NT, RM>(f, moves, i0, min(B, i1 - i0));
  keep_fill<NT, RM, WS != 0>(tab[0], pp, f, min(B, i1 - i0));
  if (i1 - i0 > B) {
    keep_fetch<NT, RM>(f, moves, i0 + B, min(B, i1 - i0 - B));
    keep_fill<NT, RM, WS != 0>(tab[1], pp, f, min(B, i1 - i0 - B));
  }
  if (i1 - i0 > 2 * B) keep_fetch<NT, RM>(f, moves, i0 + 2 * B, min(B, i1 - i0 - 2 * B));
  __syncthreads();
  typename P::Regs ra, rb;
  P::read(ra, tab[0], min(B, i1 - i0));
  int b = 0;
  for (int m0 = i0;;) {  // the same trips in every thread
    P::step(tab, b, ra, rb, f, pp, moves, m0, i1);
    m0 += B, ++b;
    if (m0 >= i1) break;
    P::step(tab, b, rb, ra, f, pp, moves, m0, i1);
    m0 += B, ++b;
    if (m0 >= i1) break;
  }
}
template <int NT, int WS, int LP, int R>
__device__ bool keep_table_per(KeepTable<R>* tab, const KeepPlanes& pp, const KeepMove* moves, int i0, int i1, int per) {
  switch (per) {
    case 2: keep_table_moves<NT, 2, WS, LP, R>(tab, pp, moves, i0, i1); return true;
    case 4: keep_table_moves<NT, 4, WS, LP, R>(tab, pp, moves, i0, i1); return true;
    case 8: keep_table_moves<NT, 8, WS, LP, R>(tab, pp, moves, i0, i1); return true;
    case 16: keep_table_moves<NT, 16, WS, LP, R>(tab, pp, moves, i0, i1); return true;
    case 32: keep_table_moves<NT, 32, WS, LP, R>(tab, pp, moves, i0, i1); return true;
  }
  return false;
}
constexpr int kKeepSetLoads = 4;  // 16-byte code pieces per thread in each of the two register sets
constexpr int kKeepTable = 128;   // moves per batch at most (rows of a table)
template <int NT, int MINB>
__global__ void __launch_bounds__(NT, MINB) keep_kernel(const KvView* views, const KeepMove* moves,
                                                      const int32_t* lane_off) {
  constexpr int LP = kKeepSetLoads, R = kKeepTable;
  __shared__ KeepTable<R> tab[4];
  __shared__ KeepPlanes pp;
  const int f = blockIdx.x;
  int i0, i1;
  KvView v;
  if (!keep_group(views, moves, lane_off, &i0, &i1, &v)) return;
  const bool scales = v.lay.scale_bytes != 0;
  const KvPlane pc = kv_plane(v, f);
  const KvPlane ps = scales ? kv_plane(v, v.lay.planes() + f) : pc;
  const int ws = scales ? keep_piece_width(ps) : 0;
  const int per = keep_piece_width(pc) == 16 ? int(pc.bytes) / 16 : 0;
  if (threadIdx.x == 0) pp = KeepPlanes{pc, ps};
  __syncthreads();
  if (ws == 0 || ws == int(ps.bytes)) {  // one piece per scale row
    bool done = false;
    switch (ws) {
      case 0: done = keep_table_per<NT, 0, LP, R>(tab, pp, moves, i0, i1, per); break;
      case 2: done = keep_table_per<NT, 2, LP, R>(tab, pp, moves, i0, i1, per); break;
      case 4: done = keep_table_per<NT, 4, LP, R>(tab, pp, moves, i0, i1, per); break;
      case 8: done = keep_table_per<NT, 8, LP, R>(tab, pp, moves, i0, i1, per); break;
      case 16: done = keep_table_per<NT, 16, LP, R>(tab, pp, moves, i0, i1, per); break;
    }
    if (done) return;
  }
  keep_plane<NT>(pc, moves, i0, i1);  // otherwise one plane after the other (each its own batches)
  if (scales) keep_plane<NT>(ps, moves, i0, i1);
}

// ---- keep5 experiment: the kernel per layout (code row PER 16-byte pieces, scale row WS bytes), chosen on
// the host from the layout, so the first batches' moves are fetched with the group's lane and the prologue's
// page-table loads of two tables are in flight together. H: load hints (experiment).
template <int H>
__device__ __forceinline__ uint4 keep_ld16(const uint8_t* p) {
  if constexpr (H == 0) {
    return keep_load<uint4>(p);
  } else {
    uint4 r;
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p), "l"(pol));
    return r;
  }
}
template <int NT, int PER, int WS, int LP, int R, int H>
struct KeepPipe5 {
  using TS = typename KeepPiece<WS ? WS : 1>::T;
  static constexpr int MSTEP = NT / PER;
  static constexpr int L = LP * MSTEP <= R ? LP : R / MSTEP;
  static constexpr int B = L * MSTEP, LS = WS ? (B + NT - 1) / NT : 0, RM = (B + NT - 1) / NT;
  static_assert(NT % PER == 0 && L >= 1 && B <= R, "batch exceeds the table");
  struct Regs {
    uint4 x[L];
    TS y[LS ? LS : 1];
  };
  static __device__ __forceinline__ void read(Regs& g, const KeepTable<R>& t, int n) {
    const int mi = threadIdx.x / PER, off = (threadIdx.x % PER) * 16;
    const int lim = n - mi, slim = n - int(threadIdx.x);
#pragma unroll
    for (int u = 0; u < L; ++u) g.x[u] = u * MSTEP < lim ? keep_ld16<H>(t.src[u * MSTEP + mi] + off) : uint4{};
#pragma unroll
    for (int u = 0; u < LS; ++u) g.y[u] = u * NT < slim ? keep_load<TS>(t.ssrc[u * NT + threadIdx.x]) : TS{};
  }
  static __device__ __forceinline__ void write(const Regs& g, const KeepTable<R>& t, int n) {
    const int mi = threadIdx.x / PER, off = (threadIdx.x % PER) * 16;
    const int lim = n - mi, slim = n - int(threadIdx.x);
#pragma unroll
    for (int u = 0; u < L; ++u)
      if (u * MSTEP < lim) keep_store(t.dst[u * MSTEP + mi] + off, g.x[u]);
#pragma unroll
    for (int u = 0; u < LS; ++u)
      if (u * NT < slim) keep_store(t.sdst[u * NT + threadIdx.x], g.y[u]);
  }
  static __device__ __forceinline__ void step(KeepTable<R>* tab, int b, Regs& cur, Regs& next, KeepFetched<RM>& f,
                                              const KeepPlanes& pp, const KeepMove* moves, int m0, int i1) {
    const int n1 = min(B, i1 - m0 - B), n2 = min(B, i1 - m0 - 2 * B), n3 = min(B, i1 - m0 - 3 * B);
    if (n1 > 0) read(next, tab[(b + 1) & 3], n1);
    if (n2 > 0) keep_fill<NT, RM, WS != 0>(tab[(b + 2) & 3], pp, f, n2);
    if (n3 > 0) keep_fetch<NT, RM>(f, moves, m0 + 3 * B, n3);
    __syncthreads();
    write(cur, tab[b & 3], min(B, i1 - m0));
  }
};
// Two tables' rows resolved with every page-table load issued before the first shared store.
template <int NT, int RM, bool SCALES, int R>
__device__ __forceinline__ void keep_fill2(KeepTable<R>& t0, KeepTable<R>& t1, const KeepPlanes& pp,
                                           const KeepFetched<RM>& f0, const KeepFetched<RM>& f1, int n0, int n1) {
  KvPos a0[RM], b0[RM], a1[RM], b1[RM];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int k = int(threadIdx.x) + r * NT;
    if (k < n0) a0[r] = kv_pos(pp.c, f0.src[r]), b0[r] = kv_pos(pp.c, f0.dst[r]);
    if (k < n1) a1[r] = kv_pos(pp.c, f1.src[r]), b1[r] = kv_pos(pp.c, f1.dst[r]);
  }
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int k = int(threadIdx.x) + r * NT;
    if (k < n0) {
      t0.src[k] = kv_plane_at(pp.c, a0[r]);
      t0.dst[k] = kv_plane_at(pp.c, b0[r]);
      if (SCALES) t0.ssrc[k] = kv_plane_at(pp.s, a0[r]), t0.sdst[k] = kv_plane_at(pp.s, b0[r]);
    }
    if (k < n1) {
      t1.src[k] = kv_plane_at(pp.c, a1[r]);
      t1.dst[k] = kv_plane_at(pp.c, b1[r]);
      if (SCALES) t1.ssrc[k] = kv_plane_at(pp.s, a1[r]), t1.sdst[k] = kv_plane_at(pp.s, b1[r]);
    }
  }
}
template <int NT, int MINB, int PER, int WS, int H>
__global__ void __launch_bounds__(NT, MINB) keep5_kernel(const KvView* views, const KeepMove* moves,
                                                       const int32_t* lane_off) {
  constexpr int LP = kKeepSetLoads, R = kKeepTable;
  using P = KeepPipe5<NT, PER ? PER : 2, WS, LP, R, H>;
  constexpr int B = P::B, RM = P::RM;
  __shared__ KeepTable<R> tab[4];
  __shared__ KeepPlanes pp;
  const int f = blockIdx.x, g = blockIdx.y;
  const int i0 = lane_off[g], i1 = lane_off[g + 1];
  if (i0 >= i1) return;
  // The first three batches' moves, fetched with the group's lane (a group holds one lane's moves).
  KeepFetched<RM> f0, f1, f2;
  if (PER) {
    keep_fetch<NT, RM>(f0, moves, i0, min(B, i1 - i0));
    if (i1 - i0 > B) keep_fetch<NT, RM>(f1, moves, i0 + B, min(B, i1 - i0 - B));
    if (i1 - i0 > 2 * B) keep_fetch<NT, RM>(f2, moves, i0 + 2 * B, min(B, i1 - i0 - 2 * B));
  }
#ifdef KC_PLANT_KEEP_FIRST_LANE
  const KvView& v = views[moves[0].lane];  // planted bug (test builds only): the first move's lane
#else
  const KvView& v = views[moves[i0].lane];
#endif
  const bool scales = v.lay.scale_bytes != 0;
  const KeepPlanes pr{kv_plane(v, f), scales ? kv_plane(v, v.lay.planes() + f) : kv_plane(v, f)};
  // The table covers this launch's layout where the planes' addresses are 16-byte pieces (codes) and one
  // aligned piece per scale row; otherwise one plane after the other.
  if (PER == 0 || keep_piece_width(pr.c) != 16 || int(pr.c.bytes) != PER * 16 ||
      (WS == 0 ? scales : !scales || keep_piece_width(pr.s) != WS || int(pr.s.bytes) != WS)) {
    keep_plane<NT>(pr.c, moves, i0, i1);
    if (scales) keep_plane<NT>(pr.s, moves, i0, i1);
    return;
  }
  if constexpr (PER != 0) {
    keep_fill2<NT, RM, WS != 0>(tab[0], tab[1], pr, f0, f1, min(B, i1 - i0), min(B, i1 - i0 - B));
    if (threadIdx.x == 0) pp = pr;
    __syncthreads();
    typename P::Regs ra, rb;
    P::read(ra, tab[0], min(B, i1 - i0));
    int b = 0;
    for (int m0 = i0;;) {  // the same trips in every thread
      P::step(tab, b, ra, rb, f2, pp, moves, m0, i1);
      m0 += B, ++b;
      if (m0 >= i1) break;
      P::step(tab, b, rb, ra, f2, pp, moves, m0, i1);
      m0 += B, ++b;
      if (m0 >= i1) break;
    }
  }
}
template <int PER, int WS, int H>
void keep5_launch(dim3 grid, const KvView* views, const KeepMove* moves, const int32_t* lane_off, cudaStream_t s) {
  keep5_kernel<128, 8, PER, WS, H><<<grid, 128, 0, s>>>(views, moves, lane_off);
}
template <int PER>
bool keep5_ws(int ws, int h, dim3 grid, const KvView* views, const KeepMove* moves, const int32_t* lane_off,
              cudaStream_t s) {
  if (h == 1) {  // hints: only the bench's d128 layouts
    if (PER == 16 && ws == 0) return keep5_launch<16, 0, 1>(grid, views, moves, lane_off, s), true;
    if (PER == 8 && ws == 4) return keep5_launch<8, 4, 1>(grid, views, moves, lane_off, s), true;
    if (PER == 4 && ws == 8) return keep5_launch<4, 8, 1>(grid, views, moves, lane_off, s), true;
  }
  switch (ws) {
    case 0: keep5_launch<PER, 0, 0>(grid, views, moves, lane_off, s); return true;
    case 2: keep5_launch<PER, 2, 0>(grid, views, moves, lane_off, s); return true;
    case 4: keep5_launch<PER, 4, 0>(grid, views, moves, lane_off, s); return true;
    case 8: keep5_launch<PER, 8, 0>(grid, views, moves, lane_off, s); return true;
    case 16: keep5_launch<PER, 16, 0>(grid, views, moves, lane_off, s); return true;
  }
  return false;
}
bool keep5_dispatch(const KvLayout& lay, int h, dim3 grid, const KvView* views, const KeepMove* moves,
                    const int32_t* lane_off, cudaStream_t s) {
  const int per = lay.code_bytes % 16 == 0 ? int(lay.code_bytes / 16) : 0, ws = int(lay.scale_bytes);
  switch (per) {
    case 2: return keep5_ws<2>(ws, h, grid, views, moves, lane_off, s);
    case 4: return keep5_ws<4>(ws, h, grid, views, moves, lane_off, s);
    case 8: return keep5_ws<8>(ws, h, grid, views, moves, lane_off, s);
    case 16: return keep5_ws<16>(ws, h, grid, views, moves, lane_off, s);
    case 32: return keep5_ws<32>(ws, h, grid, views, moves, lane_off, s);
  }
  return false;
}

Status launch_keep(const KvView* views, const KvLayout& lay, const KeepMove* moves, const int32_t* lane_off, int groups,
                   cudaStream_t s) {
  if (groups == 0) return Status::Ok();
  static const int variant = [] {
    const char* e = std::getenv("KC_KEEP5_VARIANT");
    return e ? std::atoi(e) : 1;
  }();
  const dim3 grid(lay.planes(), groups);
  if (variant == 0) {
    keep_kernel<128, 8><<<grid, 128, 0, s>>>(views, moves, lane_off);
  } else if (!keep5_dispatch(lay, variant == 2 ? 1 : 0, grid, views, moves, lane_off, s)) {
    keep5_kernel<128, 8, 0, 0, 0><<<grid, 128, 0, s>>>(views, moves, lane_off);  // one plane after the other
  }
  KC_LAUNCH_CHECK("keep_kernel");
  return Status::Ok();
}
}  // namespace kc
