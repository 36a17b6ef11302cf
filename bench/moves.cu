// Rope-store and compaction benchmarks on the device (see bench/rope_store.h).
// Each configuration: lanes of a cache of `layers` layers (pages of ptok positions shuffled
// through one arena, or one window per lane), the kernel run once and verified (untimed),
// then timed with CUDA events around single launches (warm-up, then the median of reps),
// and the copy ceiling of the same bytes measured right after (bench/copy_ceiling.cu). The
// L2 rule (MoveBenchConfig::flush_l2, default on): the L2 read out, untimed, before every
// timed run of the kernel and of the ceiling alike (bench/timing.cuh, BenchL2Flush).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include "bench/rope_store.h"
#include "bench/timing.cuh"
#include "kernels/attention/launch.h"
#include "kernels/attention/twin.h"
#include "kernels/codecs/rows.h"
#include "kernels/layout/cache.h"

namespace kc {
namespace {

// Uniform floats in (-2, 2) from the hash (finite, varied exponents near 1).
__global__ void fill_floats_kernel(float* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = (float(bench_hash32(seed * 0x9E3779B97F4A7C15ull + i) >> 8) * (1.0f / 16777216.0f) - 0.5f) * 4.0f;
}

// The sequential reference of keep: block (field, lane), a barrier after every move, one
// byte per thread (the keep kernel's scheme before the batched one; independent code).
__global__ void keep_reference_kernel(const KvView* views, const KeepMove* moves, const int32_t* lane_off) {
  const int f = blockIdx.x, g = blockIdx.y;
  for (int32_t i = lane_off[g]; i < lane_off[g + 1]; ++i) {
    const KeepMove mv = moves[i];
    const KvView v = views[mv.lane];
    const uint32_t bytes = v.lay.field(f).bytes_per_pos;
    const uint8_t* src = kv_field_row(v, f, mv.src);
    uint8_t* dst = kv_field_row(v, f, mv.dst);
    for (uint32_t b = threadIdx.x; b < bytes; b += blockDim.x) dst[b] = src[b];
    __syncthreads();
  }
}

// Lanes of one cache on the device: an arena of shuffled pages, or a window per lane.
struct BenchLanes {
  KvLayout lay;
  int ptok = 0;
  uint64_t ps = 0, mem_bytes = 0;
  DevBuf<uint8_t> mem;
  std::vector<int32_t> pt;   // host copy of the page tables (lane-major)
  DevBuf<int32_t> dpt;
  std::vector<KvView> hviews;  // device addresses through the host page table (host-side address arithmetic)
  DevBuf<KvView> dviews;       // the kernels' views
};

Status make_lanes(const KvLayout& lay, int lanes, int64_t cap, int ptok_cfg, BenchLanes* L) {
  L->lay = lay;
  const bool paged = ptok_cfg > 0;
  L->ptok = paged ? ptok_cfg : int(cap);
  L->ps = lay.page_stride(L->ptok);  // a window is one page of ptok = its capacity
  const int64_t ppl = paged ? (cap + L->ptok - 1) / L->ptok : 1;
  L->mem_bytes = L->ps * uint64_t(ppl) * lanes;
  KC_RETURN_IF_ERROR(L->mem.alloc(L->mem_bytes));
  L->pt.resize(size_t(ppl) * lanes);
  std::iota(L->pt.begin(), L->pt.end(), 0);
  std::mt19937 g(5);
  if (paged) std::shuffle(L->pt.begin(), L->pt.end(), g);
  KC_RETURN_IF_ERROR(L->dpt.upload(L->pt.data(), L->pt.size()));
  std::vector<KvView> dv(lanes);
  L->hviews.resize(lanes);
  for (int b = 0; b < lanes; ++b) {
    KvView v;
    v.lay = lay;
    v.ptok = L->ptok;
    v.ps = L->ps;
    v.base = paged ? L->mem.get() : L->mem.get() + L->ps * b;
    L->hviews[b] = v;
    if (paged) {
      L->hviews[b].pt = L->pt.data() + size_t(b) * ppl;
      v.pt = L->dpt.get() + size_t(b) * ppl;
    }
    dv[b] = v;
  }
  return L->dviews.upload(dv.data(), dv.size());
}

Status download(void* dst, const void* src, size_t n) {
  KC_CUDA_TRY(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
  return Status::Ok();
}

// The rope store of a sample of rows on the host twin against the device's bytes (the first
// and last 8 rows, and every 131st: a persistent kernel's block takes every G-th row, so a
// stride prime to the grid reaches every block at many depths of its rings): V rows
// (codes and scales) equal; K rows decoded within a format step of the row's largest value
// and rotated q within 2^-20 of the row's largest input (the device contracts products into
// fmas where the twin rounds each: the rounding of the rotation may differ in the last bit).
Status verify_rope(const MoveBenchConfig& c, const BenchLanes& L, const std::vector<RopeRow>& rows,
                   const RopeParams& p, const float* dq, const float* dk, const float* dv, const float* dqo,
                   MoveBenchResult* r) {
  const int d = c.head_dim, hq = c.q_heads, hkv = c.kv_heads, n = int(rows.size());
  std::vector<int> sample;
  for (int i = 0; i < n; ++i)
    if (i < 8 || i >= n - 8 || i % 131 == 0) sample.push_back(i);
  const int S = int(sample.size());
  std::vector<float> q(size_t(S) * hq * d), k(size_t(S) * hkv * d), v(size_t(S) * hkv * d), qo(q.size()),
      qh(q.size());
  std::vector<RopeRow> hrows(S);
  for (int s = 0; s < S; ++s) {
    const int i = sample[s];
    KC_RETURN_IF_ERROR(download(&q[size_t(s) * hq * d], dq + size_t(i) * hq * d, size_t(hq) * d * 4));
    KC_RETURN_IF_ERROR(download(&qo[size_t(s) * hq * d], dqo + size_t(i) * hq * d, size_t(hq) * d * 4));
    KC_RETURN_IF_ERROR(download(&k[size_t(s) * hkv * d], dk + size_t(i) * hkv * d, size_t(hkv) * d * 4));
    KC_RETURN_IF_ERROR(download(&v[size_t(s) * hkv * d], dv + size_t(i) * hkv * d, size_t(hkv) * d * 4));
    hrows[s] = {0, rows[i].pos, s};
  }
  // Host caches of one window lane of S positions: the twin's stores (want) and the device's bytes (got).
  Cache want;
  want.lay = L.lay;
  want.mem.assign(L.lay.page_stride(S), 0);
  want.views = {ViewDesc{0, -1, 0, S, L.lay.page_stride(S)}};
  Cache got = want;
  rope_store_host(want, p, hrows.data(), S, q.data(), k.data(), v.data(), qh.data());
  const KvView gw = got.view(0);
  for (int s = 0; s < S; ++s) {
    const RopeRow& rr = rows[sample[s]];
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < hkv; ++h) {
        KC_RETURN_IF_ERROR(download(kv_row(gw, p.layer, kv, h, s), kv_row(L.hviews[rr.lane], p.layer, kv, h, rr.slot),
                                    L.lay.code_bytes));
        if (L.lay.scale_bytes)
          KC_RETURN_IF_ERROR(download(kv_scale(gw, p.layer, kv, h, s),
                                      kv_scale(L.hviews[rr.lane], p.layer, kv, h, rr.slot), L.lay.scale_bytes));
      }
  }
  int64_t bad_q = 0, bad_v = 0, bad_k = 0, k_exact = 0;
  for (int s = 0; s < S; ++s)
    for (int h = 0; h < hq; ++h) {
      const size_t o = (size_t(s) * hq + h) * d;
      float mx = 0;
      for (int j = 0; j < d; ++j) mx = std::max(mx, std::fabs(q[o + j]));
      for (int j = 0; j < d; ++j) bad_q += !(std::fabs(qo[o + j] - qh[o + j]) <= std::ldexp(mx, -20));
    }
  const double ktol = c.fmt == Format::bf16 ? 1.0 / 128 : c.fmt == Format::fp8 ? 0.125 : 0.25;
  std::vector<float> a(d), b(d);
  const KvView ww = want.view(0);
  with_format(c.fmt, [&](auto codec) {
    using C = decltype(codec);
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < hkv; ++h) {
        const RowRef vr{0, p.layer, 1, h, s}, kr{0, p.layer, 0, h, s};
        bad_v += std::memcmp(kv_row(ww, p.layer, 1, h, s), kv_row(gw, p.layer, 1, h, s), L.lay.code_bytes) != 0 ||
                 (L.lay.scale_bytes &&
                  std::memcmp(kv_scale(ww, p.layer, 1, h, s), kv_scale(gw, p.layer, 1, h, s), L.lay.scale_bytes) != 0);
        k_exact += std::memcmp(kv_row(ww, p.layer, 0, h, s), kv_row(gw, p.layer, 0, h, s), L.lay.code_bytes) == 0;
        C::decode_row(ww, kr, a.data());
        C::decode_row(gw, kr, b.data());
        float mx = 0;
        for (int j = 0; j < d; ++j) mx = std::max(mx, std::fabs(a[j]));
        bool ok = true;
        for (int j = 0; j < d; ++j) ok = ok && std::fabs(a[j] - b[j]) <= ktol * mx;
        bad_k += !ok;
        (void)vr;
      }
  });
  std::ostringstream o;
  o << S << " sampled rows against the host twin: " << bad_v << " of " << S * hkv << " V rows differ, " << bad_k << " of "
    << S * hkv << " K rows outside a format step (" << k_exact << " byte-equal), " << bad_q << " of " << q.size()
    << " q elements outside 2^-20";
  r->verify_detail = o.str();
  r->verified = bad_q == 0 && bad_v == 0 && bad_k == 0;
  return Status::Ok();
}

}  // namespace

