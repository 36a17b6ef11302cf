// Scale-plane packing benchmark on the device (see bench/pack.h).
// One configuration: a lane of `count` positions (paged: pages shuffled through one
// arena; window: one contiguous region) filled with random bytes; the blob's data region
// on the device. Timed with CUDA events around single launches (warm-up, then the median
// of `reps`): gather A -> D1 (pack), scatter D1 -> B (unpack), and the ceiling: a
// grid-stride copy D1 -> D2 with 16-byte loads and stores over the same byte count.
// Verification (untimed): gather B -> D2 must equal D1 (device compare), so the timed
// kernels did move every byte of every field.
#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <random>
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
  // Verification: B now holds A's rows; gathering B must give D1 again.
  KC_RETURN_IF_ERROR(launch_pack_rows(vb, 0, count, dcopies.get(), nc, d2.get(), false, cudaStream_t(0)));
  unsigned long long diff = 1;
  KC_RETURN_IF_ERROR(bench_count_diff(d1.get(), d2.get(), plan.data_bytes(), &diff));
  r->verified = diff == 0;

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
