// Process-wide accounting of device memory: every device allocation of the project goes
// through device_alloc / device_free (kernels/backend/cuda_check.h: DevBuf, and the cuda
// engine's grow-only buffers), which keep the bytes allocated now and the peak since the
// last reset_device_peak(). Plain host code (no CUDA header), so a Backend can report it;
// on a cpu-only build the counters stay 0 and nothing reports them (Backend::memory_stats
// of the cpu backend says "not applicable").
#pragma once
#include <atomic>
#include <cstdint>

namespace kc {

struct DeviceMemoryCounters {
  std::atomic<uint64_t> current{0};
  std::atomic<uint64_t> peak{0};
  std::atomic<uint64_t> allocations{0};
};

inline DeviceMemoryCounters& device_memory_counters() {
  static DeviceMemoryCounters c;
  return c;
}

inline void note_device_alloc(uint64_t bytes) {
  DeviceMemoryCounters& c = device_memory_counters();
  const uint64_t now = c.current.fetch_add(bytes) + bytes;
  c.allocations.fetch_add(1);
  uint64_t p = c.peak.load();
  while (now > p && !c.peak.compare_exchange_weak(p, now)) {
  }
}

inline void note_device_free(uint64_t bytes) { device_memory_counters().current.fetch_sub(bytes); }

// The peak restarts at the bytes allocated now.
inline void reset_device_peak() {
  DeviceMemoryCounters& c = device_memory_counters();
  c.peak.store(c.current.load());
}

}  // namespace kc
