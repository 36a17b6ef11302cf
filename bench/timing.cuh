// What the device benches share (nvcc only): timed runs of an enqueue (bench_timed: events,
// gated, graph or partial; bench_time: the median of events-timed launches), a
// grid-stride byte fill, a byte-difference count, a hash of a buffer's bytes, and the copy
// ceiling of a byte count (a device-to-device cudaMemcpyAsync and a 16-byte load/store copy
// kernel over the same bytes, both timed; a bench takes the faster as its ceiling), and the L2
// rule of the move benches (BenchL2Flush, bench_time_l2: L2 flushed before every timed run).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/copy_ceiling.h"
#include "bench/hash.cuh"
#include "kernels/backend/cuda_check.h"

namespace kc {
namespace {  // each bench file its own copy (no relocatable device code)

__global__ void bench_fill_words_kernel(uint32_t* p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = bench_hash32(seed * 0x9E3779B97F4A7C15ull + i);
}

// The ceiling's kernel: read n16 int4 from src, write them to dst; four in flight per thread.
__global__ void bench_copy16_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n16) {
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

__global__ void bench_count_diff_kernel(const uint8_t* a, const uint8_t* b, size_t n, unsigned long long* diff) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  if (local) atomicAdd(diff, local);
}

// Word i (8 bytes, little-endian; the last one zero-padded) of n bytes, mixed with its index,
// summed: a sum is free of the order in which threads add, so the hash is the bytes' alone.
__global__ void bench_bytes_hash_kernel(const uint8_t* p, size_t n, unsigned long long* h) {
  unsigned long long local = 0;
  const size_t words = (n + 7) / 8;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t w = 0;
    if (8 * i + 8 <= n && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      w = reinterpret_cast<const uint64_t*>(p)[i];
    } else {
      for (size_t b = 8 * i; b < n && b < 8 * i + 8; ++b) w |= uint64_t(p[b]) << (8 * (b - 8 * i));
    }
    local += bench_mix64(w ^ bench_mix64(i + 1));
  }
  atomicAdd(h, local);
}

// Fills n bytes (a multiple of 4) with reproducible random bytes.
Status bench_fill(uint8_t* p, size_t n, uint64_t seed) {
  bench_fill_words_kernel<<<4096, 256>>>(reinterpret_cast<uint32_t*>(p), n / 4, seed);
  KC_LAUNCH_CHECK("bench_fill_words_kernel");
  return Status::Ok();
}

// Bytes of a and b (n of them) that differ.
Status bench_count_diff(const uint8_t* a, const uint8_t* b, size_t n, unsigned long long* diff) {
  DevBuf<unsigned long long> d;
  KC_RETURN_IF_ERROR(d.alloc(1));
  KC_CUDA_TRY(cudaMemset(d.get(), 0, sizeof(unsigned long long)));
  bench_count_diff_kernel<<<2048, 256>>>(a, b, n, d.get());
  KC_LAUNCH_CHECK("bench_count_diff_kernel");
  return d.download(diff, 1);
}

// A 64-bit hash of n bytes at p (device memory), as 16 hex digits: two builds that leave the
// same bytes give the same hash.
Status bench_bytes_hash(const void* p, size_t n, std::string* hex) {
  DevBuf<unsigned long long> d;
  KC_RETURN_IF_ERROR(d.alloc(1));
  KC_CUDA_TRY(cudaMemset(d.get(), 0, sizeof(unsigned long long)));
  bench_bytes_hash_kernel<<<2048, 256>>>(static_cast<const uint8_t*>(p), n, d.get());
  KC_LAUNCH_CHECK("bench_bytes_hash_kernel");
  unsigned long long h = 0;
  KC_RETURN_IF_ERROR(d.download(&h, 1));
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", h);
  *hex = s;
  return Status::Ok();
}

