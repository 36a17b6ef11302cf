// Model::forward on the backend's engine (Backend::engine()) and on the host engine a
// decorator without one gets (make_host_engine over the decorator): the same logits bytes,
// so a test's decorator sees the forward the cpu backend runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "engine/ops.h"
#include "kernels/backend/forwarding.h"
#include "kernels/engine/engine_backend.h"
#include "tests/cuda_backend_or_skip.h"

namespace kc::engine {
namespace {

const std::string kFixture = std::string(KC_SOURCE_DIR) + "/fixtures/models/stdlib-bytes-3m";

// Forwards every operation, counting the KV steps; has no engine of its own.
class PassThrough final : public ForwardingBackend {
 public:
  explicit PassThrough(Backend& b) : ForwardingBackend(b) {}
  int kv_calls = 0;
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* r, int n, const float* q, const float* k, const float* v,
                    float* qo) override {
    ++kv_calls;
    return real_.rope_store(c, p, r, n, q, k, v, qo);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* r, int n, const std::vector<int32_t>& t,
                   const float* q, float* o) override {
    ++kv_calls;
    return real_.attention(c, p, r, n, t, q, o);
  }
};

TEST(EngineBackend, DecoratorWithoutEngineGivesTheCpuEnginesBytes) {
  Qwen3Weights w;
  ASSERT_TRUE(load_qwen3_checkpoint(kFixture, &w).ok);
  Model m;
  ASSERT_TRUE(Model::create(w, {}, &m).ok);
  auto cpu = make_cpu_backend();
  ASSERT_NE(cpu->engine(), nullptr);
  PassThrough deco(*cpu);
  ASSERT_EQ(deco.engine(), nullptr);
  const std::vector<int32_t> prompt = encode_prompt("def main():\n");
  std::vector<ForwardRow> rows;
  for (size_t p = 0; p < prompt.size(); ++p) rows.push_back({0, prompt[p], int32_t(p), true});
  Cache a, b;
  ASSERT_TRUE(make_engine_cache(m.kv_layout(), {{32, 0}}, &a).ok);
  ASSERT_TRUE(make_engine_cache(m.kv_layout(), {{32, 0}}, &b).ok);
  std::vector<float> la, lb;
  ASSERT_TRUE(m.forward(*cpu, a, rows, &la).ok);
  ASSERT_TRUE(m.forward(deco, b, rows, &lb).ok);
  EXPECT_EQ(deco.kv_calls, 2 * int(m.config().num_hidden_layers));  // the decorator ran the KV steps
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0);
  EXPECT_EQ(a.mem, b.mem);
  // The host engine holds nothing: hold / release are no-ops that succeed.
  EXPECT_TRUE(cpu->engine()->hold(a).ok);
  EXPECT_TRUE(cpu->engine()->release(a).ok);
}

// matmul_parts: several products over one x give, part by part, the bytes of one matmul
// per part (shapes on both sides of the staged kernel's conditions: K a multiple of 8 or
// not, batches 1..8 and past 8, part sizes not a multiple of the 4 outputs a group takes).
// On cpu the default (one matmul per part); on cuda, when a device is present, the staged
// launch against the cpu twin's bytes, up to the 27B-attention preset's o_proj shape.
struct PartsCase {
  std::vector<int64_t> rows;
  int64_t cols;
  int n;
};

