// Scale-plane packing: the versioned host blob a run of a lane's positions is saved to,
// and the host-side code that builds, seals, opens and checks it. Shared by the host twin
// (pack/twin.cpp) and the CUDA path (pack/pack.cu); the kernels only move field rows.
//
// What is packed: positions [pos0, pos0 + count) of one lane, every field the layout
// declares (KvLayout::field(0 .. field_count()-1): code planes, then scale planes), in
// declaration order. The field list is never repeated here: the table is derived from
// KvLayout::field() alone.
//
// Blob format, version kPackLayoutVersion (all integers little-endian):
//   offset  bytes  header (kPackHeaderBytes = 64)
//    0      8      magic "KCPLANES"
//    8      4      layout version (kPackLayoutVersion)
//   12      4      header bytes (64)
//   16      4      format (Format: 0 bf16, 1 fp8, 2 q4, 3 mxfp4)
//   20      4      layers
//   24      4      kv_heads
//   28      4      head_dim
//   32      4      field count (KvLayout::field_count())
//   36      4      field entry bytes (kPackFieldEntryBytes = 48)
//   40      8      count (positions)
//   48      8      data offset (first byte of field 0's data)
//   56      8      total bytes (the whole blob, checksum included)
//   64      field table: one 48-byte entry per field, in declaration order:
//            0  32  name, NUL-padded: "L<layer>.<K|V>.h<head>.<codes|scales>"
//           32   4  bytes per position
//           36   4  kind (0 codes, 1 scales)
//           40   8  offset of the field's data in the blob
//   then zero padding up to the data offset = round_up(64 + 48 * fields, 256);
//   data, field-major: field f's `count` rows (bytes_per_pos each) contiguous at its
//     offset; offset(0) = data offset, offset(f+1) = round_up(offset(f) + count *
//     bytes_per_pos(f), 16) (zero padding between fields, so every field starts
//     16-byte aligned for vector access);
//   data end = round_up(offset(last) + count * bytes_per_pos(last), 16);
//   checksum: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over
//     bytes [0, data end), stored as a u64 at data end; total bytes = data end + 8.
// Opening a blob (pack_open) refuses, with a message "unpack: refused: <reason>: ..."
// naming the field where one is at fault, in this order: shorter than a header
// ("truncated"), a wrong magic ("bad magic"), a layout version other than
// kPackLayoutVersion ("layout version"), a header whose sizes disagree with its own
// count ("header"), a blob shorter / longer than its header says ("truncated" /
// "oversized"), a checksum mismatch ("checksum"), a format other than the cache's
// ("format"), a shape other than the cache's ("shape"), a field table entry other than
// the declaration's ("field table", names the field). The range check ("outside the
// lane") is pack_check_range. A refused blob writes nothing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/layout/cache.h"
#include "kernels/layout/status.h"

namespace kc {

constexpr char kPackMagic[8] = {'K', 'C', 'P', 'L', 'A', 'N', 'E', 'S'};
constexpr uint32_t kPackLayoutVersion = 1;
constexpr uint32_t kPackHeaderBytes = 64;
constexpr uint32_t kPackFieldEntryBytes = 48;
constexpr uint32_t kPackNameBytes = 32;
constexpr uint64_t kPackChecksumBytes = 8;

// One field of the table (derived from KvLayout::field).
struct PackField {
  std::string name;
  uint32_t bytes_per_pos = 0;
  FieldKind kind = FieldKind::codes;
  uint64_t offset = 0;  // of its data, in the blob
};

struct PackPlan {
  KvLayout lay;
  uint64_t count = 0;
  std::vector<PackField> fields;
  uint64_t data_offset = 0;
  uint64_t data_end = 0;  // the checksum's offset
  uint64_t total_bytes = 0;
  uint64_t data_bytes() const { return data_end - data_offset; }
};

// One row copy job: blob field `blob_field`'s data (at data_off, relative to the data
// offset) <-> the cache plane of declared field `cache_field`, bytes_per_pos each.
struct PackCopy {
  int32_t cache_field;
  uint32_t bytes_per_pos;
  uint64_t data_off;
};

// "L0.K.h1.codes", "L2.V.h3.scales".
std::string pack_field_name(const FieldInfo& fi);
PackPlan pack_plan(const KvLayout& lay, uint64_t count);
// Writes the header and the field table into blob[0, data_offset) (blob holds total_bytes).
void pack_write_header(const PackPlan& plan, uint8_t* blob);
uint64_t pack_checksum(const uint8_t* p, size_t n);
// Computes the checksum over [0, data_end) and stores it at data_end.
void pack_seal(std::vector<uint8_t>& blob);

enum class PackDirection { pack, unpack };
// The copy jobs: one per field of the plan (the packers' only field loop).
std::vector<PackCopy> pack_copies(const PackPlan& plan, PackDirection dir);

// Request checks shared by both backends: the cache is valid, the lane exists, and
// [pos0, pos0 + count) lies inside the lane's capacity.
Status pack_check_range(const Cache& c, int lane, int64_t pos0, int64_t count, const char* who);

// An opened (checked) blob: its plan and the first byte of its data region.
struct PackOpened {
  PackPlan plan;
  const uint8_t* data = nullptr;  // blob + data_offset
  std::vector<uint8_t> padded;    // storage for a lenient read (planted faults only)
};
Status pack_open(const std::vector<uint8_t>& blob, const KvLayout& lay, PackOpened* out);

// Planted faults for the scale-planes contract's controls (a deliberately broken packer
// path, selected at run time; none by default). Both backends read it.
enum class PackFault {
  none,
  drop_scale_plane,      // pack leaves one scale field's data zero
  swap_kv_scales,        // pack writes layer 0 head 0's V scales as its K scales and back
  accept_stale_version,  // open skips the layout-version check
  accept_truncated,      // open reads a short blob leniently (missing bytes read as zero)
  skip_checksum,         // open skips the checksum check
};
PackFault pack_fault();
class PackFaultScope {
 public:
  explicit PackFaultScope(PackFault f);
  ~PackFaultScope();
  PackFaultScope(const PackFaultScope&) = delete;
  PackFaultScope& operator=(const PackFaultScope&) = delete;

 private:
  PackFault prev_;
};

}  // namespace kc
