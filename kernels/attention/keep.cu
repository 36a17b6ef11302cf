// Compaction (keep) kernel. Host twin: keep_host (attention/twin.cpp); contract: qwen-pages;
// bench: bench compact.
//
// Two kernels, one chosen per cache layout by launch_keep (measured on the H200, bench
// compact, reports/h200/issue20-moves.md and issue20-moves2/issue20-moves2.md):
//   keep_kernel<128, 8>       layouts without scale planes (bf16): a block per (field, lane
//                             group), 128 threads, 8 blocks per SM, so the blocks of a
//                             bench-sized keep run in about one wave; 0.85-0.94 of the copy
//                             ceiling from 64 MiB up.
//   keep_pair_kernel<128, 8>  layouts with scale planes (fp8, q4, mxfp4): a block per (code
//                             plane, lane group) that also moves the plane's scale plane, the
//                             scale pieces riding in the code batches (one barrier for both):
//                             every block carries the same bytes. 0.68-0.77 (fp8) and
//                             0.66-0.72 (q4) where d4bdbb2's 256-thread kernel (a block per
//                             field: half the blocks moved 1-4 KiB of scales) gave 0.63-0.71
//                             and 0.61-0.67 in the same run.
// Both: the lane group's moves run in batches: the block reads the source rows of a batch
//   (each row in pieces of W bytes, W the widest of 16, 8, 4, 2, 1 that every row address of
//   the plane allows; kKeepLoads pieces in flight per thread), a barrier, writes them to
//   their destinations, then the next batch.
//   This equals sequential in-order moves: a lane's moves ascend in src and in dst, with
//   dst < src, so no move reads a row that an earlier move wrote (dst_i < src_i < src_j for
//   i < j); a later move may write the row an earlier one reads (dst_j == src_i, j > i),
//   and every read of a batch comes before the batch's writes and every later batch's
//   (the barrier of the next batch). Every declared field (codes and scales) moves; addresses come from kv_plane.
//   Both keep their pieces' destination positions, not addresses, across the barrier, and
//   each piece width's loop is its own function (keep_kernel: 64 registers without spills;
//   keep_pair_kernel: 64 registers, 8-64 bytes spilled per loop).
// Tried (reports/h200/issue20-moves.md, issue20-moves2/): a warp per (lane, field, 64-byte
// column) with no block barrier: 0.55-0.71 (bf16), 0.41-0.55 (fp8), 0.29-0.42 (q4); 64-thread
// blocks, 16 per SM: 0.66-0.79 (bf16); keep_pair_kernel at 6 blocks per SM: 0.52-0.63.
#include <cuda_runtime.h>

#include <cstdlib>

#include "kernels/attention/launch.h"

