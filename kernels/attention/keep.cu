// Compaction (keep) kernel. Host twin: keep_host (attention/twin.cpp); contract: qwen-pages;
// bench: bench compact.
//
// keep_kernel<128, 8, PER, WS>: a block per (code plane, lane group), 128 threads, 8 blocks per SM
// (so the blocks of a bench-sized keep run in about one wave), that also moves the code plane's
// scale plane where the layout has one: every block carries the same bytes. The kernel is chosen
// on the host from the layout (code rows of PER 16-byte pieces, 32-512 bytes; scale rows of WS
// bytes, one piece, WS 0 where none), and checks on the device that the view's planes allow it.
// The lane group's moves run in batches of B moves (kKeepSetLoads 16-byte code pieces per
// thread, B = kKeepSetLoads * 128 / PER, at most kKeepTable; one scale row per thread per piece
// slot). Each batch's moves are resolved once per block into a shared table of row addresses
// (the move's load, the page split and the page table's load: kv_pos of src and dst, then
// kv_plane_at of the code and the scale plane), shared by every piece of a row (code and
// scale). The batches are pipelined through two register sets and four tables: step b reads
// batch b + 1 into one set, resolves batch b + 2 into its table and fetches batch b + 3's
// moves, one barrier, then writes batch b from the other set (KeepPipe::step), so the next
// batch's reads are in flight while a batch is written. The prologue is short: B is known at
// compile time, so the first three batches' moves are fetched together with the group's lane
// and the view of lane g (the group's lane wherever every lane before it has moves: then the
// view is no dependent load after the moves), both first tables are resolved from the view in
// registers with their page-table loads in flight together, and one barrier precedes the first
// reads.
// This equals sequential in-order moves: a lane's moves ascend in src and in dst, with dst <
// src, so no move reads a row that an earlier move wrote (dst_i < src_i < src_j for i < j):
// a batch's reads may run ahead of every earlier batch's writes. A later move may write the
// row an earlier one reads (dst_j == src_i, j > i): every read of batch b is issued before the
// barrier of step b - 1 and every write of b comes after the barrier of step b. Every
// declared field (codes and scales) moves; addresses come from kv_pos and kv_plane_at.
// Layouts the table does not cover (code rows not 32-512 bytes in 16-byte pieces, a scale row
// not one aligned piece of 2-16 bytes, or planes whose addresses are not aligned so) move one
// plane after the other (keep_moves: pieces of the widest width the plane's addresses allow,
// each thread resolving its own rows; keep_kernel<128, 8, 0, 0> where the host finds no table).
// Measured on the H200 (bench compact under the L2 rule, flush, bytes moved / copy ceiling from
// 64 MiB up, two runs each in one call, reports/h200/issue20-keep5/): bf16 0.888-0.926, fp8
// 0.807-0.893, q4 0.772-0.838, where keep4's kernel (the same pipeline, the table kernel chosen
// on the device and a longer prologue) gave 0.852-0.919, 0.802-0.858 and 0.775-0.821 in the
// same call: 1.5-4 % faster at 64 MiB, 0.99-1.06 (median 1.03) below, the same within noise
// (0.99-1.01) from 256 MiB up. The view of lane g loaded with the moves and the lane checked
// after the moves' loads (issue20-keep7, one dependent load less before the first tables):
// main's time / this kernel's, same call, three runs each: 1.03-1.05 at 1 MiB, 1.00-1.05 at
// 4-16 MiB, 1.005-1.021 at 64 MiB, 1.000-1.007 from 256 MiB up.
// From 256 MiB up fp8 and q4 run at what a copy of their access pattern runs at: a kernel with
// no table and no barrier moving chunk 2j + 1 to chunk j of 1024 regions (codes only) reached
// 0.80 (128-byte chunks) and 0.78 (64-byte chunks) of the copy ceiling at 1 GiB, one grid-wide
// sweep of the same chunks 0.85 and 0.87 (issue20-keep5); q4 also reads each 8-byte scale row
// as part of a sector of which the even rows' half is not needed (11 % more DRAM reads, ncu).
// Tried (reports/h200/issue20-moves.md, issue20-moves2/, issue20-keep3/, issue20-keep4/,
// issue20-keep5/): a warp per (lane, field, 64-byte column) with no block barrier: 0.55-0.71
// (bf16), 0.41-0.55 (fp8), 0.29-0.42 (q4); 64-thread blocks, 16 per SM: 0.66-0.79 (bf16); the
// pair kernel at 6 blocks per SM: 0.52-0.63; the unpipelined table with the next batch's moves
// fetched after the writes: the same within noise; with streaming loads and stores (.cs): q4
// 0.67-0.73 from 256 MiB up; the pipeline with 8 pieces per set at 4 blocks per SM (two waves):
// q4 0.71-0.81, 64 MiB rows 3-8 % below the table's; the code loads with L1::no_allocate and an
// L2 evict_first policy: q4 0.69-0.75 from 256 MiB up (main's 0.78-0.82 in the same call).
// Clusters of 8 blocks along planes (issue20-keep6): the step's barrier the cluster's (blocks of
// a lane in lockstep) 0.60-0.75 of the ceiling from 64 MiB up, a cluster moving its 8 planes'
// batches together (round r of block c = batch 8r + c, cluster barrier) 0.57-0.71, main 0.76-0.92
// in the same call; at 8 blocks per SM only 124 clusters of 8 (992 blocks) are resident, so the
// 1024-block grid ran a tail wave.
#include <cuda_runtime.h>

