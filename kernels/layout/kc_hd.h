// KC_HD marks helpers that run on both sides: __host__ __device__ under nvcc, plain
// inline under g++, so host-only code includes the same headers as the kernels.
#pragma once
#if defined(__CUDACC__)
#define KC_HD __host__ __device__ inline
#else
#define KC_HD inline
#endif
