// Split-K merge kernel. Host twin: attention_merge_host (attention/twin.cpp); contract:
// qwen-pages.
//
// attention_merge_kernel: block per (q head, row), a thread per output element; chunks
//   merged in chunk order: M = max of m, L = sum l * expf(m - M),
//   O = sum o * expf(m - M); out = O / L; a row with no keys gives 0 (never NaN). Every
//   chunk below nc has keys (l >= 1 when its scores are finite); a chunk is never skipped
//   for its l, so a NaN l or o (a non-finite score or V) reaches the output. q4
//   caches: the output is rotated back to original space once (codecs/q4.h).
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/attention/partial.cuh"
#include "kernels/attention/ptx.cuh"

namespace kc {

// Block per (q head, row), one thread per output element. M (the max of the chunks' m;
// exact in any order) is a block reduction; then every thread walks the chunks
// in chunk order (the same L in every thread), their m and l staged through shared
// memory kMergeTile chunks at a time and their partials loaded kMergeBatch chunks at a
// time before the first is used. The merge is latency-bound (a few loads per thread), so
// the first tile's m and l are staged by the pass that finds M, and the first batch of
// partials is in flight during it. Each chunk's weight expf(m - M) is computed once per
// block into shared memory (the same value in every thread, so the same bytes), not once
// per element: a row of 256 chunks took 256 expf per thread.
// Batch of 16: on the H200 (24q/4kv/d256) 54.8 us against 59.5 us before at 32K x b1 and
// 297 against 299 us at 32K x b8 (two alternating runs each); 32 and 64 were no better while
// every thread computed every chunk's weight. Since the weights are computed once per block,
// each batch costs about one round trip to the partials (0.85 us per batch of 16 on an H100,
// where the merge added 16-19 us to b1 x 128K's 256 chunks: reports/h100/receipts-s41), so
// the batch grows with the chunks: kMergeBatch up to 16 chunks, 32 up to 32, 64 above.
// Kept partials (bf16 d 256) stay at 16: they are read from the L2, and 64 was 2.8 % slower
// than 16 there at b1 x 128K, where the others gain 2-4 % over 16 (same call).
constexpr int kMergeTile = 256, kMergeBatch = 16;
constexpr int merge_batch(int max_chunks, bool kept) {
  return kept ? kMergeBatch : max_chunks > 32 ? 64 : max_chunks > 16 ? 32 : kMergeBatch;
}
// kKept: the partial kept its outputs in L2 (attn_keeps_partials): they are read with an
// evict_first policy, so that they leave L2 first once read.
template <bool kKept, int U>
__global__ void attention_merge_kernel(AttnParams p, const AttnRow* rows, int d, int max_chunks, const float* pm,
                                       const float* pl, const float* po, bool unrotate, float* out) {
  __shared__ float obuf[kMaxHeadDim];
  __shared__ float tl[kMergeTile], tm[kMergeTile], tw[kMergeTile], wmax[kMaxHeadDim / 32];
  const int qh = blockIdx.x, r = blockIdx.y, j = threadIdx.x, lane = j & 31;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // launched early (programmatic dependency): wait for the partials
#endif
  const AttnRow row = rows[r];
  const int nc = (row.len + row.tail_len + p.chunk - 1) / p.chunk;
  const size_t base = (size_t(r) * p.q_heads + qh) * max_chunks;
  float oc[U];  // partials of chunks [t0 + c0, t0 + c0 + U) at element j
  const uint64_t last_use = kKept ? l2_policy_evict_first() : 0;
  auto load_batch = [&](int c, int tn) {
    if constexpr (kKept) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        oc[u] = c + u < tn ? ldg_f32_l2(po + (base + c + u) * d + j, last_use) : 0.0f;
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u)
        oc[u] = c + u < tn ? __ldg(po + (base + c + u) * d + j) : 0.0f;
    }
  };
  load_batch(0, min(nc, kMergeTile));
  float M = -INFINITY;
  for (int c = j; c < nc; c += d) {
    const float lc = __ldg(pl + base + c), mc = __ldg(pm + base + c);
    if (c < kMergeTile) tl[c] = lc, tm[c] = mc;
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE  // planted bug (test builds only): a chunk whose l is NaN is skipped
    if (lc > 0.0f) M = fmaxf(M, mc);
#else
    M = fmaxf(M, mc);
    (void)lc;
#endif
  }
  for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xFFFFFFFFu, M, off));
  if (lane == 0) wmax[j / 32] = M;
#if defined(KC_PLANT_MERGE_BARRIER_TWO_SITES)  // sanitizer control (tools/sanitize.py): synccheck must see the
  // block's warps meet one barrier at two instructions (the first warp at one, the rest at another);
  // bar.sync is the aligned barrier, so that is an error even where the hardware lets it pass
  if (j < 32) asm volatile("bar.sync 0;" ::: "memory");
  else asm volatile("bar.sync 0;" ::: "memory");
#elif !defined(KC_PLANT_MERGE_NO_BARRIER)  // sanitizer control (tools/sanitize.py): racecheck must see the hazard
  __syncthreads();  // also: the first tile's m and l are staged