void check_parts(EngineBackend& eb, EngineBackend& twin, const PartsCase& pc, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int count = int(pc.rows.size());
  std::vector<std::vector<uint16_t>> W(count);
  for (int i = 0; i < count; ++i) {
    W[i].resize(size_t(pc.rows[i] * pc.cols));
    for (auto& v : W[i]) {
      float f = nd(g) * 0.05f;
      uint32_t u;
      std::memcpy(&u, &f, 4);
      v = uint16_t(u >> 16);
    }
  }
  std::vector<float> x(size_t(pc.n) * pc.cols);
  for (auto& v : x) v = nd(g);
  // Device (or host) copies through the engine's own memory.
  auto run = [&](EngineBackend& e, bool parts_call, std::vector<std::vector<float>>* ys) {
    void* px;
    ASSERT_TRUE(e.scratch(0, x.size() * 4, &px).ok);
    ASSERT_TRUE(e.upload(px, x.data(), x.size() * 4).ok);
    MatmulPart parts[3];
    for (int i = 0; i < count; ++i) {
      void* pw;
      void* py;
      ASSERT_TRUE(e.scratch(1 + i, W[i].size() * 2, &pw).ok);
      ASSERT_TRUE(e.upload(pw, W[i].data(), W[i].size() * 2).ok);
      ASSERT_TRUE(e.scratch(4 + i, size_t(pc.n) * pc.rows[i] * 4, &py).ok);
      parts[i] = {static_cast<const uint16_t*>(pw), pc.rows[i], static_cast<float*>(py)};
    }
    if (parts_call) {
      const Status st = e.matmul_parts(parts, count, pc.cols, static_cast<const float*>(px), pc.n);
      ASSERT_TRUE(st.ok) << st.message;
    } else {
      for (int i = 0; i < count; ++i)
        ASSERT_TRUE(e.matmul(parts[i].W, parts[i].rows, pc.cols, static_cast<const float*>(px), pc.n, parts[i].y).ok);
    }
    ys->assign(count, {});
    for (int i = 0; i < count; ++i) {
      (*ys)[i].resize(size_t(pc.n) * pc.rows[i]);
      ASSERT_TRUE(e.download((*ys)[i].data(), parts[i].y, (*ys)[i].size() * 4).ok);
    }
  };
  std::vector<std::vector<float>> got, want;
  run(eb, true, &got);
  run(twin, false, &want);
  for (int i = 0; i < count; ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * 4), 0)
        << eb.name() << ": part " << i << " of " << count << ", cols " << pc.cols << ", n " << pc.n;
  }
}

const std::vector<PartsCase> kPartsCases = {
    {{5, 13, 300}, 264, 1}, {{5, 13, 300}, 264, 3},  {{7, 2}, 1032, 8},   {{7, 2}, 1032, 11},
    {{33}, 37, 5},          {{64, 9, 1}, 2056, 2},   {{130, 18}, 8, 4},   {{3, 3, 3}, 16, 8}};

// The forwarding decorators (kernels/backend/forwarding.h) pass each call on to the same
// operation with its arguments in order: pack its pos0 and count, keep its moves, an
// engine's hold_alias to hold_alias (on cuda it shares the base cache's device copy; hold
// makes one of its own). The host engine's hold and hold_alias both do nothing, so only a
// decorator that records the calls sees which one arrived (mutation sweep round 7:
// fwd-pack-count-as-pos, fwd-keep-dropped, fwd-engine-hold-alias-as-hold).
class RecordingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  int64_t pack_p0 = -1, pack_n = -1;
  int keep_moves = 0;
  Status pack(const Cache&, int, int64_t p0, int64_t n, std::vector<uint8_t>*) override {
    pack_p0 = p0, pack_n = n;
    return Status::Ok();
  }
  Status keep(Cache&, const KeepMove*, int n) override {
    keep_moves += n;
    return Status::Ok();
  }
};
class RecordingEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  int holds = 0, aliases = 0, releases = 0;
  Status hold(Cache&) override { return ++holds, Status::Ok(); }
  Status hold_alias(Cache&, Cache&) override { return ++aliases, Status::Ok(); }
  Status release(Cache&) override { return ++releases, Status::Ok(); }
};
class Plain final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
};
class PlainEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
};

