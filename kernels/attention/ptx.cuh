// PTX wrappers shared by the attention kernels: the tensor-core product (mma.m16n8k16),
// asynchronous copies to shared memory (cp.async), the transposing shared-memory matrix
// load (ldmatrix) and global loads with an L2 prefetch hint. Each wrapper compiles to
// nothing (or to __trap, for the mma) below sm_80; the launchers pick their kernels only on
// sm_80 and newer. nvcc only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace kc {

// c += a b on the tensor cores: m16n8k16, fp32 accumulate, inputs fp16 (kF16) or bf16.
template <bool kF16>  // inputs fp16 (fp8 caches) or bf16
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint2 b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
#else
  __trap();  // launch_attention picks this kernel only on sm_80 and newer builds
#endif
}
// Global loads, by default asking L2 to fetch the 256 bytes around each miss
// (the mma partial reads the rest of a K row or the neighbouring V slices next; 1.5 % faster
// at 32K x b8 on the H200, in two repeated pairs, on the 8 x 1 ring). kL2Hint = false: no
// hint (MmaTune::k_l2_hint picks it per format for the K loads of the bf16 / fp8 partial).
#ifndef KC_MMA_LDQ  // the hinted loads' cache qualifiers (experiments override)
#define KC_MMA_LDQ ".L2::256B"
#endif
template <typename T, bool kL2Hint = true>
__device__ __forceinline__ T ldg_mma(const uint8_t* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (!kL2Hint && sizeof(T) == 16) {
    uint4 r;
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return reinterpret_cast<T&>(r);
  } else if constexpr (!kL2Hint && sizeof(T) == 8) {
    uint2 r;
    asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return reinterpret_cast<T&>(r);
  } else if constexpr (!kL2Hint && sizeof(T) == 4) {
    uint32_t r;
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(r) : "l"(p));
    return reinterpret_cast<T&>(r);
  } else if constexpr (sizeof(T) == 16) {
    uint4 r;
    asm volatile("ld.global.nc" KC_MMA_LDQ ".v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return reinterpret_cast<T&>(r);
  } else if constexpr (sizeof(T) == 8) {
    uint2 r;
    asm volatile("ld.global.nc" KC_MMA_LDQ ".v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return reinterpret_cast<T&>(r);
  } else if constexpr (sizeof(T) == 4) {
    uint32_t r;
    asm volatile("ld.global.nc" KC_MMA_LDQ ".u32 %0, [%1];" : "=r"(r) : "l"(p));
    return reinterpret_cast<T&>(r);
  }
#endif
  return __ldg(reinterpret_cast<const T*>(p));
}

// The split-K partials' way through L2 where the partial keeps them (attn_keeps_partials,
// mma_smem.h): stored with an evict_last policy, so that the merge that follows finds them in
// L2 rather than behind the K and V stream, and read by the merge with an evict_first policy,
// so that they leave L2 first once read.
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
  uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}
__device__ __forceinline__ void st_f32_l2(float* a, float v, uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(a), "f"(v), "l"(pol) : "memory");
#else
  (void)pol;
  *a = v;
#endif
}
__device__ __forceinline__ float ldg_f32_l2(const float* a, uint64_t pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float v;
  asm("ld.global.nc.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(a), "l"(pol));
  return v;
#else
  (void)pol;
  return __ldg(a);
#endif
}

// 16-byte copies global -> shared (V tiles and slices), asking L2 for the 256 bytes around each
// miss; KC_CP_ASYNC_L2 overrides the qualifier (experiments: empty for no prefetch hint).
#ifndef KC_CP_ASYNC_L2
#define KC_CP_ASYNC_L2 ".L2::256B"
#endif
__device__ __forceinline__ void cp_async16(uint32_t dst, const uint8_t* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global" KC_CP_ASYNC_L2 " [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
#endif
}
// The same with zero-fill: nothing is read when !valid, the 16 bytes become zeros.
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const uint8_t* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global" KC_CP_ASYNC_L2 " [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
#endif
}

}  // namespace kc