#include <algorithm>

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
// Two tables' rows resolved (keep_fill's addresses) with every page-table load of both issued
// before the first shared store.
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
constexpr int kKeepSetLoads = 4;  // 16-byte code pieces per thread in each of the two register sets
constexpr int kKeepTable = 128;   // moves per batch at most (rows of a table)
// PER 16-byte pieces per code row, WS bytes per scale row (0: none); PER = 0: no table (one
// plane after the other). The block's lane group is g0 + blockIdx.y: its moves [i0, i1), one
// lane's, in order (a grid's y is at most 65535: launch_keep runs more groups in launches of
// kKeepGroupsPerLaunch, each with its first group g0).
template <int NT, int MINB, int PER, int WS>
__global__ void __launch_bounds__(NT, MINB) keep_kernel(const KvView* views, const KeepMove* moves,
                                                      const int32_t* lane_off, int g0) {
  constexpr int LP = kKeepSetLoads, R = kKeepTable;
  using P = KeepPipe<NT, PER ? PER : 2, WS, LP, R>;
  constexpr int B = P::B, RM = P::RM;
  __shared__ KeepTable<R> tab[4];
  __shared__ KeepPlanes pp;
  const int f = blockIdx.x, g = g0 + int(blockIdx.y);
  // The view of lane g, loaded with the moves (it depends on no load): the group's lane is g
  // wherever every lane up to g has moves (the groups are distinct lanes in lane order, so
  // g < the number of views), and then its view is not a dependent load after the moves.
  KvView v = views[g];
  const int i0 = lane_off[g], i1 = lane_off[g + 1];
  if (i0 >= i1) return;
  // The first three batches' moves, fetched with the group's lane (the view of lane g is in flight).
  KeepFetched<RM> f0, f1, f2;
  if (PER) {
    keep_fetch<NT, RM>(f0, moves, i0, min(B, i1 - i0));
    if (i1 - i0 > B) keep_fetch<NT, RM>(f1, moves, i0 + B, min(B, i1 - i0 - B));
    if (i1 - i0 > 2 * B) keep_fetch<NT, RM>(f2, moves, i0 + 2 * B, min(B, i1 - i0 - 2 * B));
  }
  // The group's lane, loaded after the moves' loads are issued: without this fence ptxas hoists
  // the load, its check and views[lane] (predicated) above the moves' loads, and the check then
  // waits a load's latency before they issue (SASS of keep_kernel<128, 8, 4, 8>, issue20-keep7).
  __syncwarp();
#ifdef KC_PLANT_KEEP_FIRST_LANE
  const int lane = moves[0].lane;  // planted bug (test builds only): the first move's lane
#else
  const int lane = moves[i0].lane;  // a group holds one lane's moves
#endif
  if (lane != g) v = views[lane];  // the group's lane is not g: its view after the moves, as before
  const bool scales = v.lay.scale_bytes != 0;
  const KeepPlanes pr{kv_plane(v, f), scales ? kv_plane(v, v.lay.planes() + f) : kv_plane(v, f)};
  // The table where the view's planes are what the host chose it for: code rows of PER aligned
  // 16-byte pieces, scale rows (where the layout has them) one aligned piece of WS bytes.
  if (PER == 0 || keep_piece_width(pr.c) != 16 || int(pr.c.bytes) != PER * 16 ||
      (WS == 0 ? scales : !scales || keep_piece_width(pr.s) != WS || int(pr.s.bytes) != WS)) {
    keep_plane<NT>(pr.c, moves, i0, i1);  // otherwise one plane after the other (each its own batches)
    if (scales) keep_plane<NT>(pr.s, moves, i0, i1);
    return;
  }
  if constexpr (PER != 0) {
    keep_fill2<NT, RM, WS != 0>(tab[0], tab[1], pr, f0, f1, min(B, i1 - i0), min(B, i1 - i0 - B));
    if (threadIdx.x == 0) pp = pr;
    __syncthreads();  // both tables and pp visible
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

template <int PER, int WS>
void keep_launch(dim3 grid, const KvView* views, const KeepMove* moves, const int32_t* lane_off, int g0, cudaStream_t s) {
  keep_kernel<128, 8, PER, WS><<<grid, 128, 0, s>>>(views, moves, lane_off, g0);
}
template <int PER>
bool keep_launch_ws(int ws, dim3 grid, const KvView* views, const KeepMove* moves, const int32_t* lane_off, int g0,
                    cudaStream_t s) {
  switch (ws) {
    case 0: keep_launch<PER, 0>(grid, views, moves, lane_off, g0, s); return true;
    case 2: keep_launch<PER, 2>(grid, views, moves, lane_off, g0, s); return true;
    case 4: keep_launch<PER, 4>(grid, views, moves, lane_off, g0, s); return true;
    case 8: keep_launch<PER, 8>(grid, views, moves, lane_off, g0, s); return true;
    case 16: keep_launch<PER, 16>(grid, views, moves, lane_off, g0, s); return true;
  }
  return false;
}

Status launch_keep(const KvView* views, const KvLayout& lay, const KeepMove* moves, const int32_t* lane_off, int groups,
                   cudaStream_t s) {
  if (groups == 0) return Status::Ok();
  const int per = lay.code_bytes % 16 == 0 ? int(lay.code_bytes / 16) : 0, ws = int(lay.scale_bytes);
  bool table = false;
  // A lane group is a grid y index (at most 65535): more groups go in launches of
  // kKeepGroupsPerLaunch, each naming its first group.
  for (int g0 = 0; g0 < groups; g0 += kKeepGroupsPerLaunch) {
    const dim3 grid(lay.planes(), std::min(groups - g0, kKeepGroupsPerLaunch));
    switch (per) {
      case 2: table = keep_launch_ws<2>(ws, grid, views, moves, lane_off, g0, s); break;
      case 4: table = keep_launch_ws<4>(ws, grid, views, moves, lane_off, g0, s); break;
      case 8: table = keep_launch_ws<8>(ws, grid, views, moves, lane_off, g0, s); break;
      case 16: table = keep_launch_ws<16>(ws, grid, views, moves, lane_off, g0, s); break;
      case 32: table = keep_launch_ws<32>(ws, grid, views, moves, lane_off, g0, s); break;
    }
    if (!table) keep_kernel<128, 8, 0, 0><<<grid, 128, 0, s>>>(views, moves, lane_off, g0);  // one plane after the other
    KC_LAUNCH_CHECK("keep_kernel");
  }
  KernelPaths::note(table ? "keep-table" : "keep-planes");
  return Status::Ok();
}
}  // namespace kc
