// engine/safetensors: conversions, write -> read round trips, and every refusal class.
#include "engine/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

using test::TempDir;

// ---- Conversions.

TEST(Conversions, Bf16EveryCodeDecodesAndEncodesBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = bf16_to_f32(static_cast<uint16_t>(h));
    EXPECT_EQ(std::bit_cast<uint32_t>(x), h << 16);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(x))));
      EXPECT_EQ(f32_to_bf16(x) & 0x8000u, h & 0x8000u) << "NaN keeps its sign";
    } else {
      ASSERT_EQ(f32_to_bf16(x), h) << "code " << h;
    }
  }
}

TEST(Conversions, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between bf16 1 (0x3F80) and 1 + 2^-7 (0x3F81): ties to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3F82);  // tie, odd below: up
  EXPECT_EQ(f32_to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80) << "rounds to +inf";
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

float f16_reference_value(uint16_t h) {
  // Independent: from the definition (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) return m ? std::numeric_limits<float>::quiet_NaN() : (s ? -INFINITY : INFINITY);
  if (e == 0)
    v = std::ldexp(m / 1024.0, -14);
  else
    v = std::ldexp(1.0 + m / 1024.0, e - 15);
  return static_cast<float>(s ? -v : v);
}

TEST(Conversions, F16EveryCodeDecodesExactlyAndEncodesBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = f16_to_f32(static_cast<uint16_t>(h));
    const float want = f16_reference_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(x)) << h;
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(x))));
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(x), std::bit_cast<uint32_t>(want)) << "code " << h;
    ASSERT_EQ(f32_to_f16(x), h) << "code " << h;
  }
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x0400), 0x1p-14f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
}

TEST(Conversions, F16RoundsEveryMidpointToEven) {
  // Between every pair of adjacent positive finite fp16 values the midpoint is exact in
  // fp32; it must go to the even code, and one fp32 ulp either side to the near code.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const float lo = f16_to_f32(static_cast<uint16_t>(h)), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(f32_to_f16(mid), even) << h;
    ASSERT_EQ(f32_to_f16(-mid), even | 0x8000) << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, INFINITY)), h + 1) << h;
  }
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(1e30f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-1e30f), 0xFC00);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000) << "a tie with zero goes to zero";
  EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(1e-40f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(Conversions, NanWithItsPayloadInTheDroppedBitsStaysNan) {
  // A NaN whose payload lies only in the bits the narrowing drops must not become inf:
  // the encoders set the quiet bit. The every-code tests encode only NaNs decoded from
  // bf16 / fp16 codes, whose payload survives the shift.
  for (uint32_t u : {0x7F800001u, 0xFF800001u, 0x7F80FFFFu, 0x7F801FFFu, 0xFF801000u, 0x7FC00000u}) {
    const float x = std::bit_cast<float>(u);
    ASSERT_TRUE(std::isnan(x));
    const uint16_t b = f32_to_bf16(x), h = f32_to_f16(x);
    EXPECT_TRUE(std::isnan(bf16_to_f32(b))) << std::hex << u << " -> bf16 " << b;
    EXPECT_TRUE(std::isnan(f16_to_f32(h))) << std::hex << u << " -> f16 " << h;
    EXPECT_EQ(b & 0x8000u, (u >> 16) & 0x8000u) << "NaN keeps its sign";
    EXPECT_EQ(h & 0x8000u, (u >> 16) & 0x8000u) << "NaN keeps its sign";
  }
}

// ---- Round trips.

std::vector<float> representable(Dtype d, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    do {
      const uint32_t r = rng();
      x = d == Dtype::bf16 ? bf16_to_f32(static_cast<uint16_t>(r))
          : d == Dtype::f16 ? f16_to_f32(static_cast<uint16_t>(r))
                            : std::bit_cast<float>(r);
    } while (std::isnan(x));
  }
  return v;
}

