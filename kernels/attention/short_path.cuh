// Pieces of the tensor-core partials' short-row path (partial_mma.cu, partial_mma_q4.cu):
// a chunk split over the CL blocks of one thread-block cluster (sm_90), which exchange
// their scores through distributed shared memory. The arithmetic of every score, the
// softmax and every output element is the regular kernels' (attention/rows.h); only the
// blocks that do it change. Host-side choice: attn_short_pick (attention.cu). nvcc only.
//
// Why: a row of a few thousand keys in a batch of one gives the regular kernels a grid of
// 32 (24q/4kv/d256) to 64 (32q/8kv/d128) blocks at 4K keys, each reading its 512-key chunk
// of K and V latency-bound on one SM (reports/h200/issue20-short2/). With a cluster per
// chunk, CL blocks (CL SMs) read it: rank r scores the chunk's key tiles r, r + CL, .. and
// writes the scores into every rank's shared memory; after the cluster barrier each rank
// runs the same softmax over all the chunk's scores and the p.v of its slice of the head
// dimension (D / CL elements), its V slice loaded whole by cp.async at the start.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

namespace kc {

// Cluster barrier, split: arrive (release, or relaxed: no ordering, only "this block has
// started") then wait (acquire). Every thread of every block of the cluster takes part.
__device__ __forceinline__ void cluster_arrive_relaxed() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
// This block's rank in its cluster.
__device__ __forceinline__ int cluster_rank() {
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  return int(r);
}
// Stores v at the shared-memory address `addr` (this block's shared::cta address) of the
// block of rank `rank` in the cluster.
__device__ __forceinline__ void st_cluster_f32(uint32_t addr, int rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(addr), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(a), "f"(v) : "memory");
#endif
}
// v to the same place in every block of a cluster of CL.
template <int CL>
__device__ __forceinline__ void st_cluster_all(uint32_t addr, float v) {
#pragma unroll
  for (int r = 0; r < CL; ++r) st_cluster_f32(addr, r, v);
}

// Two 8x8 b16 matrices from shared memory, transposed (lanes 0..15 give the row addresses).
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t& r0, uint32_t& r1, uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr) : "memory");
#endif
}

// A V slice of CPS 16-byte chunks per key in shared memory: chunk ch of key k at
// 16 (ch ^ short_swz<CPS>(k)) of the key's row, so that ldmatrix's 8 rows (8 consecutive
// keys, one chunk) fall on 8 distinct 16-byte bank groups.
template <int CPS>
__device__ __forceinline__ int short_swz(int k) {
  if constexpr (CPS >= 8) return k & 7;
  else return (k / (8 / CPS)) & (CPS - 1);
}

// Experiment hook KC_MMA_PHASES (never in a default build): thread 0 of each short-path
// block stamps clock64() at its phase boundaries (KC_SHORT_PHASE(k), k = 1..7, cycles from
// its entry) and %globaltimer at entry and exit; after each launch, synchronously,
// short_phases_print gives the grid's mean cycles to each stamp and the span from the first
// entry to the last exit. One copy per translation unit.
#ifdef KC_MMA_PHASES
static __device__ unsigned long long kc_short_phase[8];  // [0] blocks, [1..7] cycles from the entry
static __device__ unsigned long long kc_short_span[2];   // min entry ns, max exit ns
__device__ __forceinline__ unsigned long long kc_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define KC_SHORT_ENTRY()                                     \
  long long kc_sp_t[8] = {};                                 \
  if (threadIdx.x == 0) {                                    \
    kc_sp_t[0] = clock64();                                  \
    atomicMin(&kc_short_span[0], kc_globaltimer());          \
  }
#define KC_SHORT_PHASE(k) \
  do { if (threadIdx.x == 0) kc_sp_t[k] = clock64(); } while (0)
#define KC_SHORT_DONE()                                                                  \
  do {                                                                                  \
    if (threadIdx.x == 0) {                                                             \
      for (int k_ = 1; k_ < 8; ++k_)                                                    \
        atomicAdd(&kc_short_phase[k_], (unsigned long long)(kc_sp_t[k_] - kc_sp_t[0])); \
      atomicAdd(&kc_short_phase[0], 1ull);                                              \
      atomicMax(&kc_short_span[1], kc_globaltimer());                                   \
    }                                                                                   \
  } while (0)
static inline cudaError_t short_phases_reset() {  // static: this unit's counters
  const unsigned long long z[8] = {}, sp[2] = {~0ull, 0ull};
  cudaError_t e = cudaMemcpyToSymbol(kc_short_phase, z, sizeof z);
  return e != cudaSuccess ? e : cudaMemcpyToSymbol(kc_short_span, sp, sizeof sp);
}
static inline cudaError_t short_phases_print(const char* what, int d, int cl, cudaStream_t s) {
  cudaError_t e = cudaStreamSynchronize(s);  // an experiment's hook: it waits
  unsigned long long h[8] = {}, sp[2] = {};
  if (e == cudaSuccess) e = cudaMemcpyFromSymbol(h, kc_short_phase, sizeof h);
  if (e == cudaSuccess) e = cudaMemcpyFromSymbol(sp, kc_short_span, sizeof sp);
  if (e != cudaSuccess) return e;
  const double b = double(h[0] ? h[0] : 1);
  std::fprintf(stderr,
               "short phases (%s d%d cl %d, %llu blocks, mean cycles from entry): view %.0f setup %.0f scores %.0f "
               "cluster %.0f softmax+V %.0f p.v %.0f end %.0f; span %.0f ns\n",
               what, d, cl, h[0], h[1] / b, h[2] / b, h[3] / b, h[4] / b, h[5] / b, h[6] / b, h[7] / b,
               double(sp[1] - sp[0]));
  return short_phases_reset();
}
#else
#define KC_SHORT_ENTRY() do {} while (0)
#define KC_SHORT_PHASE(k) do {} while (0)
#define KC_SHORT_DONE() do {} while (0)
#endif

}  // namespace kc
