#include "engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "contracts/signals.h"

namespace kc::engine {

static_assert(std::endian::native == std::endian::little,
              "the reader copies little-endian data as it lies; a big-endian host needs byte swaps");

namespace {

using json = nlohmann::json;

// The reference implementation refuses headers over 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

std::string type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_float()) return "a non-integer number";
  if (v.is_number_integer() && !v.is_number_unsigned()) return "a negative integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::string sys_error() { return std::strerror(errno); }

}  // namespace

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::bf16: return "BF16";
    case Dtype::f16: return "F16";
    case Dtype::f32: return "F32";
  }
  return "?";
}

size_t dtype_size(Dtype d) { return d == Dtype::f32 ? 4 : 2; }

bool parse_dtype(const std::string& name, Dtype* out) {
  for (Dtype d : {Dtype::bf16, Dtype::f16, Dtype::f32})
    if (name == dtype_name(d)) {
      *out = d;
      return true;
    }
  return false;
}

// ---- Conversions.

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);  // inf, or NaN with its payload kept
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    // Subnormal: value = man * 2^-24. Normalise: shift until the implicit bit (0x400) is set.
    int e = -14;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e + 127) << 23) | ((man & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

uint16_t f32_to_f16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // quiet NaN
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 = 65504 + half an ulp
  if (a < 0x38800000u) {
    // Below 2^-14: an fp16 subnormal, value / 2^-24 rounded to nearest even. 2^-25 and
    // below round to zero (2^-25 itself is a tie, to the even 0).
    if (a <= 0x33000000u) return sign;
    const uint32_t e = a >> 23;  // 102..112
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value * 2^24 = m * 2^(e - 126)
    uint32_t kept = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (kept & 1u))) ++kept;  // 0x400 is the smallest normal's encoding
    return static_cast<uint16_t>(sign | kept);
  }
  // Normal: round the 13 dropped bits to nearest even (a carry moves into the exponent),
  // then rebias the exponent from 127 to 15.
  const uint32_t r = a + 0xFFFu + ((a >> 13) & 1u) - (112u << 23);
  return static_cast<uint16_t>(sign | (r >> 13));
}

// ---- TensorInfo / SafetensorsFile.

uint64_t TensorInfo::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

SafetensorsFile::~SafetensorsFile() { release(); }

