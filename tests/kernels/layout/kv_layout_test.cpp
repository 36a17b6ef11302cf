// Properties of the layout declaration and of kv_row / kv_scale.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "kernels/layout/cache.h"
#include "kernels/layout/kv_layout.h"

namespace kc {
namespace {

TEST(KvLayout, FieldTableCoversAPositionExactly) {
  for (Format f : {Format::bf16, Format::fp8, Format::q4, Format::mxfp4}) {
    const KvLayout lay(3, 4, 256, f);
    uint64_t sum = 0, expect_off = 0;
    for (int i = 0; i < lay.field_count(); ++i) {
      const FieldInfo fi = lay.field(i);
      EXPECT_EQ(fi.offset_per_ptok, expect_off) << format_name(f) << " field " << i;
      expect_off += fi.bytes_per_pos;
      sum += fi.bytes_per_pos;
    }
    EXPECT_EQ(sum, lay.pos_bytes) << format_name(f);
  }
  EXPECT_EQ(KvLayout(1, 1, 256, Format::q4).code_bytes + KvLayout(1, 1, 256, Format::q4).scale_bytes, 144u);
}

// Every (field, pos) of a paged lane maps to its own bytes inside the lane's pages,
// and the window mapping is the documented expression.
RC_GTEST_PROP(KvLayout, PagedRowsAreDisjointAndInsideTheirPages, ()) {
  const int L = *rc::gen::inRange(1, 3);
  const int H = *rc::gen::inRange(1, 4);
  const int d = *rc::gen::element(32, 64, 128, 256);
  const Format f = *rc::gen::element(Format::bf16, Format::fp8, Format::q4, Format::mxfp4);
  const int ptok = *rc::gen::element(1, 3, 7, 16, 48);
  const int len = *rc::gen::inRange(1, 60);
  const KvLayout lay(L, H, d, f);
  const int npages = (len + ptok - 1) / ptok;
  const int arena_pages = npages + 2;
  std::vector<int32_t> pt(arena_pages);
  std::iota(pt.begin(), pt.end(), 0);
  std::shuffle(pt.begin(), pt.end(), std::mt19937(*rc::gen::arbitrary<unsigned>()));
  pt.resize(npages);
  std::vector<uint8_t> mem(lay.page_stride(ptok) * arena_pages);
  KvView v{mem.data(), pt.data(), ptok, lay.page_stride(ptok), lay};
  std::vector<uint8_t> owner(mem.size(), 0);
  for (int pos = 0; pos < len; ++pos)
    for (int fld = 0; fld < lay.field_count(); ++fld) {
      const uint8_t* p = kv_field_row(v, fld, pos);
      const uint64_t off = p - mem.data();
      const uint64_t page = off / v.ps;
      RC_ASSERT(page == uint64_t(pt[pos / ptok]));
      RC_ASSERT(off + lay.field(fld).bytes_per_pos <= (page + 1) * v.ps);
      for (uint32_t b = 0; b < lay.field(fld).bytes_per_pos; ++b) {
        RC_ASSERT(owner[off + b] == 0);
        owner[off + b] = 1;
      }
    }
  // Window: pos * row_bytes inside each plane.
  KvView w{mem.data(), nullptr, len, 0, lay};
  const int layer = *rc::gen::inRange(0, L), kv = *rc::gen::inRange(0, 2), head = *rc::gen::inRange(0, H);
  const int pos = *rc::gen::inRange(0, len);
  const uint64_t plane = lay.plane_index(layer, kv, head);
  RC_ASSERT(uint64_t(kv_row(w, layer, kv, head, pos) - mem.data()) ==
            plane * lay.code_bytes * len + uint64_t(pos) * lay.code_bytes);
  if (lay.scale_bytes)
    RC_ASSERT(uint64_t(kv_scale(w, layer, kv, head, pos) - mem.data()) ==
              uint64_t(lay.planes()) * lay.code_bytes * len + plane * lay.scale_bytes * len +
                  uint64_t(pos) * lay.scale_bytes);
}

TEST(Cache, ValidateRejectsPagesOutsideTheArena) {
  Cache c;
  c.lay = KvLayout(1, 1, 64, Format::fp8);
  c.mem.resize(c.lay.page_stride(4) * 2);
  c.pts = {0, 2};
  ViewDesc d;
  d.base_off = 0;
  d.pt_off = 0;
  d.n_pages = 2;
  d.ptok = 4;
  d.ps = c.lay.page_stride(4);
  c.views = {d};
  const Status st = c.validate();
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("outside the arena"), std::string::npos) << st.message;
  c.pts = {1, 0};
  EXPECT_TRUE(c.validate().ok);
}

}  // namespace
}  // namespace kc