TEST(EngineBackend, ForwardingDecoratorsPassEachCallOnUnchanged) {
  auto cpu = make_cpu_backend();
  RecordingBackend rec(*cpu);
  Plain fwd(rec);
  Cache a, b;
  std::vector<uint8_t> blob;
  ASSERT_TRUE(fwd.pack(a, 0, 3, 5, &blob).ok);
  EXPECT_EQ(rec.pack_p0, 3);
  EXPECT_EQ(rec.pack_n, 5);
  const KeepMove moves[2] = {{0, 4, 1}, {0, 6, 2}};
  ASSERT_TRUE(fwd.keep(a, moves, 2).ok);
  EXPECT_EQ(rec.keep_moves, 2);
  RecordingEngine eng(*cpu->engine());
  PlainEngine fe(eng);
  ASSERT_TRUE(fe.hold_alias(a, b).ok);
  ASSERT_TRUE(fe.hold(b).ok);
  ASSERT_TRUE(fe.release(a).ok);
  EXPECT_EQ(eng.aliases, 1);
  EXPECT_EQ(eng.holds, 1);
  EXPECT_EQ(eng.releases, 1);
}

TEST(EngineBackend, MatmulPartsGivesOneMatmulPerPartsBytesOnCpu) {
  auto cpu = make_cpu_backend();
  auto twin_be = make_cpu_backend();
  uint64_t seed = 1;
  for (const PartsCase& pc : kPartsCases) check_parts(*cpu->engine(), *twin_be->engine(), pc, seed++);
}

TEST(EngineBackend, MatmulPartsGivesOneMatmulPerPartsBytesOnCuda) {
  KC_CUDA_BACKEND_OR_SKIP(cuda);
  auto cpu = make_cpu_backend();
  uint64_t seed = 100;
  std::vector<PartsCase> cases = kPartsCases;
  cases.push_back({{6144, 1024, 1024}, 5120, 8});  // the 27B-attention preset's q/k/v (4 groups per block)
  cases.push_back({{5120}, 6144, 8});              // its o_proj (the tree in two passes: 4 groups per block, not 2)
  cases.push_back({{1024, 1024}, 5120, 1});        // gate/up at batch 1
  for (const PartsCase& pc : cases) check_parts(*cuda->engine(), *cpu->engine(), pc, seed++);
}

// add_rms_norm: the residual add and the norm after it give the bytes of add then rms_norm,
// h's sums and out both: on cpu the default (those two calls); on cuda, when a device is
// present, the fused kernel where it applies (rows of at most 8192 floats, dim % 4 == 0,
// 16-byte aligned) and the two launches otherwise, t == h (h doubled) included.
struct AddNormCase {
  int n, dim;
  bool t_is_h;
};
const std::vector<AddNormCase> kAddNormCases = {{1, 8, false},    {8, 5120, false}, {3, 260, false}, {5, 8192, false},
                                                {2, 8196, false}, {4, 6, false},    {8, 5120, true}, {192, 256, false}};

void check_add_norm(EngineBackend& eb, EngineBackend& twin, const AddNormCase& c, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t count = size_t(c.n) * size_t(c.dim);
  std::vector<float> h(count), t(count), w(size_t(c.dim));
  for (auto& v : h) v = nd(g) * 4.0f;
  for (auto& v : t) v = nd(g);
  for (auto& v : w) v = 1.0f + 0.1f * nd(g);
  const float eps = 1e-6f;
  auto run = [&](EngineBackend& e, bool fused, std::vector<float>* h_out, std::vector<float>* y) {
    void *ph, *pt, *pw, *py;
    ASSERT_TRUE(e.scratch(0, count * 4, &ph).ok);
    ASSERT_TRUE(e.scratch(1, count * 4, &pt).ok);
    ASSERT_TRUE(e.scratch(2, w.size() * 4, &pw).ok);
    ASSERT_TRUE(e.scratch(3, count * 4, &py).ok);
    ASSERT_TRUE(e.upload(ph, h.data(), count * 4).ok);
    ASSERT_TRUE(e.upload(pt, t.data(), count * 4).ok);
    ASSERT_TRUE(e.upload(pw, w.data(), w.size() * 4).ok);
    float* hp = static_cast<float*>(ph);
    const float* tp = c.t_is_h ? hp : static_cast<const float*>(pt);
    const float* wp = static_cast<const float*>(pw);
    float* yp = static_cast<float*>(py);
    if (fused) {
      const Status st = e.add_rms_norm(hp, tp, wp, c.n, c.dim, eps, yp);
      ASSERT_TRUE(st.ok) << st.message;
    } else {
      ASSERT_TRUE(e.add(hp, tp, int64_t(count)).ok);
      ASSERT_TRUE(e.rms_norm(hp, wp, c.n, c.dim, eps, yp).ok);
    }
    h_out->resize(count);
    y->resize(count);
    ASSERT_TRUE(e.download(h_out->data(), hp, count * 4).ok);
    ASSERT_TRUE(e.download(y->data(), yp, count * 4).ok);
  };
  std::vector<float> got_h, got_y, want_h, want_y;
  run(eb, true, &got_h, &got_y);
  run(twin, false, &want_h, &want_y);
  const std::string what = eb.name() + ": n " + std::to_string(c.n) + ", dim " + std::to_string(c.dim) +
                           (c.t_is_h ? ", t == h" : "");
  EXPECT_EQ(std::memcmp(got_h.data(), want_h.data(), count * 4), 0) << what << " (h)";
  EXPECT_EQ(std::memcmp(got_y.data(), want_y.data(), count * 4), 0) << what << " (out)";
}