Status bench_rope_store_config(const MoveBenchConfig& c, int warmup, int reps, MoveBenchResult* r) {
  if (reps < 1) return Status::Error("bench rope-store: reps must be positive");
  const KvLayout lay(c.layers, c.kv_heads, c.head_dim, c.fmt);
  const int d = c.head_dim, hq = c.q_heads, hkv = c.kv_heads;
  const double row_read = double(hq + 2 * hkv) * d * 4 + sizeof(RopeRow);
  const double row_write = double(hq) * d * 4 + 2.0 * hkv * (lay.code_bytes + lay.scale_bytes);
  const int64_t per_lane = std::max<int64_t>(1, int64_t(double(c.target_bytes) / (row_read + row_write)) / c.lanes);
  const int64_t n = per_lane * c.lanes;
  BenchLanes L;
  KC_RETURN_IF_ERROR(make_lanes(lay, c.lanes, per_lane, c.ptok, &L));
  KC_CUDA_TRY(cudaMemset(L.mem.get(), 0xFF, L.mem_bytes));  // poison: NaN in every format
  std::vector<RopeRow> rows(n);
  for (int b = 0; b < c.lanes; ++b)
    for (int64_t i = 0; i < per_lane; ++i) rows[b * per_lane + i] = {b, int32_t(30000 + i), int32_t(i)};
  DevBuf<RopeRow> drows;
  DevBuf<float> dq, dk, dv, dqo;
  KC_RETURN_IF_ERROR(drows.upload(rows.data(), rows.size()));
  KC_RETURN_IF_ERROR(dq.alloc(size_t(n) * hq * d));
  KC_RETURN_IF_ERROR(dk.alloc(size_t(n) * hkv * d));
  KC_RETURN_IF_ERROR(dv.alloc(size_t(n) * hkv * d));
  KC_RETURN_IF_ERROR(dqo.alloc(size_t(n) * hq * d));
  fill_floats_kernel<<<4096, 256>>>(dq.get(), size_t(n) * hq * d, 1);
  fill_floats_kernel<<<4096, 256>>>(dk.get(), size_t(n) * hkv * d, 2);
  fill_floats_kernel<<<4096, 256>>>(dv.get(), size_t(n) * hkv * d, 3);
  KC_LAUNCH_CHECK("fill_floats_kernel");
  const RopeParams p{hq, d, 1e6, c.layers - 1};
  auto launch = [&]() {
    return launch_rope_store(L.dviews.get(), c.fmt, hkv, d, p, drows.get(), int(n), dq.get(), dk.get(), dv.get(), dqo.get(),
                             cudaStream_t(0));
  };
  KC_RETURN_IF_ERROR(launch());
  KC_CUDA_TRY(cudaDeviceSynchronize());
  KC_RETURN_IF_ERROR(verify_rope(c, L, rows, p, dq.get(), dk.get(), dv.get(), dqo.get(), r));
  std::string hc, hq_out;  // every stored byte (the check above reads a sample): the arena, then q_out
  KC_RETURN_IF_ERROR(bench_bytes_hash(L.mem.get(), L.mem_bytes, &hc));
  KC_RETURN_IF_ERROR(bench_bytes_hash(dqo.get(), size_t(n) * hq * d * 4, &hq_out));
  r->out_hash = hc + hq_out;
  BenchL2Flush flush;
  KC_RETURN_IF_ERROR(flush.init(c.flush_l2));
  KC_RETURN_IF_ERROR(bench_time_l2(flush, warmup, reps, launch, &r->us));
  r->rows = n;
  r->read_bytes = row_read * n;
  r->write_bytes = row_write * n;
  return bench_copy_ceiling(uint64_t((r->read_bytes + r->write_bytes) / 2), warmup, reps, c.flush_l2, &r->ceiling);
}