TEST(Safetensors, RoundTripEveryDtypeBitExact) {
  TempDir dir;
  std::vector<TensorToWrite> ts;
  uint32_t seed = 1;
  for (Dtype d : {Dtype::bf16, Dtype::f16, Dtype::f32}) {
    ts.push_back({std::string("m.") + dtype_name(d), d, {3, 5, 7}, representable(d, 105, seed++)});
    ts.push_back({std::string("v.") + dtype_name(d), d, {1}, representable(d, 1, seed++)});
  }
  ts.push_back({"scalar", Dtype::f32, {}, {2.5f}});
  ts.push_back({"empty", Dtype::bf16, {0, 4}, {}});
  const std::string path = dir.file("x.safetensors");
  ASSERT_TRUE(write_safetensors(path, ts, {{"format", "pt"}}).ok);
  SafetensorsFile f;
  const Status st = SafetensorsFile::open(path, &f);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.tensors().size(), ts.size());
  for (const auto& t : ts) {
    const TensorInfo* info = f.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, t.dtype);
    EXPECT_EQ(info->shape, t.shape);
    std::vector<float> got;
    ASSERT_TRUE(f.read_f32(t.name, &got).ok);
    ASSERT_EQ(got.size(), t.values.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(t.values[i])) << t.name << "[" << i << "]";
  }
  // The header is padded to a multiple of 8 and the file is exactly header + data.
  const std::string bytes = test::read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  std::vector<float> dummy;
  ASSERT_FALSE(f.read_f32("nope", &dummy).ok);
}

TEST(Safetensors, WriterRoundsToTheStoredDtype) {
  TempDir dir;
  const std::vector<float> v = {1.0f + 0x1p-8f, 0.1f, -3.14159f, 1e-6f};
  const std::string path = dir.file("r.safetensors");
  ASSERT_TRUE(write_safetensors(path, {{"b", Dtype::bf16, {4}, v}, {"h", Dtype::f16, {4}, v}}).ok);
  SafetensorsFile f;
  ASSERT_TRUE(SafetensorsFile::open(path, &f).ok);
  std::vector<float> b, h;
  ASSERT_TRUE(f.read_f32("b", &b).ok);
  ASSERT_TRUE(f.read_f32("h", &h).ok);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(b[i], bf16_to_f32(f32_to_bf16(v[i])));
    EXPECT_EQ(h[i], f16_to_f32(f32_to_f16(v[i])));
  }
}

TEST(Safetensors, WriterRefusesBadInput) {
  TempDir dir;
  const std::string p = dir.file("w.safetensors");
  EXPECT_FALSE(write_safetensors(p, {{"a", Dtype::f32, {2}, {1.0f}}}).ok);
  EXPECT_FALSE(write_safetensors(p, {{"a", Dtype::f32, {1}, {1.0f}}, {"a", Dtype::f32, {1}, {1.0f}}}).ok);
  EXPECT_FALSE(write_safetensors(p, {{"", Dtype::f32, {1}, {1.0f}}}).ok);
  EXPECT_FALSE(write_safetensors(p, {{"__metadata__", Dtype::f32, {1}, {1.0f}}}).ok);
  EXPECT_FALSE(write_safetensors(dir.file("no/such/dir/x.safetensors"), {{"a", Dtype::f32, {1}, {1.0f}}}).ok);
}

