// The cpu backend: host twins of every kernel.
#include <fstream>
#include <string>

#include "kernels/backend/backend.h"
#include "kernels/pack/pack.h"
#include "kernels/attention/twin.h"
#include "kernels/engine/engine_backend.h"

namespace kc {
namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "unknown cpu";
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  DeviceInfo device() const override { return {cpu_model(), "", ""}; }

  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* rows, int n) override {
    return encode_rows_host(f, c, x, rows, n);
  }
  Status decode_rows(Format f, const Cache& c, const RowRef* rows, int n, float* out) override {
    return decode_rows_host(f, c, rows, n, out);
  }
  Status e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) override {
    if (first + count > (uint64_t(1) << 32)) return Status::Error("e4m3_encode_bits: range past 2^32");
    for (uint64_t i = 0; i < count; ++i) out[i] = e4m3_encode(bits_float(uint32_t(first + i)));
    return Status::Ok();
  }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    KC_RETURN_IF_ERROR(validate_rope(c, p, rows, n));
    rope_store_host(c, p, rows, n, q, k, v, q_out);
    return Status::Ok();
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    KC_RETURN_IF_ERROR(validate_attention(c, p, rows, n, tails));
    attention_host(c, p, rows, n, tails.data(), q, out);
    return Status::Ok();
  }
  Status pack(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob) override {
    return pack_cpu(c, lane, pos0, count, blob);
  }
  Status unpack(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob) override {
    return unpack_cpu(c, lane, pos0, blob);
  }
  Status keep(Cache& c, const KeepMove* moves, int n) override {
    KC_RETURN_IF_ERROR(validate_keep(c, moves, n));
    keep_host(c, moves, n);
    return Status::Ok();
  }
  EngineBackend* engine() override { return engine_.get(); }

 private:
  std::unique_ptr<EngineBackend> engine_ = make_host_engine(*this);
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

#ifndef KC_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend(Status* st) {
  *st = Status::Error("no cuda backend: this build was configured without a CUDA compiler (KC_CUDA=OFF or no nvcc)");
  return nullptr;
}
bool cuda_device_present(std::string* why) {
  if (why) *why = "no cuda backend: this build was configured without a CUDA compiler (KC_CUDA=OFF or no nvcc)";
  return false;
}
#endif

}  // namespace kc
