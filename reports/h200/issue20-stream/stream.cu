// Issue 20, session 30: how fast can a block per (chunk of 512 keys, kv head, row) read its K and
// V bytes, with no attention arithmetic? The bf16 partial's grid and bytes (window layout), read
// (A) by bulk copies (cp.async.bulk, one producer warp, a ring of S stages of TK-key tiles, eight
// consumer warps that only fold the words) and (B) by plain 16-byte loads, U in flight per thread;
// both against the read ceiling measured as bench attention measures it (grid-stride 16-byte
// reads, SMs x 8 blocks of 512). Standalone: nvcc -O3 -std=c++17 -arch=sm_90 stream.cu -o stream
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x)                                                                                        \
  do {                                                                                               \
    cudaError_t e_ = (x);                                                                            \
    if (e_ != cudaSuccess) { std::printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); std::exit(1); } \
  } while (0)

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "W_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra W_%=;\n}\n" ::"r"(smem_addr(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(b))
               : "memory");
}

struct Shape { int hkv, d, b, ctx; };
constexpr int kChunk = 512;

// (A) grid (chunks, hkv, b), 288 threads: warp 8 produces, warps 0..7 consume.
template <int TK, int S>
__global__ void __launch_bounds__(288) stream_bulk(const uint8_t* K, const uint8_t* V, int d, int hkv, int ctx,
                                                   uint32_t* out) {
  extern __shared__ __align__(128) uint8_t sm[];
  uint64_t* full = reinterpret_cast<uint64_t*>(sm);
  uint64_t* empty = full + S;
  uint8_t* ring = sm + 128;
  const uint32_t row = uint32_t(d) * 2u, tile = TK * row;
  const size_t base = ((size_t(blockIdx.z) * hkv + blockIdx.y) * ctx + size_t(blockIdx.x) * kChunk) * row;
  const int ntk = kChunk / TK, nt = 2 * ntk;  // K tiles, then V tiles
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], 8);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == 8) {
    if (lane == 0)
      for (int t = 0; t < nt; ++t) {
        const int s = t % S;
        if (t >= S) mbar_wait(&empty[s], ((t / S) - 1) & 1);
        mbar_arrive_tx(&full[s], tile);
        const uint8_t* src = (t < ntk ? K : V) + base + size_t(t % ntk) * tile;
        bulk_load(ring + size_t(s) * tile, src, tile, &full[s]);
      }
    return;
  }
  uint32_t acc = 0;
  for (int t = 0; t < nt; ++t) {
    const int s = t % S;
    mbar_wait(&full[s], (t / S) & 1);
    const uint4* p = reinterpret_cast<const uint4*>(ring + size_t(s) * tile);
    for (int i = threadIdx.x; i < int(tile / 16); i += 256) {
      const uint4 v = p[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[s]);
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;  // never in practice; keeps the reads
}

// (B) grid (chunks, hkv, b), 256 threads, U 16-byte loads in flight per thread.
template <int U>
__global__ void __launch_bounds__(256) stream_ldg(const uint8_t* K, const uint8_t* V, int d, int hkv, int ctx,
                                                  uint32_t* out) {
  const uint32_t row = uint32_t(d) * 2u;
  const size_t base = ((size_t(blockIdx.z) * hkv + blockIdx.y) * ctx + size_t(blockIdx.x) * kChunk) * row;
  const int n = int(kChunk * row / 16);
  uint32_t acc = 0;
  for (int half = 0; half < 2; ++half) {
    const uint4* p = reinterpret_cast<const uint4*>((half ? V : K) + base);
    for (int i0 = 0; i0 < n; i0 += 256 * U) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = i0 + u * 256 + threadIdx.x;
        v[u] = i < n ? __ldg(p + i) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}

// (C) the K access of the mma partial's scores: warp w takes 16-key tiles w, w + 8, ..; lane
// (g, t) reads keys g and g + 8, 16 bytes at 16 t + 64 bb for each bb (NB per row, all in
// flight): each warp instruction reads 8 rows x 64 bytes, half of each row's 128-byte line.
// FULL: the same tiles, lanes reading the tile's bytes in order (full lines). HINT: the
// .L2::256B prefetch hint as ldg_mma adds. V: plain 16-byte loads in order, as (B) at U 8.
// PF > 0: before a tile's loads, lanes 0..15 each ask L2 for one row of the warp's tile PF
// rounds ahead (cp.async.bulk.prefetch.L2, the whole row), so that DRAM sees whole rows.
template <int D, bool FULL, bool HINT, int PF = 0>
__global__ void __launch_bounds__(256) stream_kpattern(const uint8_t* K, const uint8_t* V, int hkv, int ctx,
                                                       uint32_t* out) {
  constexpr int ROW = D * 2, NB = ROW / 64;
  const size_t base = ((size_t(blockIdx.z) * hkv + blockIdx.y) * ctx + size_t(blockIdx.x) * kChunk) * ROW;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t acc = 0;
  if constexpr (PF > 0)  // the first PF rounds' rows, once
    for (int r = 0; r < PF; ++r)
      if (warp + 8 * r < kChunk / 16 && lane < 16)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(K + base + (size_t(warp + 8 * r) * 16 + lane) * ROW),
                     "r"(ROW) : "memory");
  for (int kt = warp; kt < kChunk / 16; kt += 8) {
    const uint8_t* tile = K + base + size_t(kt) * 16 * ROW;
    if constexpr (PF > 0)
      if (kt + 8 * PF < kChunk / 16 && lane < 16)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(K + base + (size_t(kt + 8 * PF) * 16 + lane) * ROW),
                     "r"(ROW) : "memory");
    uint4 v[2 * NB];
#pragma unroll
    for (int bb = 0; bb < NB; ++bb)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const uint8_t* p = FULL ? tile + (size_t(bb) * 2 + rr) * 512 + 16 * lane
                                : tile + size_t(g + 8 * rr) * ROW + 16 * t + 64 * bb;
        if constexpr (HINT)
          asm volatile("ld.global.nc.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(v[2 * bb + rr].x), "=r"(v[2 * bb + rr].y), "=r"(v[2 * bb + rr].z), "=r"(v[2 * bb + rr].w)
                       : "l"(p));
        else
          asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(v[2 * bb + rr].x), "=r"(v[2 * bb + rr].y), "=r"(v[2 * bb + rr].z), "=r"(v[2 * bb + rr].w)
                       : "l"(p));
      }
