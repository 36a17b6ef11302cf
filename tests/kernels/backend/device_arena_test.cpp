// The device-resident path (kernels/backend/device_arena.h, cuda_backend.h): a cache held
// in a DeviceArena across several steps, kernels enqueued on the caller's stream, nothing
// waited for until the test finishes the stream, every copy explicit. Its bytes must equal
// the host twins'. Labelled cuda; skipped (visibly) without the cuda backend or a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "contracts/arena.h"
#include "kernels/attention/twin.h"
#include "kernels/backend/backend.h"

#ifdef KC_HAVE_CUDA
#include "kernels/attention/launch.h"
#include "kernels/backend/cuda_backend.h"
#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_arena.h"
#include "kernels/engine/engine_backend.h"
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

// A held cache's pool moved pages without changing the table's size or any lane's view:
// refresh_tables must still upload the new entries (mutation sweep round 3,
// arena-refresh-pts-size: a refresh that compares the tables' sizes only kept the old table
// on the device). The device's page tables, a decode and an encode through the refreshed
// views are checked against the moved image.
TEST(DeviceArena, RefreshWithEqualSizedTablesUploadsTheNewEntries) {
  skip_without_device();
  if (::testing::Test::IsSkipped()) return;
#ifdef KC_HAVE_CUDA
  const Format f = Format::fp8;
  const KvLayout lay(2, 2, 64, f);
  const std::vector<int> lens = {24, 16};  // whole pages of 8: every page holds encoded rows
  Cache host = make_paged_cache(lay, 8, lens, 2, 13);
  std::vector<RowRef> rows = every_row(host, 0, lens[0]);
  for (const RowRef& r : every_row(host, 1, lens[1])) rows.push_back(r);
  const int n = int(rows.size()), d = lay.head_dim;
  const std::vector<float> x = random_rows(rows.size(), d, 21);
  ASSERT_TRUE(encode_rows_host(f, host, x.data(), rows.data(), n).ok);

  // The same pages, handed out in another order: lane 0's reversed, then lane 0's first
  // and lane 1's last swapped. Sizes and view descriptors unchanged.
  Cache moved = host;
  const ViewDesc &v0 = moved.views[0], &v1 = moved.views[1];
  ASSERT_TRUE(v0.paged() && v1.paged());
  std::reverse(moved.pts.begin() + v0.pt_off, moved.pts.begin() + v0.pt_off + v0.n_pages);
  std::swap(moved.pts[size_t(v0.pt_off)], moved.pts[size_t(v1.pt_off + v1.n_pages - 1)]);
  ASSERT_EQ(moved.pts.size(), host.pts.size());
  ASSERT_NE(moved.pts, host.pts);
  ASSERT_TRUE(moved.validate().ok);

  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArena arena;
  DeviceScratch scratch;
  ASSERT_TRUE(arena.load(host, s).ok);
  ASSERT_TRUE(arena.refresh_tables(moved, s).ok);
  // The page tables on the device.
  std::vector<std::vector<int32_t>> dev_pts(moved.views.size());
  for (size_t l = 0; l < moved.views.size(); ++l) {
    dev_pts[l].resize(size_t(moved.views[l].n_pages));
    ASSERT_EQ(cudaMemcpyAsync(dev_pts[l].data(), arena.view(int(l)).pt, dev_pts[l].size() * 4, cudaMemcpyDeviceToHost, s),
              cudaSuccess);
  }
  // Every row decoded through the refreshed views.
  RowRef* dr;
  float* dout;
  std::vector<float> out(size_t(n) * d);
  ASSERT_TRUE(scratch.put(0, rows.data(), rows.size(), s, &dr).ok);
  ASSERT_TRUE(scratch.get(1, out.size(), &dout).ok);
  ASSERT_TRUE(launch_decode_rows(f, arena.views(), dr, n, d, dout, s).ok);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
  // Lane 0's rows encoded anew through them, the memory stored.
  const std::vector<RowRef> rows0 = every_row(moved, 0, lens[0]);
  const std::vector<float> x2 = random_rows(rows0.size(), d, 22);
  float* dx2;
  RowRef* dr0;
  ASSERT_TRUE(scratch.put(2, x2.data(), x2.size(), s, &dx2).ok);
  ASSERT_TRUE(scratch.put(3, rows0.data(), rows0.size(), s, &dr0).ok);
  ASSERT_TRUE(launch_encode_rows(f, arena.views(), dx2, dr0, int(rows0.size()), d, s).ok);
  Cache dev_image = moved;
  ASSERT_TRUE(arena.store(dev_image, s).ok);
  ASSERT_TRUE(finish_stream(s).ok);
  cudaStreamDestroy(s);

  for (size_t l = 0; l < moved.views.size(); ++l) {
    const std::vector<int32_t> want(moved.pts.begin() + moved.views[l].pt_off,
                                    moved.pts.begin() + moved.views[l].pt_off + moved.views[l].n_pages);
    EXPECT_EQ(dev_pts[l], want) << "lane " << l << ": the device keeps a stale page table";
  }
  std::vector<float> want(size_t(n) * d);
  ASSERT_TRUE(decode_rows_host(f, moved, rows.data(), n, want.data()).ok);
  EXPECT_EQ(0, memcmp(out.data(), want.data(), out.size() * 4)) << "decoded rows are not the moved pages' rows";
  ASSERT_TRUE(encode_rows_host(f, moved, x2.data(), rows0.data(), int(rows0.size())).ok);
  EXPECT_TRUE(dev_image.mem == moved.mem) << "an encode through the refreshed views did not land in the moved pages";
#endif
}

