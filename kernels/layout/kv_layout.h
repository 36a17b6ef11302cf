// The KV layout declaration and the one addressing helper.
//
// One page holds `ptok` positions of every attention layer's K and V for every KV head.
// Inside a page each *field* is a plane of ptok rows. The declaration is the ordered
// field list below:
//   fields [0, C)        code planes, C = layers * 2 * kv_heads, index ((layer*2)+kv)*H+head
//   fields [C, 2C)       scale planes (formats with scales only), same order
// A field's plane starts at ptok * (sum of bytes_per_pos of the fields before it).
// Everything that touches the cache (kv_row, kv_scale, arena sizing, the packer, the
// contracts' poisoning and guard checks) derives from field()/field_count(); there is
// never a second list of fields.
//
// A window (contiguous lane) is the same plane layout with ptok = the window's capacity
// and no page table, so kv_row(pos) is `base + plane offset + pos * row_bytes` there and
// `base + pt[pos / ptok] * ps + plane offset + (pos % ptok) * row_bytes` on pages. Only
// the address differs between the two modes.
#pragma once
#include <cstdint>

#include "kernels/layout/kc_hd.h"

namespace kc {

enum class Format : uint8_t { bf16 = 0, fp8 = 1, q4 = 2, mxfp4 = 3 };
constexpr Format kLastFormat = Format::mxfp4;  // the largest value (blobs name formats by number)

KC_HD const char* format_name(Format f) {
  switch (f) {
    case Format::bf16: return "bf16";
    case Format::fp8: return "fp8";
    case Format::q4: return "q4";
    case Format::mxfp4: return "mxfp4";
  }
  return "?";
}

// Bytes of one (position, layer, K/V, head) code row and of its scale entry.
KC_HD uint32_t format_code_bytes(Format f, int head_dim) {
  switch (f) {
    case Format::bf16: return 2u * head_dim;
    case Format::fp8: return 1u * head_dim;
    case Format::q4: return head_dim / 2u;     // 4-bit codes, 16 bytes per group of 32
    case Format::mxfp4: return head_dim / 2u;  // E2M1 pairs
  }
  return 0;
}
KC_HD uint32_t format_scale_bytes(Format f, int head_dim) {
  switch (f) {
    case Format::bf16: return 0;
    case Format::fp8: return 4;                    // one fp32 scale per row
    case Format::q4: return 2u * (head_dim / 32);  // one fp16 scale per group of 32
    case Format::mxfp4: return head_dim / 32u;     // one E8M0 exponent per group of 32
  }
  return 0;
}

enum class FieldKind : uint8_t { codes = 0, scales = 1 };

struct FieldInfo {
  FieldKind kind;
  int layer;
  int kv;  // 0 = K, 1 = V
  int head;
  uint32_t bytes_per_pos;
  uint64_t offset_per_ptok;  // plane offset inside a page = offset_per_ptok * ptok
};

struct KvLayout {
  int layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
  Format format = Format::bf16;
  uint32_t code_bytes = 0;   // per row
  uint32_t scale_bytes = 0;  // per row
  uint64_t pos_bytes = 0;    // kv_bytes(1): one position of every field

  KvLayout() = default;
  KC_HD KvLayout(int layers_, int kv_heads_, int head_dim_, Format f)
      : layers(layers_), kv_heads(kv_heads_), head_dim(head_dim_), format(f),
        code_bytes(format_code_bytes(f, head_dim_)),
        scale_bytes(format_scale_bytes(f, head_dim_)),
        pos_bytes(uint64_t(layers_) * 2 * kv_heads_ * (code_bytes + scale_bytes)) {}

