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
#include <cstdlib>
#include <string_view>

#include "kernels/attention/partial.cuh"
#include "kernels/attention/ptx.cuh"
#include "kernels/backend/kernel_fit.h"
#include "kernels/backend/kernel_paths.h"

namespace kc {

// Block per (q head, row), one thread per output element. M (the max of the chunks' m;
// exact in any order) is a block reduction; then every thread walks the chunks
// in chunk order (the same L in every thread), their m and l staged through shared
// memory kMergeTile chunks at a time and their partials loaded U chunks at a time
// before the first is used. The first batch of partials (two with kPipe) is in flight
// while the pass that finds M stages the first tile's m and l. Each chunk's weight
// expf(m - M) is computed once per block into shared memory (the same value in every
// thread, so the same bytes), not once per element.
// Batch of 16: on the H200 (24q/4kv/d256) 54.8 us against 59.5 us before at 32K x b1 and
// 297 against 299 us at 32K x b8 (two alternating runs each); 32 and 64 were no better while
// every thread computed every chunk's weight. Since the weights are computed once per block,
// each batch costs about one round trip to the partials (0.85 us per batch of 16 on an H100:
// reports/h100/receipts-s41), so the batch grows with the chunks: kMergeBatch up to 16
// chunks, 32 up to 32, 64 above. Kept partials (bf16 d 256) stay at 16: they are read from
// the L2, and 64 was 2.8 % slower than 16 there at b1 x 128K (same call).
// A thread's instructions a chunk: ncu at d128 b1 x 128K (reports/h100/receipts-s58) counted
// 6,870 warp instructions a warp for 256 chunks, one active warp a scheduler at 2.9 cycles
// each: the merge was bound by each thread's serial path, not by its loads (more partials in
// flight, or a head over more blocks, was slower: reports/h200/receipts-s42). Hence head_dim is
// a template parameter (each partial's address an immediate offset from the batch's), a
// chunk's l and weight one 8-byte shared load, and a full batch runs without the guards that
// only the row's last batch needs; the sums are the same two fmas a chunk in the same order.
// Rows longer than a batch can hold two batches in registers (kPipe, below), the next one's
// loads in flight while this one is summed. On an H100 (reports/h100/receipts-s59): the merge
// alone at d128 b1 x 128K 12.8 -> 8.7 us (879K -> 161K warp instructions); a head's elements
// over 2-4 blocks on this kernel read as long again, so a thread's chain of dependent round
// trips is what is left.
constexpr int kMergeTile = 256, kMergeBatch = 16;
constexpr int merge_batch(int max_chunks, bool kept) {
  return kept ? kMergeBatch : max_chunks > 32 ? 64 : max_chunks > 16 ? 32 : kMergeBatch;
}
// Two batches in registers (kPipe) where a row can have more than one batch: always for kept
// partials (2 x 16 registers), and for the others (2 x 64, about 168 registers a thread)
// where every block of the grid fits on an SM of its own, so the registers cost no
// residency. KC_MERGE_PIPE=0 (read once a process) never takes them: the one-batch kernels
// over many chunks, for an A/B or a sanitizer run.
static bool merge_pipe_allowed() {
  static const bool allowed = [] {
    const char* e = std::getenv("KC_MERGE_PIPE");
    return !(e && std::string_view(e) == "0");
  }();
  return allowed;
}

// One chunk's terms: the same two fmas, in chunk order, on every path; `use` false leaves them.
__device__ __forceinline__ void merge_term(float& L, float& acc, float lc, float w, float o, bool use) {
  const float Ln = L + lc * w, an = acc + o * w;
  L = use ? Ln : L;
  acc = use ? an : acc;
}

// kKept: the partial kept its outputs in L2 (attn_keeps_partials): they are read with an
// evict_first policy, so that they leave L2 first once read. D: head_dim (the block's threads).
template <bool kKept, int U, int D, bool kPipe>
__global__ void attention_merge_kernel(AttnParams p, const AttnRow* rows, int max_chunks, const float* pm,
                                       const float* pl, const float* po, bool unrotate, float* out) {
  __shared__ float obuf[D];
  __shared__ float2 tlw[kMergeTile];  // a staged chunk's l and weight expf(m - M)
  __shared__ float tm[kMergeTile], wmax[D / 32];
  const int qh = blockIdx.x, r = blockIdx.y, j = threadIdx.x, lane = j & 31;
  // The rows were in place before the partial began (the stream's order), so the row's read
  // need not wait for the partials: its round trip overlaps the wait.
  const AttnRow row = rows[r];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // launched early (programmatic dependency): wait for the partials
#endif
  const int nc = (row.len + row.tail_len + p.chunk - 1) / p.chunk;
  const size_t base = (size_t(r) * p.q_heads + qh) * max_chunks;
  const float* oj = po + base * D + j;  // element j of the (row, head)'s chunk 0
  float oa[U], ob[kPipe ? U : 1];       // partials of a batch of chunks at element j (ob: the next batch)
  const uint64_t last_use = kKept ? l2_policy_evict_first() : 0;
  // Chunks [c, c + U) of the tile that ends at chunk te; only a batch that runs past te is guarded.
  auto load_batch = [&](float (&o)[U], int c, int te) {
    const float* q = oj + size_t(c) * D;
    auto ld = [&](const float* a) {
      if constexpr (kKept) return ldg_f32_l2(a, last_use);
      else return __ldg(a);
    };
    if (c + U <= te) {
#pragma unroll
      for (int u = 0; u < U; ++u) o[u] = ld(q + u * D);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) o[u] = c + u < te ? ld(q + u * D) : 0.0f;
    }
  };
  float L = 0.0f, acc = 0.0f;
  // Chunks [c0, c0 + U) of the staged tile of tn chunks, in order.
  auto sum_batch = [&](const float (&o)[U], int c0, int tn) {
    const float2* lw = tlw + c0;
    if (c0 + U <= tn) {  // the same for every thread of the block: no divergence
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float2 v = lw[u];
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE  // planted bug (test builds only): a chunk whose l is NaN is skipped
        merge_term(L, acc, v.x, v.y, o[u], v.x > 0.0f);
#else
        merge_term(L, acc, v.x, v.y, o[u], true);  // every chunk below nc has keys; a NaN l passes through
#endif
      }
    } else {
      // Branch-free, so the loads, weights and products are scheduled ahead of the two
      // in-order sums; a chunk past the tile leaves them as they are.
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float2 v = lw[min(u, tn - 1 - c0)];
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE
        merge_term(L, acc, v.x, v.y, o[u], c0 + u < tn && v.x > 0.0f);
#else
        merge_term(L, acc, v.x, v.y, o[u], c0 + u < tn);
#endif
      }
    }
  };
  {
    const int te = min(nc, kMergeTile);
    load_batch(oa, 0, te);
    if constexpr (kPipe)
      if (U < te) load_batch(ob, U, te);
  }
  float M = -INFINITY;
  for (int c = j; c < nc; c += D) {
    const float lc = __ldg(pl + base + c), mc = __ldg(pm + base + c);
    if (c < kMergeTile) tlw[c].x = lc, tm[c] = mc;
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE
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
#pragma unroll
  for (int w = 0; w < D / 32; ++w) M = fmaxf(M, wmax[w]);
  // Each chunk's weight expf(m - M), once per block (it is the same for every element j):
  // the first tile's here, the others' as they are staged.
  for (int c = j; c < min(nc, kMergeTile); c += D) tlw[c].y = expf(tm[c] - M);
  __syncthreads();
  for (int t0 = 0; t0 < nc; t0 += kMergeTile) {
    const int tn = min(kMergeTile, nc - t0), te = t0 + tn;
    if (t0 > 0) {
      __syncthreads();  // the previous tile is consumed
      for (int c = j; c < tn; c += D) tlw[c] = make_float2(__ldg(pl + base + t0 + c), expf(__ldg(pm + base + t0 + c) - M));
      load_batch(oa, t0, te);
      if constexpr (kPipe)
        if (U < tn) load_batch(ob, t0 + U, te);
      __syncthreads();
    }
    if constexpr (kPipe) {
      // oa holds batch c0 and ob batch c0 + U (if the tile has one); each set's next loads
      // are issued as soon as it is summed.
      for (int c0 = 0; c0 < tn; c0 += 2 * U) {
        sum_batch(oa, c0, tn);
        if (c0 + U >= tn) break;
        if (c0 + 2 * U < tn) load_batch(oa, t0 + c0 + 2 * U, te);
        sum_batch(ob, c0 + U, tn);
#ifndef KC_PLANT_MERGE_PIPE_STALE  // planted bug (test builds only): the second set keeps its first batch
        if (c0 + 3 * U < tn) load_batch(ob, t0 + c0 + 3 * U, te);
#endif
      }
    } else {
      for (int c0 = 0; c0 < tn; c0 += U) {
        if (c0 > 0) load_batch(oa, t0 + c0, te);
        sum_batch(oa, c0, tn);
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
    if (j < D / 32) hadamard32_inv(obuf + 32 * j);
    __syncthreads();
    res = obuf[j];
  }
#ifdef KC_PLANT_MERGE_READ_PAST_END  // sanitizer control (tools/sanitize.py): memcheck must see the read
  if (__ldg(pl + base + max_chunks) == 1234.5f) res = 0.0f;  // the next (row, head)'s: past the end on the last
#endif
  out[(size_t(r) * p.q_heads + qh) * D + j] = res;
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

using MergeKernel = void (*)(AttnParams, const AttnRow*, int, const float*, const float*, const float*, bool, float*);

// The kernel for a launch: its batch (merge_batch), one or two batches in registers (pipe),
// head_dim D. Kept partials take the batch of 16 only.
template <int D>
static MergeKernel merge_kernel_d(int max_chunks, bool kept, bool pipe) {
  if (kept) return pipe ? attention_merge_kernel<true, kMergeBatch, D, true> : attention_merge_kernel<true, kMergeBatch, D, false>;
  switch (merge_batch(max_chunks, false)) {
    case 64: return pipe ? attention_merge_kernel<false, 64, D, true> : attention_merge_kernel<false, 64, D, false>;
    case 32: return attention_merge_kernel<false, 32, D, false>;
    default: return attention_merge_kernel<false, kMergeBatch, D, false>;
  }
}
static MergeKernel merge_kernel_for(int d, int max_chunks, bool kept, bool pipe) {
  switch (d) {
    case 32: return merge_kernel_d<32>(max_chunks, kept, pipe);
    case 64: return merge_kernel_d<64>(max_chunks, kept, pipe);
    case 128: return merge_kernel_d<128>(max_chunks, kept, pipe);
    case 256: return merge_kernel_d<256>(max_chunks, kept, pipe);
    default: return nullptr;
  }
}

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
  bool pipe = merge_pipe_allowed() && max_chunks > merge_batch(max_chunks, kept);
  if (pipe && !kept) {
    CudaDeviceFacts dev;
    KC_RETURN_IF_ERROR(cuda_device_facts(&dev));
    pipe = int64_t(p.q_heads) * n <= dev.sms;
  }
  // The merge's loops over chunks (batches, tiles) run past their first trip only with chunks > 1.
  KernelPaths::note(pipe ? (kept ? "merge-kept, pipelined" : "merge, pipelined")
                    : kept ? (max_chunks > 1 ? "merge-kept, chunks > 1" : "merge-kept, 1 chunk")
                           : (max_chunks > 1 ? "merge, chunks > 1" : "merge, 1 chunk"));
  const MergeKernel kern = merge_kernel_for(d, max_chunks, kept, pipe);
  if (!kern) return Status::Error("attention merge: head_dim must be 32, 64, 128 or 256");
  KC_CUDA_TRY(cudaLaunchKernelEx(&cfg, kern, p, rows, max_chunks, pm, pl, po, unrotate, out));
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
