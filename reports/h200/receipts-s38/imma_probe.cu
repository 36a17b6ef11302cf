// Session 38 probe (issue 20, q4 lead): issue cost of the q4 score step on the tensor cores,
// per 16 keys x 32 elements (one group) x 8 heads, codes from registers (no memory in the loop):
//  F: today's fp16 path: 2 words -> 8 fp16x2 (lop3 / sub / fma, 9 instructions a word),
//     2 k-steps x 2 parts of q (HMMA m16n8k16), a fresh sum per k-step, 4 fp32 fmas a k-step;
//  I2: int8 path: 2 words -> 4 u8x4 (and / shift, 3 a word), q in 2 int8 digits, one
//     IMMA m16n8k32 per digit (the group's 32 elements at once, integer sums exact), the digits
//     joined (imad), converted (i2f) and scaled (fma);
//  I3: the same with q in 3 int8 digits.
// and the p.v step (probe_v: VF today against VI, int8 with p' in 3 digits).
// Prints ns per step and scheduler and the ratios. Not a receipt: an issue-cost probe.
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cuda_fp16.h>
__device__ __forceinline__ void hmma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void imma(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void w2h(uint32_t w, uint32_t (&r)[4]) {
  const uint32_t magic = 0x64006400u;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const uint32_t x = j ? w >> 8 : w;
    uint32_t u0, u1;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(u0) : "r"(x), "n"(0x000F000F), "r"(magic));
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(u1) : "r"(x), "n"(0x00F000F0), "r"(magic));
    asm("sub.f16x2 %0, %1, %2;" : "=r"(r[2 * j]) : "r"(u0), "r"(0x64086408u));
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r[2 * j + 1]) : "r"(u1), "r"(0x2C002C00u), "r"(0xD480D480u));
  }
}
template <int MODE>
__global__ void __launch_bounds__(256) probe(const uint32_t* in, float* out, int iters) {
  const int lane = threadIdx.x & 31;
  uint32_t w0 = in[lane], w1 = in[lane + 32];
  const uint32_t q0 = in[lane + 64], q1 = in[lane + 96], q2 = in[lane + 128], q3 = in[lane + 160];
  const float s0 = __int_as_float(in[lane + 192] & 0x3FFFFFFF), s1 = s0 * 1.5f;
  float acc[4] = {0, 0, 0, 0};
  int ia[4] = {0, 0, 0, 0};
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int grp = 0; grp < 8; ++grp) {  // 8 groups (d 256) of one 16-key tile
      w0 = w0 * 1664525u + 1013904223u;  // fresh codes every group (stand-in for the loads)
      w1 = w1 ^ (w0 >> 7);
      if (MODE == 0) {
        uint32_t a0[4], a1[4];
        w2h(w0, a0);
        w2h(w1, a1);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const uint32_t a[4] = {a0[2 * s], a1[2 * s], a0[2 * s + 1], a1[2 * s + 1]};
          float cc[4] = {0, 0, 0, 0};
          hmma(cc, a, q0, q1);
          hmma(cc, a, q2, q3);
          acc[0] = fmaf(cc[0], s0, acc[0]);
          acc[1] = fmaf(cc[1], s0, acc[1]);
          acc[2] = fmaf(cc[2], s1, acc[2]);
          acc[3] = fmaf(cc[3], s1, acc[3]);
        }
      } else {
        // key g: even nibbles (k slots 4t..) and odd nibbles (16 + 4t..); key g + 8 likewise
        const uint32_t a[4] = {w0 & 0x0F0F0F0Fu, w1 & 0x0F0F0F0Fu, (w0 >> 4) & 0x0F0F0F0Fu, (w1 >> 4) & 0x0F0F0F0Fu};
        int c0[4] = {ia[0], ia[1], ia[2], ia[3]}, c1[4] = {0, 0, 0, 0}, c2[4] = {0, 0, 0, 0};
        imma(c0, a, q0, q1);  // offset -8 sum(q digit) would be the C init: here ia (a register)
        imma(c1, a, q2, q3);
        if (MODE == 2) imma(c2, a, q1, q3);
        float f[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int lo = c0[e] + (c1[e] << 8);  // two digits joined exactly
          f[e] = MODE == 2 ? fmaf(float(c2[e]), 65536.0f, float(lo)) : float(lo);
        }
        acc[0] = fmaf(f[0], s0, acc[0]);
        acc[1] = fmaf(f[1], s0, acc[1]);
        acc[2] = fmaf(f[2], s1, acc[2]);
        acc[3] = fmaf(f[3], s1, acc[3]);
      }
    }
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc[0] + acc[1] + acc[2] + acc[3] + float(ia[0]);
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
__device__ __forceinline__ void split2(float a, float b, uint32_t (&r)[2]) {  // hi, lo fp16x2 parts
  __half2 h = __floats2half2_rn(a, b);
  const float2 f = __half22float2(h);
  __half2 l = __floats2half2_rn(a - f.x, b - f.y);
  memcpy(&r[0], &h, 4);
  memcpy(&r[1], &l, 4);
}
// The p.v step of one warp (one 32-element group, 8 heads) over 32 keys (two 16-key tiles):
//  VF: today's: per tile p' = p * scale (fp32), split in two fp16 parts, the group's codes by a
//      transposing ldmatrix x2, 2 words -> 8 fp16x2, 2 m-tiles x 2 parts HMMA, o += c;
//  VI: int8: p' = fma(p, scale', 2^23) (its bits hold the integer P), 3 digits of 8 keys packed
//      by prmt, the codes of 32 keys by one ldmatrix x4, bytes by prmt / and / shift, 2 m-tiles x 3
//      digits IMMA m16n8k32 (exact s32 sums carried across tiles), the sum of P for the -8.
template <int MODE>
__global__ void __launch_bounds__(256) probe_v(const uint32_t* in, float* out, int iters) {
  __shared__ __align__(16) uint32_t ring[2][32 * 4];  // 32 keys x 16 bytes, two slots
  const int lane = threadIdx.x & 31, lt = lane & 3;
  for (int i = threadIdx.x; i < 2 * 32 * 4; i += blockDim.x) (&ring[0][0])[i] = in[i & 255] * 2654435761u;
  __syncthreads();
  float p[8], v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    p[k] = __int_as_float(in[lane + k] & 0x3F7FFFFF) * 0.5f;
    v[k] = 1.0f + 0.25f * k;
  }
  float o[2][4] = {};
  int io[2][3][4] = {};
  int psum = 0;
  const uint32_t rs = uint32_t(__cvta_generic_to_shared(&ring[0][0]));