#endif
  M = -INFINITY;
  for (int w = 0; w < d / 32; ++w) M = fmaxf(M, wmax[w]);
  // Each chunk's weight expf(m - M), once per block (it is the same for every element j):
  // the first tile's here, the others' as they are staged.
  for (int c = j; c < min(nc, kMergeTile); c += d) tw[c] = expf(tm[c] - M);
  __syncthreads();
  float L = 0.0f, acc = 0.0f;
  for (int t0 = 0; t0 < nc; t0 += kMergeTile) {
    const int tn = min(kMergeTile, nc - t0);
    if (t0 > 0) {
      __syncthreads();  // the previous tile is consumed
      for (int c = j; c < tn; c += d) {
        tl[c] = __ldg(pl + base + t0 + c);
        tw[c] = expf(__ldg(pm + base + t0 + c) - M);
      }
      __syncthreads();
    }
    for (int c0 = 0; c0 < tn; c0 += U) {
      if (t0 > 0 || c0 > 0) load_batch(t0 + c0, t0 + tn);
      // Branch-free, so the batch's loads, weights and products are scheduled ahead of
      // the two in-order sums; a chunk past the tile or without keys leaves them as they are.
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int cu = min(c0 + u, tn - 1);
        const float lc = tl[cu], w = tw[cu];
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE
        const bool use = c0 + u < tn && lc > 0.0f;
#else
        const bool use = c0 + u < tn;  // every chunk below nc has keys; a NaN l passes through
#endif
        const float Ln = L + lc * w, an = acc + oc[u] * w;
        L = use ? Ln : L;
        acc = use ? an : acc;
      }
    }
  }
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE
  float res = L > 0.0f ? acc / L : 0.0f;
#else
  float res = nc > 0 ? acc / L : 0.0f;  // no keys: 0; otherwise a NaN L or acc stays NaN
#endif
  if (unrotate) {  // q4: the output back to original space, once
    obuf[j] = res;
    __syncthreads();
    if (j < d / 32) hadamard32_inv(obuf + 32 * j);
    __syncthreads();
    res = obuf[j];
  }
#ifdef KC_PLANT_MERGE_READ_PAST_END  // sanitizer control (tools/sanitize.py): memcheck must see the read
  if (__ldg(pl + base + max_chunks) == 1234.5f) res = 0.0f;  // the next (row, head)'s: past the end on the last
#endif
  out[(size_t(r) * p.q_heads + qh) * d + j] = res;
}

#ifdef KC_PLANT_MERGE_READ_UNWRITTEN
// sanitizer control (tools/sanitize.py): initcheck must see this read. A device buffer that nothing
// ever writes, read after every merge. (Two earlier forms were green on the H200: the partial writes
// the slots past a row's last chunk empty, and the scratch output had been written by the operation
// before; the contract's bytes hide both from memcheck too, so only a buffer of its own is sure.)
__global__ void merge_plant_read_unwritten_kernel(const float* never_written, float* out) {
  if (never_written[threadIdx.x] == 1234.5f) out[0] = 0.0f;
}
#endif

Status launch_merge(const AttnParams& p, const AttnRow* rows, int n, int d, int max_chunks, const float* pm,
                    const float* pl, const float* po, bool unrotate, bool kept, float* out, cudaStream_t s) {
  // A row a grid y index (at most 65535): more rows go in launches of kAttnRowsPerLaunch, each
  // with its rows' slices of the partials and of out (the partial's launches are split the same
  // way; each merge launch waits for the kernel before it, and that one for all before it).
  if (n > kAttnRowsPerLaunch) {
    for (int b = 0; b < n; b += kAttnRowsPerLaunch) {
      const int nb = n - b < kAttnRowsPerLaunch ? n - b : kAttnRowsPerLaunch;
      const size_t po0 = size_t(b) * p.q_heads * max_chunks;
      KC_RETURN_IF_ERROR(launch_merge(p, rows + b, nb, d, max_chunks, pm + po0, pl + po0, po + po0 * d, unrotate, kept,
                                      out + size_t(b) * p.q_heads * d, s));
    }
    return Status::Ok();
  }
  // Launched with a programmatic dependency on the partial (dependent_launch).
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = dependent_launch(dim3(p.q_heads, n), dim3(d), s, &attr);
  const int u = merge_batch(max_chunks, kept);
  // Kept partials take the batch of 16 only (merge_batch), so only those kernels exist.
  const auto kern = kept ? attention_merge_kernel<true, kMergeBatch>
                    : u == 64 ? attention_merge_kernel<false, 64>
                    : u == 32 ? attention_merge_kernel<false, 32>
                              : attention_merge_kernel<false, kMergeBatch>;
  KC_CUDA_TRY(cudaLaunchKernelEx(&cfg, kern,
                                 p, rows, d, max_chunks, pm, pl, po, unrotate, out));
  KC_LAUNCH_CHECK("attention_merge_kernel");
#ifdef KC_PLANT_MERGE_READ_UNWRITTEN
  static float* never_written = nullptr;  // allocated once per process, kept to its end
  if (!never_written) KC_CUDA_TRY(cudaMalloc(&never_written, 32 * sizeof(float)));
  merge_plant_read_unwritten_kernel<<<1, 32, 0, s>>>(never_written, out);
  KC_LAUNCH_CHECK("merge_plant_read_unwritten_kernel");
#endif
  return Status::Ok();
}

}  // namespace kc