// ---- Refusals: every bad-file class, each message naming the file, what and why.

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}
std::string file_with(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

struct Refusal {
  const char* what;
  std::string bytes;
  std::vector<std::string> expect;  // substrings of the message besides the path
};

TEST(Safetensors, RefusesEveryBadFileClassNamingFileTensorAndReason) {
  const std::string ok_entry = R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  const std::string d8(8, '\x01');
  const std::vector<Refusal> cases = {
      {"empty file", "", {"truncated: 0 bytes"}},
      {"shorter than the length", std::string("\x05\x00\x00", 3), {"truncated: 3 bytes"}},
      {"header length past the end", le64(64) + "{}", {"header length: 64 bytes runs past the end of the file (2 bytes"}},
      // One byte past: the length's own 8 bytes count (a check against the whole file size
      // lets the parser read past the mapping).
      {"header length one byte past the end", le64(3) + "{}",
       {"header length: 3 bytes runs past the end of the file (2 bytes follow the length)"}},
      {"header length absurd", le64(1ull << 62) + "{}", {"header length:", "exceeds the 100 MB limit"}},
      {"header not JSON", file_with("{\"w\": ", ""), {"header: not JSON"}},
      {"header not an object", file_with("[1, 2]", ""), {"header: expected a JSON object, got an array"}},
      {"duplicate name", file_with("{" + ok_entry + ", " + ok_entry + "}", d8), {"w: name occurs twice"}},
      {"entry not an object", file_with(R"({"w": 3})", ""), {"w: expected an object, got a number"}},
      {"missing dtype", file_with(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", d8), {"w: dtype: missing"}},
      {"dtype not a string", file_with(R"({"w": {"dtype": 7, "shape": [2], "data_offsets": [0, 8]}})", d8),
       {"w: dtype: expected a string, got a number"}},
      {"unknown dtype", file_with(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", d8),
       {"w: dtype: 'F64' is not supported (this reader takes BF16, F16 and F32)"}},
      {"integer dtype", file_with(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", d8),
       {"w: dtype: 'I64' is not supported"}},
      {"missing shape", file_with(R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", d8), {"w: shape: missing"}},
      {"shape not an array", file_with(R"({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}})", d8),
       {"w: shape: expected an array, got a string"}},
      {"negative dimension", file_with(R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", d8),
       {"w: shape[0]: expected a non-negative integer, got -2"}},
      {"fractional dimension", file_with(R"({"w": {"dtype": "F32", "shape": [2, 1.5], "data_offsets": [0, 8]}})", d8),
       {"w: shape[1]: expected a non-negative integer, got a non-integer number"}},
      {"shape overflow",
       file_with(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 2], "data_offsets": [0, 8]}})", d8),
       {"w: shape: [4294967296,4294967296,2] has more elements than 2^64"}},
      {"shape bytes overflow",
       file_with(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 2], "data_offsets": [0, 8]}})", d8),
       {"w: shape:", "takes more than 2^64 bytes"}},
      {"missing offsets", file_with(R"({"w": {"dtype": "F32", "shape": [2]}})", d8), {"w: data_offsets: missing"}},
      {"one offset", file_with(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", d8),
       {"w: data_offsets: expected an array of two integers, got an array of 1"}},
      {"offset not an integer", file_with(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": ["0", 8]}})", d8),
       {"w: data_offsets[0]: expected a non-negative integer, got a string"}},
      {"offsets reversed", file_with(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", d8),
       {"w: data_offsets: begin 8 > end 0"}},
      {"truncated data", file_with("{" + ok_entry + "}", std::string(5, '\0')),
       {"w: data_offsets: end 8 is past the data section (5 bytes; the file may be truncated)"}},
      {"length vs shape", file_with(R"({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})", d8),
       {"w: data_offsets: 8 bytes, but shape [2,3] of BF16 needs 12"}},
      {"overlap",
       file_with(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                 std::string(12, '\0')),
       {"b: data_offsets: [4, 12) overlaps a [0, 8)"}},
      {"overlap of one byte",
       file_with(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "b": {"dtype": "F32", "shape": [2], "data_offsets": [7, 15]}})",
                 std::string(15, '\0')),
       {"b: data_offsets: [7, 15) overlaps a [0, 8)"}},
      {"hole",
       file_with(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                 std::string(12, '\0')),
       {"b: data_offsets: bytes [4, 8) before it belong to no tensor"}},
      {"trailing bytes", file_with("{" + ok_entry + "}", std::string(12, '\0')),
       {"data: bytes [8, 12) at the end of the data section belong to no tensor"}},
      {"metadata not an object", file_with(R"({"__metadata__": [1]})", ""), {"__metadata__: expected an object, got an array"}},
      {"metadata value not a string", file_with(R"({"__metadata__": {"format": 1}})", ""),
       {"__metadata__.format: expected a string, got a number"}},
      {"deeply nested header", file_with(std::string(100000, '[') + std::string(100000, ']'), ""),
       {"header: expected a JSON object, got an array"}},
      {"offsets past 2^32",
       file_with(R"({"w": {"dtype": "BF16", "shape": [4294967296], "data_offsets": [0, 8589934592]}})", d8),
       {"w: data_offsets: end 8589934592 is past the data section (8 bytes"}},
      {"empty name", file_with(R"({"": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})", ""),
       {"(empty name): a tensor name must not be empty"}},
      // The 100 MB limit admits 100 MB itself: a length at the limit is judged against the
      // file (past its end here), one byte more is over the limit.
      {"header length at the 100 MB limit", le64(100ull << 20) + "{}",
       {"header length: 104857600 bytes runs past the end of the file (2 bytes"}},
      {"header length one byte over the limit", le64((100ull << 20) + 1) + "{}",
       {"header length: 104857601 bytes exceeds the 100 MB limit"}},
      // Several names repeated: the refusal names the first repeat met in the file.
      {"two names repeated",
       file_with(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
                     "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                     "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                 d8),
       {"safetensors: a: name occurs twice in the header"}},
      // A dimension past INT64_MAX is refused even where a 0 keeps the product at 0 (the
      // shape would hold a negative int64).
      {"dimension past INT64_MAX beside a 0",
       file_with(R"({"w": {"dtype": "F32", "shape": [9223372036854775808, 0], "data_offsets": [0, 0]}})", ""),
       {"w: shape: [9223372036854775808,0] has more elements than 2^64"}},
      {"three offsets", file_with(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 16]}})", d8),
       {"w: data_offsets: expected an array of two integers, got an array of 3"}},
  };
  TempDir dir;
  int i = 0;
  for (const Refusal& c : cases) {
    const std::string path = dir.file("bad" + std::to_string(i++) + ".safetensors");
    test::write_bytes(path, c.bytes);
    SafetensorsFile f;
    const Status st = SafetensorsFile::open(path, &f);
    ASSERT_FALSE(st.ok) << c.what;
    EXPECT_EQ(st.message.rfind(path + ": ", 0), 0u) << c.what << ": " << st.message;
    for (const std::string& e : c.expect)
      EXPECT_NE(st.message.find(e), std::string::npos) << c.what << ": '" << st.message << "' lacks '" << e << "'";
  }
}

