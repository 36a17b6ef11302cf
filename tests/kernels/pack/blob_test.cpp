// The scale-plane blob format (pack/blob.h) and the host twins pack_cpu / unpack_cpu.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <random>

#include "contracts/arena.h"
#include "kernels/pack/pack.h"
#include "kernels/pack/blob.h"

namespace kc {
namespace {

TEST(PackBlob, TableIsTheLayoutDeclaration) {
  for (Format f : {Format::bf16, Format::fp8, Format::q4, Format::mxfp4}) {
    const KvLayout lay(2, 3, 64, f);
    const PackPlan p = pack_plan(lay, 10);
    ASSERT_EQ(int(p.fields.size()), lay.field_count()) << format_name(f);
    EXPECT_EQ(p.data_offset % 256, 0u);
    uint64_t off = p.data_offset;
    for (int i = 0; i < lay.field_count(); ++i) {
      const FieldInfo fi = lay.field(i);
      EXPECT_EQ(p.fields[i].name, pack_field_name(fi));
      EXPECT_EQ(p.fields[i].bytes_per_pos, fi.bytes_per_pos);
      EXPECT_EQ(p.fields[i].offset, off);
      EXPECT_EQ(p.fields[i].offset % 16, 0u);
      off = (off + 10 * fi.bytes_per_pos + 15) / 16 * 16;
    }
    EXPECT_EQ(p.total_bytes, off + 8);
  }
  const KvLayout fp8(2, 4, 64, Format::fp8);
  EXPECT_EQ(pack_plan(fp8, 1).fields[0].name, "L0.K.h0.codes");
  EXPECT_EQ(pack_plan(fp8, 1).fields[4 + 3].name, "L0.V.h3.codes");
  EXPECT_EQ(pack_plan(fp8, 1).fields[fp8.planes() + 2 * 4 + 4 + 1].name, "L1.V.h1.scales");
}

TEST(PackBlob, ChecksumIsFnv1a64) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(pack_checksum(nullptr, 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(pack_checksum(reinterpret_cast<const uint8_t*>("a"), 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(pack_checksum(reinterpret_cast<const uint8_t*>("foobar"), 6), 0x85944171f73967e8ull);
}

TEST(PackBlob, HeaderBytesAreTheDocumentedOnes) {
  const KvLayout lay(1, 2, 32, Format::mxfp4);
  Cache c = make_window_cache(lay, {9}, 0, 3);
  std::vector<uint8_t> b;
  ASSERT_TRUE(pack_cpu(c, 0, 2, 5, &b).ok);
  ASSERT_GE(b.size(), 64u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data()), 8), "KCPLANES");
  uint32_t u;
  uint64_t q;
  std::memcpy(&u, &b[8], 4);
  EXPECT_EQ(u, kPackLayoutVersion);
  std::memcpy(&u, &b[16], 4);
  EXPECT_EQ(u, 3u);
  std::memcpy(&u, &b[32], 4);
  EXPECT_EQ(u, 8u);  // 4 code planes + 4 scale planes
  std::memcpy(&q, &b[40], 8);
  EXPECT_EQ(q, 5u);
  std::memcpy(&q, &b[56], 8);
  EXPECT_EQ(q, b.size());
  std::memcpy(&q, &b[b.size() - 8], 8);
  EXPECT_EQ(q, pack_checksum(b.data(), b.size() - 8));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&b[64 + 48 * 7])), "L0.V.h1.scales");
}

// Field names of 16 characters and more (layer 10 and kv head 10 on: "L11.V.h11.scales") fit
// the table's 32-byte name field and read back whole: the blob of such a layout unpacks
// (mutation sweep round 7, blob-name-bytes-16: a 16-byte field cut them to 15).
TEST(PackBlob, LongFieldNamesRoundTrip) {
  const KvLayout lay(12, 12, 32, Format::q4);
  const PackPlan p = pack_plan(lay, 2);
  EXPECT_EQ(p.fields.back().name, "L11.V.h11.scales");
  const Cache src = make_window_cache(lay, {4}, 0, 7);
  Cache dst = make_window_cache(lay, {4}, 0, 8);
  std::vector<uint8_t> b;
  ASSERT_TRUE(pack_cpu(src, 0, 1, 2, &b).ok);
  const size_t last = 64 + 48 * size_t(lay.field_count() - 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&b[last])), "L11.V.h11.scales");
  const Status st = unpack_cpu(dst, 0, 1, b);
  ASSERT_TRUE(st.ok) << st.message;
  for (int f = 0; f < lay.field_count(); ++f)
    EXPECT_EQ(std::memcmp(kv_field_row(dst.view(0), f, 2), kv_field_row(src.view(0), f, 2), lay.field(f).bytes_per_pos), 0) << f;
}

