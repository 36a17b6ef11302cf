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

#include "bench/hash.cuh"
#include "bench/pack.h"
#include "kernels/backend/cuda_check.h"
#include "kernels/pack/blob.h"
#include "kernels/pack/launch.h"

namespace kc {
namespace {

__global__ void fill_bytes_kernel(uint32_t* p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = bench_hash32(seed * 0x9E3779B97F4A7C15ull + i);
}

// The ceiling: read n16 int4 from src, write them to dst; four in flight per thread.
__global__ void copy_ceiling_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n16) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n16; i += stride) dst[i] = src[i];
}

__global__ void count_diff_kernel(const uint8_t* a, const uint8_t* b, size_t n, unsigned long long* diff) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  if (local) atomicAdd(diff, local);
}

double median_ms(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `launch` (which enqueues one kernel) with events: warmup untimed, then reps.
template <class F>
Status time_launches(int warmup, int reps, F launch, double* median_us) {
  cudaEvent_t a, b;
  KC_CUDA_TRY(cudaEventCreate(&a));
  KC_CUDA_TRY(cudaEventCreate(&b));
  std::vector<float> t;
  Status st = Status::Ok();
  for (int i = 0; i < warmup + reps && st.ok; ++i) {
    cudaEventRecord(a);
    st = launch();
    cudaEventRecord(b);
    const cudaError_t e = cudaEventSynchronize(b);
    if (st.ok && e != cudaSuccess) st = cuda_error("cudaEventSynchronize(b)", __FILE__, __LINE__, e);
    float ms = 0;
    if (st.ok) {
      const cudaError_t e2 = cudaEventElapsedTime(&ms, a, b);
      if (e2 != cudaSuccess) st = cuda_error("cudaEventElapsedTime", __FILE__, __LINE__, e2);
    }
    if (i >= warmup) t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  KC_RETURN_IF_ERROR(st);
  *median_us = median_ms(t) * 1e3;
  return Status::Ok();
}

}  // namespace

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
  DevBuf<unsigned long long> ddiff;
  KC_RETURN_IF_ERROR(mem_a.alloc(mem_bytes));
  KC_RETURN_IF_ERROR(mem_b.alloc(mem_bytes));
  KC_RETURN_IF_ERROR(d1.alloc(dbytes));
  KC_RETURN_IF_ERROR(d2.alloc(dbytes));
  KC_RETURN_IF_ERROR(ddiff.alloc(1));
  KC_RETURN_IF_ERROR(dcopies.upload(copies.data(), copies.size()));
  fill_bytes_kernel<<<4096, 256>>>(reinterpret_cast<uint32_t*>(mem_a.get()), mem_bytes / 4, 17);
  KC_LAUNCH_CHECK("fill_bytes_kernel");
  fill_bytes_kernel<<<4096, 256>>>(reinterpret_cast<uint32_t*>(mem_b.get()), mem_bytes / 4, 23);
  KC_LAUNCH_CHECK("fill_bytes_kernel");
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

  KC_RETURN_IF_ERROR(time_launches(warmup, reps, [&] {
    return launch_pack_rows(va, 0, count, dcopies.get(), nc, d1.get(), false, cudaStream_t(0));
  }, &r->pack_us));
  KC_RETURN_IF_ERROR(time_launches(warmup, reps, [&] {
    return launch_pack_rows(vb, 0, count, dcopies.get(), nc, d1.get(), true, cudaStream_t(0));
  }, &r->unpack_us));
  // Verification: B now holds A's rows; gathering B must give D1 again.
  KC_RETURN_IF_ERROR(launch_pack_rows(vb, 0, count, dcopies.get(), nc, d2.get(), false, cudaStream_t(0)));
  KC_CUDA_TRY(cudaMemset(ddiff.get(), 0, sizeof(unsigned long long)));
  count_diff_kernel<<<2048, 256>>>(d1.get(), d2.get(), plan.data_bytes(), ddiff.get());
  KC_LAUNCH_CHECK("count_diff_kernel");
  unsigned long long diff = 1;
  KC_RETURN_IF_ERROR(ddiff.download(&diff, 1));
  r->verified = diff == 0;

  int sms = 0;
  KC_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  KC_RETURN_IF_ERROR(time_launches(warmup, reps, [&]() -> Status {
    copy_ceiling_kernel<<<sms * 8, 256>>>(reinterpret_cast<const int4*>(d1.get()), reinterpret_cast<int4*>(d2.get()),
                                          dbytes / 16);
    KC_LAUNCH_CHECK("copy_ceiling_kernel");
    return Status::Ok();
  }, &r->copy_us));
  r->count = count;
  r->data_bytes = double(lay.kv_bytes(uint64_t(count)));
  r->copy_bytes = double(dbytes);
  return Status::Ok();
}

}  // namespace kc