TEST(EngineBackend, AddRmsNormGivesAddThenRmsNormBytesOnCpu) {
  auto cpu = make_cpu_backend();
  auto twin_be = make_cpu_backend();
  uint64_t seed = 500;
  for (const AddNormCase& c : kAddNormCases) check_add_norm(*cpu->engine(), *twin_be->engine(), c, seed++);
}

TEST(EngineBackend, AddRmsNormGivesAddThenRmsNormBytesOnCuda) {
  KC_CUDA_BACKEND_OR_SKIP(cuda);
  auto cpu = make_cpu_backend();
  uint64_t seed = 600;
  for (const AddNormCase& c : kAddNormCases) check_add_norm(*cuda->engine(), *cpu->engine(), c, seed++);
}

// rms_norm_parts: several row sets of one dim give, part by part, the bytes of one rms_norm
// each (on cuda one launch), in place (out == x, the model's q_norm and k_norm) or not,
// parts of 0 rows among them, rows past the 8192-float staging chunk and rows that are not
// a multiple of 4 floats.
struct NormPartsCase {
  int dim;
  std::vector<int> rows;  // each part's
  bool in_place;
};
const std::vector<NormPartsCase> kNormPartsCases = {
    {256, {192, 32}, true}, {128, {1, 1}, false}, {256, {0, 5, 0}, true}, {8196, {3, 2}, false},
    {6, {4, 1, 7, 2}, true}, {5120, {8}, false},  {260, {2, 0}, false},   {8192, {1, 3, 2}, true}};

void check_norm_parts(EngineBackend& eb, EngineBackend& twin, const NormPartsCase& c, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int count = int(c.rows.size());
  std::vector<std::vector<float>> x(count), w(count);
  for (int p = 0; p < count; ++p) {
    x[p].resize(size_t(c.rows[p]) * c.dim);
    w[p].resize(size_t(c.dim));
    for (auto& v : x[p]) v = nd(g) * 3.0f;
    for (auto& v : w[p]) v = 1.0f + 0.1f * nd(g);
  }
  const float eps = 1e-6f;
  // Slots: x of part p in 2p, w in 2p + 1, out (not in place) in 8 + p.
  auto run = [&](EngineBackend& e, bool joined, std::vector<std::vector<float>>* got) {
    NormPart parts[kNormPartsMax];
    for (int p = 0; p < count; ++p) {
      const size_t bytes = std::max<size_t>(x[p].size(), 1) * 4;
      void *px, *pw, *po;
      ASSERT_TRUE(e.scratch(2 * p, bytes, &px).ok);
      ASSERT_TRUE(e.scratch(2 * p + 1, w[p].size() * 4, &pw).ok);
      ASSERT_TRUE(e.scratch(8 + p, bytes, &po).ok);
      if (!x[p].empty()) {
        ASSERT_TRUE(e.upload(px, x[p].data(), x[p].size() * 4).ok);
      }
      ASSERT_TRUE(e.upload(pw, w[p].data(), w[p].size() * 4).ok);
      parts[p] = {static_cast<float*>(px), static_cast<float*>(pw), c.rows[p],
                  c.in_place ? static_cast<float*>(px) : static_cast<float*>(po)};
    }
    if (joined) {
      const Status st = e.rms_norm_parts(parts, count, c.dim, eps);
      ASSERT_TRUE(st.ok) << st.message;
    } else {
      for (int p = 0; p < count; ++p)
        ASSERT_TRUE(e.rms_norm(parts[p].x, parts[p].w, parts[p].n, c.dim, eps, parts[p].out).ok);
    }
    got->assign(count, {});
    for (int p = 0; p < count; ++p) {
      (*got)[p].resize(x[p].size());
      if (!x[p].empty()) {
        ASSERT_TRUE(e.download((*got)[p].data(), parts[p].out, x[p].size() * 4).ok);
      }
    }
  };
  std::vector<std::vector<float>> got, want;
  run(eb, true, &got);
  run(twin, false, &want);
  for (int p = 0; p < count; ++p) {
    ASSERT_EQ(got[p].size(), want[p].size());
    // (a part of 0 rows has no data: memcmp must not see its null pointer, UBSan session 53)
    EXPECT_TRUE(got[p].empty() || std::memcmp(got[p].data(), want[p].data(), got[p].size() * 4) == 0)
        << eb.name() << ": dim " << c.dim << ", part " << p << " of " << count << (c.in_place ? ", in place" : "");
  }
}