void SafetensorsFile::release() {
  if (map_ != nullptr) munmap(const_cast<unsigned char*>(map_), map_size_);
  map_ = nullptr;
  map_size_ = 0;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = o.map_;
    map_size_ = o.map_size_;
    data_start_ = o.data_start_;
    tensors_ = std::move(o.tensors_);
    index_ = std::move(o.index_);
    metadata_ = std::move(o.metadata_);
    o.map_ = nullptr;
    o.map_size_ = 0;
  }
  return *this;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsFile::open(const std::string& path, SafetensorsFile* out) {
  auto fail = [&](const std::string& what, const std::string& why) {
    return Status::Error(path + ": " + (what.empty() ? "" : what + ": ") + why);
  };
  SafetensorsFile f;
  f.path_ = path;
  // O_NONBLOCK: a FIFO (or another special file) opens at once and is refused below, where a
  // plain open would wait for a writer; on a regular file it changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail("", "cannot open: " + sys_error());
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const std::string e = sys_error();
    ::close(fd);
    return fail("", "cannot stat: " + e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("", "not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return fail("", "truncated: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string map_error = m == MAP_FAILED ? sys_error() : "";
  ::close(fd);
  if (m == MAP_FAILED) return fail("", "cannot map: " + map_error);
  f.map_ = static_cast<const unsigned char*>(m);
  f.map_size_ = size;

  uint64_t n = 0;
  std::memcpy(&n, f.map_, 8);
  if (n > kMaxHeaderBytes)
    return fail("header length", std::to_string(n) + " bytes exceeds the 100 MB limit (file is " +
                                     std::to_string(size) + " bytes)");
  if (n > size - 8)
    return fail("header length", std::to_string(n) + " bytes runs past the end of the file (" +
                                     std::to_string(size - 8) + " bytes follow the length)");
  f.data_start_ = 8 + n;
  const uint64_t data_size = size - f.data_start_;

  // Parse, noting names that occur twice in the top-level object (the parser would keep
  // only the last one silently).
  std::set<std::string> seen;
  std::string duplicate;
  json header;
  try {
    const char* begin = reinterpret_cast<const char*>(f.map_ + 8);
    header = json::parse(begin, begin + n, [&](int depth, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
        const std::string k = parsed.get<std::string>();
        if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
      }
      return true;
    });
  } catch (const json::exception& e) {
    return fail("header", std::string("not JSON: ") + e.what());
  }
  if (!header.is_object()) return fail("header", "expected a JSON object, got " + type_name(header));
  if (!duplicate.empty()) return fail(duplicate, "name occurs twice in the header");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return fail("__metadata__", "expected an object, got " + type_name(v));
      for (auto m2 = v.begin(); m2 != v.end(); ++m2) {
        if (!m2.value().is_string())
          return fail("__metadata__." + m2.key(), "expected a string, got " + type_name(m2.value()));
        f.metadata_[m2.key()] = m2.value().get<std::string>();
      }
      continue;
    }
    if (name.empty()) return fail("(empty name)", "a tensor name must not be empty");
    if (!v.is_object()) return fail(name, "expected an object, got " + type_name(v));
    TensorInfo t;
    t.name = name;
    // dtype
    if (!v.contains("dtype")) return fail(name, "dtype: missing");
    if (!v["dtype"].is_string()) return fail(name, "dtype: expected a string, got " + type_name(v["dtype"]));
    const std::string dt = v["dtype"].get<std::string>();
    if (!parse_dtype(dt, &t.dtype))
      return fail(name, "dtype: '" + dt + "' is not supported (this reader takes BF16, F16 and F32)");
    // shape
    if (!v.contains("shape")) return fail(name, "shape: missing");
    if (!v["shape"].is_array()) return fail(name, "shape: expected an array, got " + type_name(v["shape"]));
    uint64_t numel = 1;
    for (size_t i = 0; i < v["shape"].size(); ++i) {
      const json& d = v["shape"][i];
      if (!d.is_number_unsigned())
        return fail(name, "shape[" + std::to_string(i) + "]: expected a non-negative integer, got " +
                              (d.is_number_integer() ? d.dump() : type_name(d)));
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dim, &numel))
        return fail(name, "shape: " + v["shape"].dump() + " has more elements than 2^64");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(t.dtype)), &nbytes))
      return fail(name, "shape: " + v["shape"].dump() + " of " + dt + " takes more than 2^64 bytes");
    // data_offsets
    if (!v.contains("data_offsets")) return fail(name, "data_offsets: missing");
    const json& o = v["data_offsets"];
    if (!o.is_array() || o.size() != 2)
      return fail(name, "data_offsets: expected an array of two integers, got " +
                            (o.is_array() ? "an array of " + std::to_string(o.size()) : type_name(o)));
    for (int i = 0; i < 2; ++i)
      if (!o[i].is_number_unsigned())
        return fail(name, "data_offsets[" + std::to_string(i) + "]: expected a non-negative integer, got " +
                              (o[i].is_number_integer() ? o[i].dump() : type_name(o[i])));
    t.begin = o[0].get<uint64_t>();
    t.end = o[1].get<uint64_t>();
    if (t.begin > t.end) return fail(name, "data_offsets: begin " + std::to_string(t.begin) + " > end " + std::to_string(t.end));
    if (t.end > data_size)
      return fail(name, "data_offsets: end " + std::to_string(t.end) + " is past the data section (" +
                            std::to_string(data_size) + " bytes; the file may be truncated)");
    if (t.end - t.begin != nbytes)
      return fail(name, "data_offsets: " + std::to_string(t.end - t.begin) + " bytes, but shape " + v["shape"].dump() +
                            " of " + dt + " needs " + std::to_string(nbytes));
    f.tensors_.push_back(std::move(t));
  }

  // Tensors must tile the data section: no overlaps, no holes, nothing after the last.
  std::stable_sort(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : f.tensors_) {
    if (t.begin < covered)
      return fail(t.name, "data_offsets: [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ") overlaps " +
                              prev->name + " [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) + ")");
    if (t.begin > covered)
      return fail(t.name, "data_offsets: bytes [" + std::to_string(covered) + ", " + std::to_string(t.begin) +
                              ") before it belong to no tensor");
    covered = t.end;
    prev = &t;
  }
  if (covered != data_size)
    return fail("data", "bytes [" + std::to_string(covered) + ", " + std::to_string(data_size) +
                            ") at the end of the data section belong to no tensor");
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_[f.tensors_[i].name] = i;
  *out = std::move(f);
  return Status::Ok();
}