// pack -> unpack between any two addressing modes restores every field's rows.
RC_GTEST_PROP(PackBlob, RoundTripAnyModes, ()) {
  const Format f = *rc::gen::element(Format::bf16, Format::fp8, Format::q4, Format::mxfp4);
  const KvLayout lay(*rc::gen::inRange(1, 3), *rc::gen::inRange(1, 3), *rc::gen::element(32, 64), f);
  const int sp = *rc::gen::element(0, 1, 3, 7, 16, 48);
  const int dp = *rc::gen::element(0, 1, 3, 7, 16, 48);
  const int count = *rc::gen::inRange(0, 80);
  const int s0 = *rc::gen::inRange(0, 20), d0 = *rc::gen::inRange(0, 20);
  auto mk = [&](int p, int len, uint64_t seed) {
    return p ? make_paged_cache(lay, p, {len, 5}, 1, seed) : make_window_cache(lay, {len, 5}, 2, seed);
  };
  const Cache src = mk(sp, s0 + count, 1);
  Cache dst = mk(dp, d0 + count, 2);
  const Cache dst0 = dst;
  std::vector<uint8_t> blob;
  RC_ASSERT(pack_cpu(src, 0, s0, count, &blob).ok);
  RC_ASSERT(unpack_cpu(dst, 0, d0, blob).ok);
  std::vector<RowRef> rows;
  for (int i = 0; i < count; ++i)
    for (int fl = 0; fl < lay.field_count(); ++fl) {
      const FieldInfo fi = lay.field(fl);
      RC_ASSERT(std::memcmp(kv_field_row(dst.view(0), fl, d0 + i), kv_field_row(src.view(0), fl, s0 + i),
                            fi.bytes_per_pos) == 0);
      if (fi.kind == FieldKind::codes) rows.push_back({0, fi.layer, fi.kv, fi.head, d0 + i});
    }
  std::vector<uint8_t> mask;
  mark_rows(dst, rows, mask);
  RC_ASSERT(guard_violations(dst, dst0.mem, mask, nullptr) == 0);
}

struct Bad {
  const char* reason;
  std::vector<uint8_t> blob;
};

TEST(PackBlob, RefusalsNameTheReasonAndWriteNothing) {
  const KvLayout lay(2, 2, 64, Format::fp8);
  const Cache src = make_paged_cache(lay, 7, {30, 4}, 1, 5);
  std::vector<uint8_t> blob;
  ASSERT_TRUE(pack_cpu(src, 0, 3, 20, &blob).ok);
  auto reseal = [](std::vector<uint8_t> b) {
    pack_seal(b);
    return b;
  };
  std::vector<Bad> bad;
  {
    auto b = blob;
    b[3] ^= 1;
    bad.push_back({"bad magic", b});
  }
  {
    auto b = blob;
    b[8] = uint8_t(kPackLayoutVersion + 1);
    bad.push_back({"layout version", reseal(b)});
  }
  {
    auto b = blob;
    b[12] ^= 1;  // the header's own size
    bad.push_back({"header: header / field entry sizes", reseal(b)});
  }
  {
    auto b = blob;
    b[36] ^= 1;  // the field entry size alone (the table is still read at 48 bytes an entry)
    bad.push_back({"header: header / field entry sizes", reseal(b)});
  }
  {
    auto b = blob;
    b[64 + 48 * 9 + 32] ^= 1;  // field 9's width
    bad.push_back({"field table: field 9", reseal(b)});
  }
  {
    auto b = blob;
    b[64 + 48 * 9 + 36] ^= 1;  // field 9's kind alone (codes <-> scales)
    bad.push_back({"field table: field 9", reseal(b)});
  }
  bad.push_back({"truncated", std::vector<uint8_t>(blob.begin(), blob.end() - 1)});
  bad.push_back({"truncated", std::vector<uint8_t>(blob.begin(), blob.begin() + 63)});
  {
    auto b = blob;
    b.push_back(0);
    bad.push_back({"oversized", b});
  }
  {
    auto b = blob;
    b[b.size() / 2] ^= 0x20;
    bad.push_back({"checksum", b});
  }
  {
    std::vector<uint8_t> b;
    ASSERT_TRUE(pack_cpu(make_window_cache(KvLayout(2, 2, 64, Format::q4), {20}, 0, 1), 0, 0, 20, &b).ok);
    bad.push_back({"format", b});
    ASSERT_TRUE(pack_cpu(make_window_cache(KvLayout(1, 2, 64, Format::fp8), {20}, 0, 1), 0, 0, 20, &b).ok);
    bad.push_back({"shape", b});
  }
  for (const Bad& k : bad) {
    Cache dst = make_window_cache(lay, {40}, 0, 9);
    const Cache dst0 = dst;
    const Status st = unpack_cpu(dst, 0, 1, k.blob);
    EXPECT_FALSE(st.ok) << k.reason;
    EXPECT_NE(st.message.find(k.reason), std::string::npos) << st.message;
    EXPECT_EQ(dst.mem, dst0.mem) << k.reason;
  }
  Cache dst = make_window_cache(lay, {40}, 0, 9);
  const Cache dst0 = dst;
  EXPECT_NE(unpack_cpu(dst, 0, 21, blob).message.find("outside the lane"), std::string::npos);
  EXPECT_EQ(dst.mem, dst0.mem);
  EXPECT_TRUE(unpack_cpu(dst, 0, 20, blob).ok);  // the last position that fits
  std::vector<uint8_t> b2;
  EXPECT_NE(pack_cpu(src, 0, src.views[0].capacity() - 19, 20, &b2).message.find("outside the lane"), std::string::npos);
}

