// Scale-plane packing benchmark on the device (see bench/pack.h).
// One configuration: a lane of `count` positions (paged: pages shuffled through one
// arena; window: one contiguous region) filled with random bytes; the blob's data region
// on the device. Timed with CUDA events around single launches (warm-up, then the median
// of `reps`): gather A -> D1 (pack), scatter D1 -> B (unpack), and the ceiling: a
// grid-stride copy D1 -> D2 with 16-byte loads and stores over the same byte count.
// Verification (untimed), against paths the kernels do not share: D1 (the timed pack's output)
// must hold, field by field and position by position, the bytes a host walk of A reads through
// kv_field_row (the host twin's addressing, pack_copies' order); B after the timed unpack must
// hold A's bytes in every field row of every position (B started as other random bytes). So a
// kernel that moved nothing, skipped a field, or gathered and scattered through the same wrong
// address is not "verified".
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/pack.h"
#include "bench/timing.cuh"
#include "kernels/backend/cuda_check.h"
#include "kernels/pack/blob.h"
#include "kernels/pack/launch.h"

namespace kc {

Status bench_pack_config(const PackBenchConfig& c, int warmup, int reps, PackBenchResult* r) {
  if (reps < 1) return Status::Error("bench pack: reps must be positive");
  const KvLayout lay(c.layers, c.kv_heads, c.head_dim, c.fmt);
  const int64_t count = std::max<int64_t>(1, int64_t(c.blob_bytes / lay.pos_bytes));
  const bool paged = c.ptok > 0;
  const int ptok = paged ? c.ptok : int(count);
  const int64_t n_pages = paged ? (count + ptok - 1) / ptok : 1;
  const uint64_t ps = lay.page_stride(ptok);  // a window is one page of ptok = its capacity
  const uint64_t mem_bytes = ps * uint64_t(n_pages);
  const PackPlan plan = pack_plan(lay, uint64_t(count));
  const std::vector<PackCopy> copies = pack_copies(plan, PackDirection::pack);
  const uint64_t dbytes = (plan.data_bytes() + 15) / 16 * 16;

  DevBuf<uint8_t> mem_a, mem_b, d1, d2;
  DevBuf<int32_t> dpt;
  DevBuf<PackCopy> dcopies;
  KC_RETURN_IF_ERROR(mem_a.alloc(mem_bytes));
  KC_RETURN_IF_ERROR(mem_b.alloc(mem_bytes));
  KC_RETURN_IF_ERROR(d1.alloc(dbytes));
  KC_RETURN_IF_ERROR(d2.alloc(dbytes));
  KC_RETURN_IF_ERROR(dcopies.upload(copies.data(), copies.size()));
  KC_RETURN_IF_ERROR(bench_fill(mem_a.get(), mem_bytes, 17));
  KC_RETURN_IF_ERROR(bench_fill(mem_b.get(), mem_bytes, 23));
  KC_CUDA_TRY(cudaMemset(d1.get(), 0, dbytes));
  KC_CUDA_TRY(cudaMemset(d2.get(), 0, dbytes));
  std::vector<int32_t> perm(n_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 g(5);
  std::shuffle(perm.begin(), perm.end(), g);
  KC_RETURN_IF_ERROR(dpt.upload(perm.data(), perm.size()));

  KvView va, vb;
  va.lay = vb.lay = lay;
  va.ptok = vb.ptok = ptok;
  va.ps = vb.ps = ps;
  va.base = mem_a.get();
  vb.base = mem_b.get();
  va.pt = vb.pt = paged ? dpt.get() : nullptr;
  const int nc = int(copies.size());

  KC_RETURN_IF_ERROR(bench_time(warmup, reps, [&] {
    return launch_pack_rows(va, 0, count, dcopies.get(), nc, d1.get(), false, cudaStream_t(0));
  }, &r->pack_us));
  KC_RETURN_IF_ERROR(bench_time(warmup, reps, [&] {
    return launch_pack_rows(vb, 0, count, dcopies.get(), nc, d1.get(), true, cudaStream_t(0));
  }, &r->unpack_us));
  // Verification: D1 against a host walk of A, B's field rows against A's.
  KC_CUDA_TRY(cudaDeviceSynchronize());
  {
    std::vector<uint8_t> ha(mem_bytes), hb(mem_bytes), hd(plan.data_bytes());
    KC_CUDA_TRY(cudaMemcpy(ha.data(), mem_a.get(), mem_bytes, cudaMemcpyDeviceToHost));
    KC_CUDA_TRY(cudaMemcpy(hb.data(), mem_b.get(), mem_bytes, cudaMemcpyDeviceToHost));
    KC_CUDA_TRY(cudaMemcpy(hd.data(), d1.get(), plan.data_bytes(), cudaMemcpyDeviceToHost));
    KvView ha_v = va, hb_v = vb;
    ha_v.base = ha.data();
    hb_v.base = hb.data();
    ha_v.pt = hb_v.pt = paged ? perm.data() : nullptr;
    uint64_t blob_bad = 0, arena_bad = 0;
    std::string first;
    for (const PackCopy& cp : copies)
      for (int64_t i = 0; i < count; ++i) {
        const uint8_t* want = kv_field_row(ha_v, cp.cache_field, i);
        const bool blob_ok = std::memcmp(hd.data() + cp.data_off + uint64_t(i) * cp.bytes_per_pos, want, cp.bytes_per_pos) == 0;
        const bool arena_ok = std::memcmp(kv_field_row(hb_v, cp.cache_field, i), want, cp.bytes_per_pos) == 0;
        blob_bad += !blob_ok;
        arena_bad += !arena_ok;
        if ((!blob_ok || !arena_ok) && first.empty())
          first = "first at field " + pack_field_name(lay.field(cp.cache_field)) + ", position " + std::to_string(i) +
                  (blob_ok ? " (B after unpack)" : " (the packed data)");
      }
    r->verified = blob_bad == 0 && arena_bad == 0;
    r->verify_detail = std::to_string(copies.size()) + " fields x " + std::to_string(count) +
                       " positions: packed rows unlike A's (host walk) " + std::to_string(blob_bad) +
                       ", B's rows unlike A's after unpack " + std::to_string(arena_bad) + (first.empty() ? std::string() : "; " + first);
  }

  int sms = 0;
  KC_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  KC_RETURN_IF_ERROR(bench_time(warmup, reps, [&]() -> Status {
    bench_copy16_kernel<<<sms * 8, 256>>>(reinterpret_cast<const int4*>(d1.get()), reinterpret_cast<int4*>(d2.get()),
                                          dbytes / 16);
    KC_LAUNCH_CHECK("bench_copy16_kernel");
    return Status::Ok();
  }, &r->copy_us));
  r->count = count;
  r->data_bytes = double(lay.kv_bytes(uint64_t(count)));
  r->copy_bytes = double(dbytes);
  return Status::Ok();
}

}  // namespace kc