TEST(EngineBackend, RmsNormPartsGivesOneRmsNormPerPartsBytesOnCpu) {
  auto cpu = make_cpu_backend();
  auto twin_be = make_cpu_backend();
  uint64_t seed = 700;
  for (const NormPartsCase& c : kNormPartsCases) check_norm_parts(*cpu->engine(), *twin_be->engine(), c, seed++);
}

TEST(EngineBackend, RmsNormPartsGivesOneRmsNormPerPartsBytesOnCuda) {
  KC_CUDA_BACKEND_OR_SKIP(cuda);
  auto cpu = make_cpu_backend();
  uint64_t seed = 800;
  for (const NormPartsCase& c : kNormPartsCases) check_norm_parts(*cuda->engine(), *cpu->engine(), c, seed++);
}

TEST(EngineBackend, RmsNormPartsRefusesBeforeWriting) {
  auto cpu = make_cpu_backend();
  EngineBackend& e = *cpu->engine();
  std::vector<float> x(16, 2.0f), w(8, 1.0f), y0(16, -7.0f), y1(16, -7.0f);
  NormPart parts[kNormPartsMax + 1] = {{x.data(), w.data(), 2, y0.data()}, {x.data(), nullptr, 2, y1.data()},
                                       {x.data(), w.data(), 2, y1.data()}, {x.data(), w.data(), 2, y1.data()},
                                       {x.data(), w.data(), 2, y1.data()}};
  Status st = e.rms_norm_parts(parts, 2, 8, 1e-6f);  // part 1 has no weights
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("rms_norm_parts: part 1: rms_norm: w"), std::string::npos) << st.message;
  EXPECT_EQ(y0[0], -7.0f) << "part 0 written before the refusal";
  st = e.rms_norm_parts(parts, 0, 8, 1e-6f);
  EXPECT_NE(st.message.find("rms_norm_parts: count 0"), std::string::npos) << st.message;
  st = e.rms_norm_parts(parts, kNormPartsMax + 1, 8, 1e-6f);
  EXPECT_NE(st.message.find("rms_norm_parts: count 5"), std::string::npos) << st.message;
  st = e.rms_norm_parts(nullptr, 1, 8, 1e-6f);
  EXPECT_NE(st.message.find("rms_norm_parts: parts: null"), std::string::npos) << st.message;
  st = e.rms_norm_parts(parts, 1, 8, -1.0f);
  EXPECT_NE(st.message.find("rms_norm_parts: part 0: rms_norm: eps"), std::string::npos) << st.message;
  parts[1].w = w.data();
  // A part whose x is another part's output, or whose output is another part's x or
  // output, is refused (one launch and the default would differ); its own x is fine.
  const NormPart chained[2] = {{x.data(), w.data(), 2, y0.data()}, {y0.data() + 8, w.data(), 1, y1.data()}};
  st = e.rms_norm_parts(chained, 2, 8, 0.0f);
  EXPECT_NE(st.message.find("rms_norm_parts: part 1: x overlaps the out of part 0"), std::string::npos) << st.message;
  const NormPart same_out[2] = {{x.data(), w.data(), 2, y0.data()}, {y1.data(), w.data(), 1, y0.data() + 8}};
  st = e.rms_norm_parts(same_out, 2, 8, 0.0f);
  EXPECT_NE(st.message.find("rms_norm_parts: part 1: out overlaps part 0"), std::string::npos) << st.message;
  const NormPart onto_x[2] = {{x.data(), w.data(), 2, y0.data()}, {y1.data(), w.data(), 1, x.data() + 15}};
  st = e.rms_norm_parts(onto_x, 2, 8, 0.0f);
  EXPECT_NE(st.message.find("rms_norm_parts: part 1: out overlaps the x of part 0"), std::string::npos) << st.message;
  EXPECT_EQ(y0[0], -7.0f) << "written before a refusal";
  EXPECT_TRUE(e.rms_norm_parts(parts, 2, 8, 0.0f).ok);
  EXPECT_EQ(y0[0], 1.0f);  // 2 / rms(2, ..., 2)
  EXPECT_EQ(y1[15], 1.0f);
}