#pragma unroll 1
  for (int it = 0; it < iters; ++it) {
    const uint32_t slot = rs + uint32_t((it & 1) * 32 * 16);
#pragma unroll
    for (int k = 0; k < 8; ++k) p[k] = p[k] * 0.999f + 1e-4f;  // fresh p every pass (stand-in for the loads)
    if (MODE == 0) {
#pragma unroll
      for (int tile = 0; tile < 2; ++tile) {
        uint32_t lo[2], hi[2];
        split2(p[4 * tile] * v[4 * tile], p[4 * tile + 1] * v[4 * tile + 1], lo);
        split2(p[4 * tile + 2] * v[4 * tile + 2], p[4 * tile + 3] * v[4 * tile + 3], hi);
        uint32_t w01, w89;
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                     : "=r"(w01), "=r"(w89) : "r"(slot + uint32_t(tile * 256 + (lane & 15) * 16)));
        uint32_t c01[4], c89[4];
        w2h(w01, c01);
        w2h(w89, c89);
#pragma unroll
        for (int jt = 0; jt < 2; ++jt) {
          const uint32_t a[4] = {c01[2 * jt], c01[2 * jt + 1], c89[2 * jt], c89[2 * jt + 1]};
          float cc[4] = {0, 0, 0, 0};
          hmma(cc, a, lo[1], hi[1]);
          hmma(cc, a, lo[0], hi[0]);
#pragma unroll
          for (int e = 0; e < 4; ++e) o[jt][e] += cc[e];
        }
      }
    } else {
      uint32_t P[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        P[k] = __float_as_uint(fmaf(p[k], v[k] * 65536.0f, 8388608.0f));
        psum += int(P[k]);
      }
      // digits: byte j of P[0..3] -> b0, of P[4..7] -> b1
      uint32_t d[3][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t x = prmt(P[4 * h], P[4 * h + 1], 0x5140), y = prmt(P[4 * h + 2], P[4 * h + 3], 0x5140);
        d[0][h] = prmt(x, y, 0x5410);
        d[1][h] = prmt(x, y, 0x7632);
        const uint32_t z = prmt(P[4 * h], P[4 * h + 1], 0x0062), u = prmt(P[4 * h + 2], P[4 * h + 3], 0x0062);
        d[2][h] = prmt(z, u, 0x5410);
      }
      uint32_t w[4];
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                   : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]) : "r"(slot + uint32_t((lane & 31) * 16)));
#pragma unroll
      for (int jt = 0; jt < 2; ++jt) {
        const uint32_t x01 = prmt(w[0], w[1], jt ? 0x7531 : 0x6420), x23 = prmt(w[2], w[3], jt ? 0x7531 : 0x6420);
        const uint32_t a[4] = {x01 & 0x0F0F0F0Fu, (x01 >> 4) & 0x0F0F0F0Fu, x23 & 0x0F0F0F0Fu, (x23 >> 4) & 0x0F0F0F0Fu};
#pragma unroll
        for (int dg = 0; dg < 3; ++dg) {
          if (dg < 2) {
            asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+r"(io[jt][dg][0]), "+r"(io[jt][dg][1]), "+r"(io[jt][dg][2]), "+r"(io[jt][dg][3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(d[dg][0]), "r"(d[dg][1]));
          } else {
            imma(io[jt][dg], a, d[dg][0], d[dg][1]);
          }
        }
      }
    }
  }
  float r = float(psum) + float(lt);