namespace kc {

constexpr int kKeepLoads = 8;  // pieces in flight per thread

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
    T x[kKeepLoads];
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

template <int NT, int MINB>
__global__ void __launch_bounds__(NT, MINB) keep_kernel(const KvView* views, const KeepMove* moves,
                                                      const int32_t* lane_off) {
  const int f = blockIdx.x;
  int i0, i1;
  KvView v;
  if (!keep_group(views, moves, lane_off, &i0, &i1, &v)) return;
  keep_plane<NT>(kv_plane(v, f), moves, i0, i1);
}

// ---- keep_pair_kernel: a block per (code plane, lane group) that moves the plane's scale plane too ----
// Layouts with scale planes: the code plane and its scale plane (field planes() + f) of one
// lane group in one block, so every block carries the same bytes (the scale plane's batch
// pieces ride along in the code plane's batches: one barrier for both).
constexpr int kKeepScaleLoads = 2;  // scale pieces in flight per thread (fp8, q4, mxfp4 at d 128 need 1 or 2)

template <int WC, int WS, int NT>
__device__ __noinline__ void keep_moves_pair(const KvPlane pc, const KvPlane ps, const KeepMove* moves, int i0, int i1,
                                             int ss) {
  using TC = typename KeepPiece<WC>::T;
  using TS = typename KeepPiece<WS>::T;
  const int per = int(pc.bytes / WC), pers = int(ps.bytes / WS);
  const int mstep = NT / per, batch = kKeepLoads * mstep;  // moves per batch (both planes)
  const int mi = threadIdx.x / per, off = (threadIdx.x % per) * WC;
  for (int m0 = i0; m0 < i1; m0 += batch) {  // the same trips in every thread
    TC x[kKeepLoads];
    TS y[kKeepScaleLoads];
    int32_t dst[kKeepLoads], dsts[kKeepScaleLoads];
#pragma unroll
    for (int u = 0; u < kKeepLoads; ++u) {
      const int m = m0 + u * mstep + mi;
      dst[u] = -1;
      if (m < i1) {
        const KeepMove mv = moves[m];
        x[u] = *reinterpret_cast<const TC*>(kv_plane_row(pc, mv.src) + off);
        dst[u] = mv.dst;
      }
    }
#pragma unroll
    for (int u = 0; u < kKeepScaleLoads; ++u) {
      const int q = threadIdx.x + NT * u, m = m0 + q / pers;  // scale piece q of the batch
      dsts[u] = -1;
      if (u < ss && q < batch * pers && m < i1) {
        const KeepMove mv = moves[m];
        y[u] = *reinterpret_cast<const TS*>(kv_plane_row(ps, mv.src) + (q % pers) * WS);
        dsts[u] = mv.dst;
      }
    }
    __syncthreads();  // every read of the batch (both planes) before any of its writes
#pragma unroll
    for (int u = 0; u < kKeepLoads; ++u)
      if (dst[u] >= 0) *reinterpret_cast<TC*>(kv_plane_row(pc, dst[u]) + off) = x[u];
#pragma unroll
    for (int u = 0; u < kKeepScaleLoads; ++u)
      if (dsts[u] >= 0) {
        const int q = threadIdx.x + NT * u;
        *reinterpret_cast<TS*>(kv_plane_row(ps, dsts[u]) + (q % pers) * WS) = y[u];
      }
  }
}

template <int NT, int MINB>
__global__ void __launch_bounds__(NT, MINB) keep_pair_kernel(const KvView* views, const KeepMove* moves,
                                                           const int32_t* lane_off) {
  const int f = blockIdx.x;
  int i0, i1;
  KvView v;
  if (!keep_group(views, moves, lane_off, &i0, &i1, &v)) return;
  const KvPlane pc = kv_plane(v, f), ps = kv_plane(v, v.lay.planes() + f);
  const int wc = keep_piece_width(pc), ws = keep_piece_width(ps);
  const int per = int(pc.bytes) / wc, pers = int(ps.bytes) / ws;
  // Both planes in one batch loop: 16-byte code pieces, a code row's pieces dividing the
  // block, and the batch's scale pieces at most kKeepScaleLoads per thread.
  const int ss = (kKeepLoads * (NT / max(per, 1)) * pers + NT - 1) / NT;
  if (wc == 16 && per <= NT && NT % per == 0 && ws >= 2 && ss <= kKeepScaleLoads) {
    switch (ws) {
      case 16: keep_moves_pair<16, 16, NT>(pc, ps, moves, i0, i1, ss); return;
      case 8: keep_moves_pair<16, 8, NT>(pc, ps, moves, i0, i1, ss); return;
      case 4: keep_moves_pair<16, 4, NT>(pc, ps, moves, i0, i1, ss); return;
      default: keep_moves_pair<16, 2, NT>(pc, ps, moves, i0, i1, ss); return;
    }
  }
  keep_plane<NT>(pc, moves, i0, i1);  // otherwise one plane after the other (each its own batches)
  keep_plane<NT>(ps, moves, i0, i1);
}

// ---- keep_table_kernel (experiment): the batch's moves resolved once per block into shared memory ----
// A block per (code plane, lane group), moving the plane's scale plane too where the layout has
// one. Each batch's moves are resolved (the move's load, the page split, the page table's load:
// kv_pos of src and dst, then kv_plane_at of each plane) once per block into a shared table of
// row addresses; every piece (code and scale) then takes its row's address from the table.
// Two tables in turn (see keep_table_batch).
constexpr int kKeepTable = 256;  // moves per batch at most (rows of a table)
struct KeepTable {
  uint8_t* src[kKeepTable];  // code rows
  uint8_t* dst[kKeepTable];
  uint8_t* ssrc[kKeepTable];  // scale rows
  uint8_t* sdst[kKeepTable];
};
struct KeepPlanes {
  KvPlane c, s;
};

// A batch's moves, RM per thread (k = threadIdx.x + r * NT), fetched into registers, then
// resolved into a table: the row addresses of src and dst (one kv_pos per position, both planes).
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
template <int NT, int RM, bool SCALES>
__device__ __forceinline__ void keep_fill(KeepTable& t, const KeepPlanes& pp, const KeepFetched<RM>& f, int n) {
#pragma unroll
  for (int r = 0; r < RM; ++r) {
    const int k = int(threadIdx.x) + r * NT;
    if (k < n) {
      const KvPos a = kv_pos(pp.c, f.src[r]), b = kv_pos(pp.c, f.dst[r]);
      t.src[k] = kv_plane_at(pp.c, a);
      t.dst[k] = kv_plane_at(pp.c, b);
      if (SCALES) {
        t.ssrc[k] = kv_plane_at(pp.s, a);
        t.sdst[k] = kv_plane_at(pp.s, b);
      }
    }
  }
}

// Global loads and stores (the table's addresses are generic pointers): CS, streaming (.cs).
template <bool CS, typename T>
__device__ __forceinline__ T keep_load(const uint8_t* p) {
  if constexpr (CS) {
    return __ldcs(reinterpret_cast<const T*>(p));
  } else {
    __builtin_assume(__isGlobal(p));
    return *reinterpret_cast<const T*>(p);
  }
}
template <bool CS, typename T>
__device__ __forceinline__ void keep_store(uint8_t* p, const T& x) {
  if constexpr (CS) {
    __stcs(reinterpret_cast<T*>(p), x);
  } else {
    __builtin_assume(__isGlobal(p));
    *reinterpret_cast<T*>(p) = x;
  }
}

// PER code pieces of 16 bytes per code row (PER divides NT; kKeepLoads * NT / PER moves per
// batch, at most kKeepTable); scale rows of WS bytes, one piece each (WS = 0: no scale plane).
// Compile-time strides: each piece's table entry is a fixed offset from the thread's first.
// FULL: a whole batch (no guards). A guarded load leaves a zero, not the previous batch's
// register (kept live across the loop, it spilled).
// The next batch's table: its moves fetched (MID: between this batch's reads and the barrier,
// their latency under the reads), resolved into the other table after this batch's writes
// (the table last read by the previous batch's writes, before this batch's barrier), then a
// second barrier.
template <int NT, int PER, int WS, bool CS, bool MID, bool FULL>
__device__ __forceinline__ void keep_table_batch(KeepTable* tab, int cur, const KeepPlanes& pp, const KeepMove* moves,
                                                 int m0, int i1) {
  using TS = typename KeepPiece<WS ? WS : 1>::T;
  constexpr int MSTEP = NT / PER, B = kKeepLoads * MSTEP;  // moves per load slot; per batch
  constexpr int LS = WS ? (B + NT - 1) / NT : 0;          // scale pieces per thread
  constexpr int RM = (B + NT - 1) / NT;                   // moves resolved per thread
  const int mi = threadIdx.x / PER, off = (threadIdx.x % PER) * 16;
  const int n = min(B, i1 - m0), lim = n - mi, slim = n - int(threadIdx.x);  // this thread's pieces: index < lim
  const int nn = min(B, i1 - m0 - B);  // the next batch's moves (none if <= 0)
  const KeepTable& t = tab[cur];
  uint4 x[kKeepLoads];
  TS y[LS ? LS : 1];
#pragma unroll
  for (int u = 0; u < kKeepLoads; ++u)
    x[u] = FULL || u * MSTEP < lim ? keep_load<CS, uint4>(t.src[u * MSTEP + mi] + off) : uint4{};
#pragma unroll
  for (int u = 0; u < LS; ++u)
    y[u] = (FULL && (u + 1) * NT <= B) || u * NT < slim ? keep_load<CS, TS>(t.ssrc[u * NT + threadIdx.x]) : TS{};
  KeepFetched<RM> f;
  if (MID) keep_fetch<NT, RM>(f, moves, m0 + B, nn);
  __syncthreads();  // every read of the batch (both planes) before any of its writes
#pragma unroll
  for (int u = 0; u < kKeepLoads; ++u)
    if (FULL || u * MSTEP < lim) keep_store<CS>(t.dst[u * MSTEP + mi] + off, x[u]);
#pragma unroll
  for (int u = 0; u < LS; ++u)
    if ((FULL && (u + 1) * NT <= B) || u * NT < slim) keep_store<CS>(t.sdst[u * NT + threadIdx.x], y[u]);
  if (nn > 0) {
    if (!MID) keep_fetch<NT, RM>(f, moves, m0 + B, nn);
    keep_fill<NT, RM, WS != 0>(tab[cur ^ 1], pp, f, nn);
    __syncthreads();  // the next table before the next batch's reads
  }
}

template <int NT, int PER, int WS, bool CS, bool MID>
__device__ __noinline__ void keep_table_moves(KeepTable* tab, const KeepPlanes& pp, const KeepMove* moves, int i0,
                                              int i1) {
  constexpr int B = kKeepLoads * (NT / PER), RM = (B + NT - 1) / NT;
  static_assert(B <= kKeepTable && NT % PER == 0, "batch exceeds the table");
  KeepFetched<RM> f;
  keep_fetch<NT, RM>(f, moves, i0, min(B, i1 - i0));
  keep_fill<NT, RM, WS != 0>(tab[0], pp, f, min(B, i1 - i0));
  __syncthreads();
  int cur = 0;
  for (int m0 = i0; m0 < i1; m0 += B, cur ^= 1) {  // the same trips in every thread
    if (i1 - m0 >= B) keep_table_batch<NT, PER, WS, CS, MID, true>(tab, cur, pp, moves, m0, i1);
    else keep_table_batch<NT, PER, WS, CS, MID, false>(tab, cur, pp, moves, m0, i1);
  }
}

template <int NT, int WS, bool CS, bool MID>
__device__ bool keep_table_per(KeepTable* tab, const KeepPlanes& pp, const KeepMove* moves, int i0, int i1, int per) {
  switch (per) {
    case 4: keep_table_moves<NT, 4, WS, CS, MID>(tab, pp, moves, i0, i1); return true;
    case 8: keep_table_moves<NT, 8, WS, CS, MID>(tab, pp, moves, i0, i1); return true;
    case 16: keep_table_moves<NT, 16, WS, CS, MID>(tab, pp, moves, i0, i1); return true;
    case 32: keep_table_moves<NT, 32, WS, CS, MID>(tab, pp, moves, i0, i1); return true;
  }
  return false;
}

template <int NT, int MINB, bool CS, bool MID>
__global__ void __launch_bounds__(NT, MINB) keep_table_kernel(const KvView* views, const KeepMove* moves,
                                                            const int32_t* lane_off, int codes_only) {
  __shared__ KeepTable tab[2];
  __shared__ KeepPlanes pp;
  const int f = blockIdx.x;
  int i0, i1;
  KvView v;
  if (!keep_group(views, moves, lane_off, &i0, &i1, &v)) return;
  const bool scales = v.lay.scale_bytes != 0;
  const KvPlane pc = kv_plane(v, f);
  const KvPlane ps = scales ? kv_plane(v, v.lay.planes() + f) : pc;
  const int ws = scales && !codes_only ? keep_piece_width(ps) : 0;
  const int per = keep_piece_width(pc) == 16 ? int(pc.bytes) / 16 : 0;
  if (threadIdx.x == 0) pp = KeepPlanes{pc, ps};
  __syncthreads();
  if (ws == 0 || ws == int(ps.bytes)) {  // one piece per scale row
    bool done = false;
    switch (ws) {
      case 0: done = keep_table_per<NT, 0, CS, MID>(tab, pp, moves, i0, i1, per); break;
      case 2: done = keep_table_per<NT, 2, CS, MID>(tab, pp, moves, i0, i1, per); break;
      case 4: done = keep_table_per<NT, 4, CS, MID>(tab, pp, moves, i0, i1, per); break;
      case 8: done = keep_table_per<NT, 8, CS, MID>(tab, pp, moves, i0, i1, per); break;
      case 16: done = keep_table_per<NT, 16, CS, MID>(tab, pp, moves, i0, i1, per); break;
    }
    if (done) return;
  }
  keep_plane<NT>(pc, moves, i0, i1);  // otherwise one plane after the other (each its own batches)
  if (scales && !codes_only) keep_plane<NT>(ps, moves, i0, i1);
}

// Experiment: the kernel picked by KC_KEEP_VARIANT: 0 main's; 1 table, next moves fetched
// mid-batch (MID), for scale layouts, main's keep_kernel for bf16; 2 table without MID for scale
// layouts; 3 table without MID for every layout; 4 table MID for every layout; 5 variant 4 with
// streaming hints (ld/st .cs); 6 main's pair kernel, codes only, and 7 variant 4, codes only
// (timing only: unverified).
template <int NT, int MINB>
__global__ void __launch_bounds__(NT, MINB) keep_pair_codes_kernel(const KvView* views, const KeepMove* moves,
                                                                 const int32_t* lane_off) {
  const int f = blockIdx.x;
  int i0, i1;
  KvView v;
  if (!keep_group(views, moves, lane_off, &i0, &i1, &v)) return;
  keep_plane<NT>(kv_plane(v, f), moves, i0, i1);
}
static int keep_variant() {
  static const int v = [] {
    const char* e = std::getenv("KC_KEEP_VARIANT");
    return e ? std::atoi(e) : 0;
  }();
  return v;
}

Status launch_keep(const KvView* views, const KvLayout& lay, const KeepMove* moves, const int32_t* lane_off, int groups,
                   cudaStream_t s) {
  if (groups == 0) return Status::Ok();
  const int var = keep_variant();
  const dim3 grid(lay.planes(), groups);
  const bool sc = lay.scale_bytes != 0;
  if ((var == 1 && sc) || var == 4 || var == 7)
    keep_table_kernel<128, 8, false, true><<<grid, 128, 0, s>>>(views, moves, lane_off, var == 7);
  else if ((var == 2 && sc) || var == 3)
    keep_table_kernel<128, 8, false, false><<<grid, 128, 0, s>>>(views, moves, lane_off, 0);
  else if (var == 5)
    keep_table_kernel<128, 8, true, true><<<grid, 128, 0, s>>>(views, moves, lane_off, 0);
  else if (var == 6 && sc)
    keep_pair_codes_kernel<128, 8><<<grid, 128, 0, s>>>(views, moves, lane_off);
  else if (!sc)
    keep_kernel<128, 8><<<dim3(lay.field_count(), groups), 128, 0, s>>>(views, moves, lane_off);
  else
    keep_pair_kernel<128, 8><<<dim3(lay.planes(), groups), 128, 0, s>>>(views, moves, lane_off);
  KC_LAUNCH_CHECK("keep_kernel");
  return Status::Ok();
}
}  // namespace kc