TEST(Safetensors, AcceptsAnEmptyHeaderObjectAndZeroSizedTensors) {
  TempDir dir;
  const std::string p = dir.file("e.safetensors");
  test::write_bytes(p, file_with(R"({"z": {"dtype": "F16", "shape": [0], "data_offsets": [0, 0]}})", ""));
  SafetensorsFile f;
  const Status st = SafetensorsFile::open(p, &f);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(f.tensors().size(), 1u);
}

TEST(Safetensors, AZeroSizedTensorMayStartWhereANonEmptyOneDoes) {
  // Tensors at one offset are ordered by their end, not by name: "b" (0 bytes at 0) sorts
  // before "a" ([0, 8)) although the header names it second.
  TempDir dir;
  const std::string p = dir.file("z.safetensors");
  test::write_bytes(p, file_with(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                     "b": {"dtype": "BF16", "shape": [3, 0], "data_offsets": [0, 0]}})",
                                 std::string(8, '\0')));
  SafetensorsFile f;
  const Status st = SafetensorsFile::open(p, &f);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_EQ(f.tensors().size(), 2u);
  ASSERT_NE(f.find("b"), nullptr);
  EXPECT_EQ(f.find("b")->numel(), 0u);
}

TEST(Safetensors, ReadRefusesACountOtherThanTheTensors) {
  TempDir dir;
  const std::string p = dir.file("c.safetensors");
  ASSERT_TRUE(write_safetensors(p, {{"t", Dtype::f32, {3}, {1, 2, 3}}}).ok);
  SafetensorsFile f;
  ASSERT_TRUE(SafetensorsFile::open(p, &f).ok);
  const TensorInfo* t = f.find("t");
  ASSERT_NE(t, nullptr);
  float buf[4] = {9, 9, 9, 9};
  for (uint64_t count : {0u, 2u, 4u}) {
    const Status st = f.read_f32(*t, buf, count);
    ASSERT_FALSE(st.ok) << count;
    EXPECT_NE(st.message.find("t: 3 elements, caller expected " + std::to_string(count)), std::string::npos)
        << st.message;
  }
  EXPECT_EQ(buf[0], 9.0f) << "a refused read writes nothing";
  ASSERT_TRUE(f.read_f32(*t, buf, 3).ok);
  EXPECT_EQ(buf[2], 3.0f);
  EXPECT_EQ(buf[3], 9.0f);
}

TEST(Safetensors, RefusesMissingFilesAndDirectories) {
  TempDir dir;
  SafetensorsFile f;
  Status st = SafetensorsFile::open(dir.file("absent.safetensors"), &f);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("absent.safetensors: cannot open: No such file"), std::string::npos) << st.message;
  st = SafetensorsFile::open(dir.str(), &f);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("not a regular file"), std::string::npos) << st.message;
}

TEST(Safetensors, ATruncatedRealFileIsRefused) {
  // A good file cut short anywhere is refused, never read.
  TempDir dir;
  const std::string p = dir.file("t.safetensors");
  ASSERT_TRUE(write_safetensors(p, {{"a", Dtype::bf16, {4, 4}, std::vector<float>(16, 1.0f)},
                                    {"b", Dtype::f32, {3}, {1, 2, 3}}})
                  .ok);
  const std::string full = test::read_bytes(p);
  for (size_t cut = 0; cut < full.size(); ++cut) {
    test::write_bytes(p, full.substr(0, cut));
    SafetensorsFile f;
    const Status st = SafetensorsFile::open(p, &f);
    ASSERT_FALSE(st.ok) << "cut at " << cut;
    EXPECT_EQ(st.message.rfind(p + ": ", 0), 0u) << st.message;
  }
  test::write_bytes(p, full);
  SafetensorsFile f;
  EXPECT_TRUE(SafetensorsFile::open(p, &f).ok);
}

}  // namespace
}  // namespace kc::engine
