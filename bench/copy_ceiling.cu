// The copy ceiling (bench/copy_ceiling.h).
#include "bench/copy_ceiling.h"
#include "bench/timing.cuh"

namespace kc {

Status bench_copy_ceiling(uint64_t bytes, int warmup, int reps, bool flush_l2, CopyCeiling* c) {
  const uint64_t n = (bytes + 15) / 16 * 16;
  DevBuf<uint8_t> a, b;
  KC_RETURN_IF_ERROR(a.alloc(n));
  KC_RETURN_IF_ERROR(b.alloc(n));
  KC_RETURN_IF_ERROR(bench_fill(a.get(), n, 41));
  BenchL2Flush flush;
  KC_RETURN_IF_ERROR(flush.init(flush_l2));
  KC_RETURN_IF_ERROR(bench_time_l2(flush, warmup, reps, [&]() -> Status {
    KC_CUDA_TRY(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice, cudaStream_t(0)));
    return Status::Ok();
  }, &c->memcpy_us));
  int sms = 0;
  KC_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  KC_RETURN_IF_ERROR(bench_time_l2(flush, warmup, reps, [&]() -> Status {
    bench_copy16_kernel<<<sms * 8, 256>>>(reinterpret_cast<const int4*>(a.get()), reinterpret_cast<int4*>(b.get()), n / 16);
    KC_LAUNCH_CHECK("bench_copy16_kernel");
    return Status::Ok();
  }, &c->kernel_us));
  c->bytes = double(n);
  return Status::Ok();
}

}  // namespace kc