#ifdef KC_HAVE_CUDA
void hold_the_stream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }
#endif

// The fill of a held cache (the pool's poison of freed pages) is ordered on the backend's
// stream: the stream's next work sees its bytes, whatever another stream does. Made
// observable: the legacy default stream is held 150 ms by a host function, then the fill
// and the release (a copy on the backend's non-blocking stream, then that stream finished).
// On the backend's stream the release copies the fill's bytes; a fill launched on the
// legacy stream (mutation sweep round 3, cuda-fill-legacy-stream) waits behind the host
// function, and the release copies the bytes before it.
TEST(DeviceArena, HeldFillIsOrderedOnTheBackendsStream) {
  skip_without_device();
  if (::testing::Test::IsSkipped()) return;
#ifdef KC_HAVE_CUDA
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Status st;
  std::unique_ptr<Backend> be = make_cuda_backend_on(s, &st);
  ASSERT_TRUE(st.ok) << st.message;
  EngineBackend* eb = be->engine();
  ASSERT_TRUE(eb && eb->on_device());
  const KvLayout lay(1, 2, 64, Format::fp8);
  Cache c = make_paged_cache(lay, 4, {8}, 1, 3);
  std::fill(c.mem.begin(), c.mem.end(), uint8_t(0x11));
  const ByteRange r{64, 1000};
  ASSERT_LE(r.offset + r.bytes, c.mem.size());
  ASSERT_TRUE(eb->hold(c).ok);
  // A first fill, finished: the backend's scratch for the ranges is allocated now (no
  // allocation below), the range holds 0x22.
  ASSERT_TRUE(be->fill(c, &r, 1, 0x22).ok);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  ASSERT_EQ(cudaLaunchHostFunc(cudaStreamLegacy, hold_the_stream, nullptr), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(be->fill(c, &r, 1, 0x5A).ok);
  ASSERT_TRUE(eb->release(c).ok);
  const double release_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the legacy stream's work done before the backend goes
  be.reset();
  cudaStreamDestroy(s);

  int64_t in_fill = 0, outside = 0, stale = 0;
  for (size_t i = 0; i < c.mem.size(); ++i) {
    const bool in = i >= r.offset && i < r.offset + r.bytes;
    if (in) in_fill += c.mem[i] == 0x5A, stale += c.mem[i] == 0x22;
    else outside += c.mem[i] != 0x11;
  }
  EXPECT_EQ(in_fill, int64_t(r.bytes)) << stale << " bytes of the range still hold the first fill's 0x22: the fill "
                                       << "ran after the release's copy (not on the backend's stream); release took "
                                       << release_ms << " ms";
  EXPECT_EQ(outside, 0) << "bytes outside the range changed";
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

// Input and output rows past 2^31 floats (device mutation sweep round 3,
// fp8-encode-row-index-32bit: a row offset computed in 32-bit int wraps there and reads
// another row's values). One call per format of 2^23 + 2 rows of 256 (8 GiB + 2 KiB of
// floats): every row but the last two reads zeros into one cache row; the last two, at
// offsets 2^31 and 2^31 + 256 floats, carry drawn values into two others. The cache bytes
// must equal the host twin's, and a decode of the same rows into the same buffer must put
// the twin's values at those offsets. Needs about 8.7 GB of device memory (skipped below
// that); on the H200 each format takes milliseconds of device time.
TEST(DeviceArena, RowCodecsIndexRowsPast2To31Floats) {
  skip_without_device();
  if (::testing::Test::IsSkipped()) return;
#ifdef KC_HAVE_CUDA
  constexpr int d = 256;
  constexpr int n = (1 << 23) + 2;
  const size_t floats = size_t(n) * d;  // 2^31 + 512
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  if (free_b < floats * 4 + size_t(n) * sizeof(RowRef) + (size_t(1) << 30))
    GTEST_SKIP() << "needs " << (floats * 4 >> 20) << " MiB of device memory and more; " << (free_b >> 20) << " MiB free";
  float* dx = nullptr;
  RowRef* dr = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, floats * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dr, size_t(n) * sizeof(RowRef)), cudaSuccess);
  std::unique_ptr<float, decltype(&cudaFree)> hold_x(dx, &cudaFree);
  std::unique_ptr<RowRef, decltype(&cudaFree)> hold_r(dr, &cudaFree);
  const std::vector<float> drawn = random_rows(2, d, 31);
  for (Format f : {Format::fp8, Format::q4, Format::mxfp4}) {
    SCOPED_TRACE(format_name(f));
    const KvLayout lay(1, 1, d, f);
    Cache host = make_paged_cache(lay, 4, {3}, 1, 7);
    const std::vector<RowRef> three = {{0, 0, 0, 0, 0}, {0, 0, 1, 0, 1}, {0, 0, 0, 0, 2}};
    std::vector<float> x3(3 * d, 0.0f);
    std::copy(drawn.begin(), drawn.end(), x3.begin() + d);
    std::vector<RowRef> rows(size_t(n), three[0]);
    rows[n - 2] = three[1];
    rows[n - 1] = three[2];

    Cache dev_image = host;
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    DeviceArena arena;
    ASSERT_TRUE(arena.load(dev_image, s).ok);
    ASSERT_EQ(cudaMemsetAsync(dx, 0, floats * 4, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(dx + size_t(n - 2) * d, drawn.data(), drawn.size() * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(dr, rows.data(), rows.size() * sizeof(RowRef), cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_TRUE(launch_encode_rows(f, arena.views(), dx, dr, n, d, s).ok);
    ASSERT_EQ(cudaMemsetAsync(dx, 0xFF, floats * 4, s), cudaSuccess);  // NaN everywhere the decode does not write
    ASSERT_TRUE(launch_decode_rows(f, arena.views(), dr, n, d, dx, s).ok);
    std::vector<float> out(3 * d);
    ASSERT_EQ(cudaMemcpyAsync(out.data(), dx, size_t(d) * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(out.data() + d, dx + size_t(n - 2) * d, 2 * size_t(d) * 4, cudaMemcpyDeviceToHost, s),
              cudaSuccess);
    ASSERT_TRUE(arena.store(dev_image, s).ok);
    ASSERT_TRUE(finish_stream(s).ok);
    cudaStreamDestroy(s);

    ASSERT_TRUE(encode_rows_host(f, host, x3.data(), three.data(), 3).ok);
    std::vector<float> want(3 * d);
    ASSERT_TRUE(decode_rows_host(f, host, three.data(), 3, want.data()).ok);
    EXPECT_TRUE(dev_image.mem == host.mem) << "device cache bytes differ from the host twin's";
    EXPECT_EQ(0, memcmp(out.data(), want.data(), out.size() * 4)) << "decoded rows differ from the host twin's";
    EXPECT_NE(want[d], 0.0f);  // the drawn rows are not zeros, so a read of a zero row shows
  }
#endif
}

}  // namespace
}  // namespace kc