#pragma unroll
    for (int i = 0; i < 2 * NB; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  }
  const uint4* pv = reinterpret_cast<const uint4*>(V + base);
  const int n = kChunk * ROW / 16;
  for (int i0 = 0; i0 < n; i0 += 256 * 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = __ldg(pv + i0 + u * 256 + threadIdx.x);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}

__global__ void read_kernel(const int4* a, size_t n, int* sink) {
  int4 acc = make_int4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int4 v = a[i];
    acc.x ^= v.x, acc.y ^= v.y, acc.z ^= v.z, acc.w ^= v.w;
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x12345) *sink = 1;
}
__global__ void fill(uint8_t* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n / 4; i += size_t(gridDim.x) * blockDim.x)
    reinterpret_cast<uint32_t*>(p)[i] = uint32_t(i * 2654435761u) & 0x3f7f3f7fu;
}

template <class F>
float median_us(F&& launch, int copies, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int r = 0; r < reps + 3; ++r) {
    CK(cudaEventRecord(a));
    launch(r % copies);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (r >= 3) t.push_back(ms * 1e3f);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t cbytes = size_t(1) << 30;
  uint8_t* cb;
  int* sink;
  CK(cudaMalloc(&cb, cbytes));
  CK(cudaMalloc(&sink, 4));
  fill<<<4096, 256>>>(cb, cbytes);
  const float cus = median_us([&](int) { read_kernel<<<sms * 8, 512>>>(reinterpret_cast<const int4*>(cb), cbytes / 16, sink); }, 1, 20);
  const double ceil = double(cbytes) / (cus * 1e-6);
  CK(cudaFree(cb));
  std::printf("read ceiling %.3f TB/s (1 GiB in %.1f us)\n", ceil / 1e12, cus);
  const Shape shapes[] = {{4, 256, 8, 32768}, {8, 128, 8, 32768}, {4, 256, 1, 131072}, {8, 128, 1, 131072},
                          {4, 256, 32, 32768}, {8, 128, 32, 32768}, {8, 128, 8, 131072}, {4, 256, 8, 131072}};
  std::printf("%-22s %-22s %9s %7s %6s\n", "shape", "variant", "us", "of_ceil", "blk/SM");
  uint32_t* out;
  CK(cudaMalloc(&out, 1 << 20));
  for (const Shape& s : shapes) {
    const size_t half = size_t(s.b) * s.hkv * s.ctx * s.d * 2;
    const int copies = int(std::max<size_t>(1, std::min<size_t>(8, (size_t(1) << 30) / (2 * half))));
    uint8_t* mem;
    CK(cudaMalloc(&mem, 2 * half * copies));
    fill<<<4096, 256>>>(mem, 2 * half * copies);
    const dim3 grid(s.ctx / kChunk, s.hkv, s.b);
    char sh[64];
    std::snprintf(sh, sizeof sh, "d%d/hkv%d/b%d/ctx%d", s.d, s.hkv, s.b, s.ctx);
    auto report = [&](const char* v, float us, int bps) {
      std::printf("%-22s %-22s %9.1f %7.3f %6d\n", sh, v, us, double(2 * half) / (us * 1e-6) / ceil, bps);
    };
    auto bulk = [&](auto kern, int tk, int st, int want_bps, const char* name) {
      const uint32_t tile = uint32_t(tk) * s.d * 2;
      size_t smem = 128 + size_t(st) * tile;
      // pad the shared memory so that at most want_bps blocks fit on an SM
      const size_t per = (228 * 1024) / want_bps - 1024;
      if (smem < per - 1024 && want_bps > 0) smem = std::max(smem, per - 2048);
      if (smem > 227 * 1024) return;
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      int bps = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kern, 288, smem));
      const float us = median_us([&](int c) {
        kern<<<grid, 288, smem>>>(mem + c * 2 * half, mem + c * 2 * half + half, s.d, s.hkv, s.ctx, out);
      }, copies, 20);
      char v[64];
      std::snprintf(v, sizeof v, "%s tk%d s%d", name, tk, st);
      report(v, us, bps);
    };
    bulk(stream_bulk<16, 4>, 16, 4, 3, "bulk");
    bulk(stream_bulk<16, 8>, 16, 8, 2, "bulk");
    bulk(stream_bulk<32, 4>, 32, 4, 2, "bulk");
    bulk(stream_bulk<16, 6>, 16, 6, 3, "bulk");
    bulk(stream_bulk<32, 6>, 32, 6, 1, "bulk");
    bulk(stream_bulk<64, 3>, 64, 3, 1, "bulk");
    auto ldg = [&](auto kern, const char* name) {
      int bps = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kern, 256, 0));
      const float us = median_us([&](int c) {
        kern<<<grid, 256>>>(mem + c * 2 * half, mem + c * 2 * half + half, s.d, s.hkv, s.ctx, out);
      }, copies, 20);
      report(name, us, bps);
    };
    auto kpat = [&](auto kern, const char* name) {
      int bps = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kern, 256, 0));
      const float us = median_us([&](int c) {
        kern<<<grid, 256>>>(mem + c * 2 * half, mem + c * 2 * half + half, s.hkv, s.ctx, out);
      }, copies, 20);
      report(name, us, bps);
    };
    if (s.d == 256) {
      kpat(stream_kpattern<256, false, true>, "kmma half+hint");
      kpat(stream_kpattern<256, false, false>, "kmma half");
      kpat(stream_kpattern<256, true, false>, "kmma full");
      kpat(stream_kpattern<256, false, true, 1>, "kmma half+hint pf1");
      kpat(stream_kpattern<256, false, true, 2>, "kmma half+hint pf2");
      kpat(stream_kpattern<256, false, false, 1>, "kmma half pf1");
    } else {
      kpat(stream_kpattern<128, false, true>, "kmma half+hint");
      kpat(stream_kpattern<128, false, false>, "kmma half");
      kpat(stream_kpattern<128, true, false>, "kmma full");
      kpat(stream_kpattern<128, false, true, 1>, "kmma half+hint pf1");
      kpat(stream_kpattern<128, false, true, 2>, "kmma half+hint pf2");
      kpat(stream_kpattern<128, false, false, 1>, "kmma half pf1");
    }
    ldg(stream_ldg<4>, "ldg u4");
    ldg(stream_ldg<8>, "ldg u8");
    ldg(stream_ldg<16>, "ldg u16");
    CK(cudaFree(mem));
  }
  return 0;
}
