// Compaction (keep) kernel. Host twin: keep_host (attention/twin.cpp); contract: qwen-pages;
// bench: bench compact.
//
// keep_kernel: grid (x, lane group); each warp of a block is an independent unit, no block
//   barrier. A lane group's units are the (field, column) pairs of its fields (codes and
//   scales: every declared field moves; addresses come from kv_plane): column c of a field
//   is bytes [64 c, 64 c + 64) of each of its rows (the whole row when it is 64 bytes or
//   shorter). A warp walks its lane's moves in order over its column, in batches: every lane
//   of the warp reads its pieces of up to kKeepLoads moves (16, 8, 4, 2 or 1 bytes each,
//   the widest that every row address of the field allows; consecutive lanes take
//   consecutive pieces of a row, then the next move), a __syncwarp, then the writes.
//   This equals sequential in-order moves. A byte is only ever read and written by the unit
//   of its (field, column), so units are independent. Within a unit: a lane's moves ascend
//   in src and in dst with dst < src, so no move reads a row an earlier move wrote
//   (dst_i < src_i < src_j for i < j); a later move may write the row an earlier one reads
//   (dst_j == src_i, j > i), and every read of a batch precedes (program order, then the
//   batch's __syncwarp) the batch's writes and every later batch's.
//   (Before: a block per (field, lane), 256 threads over whole rows with a barrier per batch
//   of reads: 1024 to 2048 blocks of uneven work at 3 per SM, scale planes of 4 or 8 bytes a
//   row beside code planes of 64 to 256; before that, a barrier after every move and one byte
//   per thread. bench compact measures the kernel.)
#include <cuda_runtime.h>

#include "kernels/attention/launch.h"

namespace kc {

constexpr int kKeepThreads = 256;  // 8 independent warps
constexpr int kKeepLoads = 8;      // pieces in flight per lane
constexpr uint32_t kKeepCol = 64;  // bytes of a row one unit moves

template <int W>
struct KeepPiece;
template <> struct KeepPiece<16> { using T = uint4; };
template <> struct KeepPiece<8> { using T = uint2; };
template <> struct KeepPiece<4> { using T = uint32_t; };
template <> struct KeepPiece<2> { using T = uint16_t; };
template <> struct KeepPiece<1> { using T = uint8_t; };

// The moves [i0, i1) of bytes [c0, c0 + w) of each row of one plane, by one warp.
template <int W>
__device__ __noinline__ void keep_column(const KvPlane& pl, const KeepMove* moves, int i0, int i1, uint32_t c0, uint32_t w,
                            int lane) {
  using T = typename KeepPiece<W>::T;
  const int per = int(w / W);  // pieces per row chunk
  if (per > 32 || 32 % per != 0) {  // no layout makes one (row widths are powers of two); kept correct: a move at a time
    for (int m = i0; m < i1; ++m) {
      const KeepMove mv = moves[m];
      const uint8_t* s = kv_plane_row(pl, mv.src) + c0;
      uint8_t* d = kv_plane_row(pl, mv.dst) + c0;
      for (int b = lane; b < per; b += 32) *reinterpret_cast<T*>(d + b * W) = *reinterpret_cast<const T*>(s + b * W);
      __syncwarp();  // this move's reads before a later move's writes
    }
    return;
  }
  const int mstep = 32 / per;  // moves per load slot
  const int mi = lane / per;
  const uint32_t off = c0 + uint32_t(lane % per) * W;
  for (int m0 = i0; m0 < i1; m0 += kKeepLoads * mstep) {  // the same trips in every lane
    T x[kKeepLoads];
    int32_t dst[kKeepLoads];  // positions (their addresses after the barrier: fewer live registers)
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
    __syncwarp();  // every read of the batch before any of its writes
#pragma unroll
    for (int u = 0; u < kKeepLoads; ++u)
      if (dst[u] >= 0) *reinterpret_cast<T*>(kv_plane_row(pl, dst[u]) + off) = x[u];
  }
}

__global__ void __launch_bounds__(kKeepThreads, 4) keep_kernel(const KvView* views, int fields, const KeepMove* moves,
                                                             const int32_t* lane_off) {
  const int g = blockIdx.y, lane = threadIdx.x & 31;
  const int i0 = lane_off[g], i1 = lane_off[g + 1];
  if (i0 >= i1) return;
#ifdef KC_PLANT_KEEP_FIRST_LANE
  const KvView v = views[moves[0].lane];  // planted bug (test builds only): the first move's lane
#else
  const KvView v = views[moves[i0].lane];  // a group holds one lane's moves
#endif
  // Units: the columns of the code planes, then of the scale planes (fields [C, fields)).
  const int C = v.lay.planes();
  const uint32_t cb = v.lay.code_bytes, sb = v.lay.scale_bytes;
  const int ccols = int((cb + kKeepCol - 1) / kKeepCol), scols = int((sb + kKeepCol - 1) / kKeepCol);
  const int units = C * ccols + (fields - C) * scols;
  for (int u = blockIdx.x * (kKeepThreads / 32) + int(threadIdx.x / 32); u < units;
       u += gridDim.x * (kKeepThreads / 32)) {
    const bool codes = u < C * ccols;
    const int f = codes ? u / ccols : C + (u - C * ccols) / scols;
    const uint32_t c0 = uint32_t(codes ? u % ccols : (u - C * ccols) % scols) * kKeepCol;
    const KvPlane pl = kv_plane(v, f);
    const uint32_t w = min(pl.bytes - c0, kKeepCol);
    // The widest piece every row address of the column allows: base, page stride (paged),
    // plane offset, row width, column offset and width all multiples of it.
    const uint64_t a =
        uint64_t(reinterpret_cast<uintptr_t>(pl.base)) | pl.plane_off | pl.bytes | c0 | w | (pl.pt ? pl.ps : 0) | 16u;
    switch (a & (~a + 1)) {
      case 16: keep_column<16>(pl, moves, i0, i1, c0, w, lane); break;
      case 8: keep_column<8>(pl, moves, i0, i1, c0, w, lane); break;
      case 4: keep_column<4>(pl, moves, i0, i1, c0, w, lane); break;
      case 2: keep_column<2>(pl, moves, i0, i1, c0, w, lane); break;
      default: keep_column<1>(pl, moves, i0, i1, c0, w, lane); break;
    }
  }
}

Status launch_keep(const KvView* views, int fields, const KeepMove* moves, const int32_t* lane_off, int groups,
                   cudaStream_t s) {
  if (groups == 0) return Status::Ok();
  // Four warps per field and group (a 256-byte row's columns; the warps of longer rows loop,
  // those of shorter ones leave at once).
  const unsigned x = unsigned((int64_t(fields) * 4 + kKeepThreads / 32 - 1) / (kKeepThreads / 32));
  keep_kernel<<<dim3(x, groups), kKeepThreads, 0, s>>>(views, fields, moves, lane_off);
  KC_LAUNCH_CHECK("keep_kernel");
  return Status::Ok();
}
}  // namespace kc
