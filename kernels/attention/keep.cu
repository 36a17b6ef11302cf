// Compaction (keep) kernel. Host twin: keep_host (attention/twin.cpp); contract: qwen-pages;
// bench: bench compact.
//
// keep_kernel: block (field, lane), 256 threads. The lane's moves run in batches: the
//   block reads the source rows of a batch (each row in pieces of W bytes, W the widest of
//   16, 8, 4, 2, 1 that every row address of the field allows; kKeepLoads pieces in flight
//   per thread), a barrier, writes them to their destinations, then the next batch.
//   This equals sequential in-order moves: a lane's moves ascend in src and in dst, with
//   dst < src, so no move reads a row that an earlier move wrote (dst_i < src_i < src_j for
//   i < j); a later move may write the row an earlier one reads (dst_j == src_i, j > i),
//   and every read of a batch comes before the batch's writes and every later batch's
//   (the barrier of the next batch). Every declared field (codes and scales) moves; addresses come from kv_plane.
//   (Before: a barrier after every move, and one byte per thread per move: 128 B to 512 B
//   rows kept a block's threads idle; bench compact measures the kernel.)
#include <cuda_runtime.h>

#include "kernels/attention/launch.h"

namespace kc {

constexpr int kKeepThreads = 256;
constexpr int kKeepLoads = 8;  // pieces in flight per thread

template <int W>
struct KeepPiece;
template <> struct KeepPiece<16> { using T = uint4; };
template <> struct KeepPiece<8> { using T = uint2; };
template <> struct KeepPiece<4> { using T = uint32_t; };
template <> struct KeepPiece<2> { using T = uint16_t; };
template <> struct KeepPiece<1> { using T = uint8_t; };

// The moves [i0, i1) of one plane. Thread tid takes piece tid % per of moves tid / per,
// + kKeepThreads / per, .. (per = pieces per row, a power of two up to kKeepThreads: every
// row width is one), kKeepLoads of them per batch: consecutive threads, consecutive
// pieces of a row and then the next row. One barrier per batch, between its reads and its
// writes: a batch's writes never reach a later batch's reads (no move reads a row an
// earlier move wrote), and every thread's reads of batch b precede the barrier of batch
// b + 1, so every later write too.
template <int W>
__device__ void keep_moves(const KvPlane& pl, const KeepMove* moves, int i0, int i1) {
  using T = typename KeepPiece<W>::T;
  const int per = int(pl.bytes / W);
  if (kKeepThreads % per != 0) {  // no layout makes one (row widths are powers of two); kept correct: one move at a time
    for (int m = i0; m < i1; ++m) {
      const KeepMove mv = moves[m];
      for (int b = threadIdx.x; b < per; b += kKeepThreads)
        *reinterpret_cast<T*>(kv_plane_row(pl, mv.dst) + b * W) = *reinterpret_cast<const T*>(kv_plane_row(pl, mv.src) + b * W);
      __syncthreads();
    }
    return;
  }
  const int mstep = kKeepThreads / per;                    // moves per load slot
  const int mi = threadIdx.x / per, off = (threadIdx.x % per) * W;
  for (int m0 = i0; m0 < i1; m0 += kKeepLoads * mstep) {  // the same trips in every thread
    T x[kKeepLoads];
    uint8_t* dst[kKeepLoads];
#pragma unroll
    for (int u = 0; u < kKeepLoads; ++u) {
      const int m = m0 + u * mstep + mi;
      dst[u] = nullptr;
      if (m < i1) {
        const KeepMove mv = moves[m];
        x[u] = *reinterpret_cast<const T*>(kv_plane_row(pl, mv.src) + off);
        dst[u] = kv_plane_row(pl, mv.dst) + off;
      }
    }
    __syncthreads();  // every read of the batch before any of its writes
#pragma unroll
    for (int u = 0; u < kKeepLoads; ++u)
      if (dst[u]) *reinterpret_cast<T*>(dst[u]) = x[u];
  }
}

__global__ void __launch_bounds__(kKeepThreads, 3) keep_kernel(const KvView* views, const KeepMove* moves,
                                                           const int32_t* lane_off) {
  const int f = blockIdx.x, g = blockIdx.y;
  const int i0 = lane_off[g], i1 = lane_off[g + 1];
  if (i0 >= i1) return;
#ifdef KC_PLANT_KEEP_FIRST_LANE
  const KvView v = views[moves[0].lane];  // planted bug (test builds only): the first move's lane
#else
  const KvView v = views[moves[i0].lane];  // a group holds one lane's moves
#endif
  const KvPlane pl = kv_plane(v, f);
  // The widest piece every row address of the plane allows: base, page stride (paged),
  // plane offset and row width all multiples of it.
  const uint64_t a = uint64_t(reinterpret_cast<uintptr_t>(pl.base)) | pl.plane_off | pl.bytes | (pl.pt ? pl.ps : 0) | 16u;
  switch (a & (~a + 1)) {
    case 16: keep_moves<16>(pl, moves, i0, i1); break;
    case 8: keep_moves<8>(pl, moves, i0, i1); break;
    case 4: keep_moves<4>(pl, moves, i0, i1); break;
    case 2: keep_moves<2>(pl, moves, i0, i1); break;
    default: keep_moves<1>(pl, moves, i0, i1); break;
  }
}

Status launch_keep(const KvView* views, int fields, const KeepMove* moves, const int32_t* lane_off, int groups,
                   cudaStream_t s) {
  if (groups == 0) return Status::Ok();
  keep_kernel<<<dim3(fields, groups), kKeepThreads, 0, s>>>(views, moves, lane_off);
  KC_LAUNCH_CHECK("keep_kernel");
  return Status::Ok();
}
}  // namespace kc
