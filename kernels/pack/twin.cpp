// Scale-plane packing: host twins of the gather (pack) and scatter (unpack) kernels in
// pack/pack.cu. The same jobs (pack_copies: one per declared field, in declaration order)
// and the same addressing (kv_field_row for every row); the device splits each job into
// page-contiguous segments, which moves the same bytes to the same places.
#include <cstring>

#include "kernels/pack/pack.h"
#include "kernels/pack/blob.h"

namespace kc {

Status pack_cpu(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob) {
  KC_RETURN_IF_ERROR(pack_check_range(c, lane, pos0, count, "pack"));
  const PackPlan plan = pack_plan(c.lay, uint64_t(count));
  blob->assign(plan.total_bytes, 0);
  pack_write_header(plan, blob->data());
  const KvView v = c.view(lane);
  uint8_t* data = blob->data() + plan.data_offset;
  for (const PackCopy& cp : pack_copies(plan, PackDirection::pack))
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(data + cp.data_off + uint64_t(i) * cp.bytes_per_pos, kv_field_row(v, cp.cache_field, pos0 + i),
                  cp.bytes_per_pos);
  pack_seal(*blob);
  return Status::Ok();
}

Status unpack_cpu(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob) {
  KC_RETURN_IF_ERROR(pack_check_range(c, lane, pos0, 0, "unpack"));
  PackOpened o;
  KC_RETURN_IF_ERROR(pack_open(blob, c.lay, &o));
  KC_RETURN_IF_ERROR(pack_check_range(c, lane, pos0, int64_t(o.plan.count), "unpack"));
  const KvView v = c.view(lane);
  for (const PackCopy& cp : pack_copies(o.plan, PackDirection::unpack))
    for (uint64_t i = 0; i < o.plan.count; ++i)
      std::memcpy(kv_field_row(v, cp.cache_field, pos0 + int64_t(i)), o.data + cp.data_off + i * cp.bytes_per_pos,
                  cp.bytes_per_pos);
  return Status::Ok();
}

}  // namespace kc