// The joined norms' overlap test: adjacent ranges share no byte, one shared byte is an overlap
// either way round, an empty range overlaps nothing (not even inside another range).
TEST(EngineBackend, ByteRangesOverlapAtTheEdges) {
  const char buf[64] = {};
  EXPECT_FALSE(byte_ranges_overlap(buf, 16, buf + 16, 16));
  EXPECT_FALSE(byte_ranges_overlap(buf + 16, 16, buf, 16));
  EXPECT_TRUE(byte_ranges_overlap(buf, 17, buf + 16, 16));
  EXPECT_TRUE(byte_ranges_overlap(buf + 16, 16, buf, 17));
  EXPECT_TRUE(byte_ranges_overlap(buf, 64, buf + 20, 1));
  EXPECT_TRUE(byte_ranges_overlap(buf + 20, 1, buf, 64));
  EXPECT_TRUE(byte_ranges_overlap(buf, 8, buf, 8));
  EXPECT_FALSE(byte_ranges_overlap(buf + 20, 0, buf, 64));
  EXPECT_FALSE(byte_ranges_overlap(buf, 64, buf + 20, 0));
}

// The staged product's tree in one pass and in two (EngineBackend::Debug::tree_passes; the
// default takes two only where shared memory leaves fewer groups per block, o_proj's case
// above) gives the twin's bytes on every case above, K not a multiple of 1024 among them
// (threads past the last octet step without loading), at every batch tile (R 1, 2, 4, 8: a
// pass of 2, 4, 8 or 16 sums), and a count of passes that is not 0, 1 or 2 is refused.
TEST(EngineBackend, MatmulPartsTreePassesGiveTheSameBytesOnCuda) {
  KC_CUDA_BACKEND_OR_SKIP(cuda);
  auto cpu = make_cpu_backend();
  std::vector<PartsCase> cases = kPartsCases;
  cases.push_back({{6144, 1024, 1024}, 5120, 8});
  cases.push_back({{5120}, 6144, 8});
  cases.push_back({{5120}, 1024, 8});  // down_proj: one step per group
  cases.push_back({{1024, 1024}, 5120, 1});
  cases.push_back({{1024, 1024}, 5120, 2});
  cases.push_back({{1024, 1024}, 5120, 4});
  for (int passes : {1, 2}) {
    EngineBackend::Debug d;
    d.tree_passes = passes;
    ASSERT_TRUE(cuda->engine()->set_debug(d).ok);
    uint64_t seed = 300;
    for (const PartsCase& pc : cases) {
      SCOPED_TRACE("tree passes " + std::to_string(passes));
      check_parts(*cuda->engine(), *cpu->engine(), pc, seed++);
    }
  }
  for (int bad_passes : {-1, 3}) {
    EngineBackend::Debug bad;
    bad.tree_passes = bad_passes;
    const Status refused = cuda->engine()->set_debug(bad);
    EXPECT_FALSE(refused.ok) << bad_passes;
    EXPECT_NE(refused.message.find("is not 0, 1 or 2"), std::string::npos) << refused.message;
  }
  ASSERT_TRUE(cuda->engine()->set_debug(EngineBackend::Debug{}).ok);
}

