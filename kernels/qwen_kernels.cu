// Rope store, split-K attention (partial and merge) and keep kernels.
//
// rope_store_kernel: one warp per (row, head slot); head slots are the row's q heads,
//   then its kv heads' K, then their V. q and k are rotated (neox pairing over the first
//   rot_dims dims, angles in float64 from the row's logical pos, rounded once to fp32);
//   q goes to q_out [n][Hq][d] fp32, K and V (V unrotated) are stored at the row's slot
//   through kv_row in the cache format (fp8: the row helpers of fp8_rows.h over the
//   rotated values).
// attention_partial_kernel: block (chunk, kv head, row), one warp per q head of the
//   kv head's group. Keys are the logical positions [chunk*W, chunk*W + W) of the row
//   (committed 0..len-1, then the tail through its index list); each lane holds d/32
//   contiguous elements (one vector load per row), rows of 4 keys are loaded before
//   the first is used. Pass 1: scores s = (q . k) * scale in the fixed 32-lane order of
//   attention_rows.h; m = max s.
//   Pass 2: e = expf(s - m), l += e, o += e * v in key order. An empty chunk gives
//   m = -inf, l = 0, o = 0. Partials [row][q head][max chunks].
// attention_merge_kernel: one warp per (row, q head); chunks merged in chunk order:
//   M = max of non-empty m, L = sum l * expf(m - M), O = sum o * expf(m - M);
//   out = O / L; a row with no keys gives 0 (never NaN).
// keep_kernel: block (field, lane); the lane's moves run in order, a barrier between
//   moves, so overlapping moves give the result of sequential in-order moves.
// Every address comes from kv_row / kv_field_row; no stride arithmetic here.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/attention_rows.h"
#include "kernels/qwen_kernels_cuda.h"