Status bench_compact_config(const MoveBenchConfig& c, int warmup, int reps, MoveBenchResult* r) {
  if (reps < 1) return Status::Error("bench compact: reps must be positive");
  const KvLayout lay(c.layers, c.kv_heads, c.head_dim, c.fmt);
  const int64_t per_lane = std::max<int64_t>(1, int64_t(c.target_bytes / 2 / lay.pos_bytes) / c.lanes);
  BenchLanes A, B;
  KC_RETURN_IF_ERROR(make_lanes(lay, c.lanes, 2 * per_lane, c.ptok, &A));
  KC_RETURN_IF_ERROR(make_lanes(lay, c.lanes, 2 * per_lane, c.ptok, &B));  // same page tables (same shuffle)
  KC_RETURN_IF_ERROR(bench_fill(A.mem.get(), A.mem_bytes, 29));
  KC_CUDA_TRY(cudaMemcpy(B.mem.get(), A.mem.get(), A.mem_bytes, cudaMemcpyDeviceToDevice));
  std::vector<KeepMove> moves;
  std::vector<int32_t> off = {0};
  for (int b = 0; b < c.lanes; ++b) {
    for (int64_t j = 0; j < per_lane; ++j) moves.push_back({b, int32_t(2 * j + 1), int32_t(j)});
    off.push_back(int32_t(moves.size()));
  }
  DevBuf<KeepMove> dm;
  DevBuf<int32_t> doff;
  KC_RETURN_IF_ERROR(dm.upload(moves.data(), moves.size()));
  KC_RETURN_IF_ERROR(doff.upload(off.data(), off.size()));
  const int fields = lay.field_count();
  auto reference = [&]() -> Status {
    keep_reference_kernel<<<dim3(fields, c.lanes), 128>>>(B.dviews.get(), dm.get(), doff.get());
    KC_LAUNCH_CHECK("keep_reference_kernel");
    return Status::Ok();
  };
  auto launch = [&]() { return launch_keep(A.dviews.get(), lay, dm.get(), doff.get(), c.lanes, cudaStream_t(0)); };
  KC_RETURN_IF_ERROR(reference());
  KC_RETURN_IF_ERROR(launch());
  unsigned long long diff = 1;
  KC_RETURN_IF_ERROR(bench_count_diff(A.mem.get(), B.mem.get(), A.mem_bytes, &diff));
  std::ostringstream o;
  o << "arena after one keep equals the sequential reference's: " << diff << " of " << A.mem_bytes << " bytes differ";
  r->verify_detail = o.str();
  r->verified = diff == 0;
  KC_RETURN_IF_ERROR(bench_bytes_hash(A.mem.get(), A.mem_bytes, &r->out_hash));
  BenchL2Flush flush;
  KC_RETURN_IF_ERROR(flush.init(c.flush_l2));
  KC_RETURN_IF_ERROR(bench_time_l2(flush, warmup, reps, launch, &r->us));
  KC_RETURN_IF_ERROR(bench_time_l2(flush, 1, std::min(reps, 5), reference, &r->reference_us));
  r->rows = int64_t(moves.size());
  r->read_bytes = r->write_bytes = double(lay.kv_bytes(uint64_t(moves.size())));
  return bench_copy_ceiling(uint64_t(r->read_bytes), warmup, reps, c.flush_l2, &r->ceiling);
}

}  // namespace kc
