// Split-K attention: the partial (on the tensor cores where attn_uses_mma, the fma chain
// otherwise), then the in-order merge. Host twin: attention_host (attention/twin.cpp);
// reference: reference/attention_ref.h; contract: qwen-pages.
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/attention/partial.cuh"

namespace kc {

Status attn_launch_shape(const void* kern, size_t smem, const AttnParams& p, int hkv, int nsub, int n, int max_chunks,
                         AttnLaunchShape* out) {
  // Per device and kernel: the dynamic shared memory allowed so far (raised, never lowered,
  // so that every size cached below stays launchable) and the resident blocks per SM of
  // each size; per device: its SMs. Asked once, not per launch.
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, size_t> allowed;
  static std::map<std::tuple<int, const void*, size_t>, int> resident;
  static std::map<int, int> sms;
  static const int walk_env = [] {
    const char* e = std::getenv("KC_ATTN_WALK");
    return e ? std::atoi(e) : 0;
  }();
  int dev = 0, per_sm = 0, nsm = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  {
    std::lock_guard<std::mutex> lock(mu);
    size_t& a = allowed[{dev, kern}];
    if (smem > a) {
      KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      a = smem;
    }
    auto it = resident.find({dev, kern, smem});
    if (it == resident.end()) {
      KC_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kAttnThreads, smem));
      resident[{dev, kern, smem}] = per_sm;
    } else {
      per_sm = it->second;
    }
    auto is = sms.find(dev);
    if (is == sms.end()) {
      KC_CUDA_TRY(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
      sms[dev] = nsm;
    } else {
      nsm = is->second;
    }
  }
  const int64_t blocks = int64_t(max_chunks) * hkv * nsub * n, cap = int64_t(std::max(1, per_sm)) * nsm;
  int walk = 1;
  while (walk < kAttnWalkMax && blocks >= 2 * walk * cap) walk *= 2;
  if (walk_env > 0) walk = walk_env;
  walk = std::max(1, std::min(walk, max_chunks));
  out->need = attn_row_need(p, hkv * nsub);
  out->walk = walk;
  out->grid = dim3(unsigned((max_chunks + walk - 1) / walk), unsigned(hkv * nsub), unsigned(n));
  return Status::Ok();
}

Status launch_attention(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                        const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                        float* out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  if (max_chunks > 0 && attn_uses_mma(fmt, d))
    KC_RETURN_IF_ERROR(launch_partial_mma(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s));
  else if (max_chunks > 0)
    KC_RETURN_IF_ERROR(launch_partial_fma(views, fmt, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s));
  const bool rotated = with_format(fmt, [](auto c) { return decltype(c)::kRotated; });  // q4: output rotated back
  return launch_merge(p, rows, n, hkv, d, max_chunks, pm, pl, po, rotated, out, s);
}

}  // namespace kc