#pragma unroll
  for (int jt = 0; jt < 2; ++jt)
#pragma unroll
    for (int e = 0; e < 4; ++e) r += o[jt][e] + float(io[jt][0][e] + (io[jt][1][e] << 8)) + 65536.0f * float(io[jt][2][e]);
  out[blockIdx.x * blockDim.x + threadIdx.x] = r;
}
int main() {
  uint32_t* in;
  float* out;
  cudaMalloc(&in, 4096);
  cudaMemset(in, 0x35, 4096);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = sms * 4, iters = 4000;
  cudaMalloc(&out, size_t(blocks) * 256 * 4);
  const char* name[3] = {"F  fp16 today (2 parts)", "I2 int8, 2 q digits   ", "I3 int8, 3 q digits   "};
  float ns[3];
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int round = 0; round < 2; ++round)
    for (int m = 0; m < 3; ++m) {
      auto k = m == 0 ? probe<0> : m == 1 ? probe<1> : probe<2>;
      k<<<blocks, 256>>>(in, out, 10);
      cudaEventRecord(a);
      k<<<blocks, 256>>>(in, out, iters);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      // ns per group-tile of one warp, with the device's warps all busy: time / (group-tiles per SM sub-partition)
      const double tiles_per_sched = double(blocks) * 8 * iters * 8 / (sms * 4);
      ns[m] = float(ms * 1e6 / tiles_per_sched);
      if (round) printf("%s  %.3f ns per group-tile per scheduler  (%.3f of F)\n", name[m], ns[m], ns[m] / ns[0]);
    }

  const char* vname[2] = {"VF fp16 today (2 parts, 2 tiles)", "VI int8, 3 p' digits (32 keys)  "};
  float vns[2];
  for (int round = 0; round < 2; ++round)
    for (int m = 0; m < 2; ++m) {
      auto k = m == 0 ? probe_v<0> : probe_v<1>;
      k<<<blocks, 256>>>(in, out, 10);
      cudaEventRecord(a);
      k<<<blocks, 256>>>(in, out, iters * 4);
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      const double per_sched = double(blocks) * 8 * iters * 4 / (sms * 4);  // 32-key steps per scheduler
      vns[m] = float(ms * 1e6 / per_sched);
      if (round) printf("%s  %.3f ns per 32 keys x group per scheduler  (%.3f of VF)\n", vname[m], vns[m], vns[m] / vns[0]);
    }
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
