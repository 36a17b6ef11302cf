#include <string>

#include "kernels/backend.h"

namespace kc {

Status validate_rows(const Cache& cache, const RowRef* rows, int n) {
  KC_RETURN_IF_ERROR(cache.validate());
  const KvLayout& L = cache.lay;
  for (int i = 0; i < n; ++i) {
    const RowRef& r = rows[i];
    const std::string who = "row " + std::to_string(i) + ": ";
    if (r.lane < 0 || r.lane >= int(cache.views.size())) return Status::Error(who + "lane out of range");
    if (r.layer < 0 || r.layer >= L.layers) return Status::Error(who + "layer out of range");
    if (r.kv < 0 || r.kv > 1) return Status::Error(who + "kv must be 0 (K) or 1 (V)");
    if (r.head < 0 || r.head >= L.kv_heads) return Status::Error(who + "head out of range");
    if (r.pos < 0 || r.pos >= cache.views[r.lane].capacity())
      return Status::Error(who + "position " + std::to_string(r.pos) + " outside the lane's capacity " +
                           std::to_string(cache.views[r.lane].capacity()));
  }
  return Status::Ok();
}

}  // namespace kc
