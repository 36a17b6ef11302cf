// Split-K attention: the partial (on the tensor cores where attn_uses_mma, the fma chain
// otherwise), then the in-order merge. Host twin: attention_host (attention/twin.cpp);
// reference: reference/attention_ref.h; contract: qwen-pages.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/attention/mma_smem.h"
#include "kernels/attention/partial.cuh"

namespace kc {

Status attn_short_pick(int blocks, const AttnShortKernel* cand, int ncand, int* pick) {
  *pick = -1;
  // KC_ATTN_SHORT: "0" never takes the path, "v" also prints each candidate's cluster fit to
  // stderr (experiments).
  static const std::string mode = [] {
    const char* e = std::getenv("KC_ATTN_SHORT");
    return std::string(e ? e : "");
  }();
  if (mode == "0" || blocks <= 0) return Status::Ok();
  CudaDeviceFacts dev;
  KC_RETURN_IF_ERROR(cuda_device_facts(&dev));
  if (dev.major < 9) return Status::Ok();  // clusters: sm_90 and newer
  for (int i = 0; i < ncand; ++i) {
    const AttnShortKernel& k = cand[i];
    if (!k.fn || k.cl < 2 || int64_t(blocks) * k.cl > dev.sms || k.smem > size_t(dev.smem_optin)) continue;
    int fit = 0;
    KC_RETURN_IF_ERROR(cuda_active_clusters(reinterpret_cast<const void*>(k.fn), k.cl, kAttnThreads, k.smem, &fit));
    if (mode == "v")
      std::fprintf(stderr, "attention short path: cl %d, %zu bytes of shared memory: %d clusters at once (%d SMs)\n",
                   k.cl, k.smem, fit, dev.sms);
    if (fit < blocks) continue;
    *pick = i;
    return Status::Ok();
  }
  return Status::Ok();
}

Status attn_launch_short(const AttnShortKernel& k, dim3 g, cudaStream_t s, const KvView* views, const AttnParams& p,
                         const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks, int nsub, float* pm,
                         float* pl, float* po) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_launch(dim3(g.x * k.cl, g.y, g.z), dim3(kAttnThreads), k.smem, s, k.cl, &attr);
  KC_CUDA_TRY(cudaLaunchKernelEx(&cfg, k.fn, views, p, rows, tails, q, max_chunks, nsub, pm, pl, po));
  if (KernelPaths::active()) KernelPaths::note(("partial-short-cl" + std::to_string(k.cl)).c_str());
  return Status::Ok();
}

Status launch_partial(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                      const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                      cudaStream_t s) {
  if (n == 0 || max_chunks == 0) return Status::Ok();
  // A row a grid z index (at most 65535): more rows go in launches of kAttnRowsPerLaunch, each
  // with its rows' slices of q and of the partials. A row's work reads only its own slices and
  // its tail (tail_off indexes all of tails), so the bytes are those of one launch.
  if (n > kAttnRowsPerLaunch) {
    for (int b = 0; b < n; b += kAttnRowsPerLaunch) {
      const int nb = std::min(kAttnRowsPerLaunch, n - b);
      const size_t qo = size_t(b) * p.q_heads * d, po0 = size_t(b) * p.q_heads * max_chunks;
      KC_RETURN_IF_ERROR(launch_partial(views, fmt, hkv, d, p, rows + b, nb, tails, q + qo, max_chunks, pm + po0,
                                        pl + po0, po + po0 * d, s));
    }
    return Status::Ok();
  }
  if (attn_uses_mma(fmt, d))
    return launch_partial_mma(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s);
  KernelPaths::note("partial-fma");
  return launch_partial_fma(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s);
}

Status launch_attention(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                        const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                        float* out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  KC_RETURN_IF_ERROR(launch_partial(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s));
  const bool rotated = with_format(fmt, [](auto c) { return decltype(c)::kRotated; });  // q4: output rotated back
  const bool kept = attn_uses_mma(fmt, d) && attn_keeps_partials(fmt, d);  // in L2 for the merge (mma_smem.h)
  // launch_merge notes its kernel's path (KernelPaths).
  return launch_merge(p, rows, n, d, max_chunks, pm, pl, po, rotated, kept, out, s);
}

}  // namespace kc
