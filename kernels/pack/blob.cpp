// Scale-plane packing: the blob format (see pack/blob.h for the byte layout).
#include "kernels/pack/blob.h"

#include <atomic>
#include <bit>
#include <cstring>

#include "kernels/layout/bits.h"  // fnv1a

namespace kc {

static_assert(std::endian::native == std::endian::little, "the blob format is little-endian; add byte swaps here");

namespace {

std::atomic<PackFault> g_fault{PackFault::none};

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

template <class T>
void put(uint8_t* p, uint64_t off, T v) {
  std::memcpy(p + off, &v, sizeof(T));
}
template <class T>
T get(const uint8_t* p, uint64_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

Status refuse(const std::string& reason, const std::string& detail) {
  return Status::Error("unpack: refused: " + reason + ": " + detail);
}

}  // namespace

PackFault pack_fault() { return g_fault.load(); }
PackFaultScope::PackFaultScope(PackFault f) : prev_(g_fault.exchange(f)) {}
PackFaultScope::~PackFaultScope() { g_fault.store(prev_); }

std::string pack_field_name(const FieldInfo& fi) {
  return "L" + std::to_string(fi.layer) + (fi.kv ? ".V" : ".K") + ".h" + std::to_string(fi.head) +
         (fi.kind == FieldKind::scales ? ".scales" : ".codes");
}

PackPlan pack_plan(const KvLayout& lay, uint64_t count) {
  PackPlan p;
  p.lay = lay;
  p.count = count;
#ifdef KC_PLANT_PACK_SKIP_SCALES
  const int n = lay.planes();  // planted bug (test builds only): a packer with its own field list, codes only
#else
  const int n = lay.field_count();
#endif
  p.data_offset = round_up(kPackHeaderBytes + uint64_t(kPackFieldEntryBytes) * n, 256);
  uint64_t off = p.data_offset;
  for (int f = 0; f < n; ++f) {
    const FieldInfo fi = lay.field(f);
    p.fields.push_back({pack_field_name(fi), fi.bytes_per_pos, fi.kind, off});
    off = round_up(off + count * fi.bytes_per_pos, 16);
  }
  p.data_end = off;
  p.total_bytes = off + kPackChecksumBytes;
  return p;
}

void pack_write_header(const PackPlan& p, uint8_t* b) {
  std::memcpy(b, kPackMagic, 8);
  put<uint32_t>(b, 8, kPackLayoutVersion);
  put<uint32_t>(b, 12, kPackHeaderBytes);
  put<uint32_t>(b, 16, uint32_t(p.lay.format));
  put<uint32_t>(b, 20, uint32_t(p.lay.layers));
  put<uint32_t>(b, 24, uint32_t(p.lay.kv_heads));
  put<uint32_t>(b, 28, uint32_t(p.lay.head_dim));
  put<uint32_t>(b, 32, uint32_t(p.fields.size()));
  put<uint32_t>(b, 36, kPackFieldEntryBytes);
  put<uint64_t>(b, 40, p.count);
  put<uint64_t>(b, 48, p.data_offset);
  put<uint64_t>(b, 56, p.total_bytes);
  for (size_t f = 0; f < p.fields.size(); ++f) {
    uint8_t* e = b + kPackHeaderBytes + f * kPackFieldEntryBytes;
    std::memset(e, 0, kPackFieldEntryBytes);
    std::memcpy(e, p.fields[f].name.data(), std::min<size_t>(p.fields[f].name.size(), kPackNameBytes - 1));
    put<uint32_t>(e, 32, p.fields[f].bytes_per_pos);
    put<uint32_t>(e, 36, uint32_t(p.fields[f].kind));
    put<uint64_t>(e, 40, p.fields[f].offset);
  }
}

uint64_t pack_checksum(const uint8_t* p, size_t n) {
  return fnv1a(p, n);
}

void pack_seal(std::vector<uint8_t>& blob) {
  const uint64_t end = blob.size() - kPackChecksumBytes;
  put<uint64_t>(blob.data(), end, pack_checksum(blob.data(), end));
}

std::vector<PackCopy> pack_copies(const PackPlan& plan, PackDirection dir) {
  std::vector<PackCopy> out;
  const PackFault fault = dir == PackDirection::pack ? pack_fault() : PackFault::none;
  const int C = plan.lay.planes();
  bool dropped = false;
  for (size_t f = 0; f < plan.fields.size(); ++f) {
    const PackField& pf = plan.fields[f];
    int src = int(f);
    if (pf.kind == FieldKind::scales) {
      if (fault == PackFault::drop_scale_plane && !dropped) {
        dropped = true;  // its data stays zero
        continue;
      }
      if (fault == PackFault::swap_kv_scales) {
        const FieldInfo fi = plan.lay.field(src);
        src = C + plan.lay.plane_index(fi.layer, 1 - fi.kv, fi.head);
      }
    }
    out.push_back({src, pf.bytes_per_pos, pf.offset - plan.data_offset});
  }
  return out;
}

Status pack_check_range(const Cache& c, int lane, int64_t pos0, int64_t count, const char* who) {
  KC_RETURN_IF_ERROR(c.validate());
  if (lane < 0 || lane >= int(c.views.size()))
    return Status::Error(std::string(who) + ": lane " + std::to_string(lane) + " out of range (" +
                         std::to_string(c.views.size()) + " lanes)");
  const int64_t cap = c.views[lane].capacity();
  if (pos0 < 0 || count < 0 || pos0 > cap || count > cap - pos0)
    return Status::Error(std::string(who) + ": refused: positions [" + std::to_string(pos0) + ", " +
                         std::to_string(pos0) + "+" + std::to_string(count) + ") outside the lane's capacity " +
                         std::to_string(cap));
  return Status::Ok();
}

Status pack_open(const std::vector<uint8_t>& blob, const KvLayout& lay, PackOpened* out) {
  const PackFault fault = pack_fault();
  const uint8_t* b = blob.data();
  const uint64_t n = blob.size();
  if (n < kPackHeaderBytes)
    return refuse("truncated", std::to_string(n) + " bytes, shorter than the " + std::to_string(kPackHeaderBytes) +
                                   "-byte header");
  if (std::memcmp(b, kPackMagic, 8) != 0) return refuse("bad magic", "the blob does not start with \"KCPLANES\"");
  const uint32_t version = get<uint32_t>(b, 8);
  if (version != kPackLayoutVersion && fault != PackFault::accept_stale_version)
    return refuse("layout version", "blob has " + std::to_string(version) + ", this build reads " +
                                        std::to_string(kPackLayoutVersion));
  const uint32_t fmt = get<uint32_t>(b, 16), layers = get<uint32_t>(b, 20), heads = get<uint32_t>(b, 24),
                 hd = get<uint32_t>(b, 28), nfields = get<uint32_t>(b, 32);
  const uint64_t count = get<uint64_t>(b, 40), data_offset = get<uint64_t>(b, 48), total = get<uint64_t>(b, 56);
  if (get<uint32_t>(b, 12) != kPackHeaderBytes || get<uint32_t>(b, 36) != kPackFieldEntryBytes)
    return refuse("header", "header / field entry sizes are not " + std::to_string(kPackHeaderBytes) + " / " +
                                std::to_string(kPackFieldEntryBytes));
  if (fmt > uint32_t(kLastFormat) || layers == 0 || heads == 0 || hd == 0 || layers > 4096 || heads > 4096 ||
      hd > 65536 || count > (uint64_t(1) << 40))
    return refuse("header", "format " + std::to_string(fmt) + ", shape " + std::to_string(layers) + "x" +
                                std::to_string(heads) + "x" + std::to_string(hd) + ", count " + std::to_string(count) +
                                " out of range");
  // The blob's own layout, planned from its header: sizes must agree with it.
  const KvLayout blay{int(layers), int(heads), int(hd), Format(fmt)};
  PackPlan bplan = pack_plan(blay, count);
  if (nfields != bplan.fields.size() || data_offset != bplan.data_offset || total != bplan.total_bytes)
    return refuse("header", "field count " + std::to_string(nfields) + ", data offset " + std::to_string(data_offset) +
                                ", total " + std::to_string(total) + " disagree with the header's own shape and count " +
                                "(expected " + std::to_string(bplan.fields.size()) + ", " +
                                std::to_string(bplan.data_offset) + ", " + std::to_string(bplan.total_bytes) + ")");
  out->padded.clear();
  if (n < total) {
    if (fault != PackFault::accept_truncated)
      return refuse("truncated", std::to_string(n) + " bytes, the header says " + std::to_string(total));
    out->padded.assign(total, 0);  // planted lenient reader: what is missing reads as zero
    std::memcpy(out->padded.data(), b, n);
    b = out->padded.data();
  } else if (n > total) {
    return refuse("oversized", std::to_string(n) + " bytes, the header says " + std::to_string(total));
  }
  const uint64_t want = get<uint64_t>(b, bplan.data_end);
  const uint64_t got = pack_checksum(b, bplan.data_end);
  if (want != got && fault != PackFault::skip_checksum && fault != PackFault::accept_truncated)
    return refuse("checksum", "FNV-1a 64 over the first " + std::to_string(bplan.data_end) +
                                  " bytes does not match the stored checksum");
  // The cache's layout declaration against the blob's.
  if (Format(fmt) != lay.format)
    return refuse("format", std::string("blob is ") + format_name(Format(fmt)) + ", the cache is " +
                                format_name(lay.format));
  if (int(layers) != lay.layers || int(heads) != lay.kv_heads || int(hd) != lay.head_dim)
    return refuse("shape", "blob is layers " + std::to_string(layers) + " x kv_heads " + std::to_string(heads) +
                               " x head_dim " + std::to_string(hd) + ", the cache is " + std::to_string(lay.layers) +
                               " x " + std::to_string(lay.kv_heads) + " x " + std::to_string(lay.head_dim));
  PackPlan plan = pack_plan(lay, count);
  if (nfields != plan.fields.size())
    return refuse("field table", "blob has " + std::to_string(nfields) + " fields, the layout declares " +
                                     std::to_string(plan.fields.size()));
  for (uint32_t f = 0; f < nfields; ++f) {
    const uint8_t* e = b + kPackHeaderBytes + uint64_t(f) * kPackFieldEntryBytes;
    const std::string name(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kPackNameBytes));
    const uint32_t bpp = get<uint32_t>(e, 32), kind = get<uint32_t>(e, 36);
    const uint64_t off = get<uint64_t>(e, 40);
    const PackField& d = plan.fields[f];
    if (name != d.name || bpp != d.bytes_per_pos || kind != uint32_t(d.kind) || off != d.offset)
      return refuse("field table", "field " + std::to_string(f) + " is '" + name + "' (" + std::to_string(bpp) +
                                       " bytes/pos, kind " + std::to_string(kind) + ", offset " + std::to_string(off) +
                                       "), the layout declares '" + d.name + "' (" + std::to_string(d.bytes_per_pos) +
                                       " bytes/pos, kind " + std::to_string(uint32_t(d.kind)) + ", offset " +
                                       std::to_string(d.offset) + ")");
  }
  out->plan = std::move(plan);
  out->data = b + out->plan.data_offset;
  return Status::Ok();
}

}  // namespace kc
