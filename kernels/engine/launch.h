// Launchers of the engine kernels (kernels.cu): device pointers in, enqueued on the
// caller's stream, Status out (launch errors; the caller finishes its stream).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/backend/cuda_check.h"
#include "kernels/engine/matmul_part.h"
#include "kernels/engine/norm_part.h"

namespace kc {
Status launch_engine_embed(const uint16_t* E, int64_t dim, const int32_t* tokens, int n, float* out, cudaStream_t s);
// legacy: the kernels before the staged ones (RMSNorm one warp per row from global memory,
// the product one block per few outputs reading x through L1/L2); the same bytes, kept for
// the engine's timing option (EngineDebug::legacy_kernels).
Status launch_engine_rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out, cudaStream_t s,
                              bool legacy = false);
// Several row sets of one dim in one launch (at most kNormPartsMax, checked by the caller).
Status launch_engine_rms_norm_parts(const NormPart* parts, int count, int dim, float eps, cudaStream_t s);
Status launch_engine_matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y,
                            cudaStream_t s, bool legacy = false, int tree_passes = 0);
// Several products over the same x in one launch where the staged kernel applies (at most 3
// parts), one launch per part otherwise.
// tree_passes: how many passes the staged kernel's tree takes through shared memory (the same
// bytes in all): 0 KC_ENGINE_TREE, else two where one would leave fewer groups per block than
// the outputs want; 1 or 2 that many, where it fits (EngineBackend::Debug::tree_passes).
inline bool engine_tree_passes_known(int p) { return p == 0 || p == 1 || p == 2; }
Status launch_engine_matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n,
                                  cudaStream_t s, bool legacy = false, int tree_passes = 0);
Status launch_engine_swiglu(const float* gate, const float* up, int64_t count, float* out, cudaStream_t s);
Status launch_engine_add(float* h, const float* t, int64_t count, cudaStream_t s);
// Whether the fused residual add + RMSNorm kernel takes these arguments (rows of at most 8192
// floats, dim % 4 == 0, 16-byte aligned pointers, out apart from h and t, t h itself or apart
// from it); else the caller runs add and rms_norm.
bool launch_engine_add_rms_norm_fits(const float* h, const float* t, const float* w, int n, int dim, const float* out);
Status launch_engine_add_rms_norm(float* h, const float* t, const float* w, int n, int dim, float eps, float* out,
                                  cudaStream_t s);
// RMSNorm of the rows h[sel[j]] into out[j] (tmp for the logits' matrix product).
Status launch_engine_gather_norm(const float* h, const int32_t* sel, int m, int dim, const float* w, float eps,
                                 float* out, cudaStream_t s, bool legacy = false);
Status launch_engine_argmax(const float* x, int n, int64_t len, int32_t* out, cudaStream_t s);
}  // namespace kc
