// The benches in a build without the cuda backend: each says so (the command line turns
// it into exit 2, bad input).
#include "bench/attention.h"
#include "bench/pack.h"
#include "bench/rope_store.h"

namespace kc {

Status bench_attention_config(const AttnBenchConfig&, int, int, AttnBenchResult*) {
  return Status::Error("bench needs the cuda backend (this build has none)");
}
Status bench_launch_floor(const std::string&, int, double*) {
  return Status::Error("bench needs the cuda backend (this build has none)");
}
Status bench_read_ceiling(size_t, int, double*) { return Status::Error("bench needs the cuda backend (this build has none)"); }
Status bench_pack_config(const PackBenchConfig&, int, int, PackBenchResult*) {
  return Status::Error("bench needs the cuda backend (this build has none)");
}
Status bench_rope_store_config(const MoveBenchConfig&, int, int, MoveBenchResult*) {
  return Status::Error("bench needs the cuda backend (this build has none)");
}
Status bench_compact_config(const MoveBenchConfig&, int, int, MoveBenchResult*) {
  return Status::Error("bench needs the cuda backend (this build has none)");
}
Status bench_copy_ceiling(uint64_t, int, int, bool, CopyCeiling*) {
  return Status::Error("bench needs the cuda backend (this build has none)");
}

}  // namespace kc
