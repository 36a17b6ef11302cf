// safetensors: the engine's own reader and writer for the Hugging Face checkpoint format.
//
// Layout of a file (https://github.com/huggingface/safetensors, "Format"):
//   bytes [0, 8)        N, the header length, unsigned 64-bit little-endian
//   bytes [8, 8 + N)    a JSON object: tensor name -> {"dtype", "shape", "data_offsets"},
//                       plus an optional "__metadata__" object of string -> string
//   bytes [8 + N, end)  the data section; a tensor's bytes are data[begin, end) with
//                       (begin, end) = data_offsets, little-endian, row-major (C order)
//
// The reader takes BF16, F16 and F32 tensors and converts them to fp32 exactly (every
// bf16 and fp16 value is an fp32 value). It refuses, with a Status naming the file, the
// tensor (or header field) and the reason: a file shorter than 8 bytes, a header length
// past the end of the file, a header that is not JSON or not an object, a duplicated
// name, a tensor entry with a missing or ill-typed field, an unknown dtype, a shape whose
// element count overflows, offsets out of order or past the data section, offsets whose
// length is not numel * dtype size, tensors that overlap, and bytes of the data section
// covered by no tensor (the format forbids holes, as the reference implementation does).
//
// The file is memory-mapped (read-only), so a checkpoint of several GB costs no copy
// until a tensor is decoded.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/layout/status.h"

namespace kc::engine {

enum class Dtype { bf16, f16, f32 };

// "BF16", "F16", "F32": the names the header uses.
const char* dtype_name(Dtype d);
size_t dtype_size(Dtype d);
// false when `name` is not one of the three names above.
bool parse_dtype(const std::string& name, Dtype* out);

// Exact conversions to fp32 and round-to-nearest-even conversions from fp32 (written
// here, not shared with kernels/). fp16 encoding: overflow to +-inf, subnormals kept,
// NaN stays NaN (quiet, sign kept). bf16 encoding: NaN becomes a quiet NaN, sign kept.
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float x);
uint16_t f32_to_f16(float x);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets in the data section
  uint64_t numel() const;
};

class SafetensorsFile {
 public:
  SafetensorsFile() = default;
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& o) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& o) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Maps `path` and validates its header and offsets (not the values).
  static Status open(const std::string& path, SafetensorsFile* out);

  const std::string& path() const { return path_; }
  // In header order of the data section (ascending offsets).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo* find(const std::string& name) const;

  // The tensor's values converted to fp32, row-major; `out` is resized to numel().
  Status read_f32(const std::string& name, std::vector<float>* out) const;
  // As above into a caller buffer of exactly `count` floats.
  Status read_f32(const TensorInfo& t, float* out, uint64_t count) const;

 private:
  void release();
  std::string path_;
  const unsigned char* map_ = nullptr;
  size_t map_size_ = 0;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: fp32 values, stored in `dtype` (rounded to nearest even). When
// `generate` is set, `values` is ignored and generate(out, numel) fills the tensor at the
// moment it is written, so a large checkpoint never holds more than one tensor in memory.
struct TensorToWrite {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<int64_t> shape;
  std::vector<float> values;  // numel values, row-major
  std::function<void(float* out, uint64_t count)> generate;
};

// Writes a safetensors file (header padded with spaces to a multiple of 8 bytes, tensors
// in the order given, packed without holes), through a temporary file and a rename.
// Refuses duplicated or empty names, a name "__metadata__", and values whose count is
// not the shape's element count.
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace kc::engine