namespace kc {

__device__ void store_row_dev(const KvView& v, int layer, int kv, int head, int32_t slot, const float* y, int nt,
                              int lane) {
  const int d = v.lay.head_dim;
  uint8_t* row = kv_row(v, layer, kv, head, slot);
  if (v.lay.format == Format::bf16) {
    for (int t = 0; t < nt; ++t) {
      const uint16_t b = bf16_from_float(y[t]);
      memcpy(row + 2 * (lane + 32 * t), &b, 2);
    }
    return;
  }
  float amax = 0.0f;
  for (int t = 0; t < nt; ++t) amax = amax_step(amax, y[t]);
  for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float scale = fp8_row_scale(amax);
  for (int t = 0; t < nt; ++t) row[lane + 32 * t] = fp8_code(y[t], scale);
  if (lane == 0) memcpy(kv_scale(v, layer, kv, head, slot), &scale, 4);
  (void)d;
}

__global__ void rope_store_kernel(const KvView* views, RopeParams p, const RopeRow* rows, int n, const float* q,
                                  const float* k, const float* vin, float* q_out) {
  const int hkv = views[0].lay.kv_heads;
  if (!q) p.q_heads = 0;  // no queries: store k and v only
  const int slots = p.q_heads + 2 * hkv;
  const int64_t w = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (w >= int64_t(n) * slots) return;
  const int r = int(w / slots), hs = int(w % slots);
  const RopeRow row = rows[r];
  const KvView v = views[row.lane];
  const int d = v.lay.head_dim, nt = d / 32, h2 = p.rot_dims / 2;
  const float* x;
  bool rotate = true;
  if (hs < p.q_heads) x = q + (size_t(r) * p.q_heads + hs) * d;
  else if (hs < p.q_heads + hkv) x = k + (size_t(r) * hkv + hs - p.q_heads) * d;
  else { x = vin + (size_t(r) * hkv + hs - p.q_heads - hkv) * d; rotate = false; }
  float y[kMaxHeadDim / 32];
  for (int t = 0; t < nt; ++t) {
    const int j = lane + 32 * t;
    if (!rotate || j >= p.rot_dims) {
      y[t] = x[j];
    } else {
      const int i = j < h2 ? j : j - h2;
      float c, s;
      rope_cos_sin(row.pos, i, p.rot_dims, p.base, &c, &s);
      y[t] = j < h2 ? x[j] * c - x[j + h2] * s : x[j] * c + x[i] * s;
    }
  }
  if (hs < p.q_heads) {
    for (int t = 0; t < nt; ++t) q_out[(size_t(r) * p.q_heads + hs) * d + lane + 32 * t] = y[t];
  } else {
    const int kv = hs < p.q_heads + hkv ? 0 : 1;
    const int head = hs - p.q_heads - kv * hkv;
    store_row_dev(v, p.layer, kv, head, row.slot, y, nt, lane);
  }
}

// A lane's PER contiguous elements of a cache row, dequantised, with one vector load.
template <int PER, Format F>
__device__ __forceinline__ void load_chunk(const uint8_t* row, int lane, float scale, float* out) {
  constexpr int EB = F == Format::bf16 ? 2 : 1;
  constexpr int BYTES = PER * EB;
  alignas(16) uint8_t buf[16];
  const uint8_t* src = row + lane * BYTES;
  if constexpr (BYTES == 16) *reinterpret_cast<uint4*>(buf) = *reinterpret_cast<const uint4*>(src);
  else if constexpr (BYTES == 8) *reinterpret_cast<uint2*>(buf) = *reinterpret_cast<const uint2*>(src);
  else if constexpr (BYTES == 4) *reinterpret_cast<uint32_t*>(buf) = *reinterpret_cast<const uint32_t*>(src);
  else if constexpr (BYTES == 2) *reinterpret_cast<uint16_t*>(buf) = *reinterpret_cast<const uint16_t*>(src);
  else buf[0] = src[0];
#pragma unroll
  for (int e = 0; e < PER; ++e) {
    if constexpr (F == Format::bf16) out[e] = bf16_to_float(uint16_t(buf[2 * e] | (buf[2 * e + 1] << 8)));
    else out[e] = fp8_value(buf[e], scale);
  }
}

constexpr int kIlp = 4;  // keys whose rows are loaded before the first is used

template <int PER, Format F>
__global__ void attention_partial_kernel(const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails,
                                         const float* q, int max_chunks, float* pm, float* pl, float* po) {
  extern __shared__ float scores[];
  const int c = blockIdx.x, kvh = blockIdx.y, r = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const AttnRow row = rows[r];
  const KvView v = views[row.lane];
  constexpr int d = PER * 32;
  const int group = p.q_heads / v.lay.kv_heads;
  const int qh = kvh * group + warp;
  const size_t pidx = (size_t(r) * p.q_heads + qh) * max_chunks + c;
  const int32_t total = row.len + row.tail_len;
  const int32_t k0 = c * p.chunk, k1 = min(total, k0 + p.chunk);
  const int32_t* tail = tails + row.tail_off;
  float qv[PER];
#pragma unroll
  for (int e = 0; e < PER; ++e) qv[e] = q[(size_t(r) * p.q_heads + qh) * d + lane * PER + e];
  float* s = scores + warp * p.chunk;
  float m = -INFINITY;
  for (int32_t key = k0; key < k1; key += kIlp) {
    float kf[kIlp][PER];
#pragma unroll
    for (int u = 0; u < kIlp; ++u)
      if (key + u < k1) {
        const int32_t slot = key_slot(key + u, row.len, tail);
        const float ks = F == Format::fp8 ? load_scale(v, p.layer, 0, kvh, slot) : 1.0f;
        load_chunk<PER, F>(kv_row(v, p.layer, 0, kvh, slot), lane, ks, kf[u]);
      }
#pragma unroll
    for (int u = 0; u < kIlp; ++u)
      if (key + u < k1) {
        float acc = 0.0f;
#pragma unroll
        for (int e = 0; e < PER; ++e) acc += qv[e] * kf[u][e];
        for (int off = 16; off > 0; off >>= 1) acc = acc + __shfl_xor_sync(0xFFFFFFFFu, acc, off);
        const float sc = acc * p.scale;
        if (lane == 0) s[key + u - k0] = sc;
        m = fmaxf(m, sc);
      }
  }
  __syncwarp();
  float l = 0.0f, o[PER];
#pragma unroll
  for (int e = 0; e < PER; ++e) o[e] = 0.0f;
  for (int32_t key = k0; key < k1; key += kIlp) {
    float vf[kIlp][PER];
#pragma unroll
    for (int u = 0; u < kIlp; ++u)
      if (key + u < k1) {
        const int32_t slot = key_slot(key + u, row.len, tail);
        const float vs = F == Format::fp8 ? load_scale(v, p.layer, 1, kvh, slot) : 1.0f;
        load_chunk<PER, F>(kv_row(v, p.layer, 1, kvh, slot), lane, vs, vf[u]);
      }
#pragma unroll
    for (int u = 0; u < kIlp; ++u)
      if (key + u < k1) {
        const float ew = expf(s[key + u - k0] - m);
        l += ew;
#pragma unroll
        for (int e = 0; e < PER; ++e) o[e] += ew * vf[u][e];
      }
  }
  if (lane == 0) {
    pm[pidx] = m;
    pl[pidx] = l;
  }
#pragma unroll
  for (int e = 0; e < PER; ++e) po[pidx * d + lane * PER + e] = o[e];
}

__global__ void attention_merge_kernel(AttnParams p, const AttnRow* rows, int d, int max_chunks, const float* pm,
                                       const float* pl, const float* po, float* out) {
  const int qh = blockIdx.x, r = blockIdx.y, lane = threadIdx.x;
  const AttnRow row = rows[r];
  const int nc = (row.len + row.tail_len + p.chunk - 1) / p.chunk, nt = d / 32;
  const size_t base = (size_t(r) * p.q_heads + qh) * max_chunks;
  float M = -INFINITY;
  for (int c = 0; c < nc; ++c)
    if (pl[base + c] > 0.0f) M = fmaxf(M, pm[base + c]);
  float L = 0.0f, acc[kMaxHeadDim / 32];
  for (int t = 0; t < nt; ++t) acc[t] = 0.0f;
  for (int c = 0; c < nc; ++c) {
    const float lc = pl[base + c];
    if (!(lc > 0.0f)) continue;
    const float w = expf(pm[base + c] - M);
    L += lc * w;
    for (int t = 0; t < nt; ++t) acc[t] += po[(base + c) * d + lane + 32 * t] * w;
  }
  for (int t = 0; t < nt; ++t) out[(size_t(r) * p.q_heads + qh) * d + lane + 32 * t] = L > 0.0f ? acc[t] / L : 0.0f;
}

__global__ void keep_kernel(const KvView* views, const KeepMove* moves, const int32_t* lane_off) {
  const int f = blockIdx.x, g = blockIdx.y;
  for (int32_t i = lane_off[g]; i < lane_off[g + 1]; ++i) {
    const KeepMove mv = moves[i];
    const KvView v = views[mv.lane];
    const uint32_t bytes = v.lay.field(f).bytes_per_pos;
    const uint8_t* src = kv_field_row(v, f, mv.src);
    uint8_t* dst = kv_field_row(v, f, mv.dst);
    for (uint32_t b = threadIdx.x; b < bytes; b += blockDim.x) dst[b] = src[b];
    __syncthreads();
  }
}

Status launch_rope_store(const KvView* views, int hkv, const RopeParams& p, const RopeRow* rows, int n, const float* q,
                         const float* k, const float* v, float* q_out) {
  if (n == 0) return Status::Ok();
  const int64_t warps = int64_t(n) * ((q ? p.q_heads : 0) + 2 * hkv);
  rope_store_kernel<<<unsigned((warps * 32 + 255) / 256), 256>>>(views, p, rows, n, q, k, v, q_out);
  KC_LAUNCH_CHECK("rope_store_kernel");
  return Status::Ok();
}

Status launch_attention(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                        const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                        float* out, bool sync) {
  if (n == 0) return Status::Ok();
  const int group = p.q_heads / hkv;
  if (max_chunks > 0) {
    const size_t smem = size_t(group) * p.chunk * sizeof(float);
    const dim3 grid(max_chunks, hkv, n);
    const bool bf = fmt == Format::bf16;
#define KC_PARTIAL(PER)                                                                                           \
  (bf ? attention_partial_kernel<PER, Format::bf16><<<grid, group * 32, smem>>>(views, p, rows, tails, q, max_chunks, \
                                                                               pm, pl, po)                        \
      : attention_partial_kernel<PER, Format::fp8><<<grid, group * 32, smem>>>(views, p, rows, tails, q, max_chunks,  \
                                                                              pm, pl, po))
    switch (d / 32) {
      case 1: KC_PARTIAL(1); break;
      case 2: KC_PARTIAL(2); break;
      case 4: KC_PARTIAL(4); break;
      case 8: KC_PARTIAL(8); break;
      default: return Status::Error("attention: head_dim must be 32, 64, 128 or 256");
    }
#undef KC_PARTIAL
    if (sync) KC_LAUNCH_CHECK("attention_partial_kernel");
    else KC_LAUNCH_CHECK_ASYNC("attention_partial_kernel");
  }
  attention_merge_kernel<<<dim3(p.q_heads, n), 32>>>(p, rows, d, max_chunks, pm, pl, po, out);
  if (sync) KC_LAUNCH_CHECK("attention_merge_kernel");
  else KC_LAUNCH_CHECK_ASYNC("attention_merge_kernel");
  return Status::Ok();
}

Status launch_keep(const KvView* views, int fields, const KeepMove* moves, const int32_t* lane_off, int groups) {
  if (groups == 0) return Status::Ok();
  keep_kernel<<<dim3(fields, groups), 128>>>(views, moves, lane_off);
  KC_LAUNCH_CHECK("keep_kernel");
  return Status::Ok();
}

}  // namespace kc
