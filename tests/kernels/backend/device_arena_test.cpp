// The device-resident path (kernels/backend/device_arena.h, cuda_backend.h): a cache held
// in a DeviceArena across several steps, kernels enqueued on the caller's stream, nothing
// waited for until the test finishes the stream, every copy explicit. Its bytes must equal
// the host twins'. Labelled cuda; skipped (visibly) without the cuda backend or a device.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "contracts/arena.h"
#include "kernels/attention/twin.h"
#include "kernels/backend/backend.h"

#ifdef KC_HAVE_CUDA
#include "kernels/attention/launch.h"
#include "kernels/backend/cuda_backend.h"
#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_arena.h"
#endif

namespace kc {
namespace {

std::vector<RowRef> every_row(const Cache& c, int lane, int len) {
  std::vector<RowRef> rows;
  for (int pos = 0; pos < len; ++pos)
    for (int l = 0; l < c.lay.layers; ++l)
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < c.lay.kv_heads; ++h) rows.push_back({lane, l, kv, h, pos});
  return rows;
}

std::vector<float> random_rows(size_t n, int d, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> x(n * d);
  for (float& v : x) v = nd(g);
  return x;
}

void skip_without_device() {
#ifndef KC_HAVE_CUDA
  GTEST_SKIP() << "this build has no cuda backend";
#else
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
#endif
}

// Two steps on one arena: encode every row of two lanes (paged, pages shuffled), then
// compact lane 0 and decode; loaded once, stored once, one stream finish at the end.
TEST(DeviceArena, StepsOnACallersStreamEqualTheHostTwins) {
  skip_without_device();
  if (::testing::Test::IsSkipped()) return;
#ifdef KC_HAVE_CUDA
  for (Format f : {Format::fp8, Format::q4, Format::mxfp4}) {
    SCOPED_TRACE(format_name(f));
    const KvLayout lay(2, 2, 128, f);
    const std::vector<int> lens = {37, 20};
    Cache host = make_paged_cache(lay, 16, lens, 2, 5);
    std::vector<RowRef> rows = every_row(host, 0, lens[0]);
    for (const RowRef& r : every_row(host, 1, lens[1])) rows.push_back(r);
    const int n = int(rows.size()), d = lay.head_dim;
    const std::vector<float> x = random_rows(rows.size(), d, 9);
    const std::vector<KeepMove> moves = {{0, 3, 1}, {0, 7, 2}, {0, 8, 7}, {0, 30, 9}};
    const std::vector<int32_t> lane_off = {0, int32_t(moves.size())};
    const std::vector<RowRef> read = every_row(host, 0, 12);

    Cache dev_image = host;
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    DeviceArena arena;
    DeviceScratch scratch;
    float* dx;
    RowRef *dr, *dread;
    KeepMove* dm;
    int32_t* doff;
    float* dout;
    std::vector<float> out(read.size() * d);
    ASSERT_TRUE(arena.load(dev_image, s).ok);
    ASSERT_TRUE(scratch.put(0, x.data(), x.size(), s, &dx).ok);
    ASSERT_TRUE(scratch.put(1, rows.data(), rows.size(), s, &dr).ok);
    ASSERT_TRUE(launch_encode_rows(f, arena.views(), dx, dr, n, d, s).ok);
    ASSERT_TRUE(scratch.put(2, moves.data(), moves.size(), s, &dm).ok);
    ASSERT_TRUE(scratch.put(3, lane_off.data(), lane_off.size(), s, &doff).ok);
    ASSERT_TRUE(launch_keep(arena.views(), lay, dm, doff, 1, s).ok);
    ASSERT_TRUE(scratch.put(4, read.data(), read.size(), s, &dread).ok);
    ASSERT_TRUE(scratch.get(5, out.size(), &dout).ok);
    ASSERT_TRUE(launch_decode_rows(f, arena.views(), dread, int(read.size()), d, dout, s).ok);
    ASSERT_EQ(cudaMemcpyAsync(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ASSERT_TRUE(arena.store(dev_image, s).ok);
    ASSERT_TRUE(finish_stream(s).ok);
    cudaStreamDestroy(s);

    ASSERT_TRUE(encode_rows_host(f, host, x.data(), rows.data(), n).ok);
    ASSERT_TRUE(validate_keep(host, moves.data(), int(moves.size())).ok);
    keep_host(host, moves.data(), int(moves.size()));
    std::vector<float> want(read.size() * d);
    ASSERT_TRUE(decode_rows_host(f, host, read.data(), int(read.size()), want.data()).ok);
    EXPECT_TRUE(dev_image.mem == host.mem) << "device cache bytes differ from the host twins'";
    EXPECT_EQ(0, memcmp(out.data(), want.data(), out.size() * 4)) << "decoded rows differ from the host twin's";
  }
#endif
}

// The backend on a caller's stream gives the bytes of the backend with its own stream and
// of the cpu backend.
TEST(DeviceArena, BackendOnACallersStream) {
  skip_without_device();
  if (::testing::Test::IsSkipped()) return;
#ifdef KC_HAVE_CUDA
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Status st;
  std::unique_ptr<Backend> on = make_cuda_backend_on(s, &st);
  ASSERT_TRUE(st.ok) << st.message;
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  const KvLayout lay(1, 2, 64, Format::fp8);
  Cache a = make_paged_cache(lay, 3, {10}, 1, 4), b = a;
  const std::vector<RowRef> rows = every_row(a, 0, 10);
  const std::vector<float> x = random_rows(rows.size(), 64, 3);
  ASSERT_TRUE(on->encode_rows(Format::fp8, a, x.data(), rows.data(), int(rows.size())).ok);
  ASSERT_TRUE(cpu->encode_rows(Format::fp8, b, x.data(), rows.data(), int(rows.size())).ok);
  EXPECT_TRUE(a.mem == b.mem);
  on.reset();
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);  // still the caller's: not destroyed by the backend
  cudaStreamDestroy(s);
#endif
}


// A failed CUDA call is reported once: the Status names it, and the runtime's last error is
// clear again, so the next launch check does not blame an innocent launch for it.
TEST(DeviceArena, AFailedAllocationLeavesNoStaleError) {
  skip_without_device();
  if (::testing::Test::IsSkipped()) return;
#ifdef KC_HAVE_CUDA
  DevBuf<uint8_t> huge;
  const Status st = huge.alloc(size_t(1) << 50);  // 1 PiB: no device has it
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("cudaMalloc"), std::string::npos) << st.message;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  DevBuf<uint8_t> small;  // and the device goes on working
  EXPECT_TRUE(small.alloc(1024).ok);
#endif
}

}  // namespace
}  // namespace kc
