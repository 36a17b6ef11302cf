// A cache format as a type: Codec<F>, specialised by the format's header (codecs/bf16.h,
// fp8.h, q4.h, mxfp4.h). codecs/rows.h holds the one switch (with_format) that turns a
// runtime Format into the template argument; the row codec kernels (rows.cu) and their
// twins (rows_twin.cpp), the rope store, attention and their twins (attention/) are
// written once over these members. The bytes of a row's code and scale entries are the
// layout declaration's (layout/kv_layout.h: format_code_bytes / format_scale_bytes).
//   kName                       the format's name in messages ("<kName>_encode_rows: ...")
//   kFormat                     F
//   kRowCodec                   Backend::encode_rows / decode_rows take the format (bf16: no)
//   kScales                     the format has scale planes (attention resolves them)
//   kRotated                    attention runs in a rotated space (q4): rotate_query(q, d)
//                               before, unrotate_out(o, d) after (no-ops otherwise)
//   kAttnMma                    the cuda backend's tensor-core partial takes the format (at
//                               head_dim 128 / 256; attention/rows.h attn_uses_mma)
//   attn_row(view, r, out)      host: row r as attention reads it (dequantised; q4 rotated)
//   store_warp(view, r, y, nt, lane)  (nvcc) the rope store of one row by one warp,
//                               element lane + 32 t in y[t]: encode_row's bytes
//   kBytesPer4, Raw4, load_raw4, raw4_of (Raw4Access<bytes of four elements>), conv4,
//   elem_scale, kAttnMinBlocks, kAttnRawWords
//                               (nvcc) the fma partial's element access (partial_fma.cu)
//   check(cache, rows, n, op)   host-side preconditions of a row batch (format, head_dim,
//                               every row inside its lane); `op` names the operation
//   encode_row(view, x, r)      host twin: row r of the cache from x[head_dim]
//   decode_row(view, r, out)    host twin: row r of the cache to out[head_dim]
//   kThreads, threads(n, d)     the kernels' block size and total threads for n rows
//   encode_thread / decode_thread(views, .., n, d, t)   (nvcc) thread t's share of a batch
// Every byte a codec writes depends on its own row's inputs alone.
#pragma once
#include <cstdint>

#include "kernels/layout/cache.h"
#include "kernels/layout/kc_hd.h"
#include "kernels/layout/status.h"

namespace kc {

template <Format F>
struct Codec;

// The launch shape of a one-warp-per-row codec (fp8, mxfp4): blocks of 8 warps.
struct WarpPerRowCodec {
  static constexpr int kThreads = 256;
  static int64_t threads(int n, int) { return int64_t(n) * 32; }
};

// The fma partial's raw element access (partial_fma.cu), by the bytes of four elements:
// 8 (bf16), 4 (fp8: four codes), 2 (q4, mxfp4: four nibbles, low nibble first). Raw4
// holds them as read; load_raw4 reads elements e0 .. e0 + 3 of a row, raw4_of takes the
// c-th four of a 16-byte word already loaded. The format's conv4 and elem_scale make values.
// A format attention reads in original space (kRotated false): nothing to rotate before or
// after (bf16, fp8, mxfp4).
struct OriginalSpace {
  static constexpr bool kRotated = false;
  KC_HD static void rotate_query(float*, int) {}
  KC_HD static void unrotate_out(float*, int) {}
};

template <int kBytes>
struct Raw4Access {
  static_assert(kBytes == 8 || kBytes == 4 || kBytes == 2, "Raw4Access: 8, 4 or 2 bytes per four elements");
#if defined(__CUDACC__)
  static constexpr int kBytesPer4 = kBytes;
  struct Raw4 {
    uint32_t w[kBytes == 8 ? 2 : 1];
  };
  __device__ __forceinline__ static Raw4 load_raw4(const uint8_t* row, int e0) {
    Raw4 r;
    if constexpr (kBytes == 8) {
      const uint2 t = __ldg(reinterpret_cast<const uint2*>(row + 2 * e0));
      r.w[0] = t.x, r.w[1] = t.y;
    } else if constexpr (kBytes == 4) {
      r.w[0] = __ldg(reinterpret_cast<const uint32_t*>(row + e0));
    } else {
      r.w[0] = __ldg(reinterpret_cast<const uint16_t*>(row + e0 / 2));
    }
    return r;
  }
  __device__ __forceinline__ static Raw4 raw4_of(const uint4& t, int c) {
    const uint32_t w[4] = {t.x, t.y, t.z, t.w};
    Raw4 r;
    if constexpr (kBytes == 8) {
      r.w[0] = w[2 * c], r.w[1] = w[2 * c + 1];
    } else if constexpr (kBytes == 4) {
      r.w[0] = w[c];
    } else {
      r.w[0] = (w[c / 2] >> (16 * (c % 2))) & 0xFFFFu;
    }
    return r;
  }
#endif
};

#if defined(__CUDACC__)
// Thread t of a one-warp-per-row kernel: its row, lane, row descriptor and lane view.
// False past the last row (whole warps leave together: blocks are whole warps).
struct WarpRow {
  int row, lane;
  RowRef r;
  KvView v;
  __device__ uint8_t* codes() const { return kv_row(v, r.layer, r.kv, r.head, r.pos); }
  __device__ uint8_t* scales() const { return kv_scale(v, r.layer, r.kv, r.head, r.pos); }
};
__device__ inline bool warp_row(const KvView* views, const RowRef* rows, int n, int64_t t, WarpRow* w) {
  w->row = int(t / 32);
  w->lane = threadIdx.x & 31;
  if (w->row >= n) return false;
  w->r = rows[w->row];
  w->v = views[w->r.lane];
  return true;
}
#endif

// The checks every format's check() ends with (kernels/backend/validate.cpp): every row's
// lane, layer, kv, head and position inside its lane.
Status validate_rows(const Cache& cache, const RowRef* rows, int n);

}  // namespace kc