TEST(EngineBackend, MatmulPartsRefusesBeforeWriting) {
  auto cpu = make_cpu_backend();
  EngineBackend& e = *cpu->engine();
  std::vector<uint16_t> W(64, 0x3f80);
  std::vector<float> x(16, 1.0f), y0(32, -7.0f), y1(32, -7.0f);
  MatmulPart parts[4] = {{W.data(), 4, y0.data()}, {W.data(), 0, y1.data()}, {W.data(), 4, y1.data()},
                         {W.data(), 4, y1.data()}};
  Status st = e.matmul_parts(parts, 2, 8, x.data(), 2);  // part 1 has no rows
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("matmul_parts: part 1: matmul: rows 0"), std::string::npos) << st.message;
  EXPECT_EQ(y0[0], -7.0f) << "part 0 written before the refusal";
  st = e.matmul_parts(parts, 0, 8, x.data(), 2);
  EXPECT_NE(st.message.find("matmul_parts: count 0"), std::string::npos) << st.message;
  st = e.matmul_parts(parts, 4, 8, x.data(), 2);
  EXPECT_NE(st.message.find("matmul_parts: count 4"), std::string::npos) << st.message;
  st = e.matmul_parts(nullptr, 1, 8, x.data(), 2);
  EXPECT_NE(st.message.find("matmul_parts: parts: null"), std::string::npos) << st.message;
  parts[1].rows = 4;
  EXPECT_TRUE(e.matmul_parts(parts, 2, 8, x.data(), 2).ok);
  EXPECT_EQ(y0[0], 8.0f);  // 8 products of 1 x 1
}

// The host engine's own range checks (kernels/engine/cpu.cpp, mutation round 6): a token
// outside 0 .. vocab - 1 (vocab itself, -1) is refused naming it, nothing written, and the
// edges 0 and vocab - 1 embed their rows; a scratch slot outside 0 .. kScratchSlots - 1 is
// refused and the last slot accepted.
TEST(EngineBackend, HostEngineRefusesTokensAndSlotsOutsideTheirRange) {
  auto cpu = make_cpu_backend();
  EngineBackend& e = *cpu->engine();
  const int64_t vocab = 4, dim = 2;
  std::vector<uint16_t> E(size_t(vocab * dim));
  for (size_t i = 0; i < E.size(); ++i) E[i] = uint16_t(0x3f80 + 0x10 * i);  // distinct bf16 values
  for (int32_t bad : {int32_t(vocab), int32_t(-1)}) {
    std::vector<float> out(2 * dim, -7.0f);
    const int32_t tokens[2] = {0, bad};
    const Status st = e.embed(E.data(), vocab, dim, tokens, 2, out.data());
    EXPECT_FALSE(st.ok) << "token " << bad;
    EXPECT_NE(st.message.find("tokens[1] " + std::to_string(bad)), std::string::npos) << st.message;
    for (float v : out) EXPECT_EQ(v, -7.0f) << "token " << bad << ": written before the refusal";
  }
  std::vector<float> out(2 * dim, -7.0f);
  const int32_t edges[2] = {0, int32_t(vocab - 1)};
  ASSERT_TRUE(e.embed(E.data(), vocab, dim, edges, 2, out.data()).ok);
  for (int j = 0; j < 2 * dim; ++j) {
    const size_t src = size_t(j < dim ? j : (vocab - 1) * dim + (j - dim));
    EXPECT_EQ(out[size_t(j)], bf16_bits_to_float(E[src])) << j;
  }
  void* p = nullptr;
  for (int slot : {-1, EngineBackend::kScratchSlots}) {
    const Status st = e.scratch(slot, 16, &p);
    EXPECT_FALSE(st.ok) << "slot " << slot;
    EXPECT_NE(st.message.find("slot out of range"), std::string::npos) << st.message;
  }
  EXPECT_TRUE(e.scratch(EngineBackend::kScratchSlots - 1, 16, &p).ok);
  EXPECT_NE(p, nullptr);
}

