// Split-K attention: the partial (on the tensor cores where attn_uses_mma, the fma chain
// otherwise), then the in-order merge. Host twin: attention_host (attention/twin.cpp);
// reference: reference/attention_ref.h; contract: qwen-pages.
#include "kernels/attention/partial.cuh"

namespace kc {

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