// Holds the stream until the host sets *flag (host memory mapped into the device), so the
// launches behind it are all enqueued before any of them runs. Gives up after 2 s (a host
// that never opens it, or a launch that waits for the device, cannot hang the bench).
__global__ void bench_gate_kernel(volatile int* flag) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*flag == 0 && t - t0 < 2000000000ull);
}
// warmup + reps runs of enqueue(i, stream) in one timing mode (events, gated, graph or partial: bench attention --timing), each
// between events a and b; t gets the timed runs' ms, host (gated, partial) the enqueue's us.
// Warm-up runs are never gated: a kernel's first launch may load its module and wait for
// the device. before (if set) enqueues untimed work ahead of every run, outside the events
// (the L2 rule's flush, BenchL2Flush).
template <class Enqueue>
Status bench_timed(const std::string& timing, int warmup, int reps, int copies, Enqueue&& enqueue,
                   std::vector<float>* t, std::vector<float>* host,
                   const std::function<Status(cudaStream_t)>& before = nullptr) {
  const bool gated = timing == "gated" || timing == "partial", graph = timing == "graph";
  if (!gated && !graph && timing != "events") return Status::Error("bench: timing '" + timing + "' unknown");
  cudaEvent_t a = nullptr, b = nullptr;
  int* flag_h = nullptr;
  int* flag_d = nullptr;
  cudaStream_t gs = nullptr;
  std::vector<cudaGraphExec_t> graphs;
  auto run = [&]() -> Status {
    KC_CUDA_TRY(cudaEventCreate(&a));
    KC_CUDA_TRY(cudaEventCreate(&b));
    if (gated) {
      KC_CUDA_TRY(cudaHostAlloc(&flag_h, sizeof(int), cudaHostAllocMapped));
      KC_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_d), flag_h, 0));
    }
    if (graph) {
      KC_CUDA_TRY(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
      for (int k = 0; k < copies; ++k) {
        KC_RETURN_IF_ERROR(enqueue(k, cudaStream_t(0)));  // loads the modules before the capture
        KC_CUDA_TRY(cudaStreamSynchronize(0));
        cudaGraph_t g;
        cudaGraphExec_t ge;
        KC_CUDA_TRY(cudaStreamBeginCapture(gs, cudaStreamCaptureModeThreadLocal));
        const Status st = enqueue(k, gs);
        KC_CUDA_TRY(cudaStreamEndCapture(gs, &g));
        KC_RETURN_IF_ERROR(st);
        const cudaError_t e = cudaGraphInstantiate(&ge, g, 0);
        cudaGraphDestroy(g);
        KC_CUDA_TRY(e);
        graphs.push_back(ge);
      }
    }
    const cudaStream_t s = graph ? gs : cudaStream_t(0);
    for (int i = 0; i < warmup + reps; ++i) {
      const bool gate = gated && i >= warmup;
      if (before) KC_RETURN_IF_ERROR(before(s));
      if (gate) {
        *reinterpret_cast<volatile int*>(flag_h) = 0;
        bench_gate_kernel<<<1, 1, 0, s>>>(flag_d);
        KC_LAUNCH_CHECK("bench_gate_kernel");
      }
      KC_CUDA_TRY(cudaEventRecord(a, s));
      const auto h0 = std::chrono::steady_clock::now();
      if (graph) {
        KC_CUDA_TRY(cudaGraphLaunch(graphs[i % copies], s));
      } else {
        KC_RETURN_IF_ERROR(enqueue(i, s));
      }
      const auto h1 = std::chrono::steady_clock::now();
      KC_CUDA_TRY(cudaEventRecord(b, s));
      if (gate) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        *reinterpret_cast<volatile int*>(flag_h) = 1;
      }
      KC_CUDA_TRY(cudaEventSynchronize(b));
      float ms;
      KC_CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
      if (i >= warmup) {
        t->push_back(ms);
        if (gate) host->push_back(float(std::chrono::duration<double, std::micro>(h1 - h0).count()));
      }
    }
    return Status::Ok();
  };
  const Status st = run();
  if (!st.ok) cudaDeviceSynchronize();  // nothing left queued behind a gate
  for (cudaGraphExec_t ge : graphs) cudaGraphExecDestroy(ge);
  if (gs) cudaStreamDestroy(gs);
  if (flag_h) cudaFreeHost(flag_h);
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  return st;
}

// The median of a bench's samples (the upper one of an even count).
inline double bench_median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `launch` (which enqueues work on stream 0) with events: warmup untimed, then reps;
// the median in microseconds.
template <class F>
Status bench_time(int warmup, int reps, F launch, double* median_us) {
  std::vector<float> t, host;
  KC_RETURN_IF_ERROR(bench_timed("events", warmup, reps, 1, [&](int, cudaStream_t) { return launch(); }, &t, &host));
  *median_us = bench_median(t) * 1e3;
  return Status::Ok();
}

// Reads n16 int4 (the L2 flush of BenchL2Flush): the loads stay, their xor goes nowhere.
__global__ void bench_l2_flush_kernel(const int4* __restrict__ p, size_t n16, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) *sink = acc;  // keeps the loads; almost never taken
}

// The L2 rule of bench rope-store and compact (bench/rope_store.h, MoveBenchConfig::flush_l2): a buffer of twice
// the device's L2 read (untimed) before every timed run of a kernel and of its copy ceiling,
// so that no run starts with lines of the previous one in L2 (a keep whose rows fit in L2
// re-read the lines its previous run wrote; the ceiling's copy of as many bytes between two
// disjoint buffers cannot). A read, not a write: it evicts every earlier line (dirty ones are
// written back during the flush) and leaves clean lines only, so the timed run does not
// write back the flush's bytes. On: false leaves the runs back to back (the earlier rule).
class BenchL2Flush {
 public:
  Status init(bool on) {
    if (!on) return Status::Ok();
    int l2 = 0;
    KC_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    bytes_ = (2 * uint64_t(l2 > 0 ? l2 : 64 << 20) + 4095) / 4096 * 4096;
    KC_RETURN_IF_ERROR(buf_.alloc(bytes_));
    KC_RETURN_IF_ERROR(sink_.alloc(1));
    bench_fill_words_kernel<<<4096, 256>>>(reinterpret_cast<uint32_t*>(buf_.get()), bytes_ / 4, 7);
    KC_LAUNCH_CHECK("bench_fill_words_kernel");
    return run();
  }
  bool on() const { return bytes_ != 0; }
  uint64_t bytes() const { return bytes_; }
  // Enqueues the flush on stream 0 (nothing when off).
  Status run() const {
    if (!on()) return Status::Ok();
    bench_l2_flush_kernel<<<2048, 256>>>(reinterpret_cast<const int4*>(buf_.get()), bytes_ / 16, sink_.get());
    KC_LAUNCH_CHECK("bench_l2_flush_kernel");
    return Status::Ok();
  }

 private:
  uint64_t bytes_ = 0;
  DevBuf<uint8_t> buf_;
  DevBuf<int> sink_;
};

// bench_time with the L2 rule: flush.run() (untimed, outside the events) before every run,
// warm-up included.
template <class F>
Status bench_time_l2(const BenchL2Flush& flush, int warmup, int reps, F launch, double* median_us) {
  std::vector<float> t, host;
  KC_RETURN_IF_ERROR(bench_timed("events", warmup, reps, 1, [&](int, cudaStream_t) { return launch(); }, &t, &host,
                                 [&](cudaStream_t) { return flush.run(); }));
  *median_us = bench_median(t) * 1e3;
  return Status::Ok();
}

}  // namespace
}  // namespace kc
