// Split-K attention: the partial (on the tensor cores where attn_uses_mma, the fma chain
// otherwise), then the in-order merge. Host twin: attention_host (attention/twin.cpp);
// reference: reference/attention_ref.h; contract: qwen-pages.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/attention/partial.cuh"

namespace kc {

Status attn_allow_smem(const void* kern, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, size_t> allowed;  // (device, kernel) -> bytes set
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  size_t& a = allowed[{dev, kern}];
  if (smem > a) {
    KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    a = smem;
  }
  return Status::Ok();
}

namespace {
struct AttnDeviceInfo {
  int sms = 0, major = 0;
  size_t smem_optin = 0;
};
}  // namespace

Status attn_short_pick(int blocks, const AttnShortKernel* cand, int ncand, int* pick) {
  *pick = -1;
  // KC_ATTN_SHORT: "0" never takes the path, "v" also prints each (kernel, shared memory)'s
  // cluster fit to stderr once (experiments).
  static const std::string mode = [] {
    const char* e = std::getenv("KC_ATTN_SHORT");
    return std::string(e ? e : "");
  }();
  if (mode == "0" || blocks <= 0) return Status::Ok();
  static std::mutex mu;
  static std::map<int, AttnDeviceInfo> devices;
  static std::map<std::tuple<int, const void*, size_t>, int> clusters;  // (device, kernel, smem) -> max active
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  AttnDeviceInfo info;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = devices.find(dev);
    if (it == devices.end()) {
      int smem = 0;
      KC_CUDA_TRY(cudaDeviceGetAttribute(&info.sms, cudaDevAttrMultiProcessorCount, dev));
      KC_CUDA_TRY(cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, dev));
      KC_CUDA_TRY(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
      info.smem_optin = size_t(smem);
      it = devices.emplace(dev, info).first;
    }
    info = it->second;
  }
  if (info.major < 9) return Status::Ok();  // clusters: sm_90 and newer
  for (int i = 0; i < ncand; ++i) {
    const AttnShortKernel& k = cand[i];
    if (!k.fn || k.cl < 2 || int64_t(blocks) * k.cl > info.sms || k.smem > info.smem_optin) continue;
    const void* fn = reinterpret_cast<const void*>(k.fn);
    KC_RETURN_IF_ERROR(attn_allow_smem(fn, k.smem));
    int fit = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = clusters.find({dev, fn, k.smem});
      if (it != clusters.end()) fit = it->second;
      else fit = -1;
    }
    if (fit < 0) {
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute attr;
      cfg.gridDim = dim3(k.cl);
      cfg.blockDim = dim3(kAttnThreads);
      cfg.dynamicSmemBytes = k.smem;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = k.cl, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      KC_CUDA_TRY(cudaOccupancyMaxActiveClusters(&fit, fn, &cfg));
      if (mode == "v")
        std::fprintf(stderr, "attention short path: cl %d, %zu bytes of shared memory: %d clusters at once (%d SMs)\n",
                     k.cl, k.smem, fit, info.sms);
      std::lock_guard<std::mutex> lock(mu);
      clusters[{dev, fn, k.smem}] = fit;
    }
    if (fit < blocks) continue;
    *pick = i;
    return Status::Ok();
  }
  return Status::Ok();
}

Status attn_launch_short(const AttnShortKernel& k, dim3 g, cudaStream_t s, const KvView* views, const AttnParams& p,
                         const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks, int nsub, float* pm,
                         float* pl, float* po) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr;
  cfg.gridDim = dim3(g.x * k.cl, g.y, g.z);
  cfg.blockDim = dim3(kAttnThreads);
  cfg.dynamicSmemBytes = k.smem;
  cfg.stream = s;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = k.cl, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  KC_CUDA_TRY(cudaLaunchKernelEx(&cfg, k.fn, views, p, rows, tails, q, max_chunks, nsub, pm, pl, po));
  return Status::Ok();
}

Status launch_partial(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                      const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                      cudaStream_t s) {
  if (n == 0 || max_chunks == 0) return Status::Ok();
  if (attn_uses_mma(fmt, d))
    return launch_partial_mma(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s);
  return launch_partial_fma(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s);
}

Status launch_attention(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                        const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                        float* out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  KC_RETURN_IF_ERROR(launch_partial(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s));
  const bool rotated = with_format(fmt, [](auto c) { return decltype(c)::kRotated; });  // q4: output rotated back
  return launch_merge(p, rows, n, d, max_chunks, pm, pl, po, rotated, out, s);
}

}  // namespace kc