Status SafetensorsFile::read_f32(const TensorInfo& t, float* out, uint64_t count) const {
  if (count != t.numel())
    return Status::Error(path_ + ": " + t.name + ": " + std::to_string(t.numel()) + " elements, caller expected " +
                         std::to_string(count));
  const unsigned char* p = map_ + data_start_ + t.begin;
  switch (t.dtype) {
    case Dtype::f32:
      std::memcpy(out, p, count * 4);
      break;
    case Dtype::bf16:
      for (uint64_t i = 0; i < count; ++i) out[i] = bf16_to_f32(static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      break;
    case Dtype::f16:
      for (uint64_t i = 0; i < count; ++i) out[i] = f16_to_f32(static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      break;
  }
  return Status::Ok();
}

Status SafetensorsFile::read_f32(const std::string& name, std::vector<float>* out) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) return Status::Error(path_ + ": " + name + ": no such tensor");
  out->resize(t->numel());
  return read_f32(*t, out->data(), out->size());
}

// ---- Writer.

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  auto fail = [&](const std::string& what, const std::string& why) {
    return Status::Error(path + ": " + what + ": " + why);
  };
  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty()) return fail("(empty name)", "a tensor name must not be empty");
    if (t.name == "__metadata__") return fail(t.name, "reserved name");
    if (!names.insert(t.name).second) return fail(t.name, "name given twice");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return fail(t.name, "negative dimension in shape");
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) return fail(t.name, "shape overflows");
    }
    if (!t.generate && numel != t.values.size())
      return fail(t.name, std::to_string(t.values.size()) + " values for a shape of " + std::to_string(numel) + " elements");
    const uint64_t nbytes = numel * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os) return fail("(file)", "cannot create " + tmp + ": " + sys_error());
    const uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    os.write(reinterpret_cast<const char*>(len), 8);
    os.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::vector<unsigned char> buf;
    constexpr size_t kChunk = 1 << 20;
    std::vector<float> generated;
    // A signal held off by the caller (make-model's claim of its folder: contracts/signals.h) stops
    // the write at the next 1 Mi elements: the temp file goes, and the caller undoes the rest
    // before its hold ends and the signal takes effect.
    // "" to go on; else the reason, with the temp file gone.
    const auto interrupted = [&]() -> std::string {
      const int sig = HoldSignals::held();
      if (!sig) return "";
      os.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return "interrupted by signal " + std::to_string(sig);
    };
    for (const TensorToWrite& t : tensors) {
      if (const std::string why = interrupted(); !why.empty()) return fail("(file)", why);
      const size_t es = dtype_size(t.dtype);
      const std::vector<float>* values = &t.values;
      if (t.generate) {
        uint64_t numel = 1;
        for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
        generated.assign(numel, 0.0f);
        t.generate(generated.data(), numel);
        values = &generated;
      }
      for (size_t at = 0; at < values->size(); at += kChunk) {
        if (const std::string why = interrupted(); !why.empty()) return fail("(file)", why);
        const size_t cnt = std::min(kChunk, values->size() - at);
        buf.resize(cnt * es);
        for (size_t i = 0; i < cnt; ++i) {
          const float x = (*values)[at + i];
          if (t.dtype == Dtype::f32) {
            std::memcpy(&buf[4 * i], &x, 4);
          } else {
            const uint16_t h = t.dtype == Dtype::bf16 ? f32_to_bf16(x) : f32_to_f16(x);
            buf[2 * i] = static_cast<unsigned char>(h & 0xFF);
            buf[2 * i + 1] = static_cast<unsigned char>(h >> 8);
          }
        }
        os.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
      }
    }
    os.flush();
    if (!os) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return fail("(file)", "write failed: " + sys_error());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();  // before remove() overwrites ec ("cannot rename ...: Success")
    std::filesystem::remove(tmp, ec);
    return fail("(file)", "cannot rename " + tmp + ": " + why);
  }
  return Status::Ok();
}

}  // namespace kc::engine