// The planted faults behind the contract's controls do what they say, and only in scope.
TEST(PackBlob, FaultsAreScoped) {
  const KvLayout lay(1, 2, 32, Format::fp8);
  const Cache src = make_window_cache(lay, {8}, 0, 5);
  std::vector<uint8_t> good, dropped, swapped;
  ASSERT_TRUE(pack_cpu(src, 0, 0, 8, &good).ok);
  {
    PackFaultScope f(PackFault::drop_scale_plane);
    ASSERT_TRUE(pack_cpu(src, 0, 0, 8, &dropped).ok);
  }
  {
    PackFaultScope f(PackFault::swap_kv_scales);
    ASSERT_TRUE(pack_cpu(src, 0, 0, 8, &swapped).ok);
  }
  EXPECT_EQ(pack_fault(), PackFault::none);
  EXPECT_NE(good, dropped);
  EXPECT_NE(good, swapped);
  std::vector<uint8_t> again;
  ASSERT_TRUE(pack_cpu(src, 0, 0, 8, &again).ok);
  EXPECT_EQ(good, again);
  auto trunc = good;
  trunc.pop_back();
  Cache dst = make_window_cache(lay, {8}, 0, 6);
  EXPECT_FALSE(unpack_cpu(dst, 0, 0, trunc).ok);
  {
    PackFaultScope f(PackFault::accept_truncated);
    EXPECT_TRUE(unpack_cpu(dst, 0, 0, trunc).ok);
  }
}

// ---- host mutation sweep round 19 (reports/mutation-sweep/host-19-local/) ----

// The data starts past the whole field table for every layout. Ten fields (five layers of one bf16
// head) end their table at byte 544, past the 256-byte boundary nine entries reach: a plan one entry
// short put the first field's data at 512, over the last entry (blob-data-offset-one-entry-short),
// and such a blob no longer round-trips.
TEST(PackBlob, DataStartsPastTheWholeFieldTable) {
  for (int layers = 1; layers <= 12; ++layers)
    for (int heads : {1, 2, 3})
      for (Format f : {Format::bf16, Format::fp8}) {
        const KvLayout lay(layers, heads, 64, f);
        EXPECT_GE(pack_plan(lay, 3).data_offset, kPackHeaderBytes + uint64_t(kPackFieldEntryBytes) * lay.field_count())
            << format_name(f) << " layers " << layers << " kv_heads " << heads;
      }
  const KvLayout lay(5, 1, 64, Format::bf16);
  ASSERT_EQ(lay.field_count(), 10);
  const Cache src = make_window_cache(lay, {8}, 0, 3);
  std::vector<uint8_t> blob;
  ASSERT_TRUE(pack_cpu(src, 0, 0, 8, &blob).ok);
  Cache dst = make_window_cache(lay, {8}, 0, 4);
  const Status st = unpack_cpu(dst, 0, 0, blob);
  ASSERT_TRUE(st.ok) << st.message;
  for (int f = 0; f < lay.field_count(); ++f)
    for (int p = 0; p < 8; ++p)
      EXPECT_EQ(std::memcmp(kv_field_row(dst.view(0), f, p), kv_field_row(src.view(0), f, p), lay.field(f).bytes_per_pos), 0)
          << "field " << f << " position " << p;
}

}  // namespace
}  // namespace kc