  KC_HD int planes() const { return layers * 2 * kv_heads; }
  KC_HD int field_count() const { return scale_bytes ? 2 * planes() : planes(); }
  KC_HD int plane_index(int layer, int kv, int head) const {
    return (layer * 2 + kv) * kv_heads + head;
  }
  // The declaration: field f's name parts, width and plane offset.
  KC_HD FieldInfo field(int f) const {
    const int C = planes();
    const bool is_scale = f >= C;
    const int p = is_scale ? f - C : f;
    FieldInfo fi;
    fi.kind = is_scale ? FieldKind::scales : FieldKind::codes;
    fi.head = p % kv_heads;
    fi.kv = (p / kv_heads) % 2;
    fi.layer = p / (2 * kv_heads);
    fi.bytes_per_pos = is_scale ? scale_bytes : code_bytes;
    fi.offset_per_ptok = is_scale ? uint64_t(C) * code_bytes + uint64_t(p) * scale_bytes
                                  : uint64_t(p) * code_bytes;
    return fi;
  }
  KC_HD uint64_t kv_bytes(uint64_t positions) const { return positions * pos_bytes; }
  // Page stride: the positions of every field, rounded up to 256 bytes so every plane
  // of every page starts aligned for 16-byte vector access.
  KC_HD uint64_t page_stride(int ptok) const { return (kv_bytes(ptok) + 255) / 256 * 256; }
};

// A lane's view of the cache: paged (pt != nullptr) or window (pt == nullptr, ptok is the
// window's capacity in positions, base its first byte).
struct KvView {
  uint8_t* base = nullptr;
  const int32_t* pt = nullptr;
  int32_t ptok = 0;
  uint64_t ps = 0;
  KvLayout lay;
};

// One field's plane in one lane, resolved once (field offset and width): kernels that
// walk many positions of a plane resolve it outside their loop. kv_pos + kv_plane_at
// (kv_plane_row) is the one addressing expression; kv_field_row / kv_row / kv_scale are
// built on it. Positions are below 2^31 (RowRef, AttnRow and KeepMove carry int32
// positions), so the page split is 32-bit arithmetic.
struct KvPlane {
  uint8_t* base = nullptr;
  const int32_t* pt = nullptr;
  uint32_t ptok = 0;
  uint64_t ps = 0;
  uint64_t plane_off = 0;  // the field's plane offset inside a page (or the window)
  uint32_t bytes = 0;      // bytes per position of the field
};

KC_HD KvPlane kv_plane(const KvView& v, int field) {
  const FieldInfo fi = v.lay.field(field);
  KvPlane p;
  p.base = v.base;
  p.pt = v.pt;
  p.ptok = uint32_t(v.ptok);
  p.ps = v.ps;
  p.plane_off = fi.offset_per_ptok * uint64_t(v.ptok);
  p.bytes = fi.bytes_per_pos;
  return p;
}
KC_HD KvPlane kv_plane(const KvView& v, int layer, int kv, int head, bool scales = false) {
  return kv_plane(v, (scales ? v.lay.planes() : 0) + v.lay.plane_index(layer, kv, head));
}

// A position split into its page's byte offset and its slot in the page: the same for
// every plane of one view (they share the page table and page size), so a kernel that
// reads several planes at one position splits it once.
struct KvPos {
  uint64_t page_base = 0;
  uint32_t slot = 0;
};
KC_HD KvPos kv_pos(const KvPlane& p, int64_t pos) {
  const uint32_t u = uint32_t(pos);
  const uint32_t page = u / p.ptok;
  KvPos r;
  r.slot = u - page * p.ptok;
#ifdef KC_PLANT_KVROW_PAGE_STRIDE
  r.page_base = p.pt ? uint64_t(p.pt[page]) * (p.ps - 256) : 0;  // planted bug (test builds only)
#elif defined(KC_PLANT_KV_OFFSET_32BIT)
  r.page_base = p.pt ? uint64_t(uint32_t(p.pt[page]) * uint32_t(p.ps)) : 0;  // planted bug (test builds only)
#else
  r.page_base = p.pt ? uint64_t(p.pt[page]) * p.ps : 0;
#endif
  return r;
}
KC_HD uint8_t* kv_plane_at(const KvPlane& p, const KvPos& at) {
  return p.base + at.page_base + p.plane_off + uint64_t(at.slot) * p.bytes;
}
KC_HD uint8_t* kv_plane_row(const KvPlane& p, int64_t pos) { return kv_plane_at(p, kv_pos(p, pos)); }

KC_HD uint8_t* kv_field_row(const KvView& v, int field, int64_t pos) { return kv_plane_row(kv_plane(v, field), pos); }

KC_HD uint8_t* kv_row(const KvView& v, int layer, int kv, int head, int64_t pos) {
  return kv_field_row(v, v.lay.plane_index(layer, kv, head), pos);
}

KC_HD uint8_t* kv_scale(const KvView& v, int layer, int kv, int head, int64_t pos) {
  return kv_field_row(v, v.lay.planes() + v.lay.plane_index(layer, kv, head), pos);
}

}  // namespace kc