// argmax writes int32 indices, so a row longer than 2^31 is refused before anything is read or
// written (the pointers are never touched: host memory serves both backends), and a row of
// exactly 2^31 passes the check. On the host, and on cuda where a device is present (the
// same validate_argmax, called before the launch).
void expect_argmax_len_refused(EngineBackend& e, const std::string& name) {
  const float x = 1.0f;
  int32_t out = -7;
  const Status st = e.argmax(&x, 1, (int64_t(1) << 31) + 1, &out);
  EXPECT_FALSE(st.ok) << name;
  EXPECT_NE(st.message.find("argmax: len 2147483649: must be at most 2147483648"), std::string::npos)
      << name << ": " << st.message;
  EXPECT_EQ(out, -7) << name << ": written before the refusal";
}

TEST(EngineBackend, ArgmaxRefusesRowsWhoseIndexDoesNotFitInt32) {
  auto cpu = make_cpu_backend();
  expect_argmax_len_refused(*cpu->engine(), "cpu");
  const float x[3] = {0.5f, 2.0f, 1.0f};
  int32_t out = -7;
  EXPECT_TRUE(validate_argmax(x, 1, int64_t(1) << 31, &out).ok);
  ASSERT_TRUE(cpu->engine()->argmax(x, 1, 3, &out).ok);
  EXPECT_EQ(out, 1);
}

// A call with no work touches no pointer, so none of its pointers need be there: null inputs
// and outputs with zero rows or elements are accepted (engine_backend.h: "no null pointer a
// call would touch"; host mutation sweep, round 18: a check refusing null with zero work
// passed every test, whose empty calls all had valid pointers). A norm part of 0 rows from
// an empty vector has a null data pointer.
TEST(EngineBackend, NullPointersOfACallWithNoWorkAreAccepted) {
  auto cpu = make_cpu_backend();
  EngineBackend& e = *cpu->engine();
  EXPECT_TRUE(e.embed(nullptr, 3, 4, nullptr, 0, nullptr).ok);
  EXPECT_TRUE(e.rms_norm(nullptr, nullptr, 0, 4, 1e-6f, nullptr).ok);
  EXPECT_TRUE(e.matmul(nullptr, 3, 4, nullptr, 0, nullptr).ok);
  EXPECT_TRUE(e.swiglu(nullptr, nullptr, 0, nullptr).ok);
  EXPECT_TRUE(e.add(nullptr, nullptr, 0).ok);
  EXPECT_TRUE(e.add_rms_norm(nullptr, nullptr, nullptr, 0, 4, 1e-6f, nullptr).ok);
  EXPECT_TRUE(e.logits(nullptr, nullptr, 0, 4, nullptr, 1e-6f, nullptr, 3, nullptr).ok);
  EXPECT_TRUE(e.argmax(nullptr, 0, 4, nullptr).ok);
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1};
  float out[4] = {};
  const NormPart parts[2] = {{x, w, 1, out}, {nullptr, nullptr, 0, nullptr}};
  EXPECT_TRUE(e.rms_norm_parts(parts, 2, 4, 1e-6f).ok);
  // With work, each is refused.
  EXPECT_FALSE(e.rms_norm(nullptr, w, 1, 4, 1e-6f, out).ok);
  EXPECT_FALSE(e.add(out, nullptr, 4).ok);
}

TEST(EngineBackend, ArgmaxRefusesRowsWhoseIndexDoesNotFitInt32OnCuda) {
  KC_CUDA_BACKEND_OR_SKIP(cuda);
  expect_argmax_len_refused(*cuda->engine(), "cuda");
}

}  // namespace
}  // namespace kc::engine
