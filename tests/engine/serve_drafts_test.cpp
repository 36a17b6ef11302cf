// Drafting beyond the chain (engine/serve.h, engine/make_draft.h) and the memory receipt
// (engine/serve_memory.h), on the cpu backend: tree drafts equal plain decoding (tokens and
// logits bytes) and each planted tree bug breaks that; a chain is the tree of ones; a draft
// checkpoint of its own (make-draft) is reproducible, loads as any checkpoint and equals
// the target truncated in memory; serve-memory's numbers follow from the layout and its
// controls turn its gates red; bad options exit 2 with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "kernels/layout/bits.h"  // fnv1a
#include "engine/make_draft.h"
#include "engine/serve.h"
#include "engine/safetensors.h"
#include "engine/serve_gate.h"
#include "engine/serve_memory.h"
#include "tests/engine/temp_dir.h"
#include "tools/receipt_views.h"

namespace kc::engine {
namespace {

const std::string kSrc = KC_SOURCE_DIR;
const std::string kTarget = kSrc + "/fixtures/models/stdlib-bytes-3m";
const std::string kDraft = kSrc + "/fixtures/models/stdlib-bytes-3m-draft1";

struct Models {
  Qwen3Weights w, dw;
  Model m, d;
};
const Models& models() {
  static Models* t = [] {
    auto* x = new Models;
    EXPECT_TRUE(load_qwen3_checkpoint(kTarget, &x->w).ok);
    EXPECT_TRUE(make_draft_weights(x->w, 1, &x->dw).ok);
    EXPECT_TRUE(Model::create(x->w, ModelOptions{}, &x->m).ok);
    EXPECT_TRUE(Model::create(x->dw, ModelOptions{}, &x->d).ok);
    return x;
  }();
  return *t;
}

std::vector<ServeRequest> requests(const std::vector<std::string>& texts, int max_tokens) {
  std::vector<ServeRequest> r;
  for (const std::string& t : texts) r.push_back({encode_prompt(t), max_tokens, nullptr, false});
  return r;
}

bool same(const std::vector<ServeResult>& a, const std::vector<ServeResult>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].tokens != b[i].tokens || a[i].digests != b[i].digests || !a[i].refused.empty() || !b[i].refused.empty())
      return false;
  return true;
}

TEST(DraftTree, ShapeNodesAndPositions) {
  EXPECT_EQ(draft_nodes({2, 2, 1}, 3), 2 + 4 + 4);
  EXPECT_EQ(draft_nodes({2, 2, 1}, 1), 2);
  EXPECT_EQ(draft_nodes({3, 2}, 5), 3 + 6);
  ServeConfig c;
  EXPECT_TRUE(draft_shape(c).empty());
  EXPECT_EQ(serve_positions(c, 10, 5), 15);
  c.draft_tokens = 3;
  EXPECT_EQ(draft_shape(c), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(serve_positions(c, 10, 5), 15 + 3 + 1);  // chain: d tail slots plus the root
  c.draft_tree = {2, 2};
  EXPECT_EQ(draft_shape(c), (std::vector<int>{2, 2}));
  EXPECT_EQ(serve_positions(c, 10, 5), 15 + 6 + 1);
}

// Paged and window lanes mixed, a page size that splits the verify window across pages.
ServeConfig mixed() {
  ServeConfig c;
  c.parallel = 2;
  c.page = 7;
  c.context = 64;
  c.pool_pages = 32;
  return c;
}

TEST(DraftTree, TreeDraftedEqualsPlainAndEachPlantedBugBreaksIt) {
  const Models& t = models();
  auto be = make_cpu_backend();
  const auto reqs = requests({"import os\n", "    def __init__(self"}, 8);
  ServeConfig c = mixed();
  std::vector<ServeResult> plain, tree, broken;
  ASSERT_TRUE(serve(t.m, nullptr, *be, c, reqs, &plain, nullptr).ok);
  c.draft_tree = {2, 2};
  ServeStats st;
  ASSERT_TRUE(serve(t.m, &t.d, *be, c, reqs, &tree, &st).ok);
  EXPECT_TRUE(same(plain, tree));
  // Every verify proposed 6 nodes over 2 depths (fewer near a request's end).
  EXPECT_GT(st.verifies, 0);
  EXPECT_LE(st.drafted, 6 * st.verifies);
  EXPECT_GT(st.drafted, st.draft_depth);  // more nodes than depths: branches
  EXPECT_GT(st.accepted, 0);
  ServeConfig p = c;
  p.plant_tree_chain_tails = true;
  ASSERT_TRUE(serve(t.m, &t.d, *be, p, reqs, &broken, nullptr).ok);
  EXPECT_FALSE(same(plain, broken)) << "a node attending its cousins went unnoticed";
  p = c;
  p.plant_skip_keep = true;
  ASSERT_TRUE(serve(t.m, &t.d, *be, p, reqs, &broken, nullptr).ok);
  EXPECT_FALSE(same(plain, broken)) << "a tree verify without keep went unnoticed";
}

// The drafter itself, not only drafted == plain (which holds whatever the draft proposes, the
// target verifying it): each verify's chain is the draft model's plain greedy decode of the
// lane's committed tokens (generate on the draft model alone), so the accepted count is the
// one the plain decodes give. Per request, after the round that gave the first token, each
// round proposes n = min(d, max_tokens - generated - 1) tokens (n = 0: a plain decode row);
// the target accepts the longest prefix equal to its own greedy tokens and commits it and one
// more token.
TEST(DraftTree, TheChainDrafterProposesThePlainGreedyDecodeOfTheDraftModel) {
  const Models& t = models();
  auto be = make_cpu_backend();
  const int d = 3, max_tokens = 12;
  const auto reqs = requests({"import os\n", "    def __init__(self", "x = "}, max_tokens);
  ServeConfig c = mixed();
  std::vector<ServeResult> plain;
  ASSERT_TRUE(serve(t.m, nullptr, *be, c, reqs, &plain, nullptr).ok);
  int64_t want_drafted = 0, want_accepted = 0, want_verifies = 0;
  for (size_t r = 0; r < reqs.size(); ++r) {
    const std::vector<int32_t>& T = plain[r].tokens;
    ASSERT_TRUE(plain[r].refused.empty()) << plain[r].refused;
    ASSERT_FALSE(plain[r].stopped_at_eos) << r;  // the schedule below counts max_tokens tokens
    ASSERT_EQ(T.size(), size_t(max_tokens));
    for (int gen = 1; gen < max_tokens;) {
      const int n = std::min(d, max_tokens - gen - 1);
      if (n == 0) {
        ++gen;
        continue;
      }
      std::vector<int32_t> seq = reqs[r].prompt;
      seq.insert(seq.end(), T.begin(), T.begin() + gen);
      GenerateOptions o;
      o.stop_at_eos = false;  // the drafter proposes <|eos|> like any token
      std::vector<GenerateResult> g;
      ASSERT_TRUE(generate(t.d, *be, {GenerateRequest{seq, n, 0}}, o, &g).ok);
      ASSERT_EQ(g[0].tokens.size(), size_t(n));
      int k = 0;
      while (k < n && g[0].tokens[size_t(k)] == T[size_t(gen + k)]) ++k;
      want_drafted += n;
      want_accepted += k;
      ++want_verifies;
      gen += k + 1;
    }
  }
  // Not vacuous: some proposals accepted, some rejected.
  EXPECT_GT(want_accepted, 0);
  EXPECT_LT(want_accepted, want_drafted);
  c.draft_tokens = d;
  std::vector<ServeResult> drafted;
  ServeStats st;
  ASSERT_TRUE(serve(t.m, &t.d, *be, c, reqs, &drafted, &st).ok);
  EXPECT_TRUE(same(plain, drafted));
  EXPECT_EQ(st.verifies, want_verifies);
  EXPECT_EQ(st.drafted, want_drafted);
  EXPECT_EQ(st.accepted, want_accepted);
}

TEST(DraftTree, AChainIsTheTreeOfOnes) {
  const Models& t = models();
  auto be = make_cpu_backend();
  const auto reqs = requests({"class A:\n", "def f(x):"}, 8);
  ServeConfig c = mixed();
  c.draft_tokens = 3;
  std::vector<ServeResult> chain, ones;
  ServeStats a, b;
  ASSERT_TRUE(serve(t.m, &t.d, *be, c, reqs, &chain, &a).ok);
  c.draft_tokens = 0;
  c.draft_tree = {1, 1, 1};
  c.plant_tree_chain_tails = true;  // on a chain the chain's tail rule is the ancestors' rule
  ASSERT_TRUE(serve(t.m, &t.d, *be, c, reqs, &ones, &b).ok);
  EXPECT_TRUE(same(chain, ones));
  EXPECT_EQ(a.drafted, b.drafted);
  EXPECT_EQ(a.accepted, b.accepted);
  EXPECT_EQ(a.rounds, b.rounds);
  EXPECT_EQ(a.drafted, a.draft_depth);
}

// <|eos|> chosen mid-stream (session 31's coverage audit: serve's and generate's stop at
// <|eos|> never ran, the fixture model never chooses it in any test or gate). The target's
// head is untied and its <|eos|> row set to twice the row of a byte the continuations use
// (exact in bf16), so <|eos|> wins wherever that byte's logit is the largest and positive,
// a few tokens in. Serving (plain on window and paged lanes, chain and tree drafts) must
// equal greedy decoding: the same tokens, logits bytes, the stop at <|eos|> and the bytes
// of the row that chose it; nothing past <|eos|> is kept.
TEST(DraftTree, EosMidStreamStopsEveryArmLikeGreedyDecoding) {
  const Models& t = models();
  Qwen3Weights w = t.w;
  w.config.tie_word_embeddings = false;
  w.lm_head = w.embed_tokens;
  const int64_t H = w.config.hidden_size;
  const int32_t byte = ' ';
  for (int64_t k = 0; k < H; ++k) w.lm_head.data[size_t(kTokEos * H + k)] = 2.f * w.lm_head.data[size_t(byte * H + k)];
  Qwen3Weights dw;
  ASSERT_TRUE(make_draft_weights(w, 1, &dw).ok);
  Model m, d;
  ASSERT_TRUE(Model::create(w, ModelOptions{}, &m).ok);
  ASSERT_TRUE(Model::create(dw, ModelOptions{}, &d).ok);
  auto be = make_cpu_backend();
  const int max_tokens = 16;
  const auto reqs = requests({"import os\n", "    def __init__(self", "x = ", "class A:\n"}, max_tokens);
  // The reference: greedy decoding, one request at a time, with the logits rows kept.
  std::vector<GenerateResult> ref;
  int mid = 0;
  for (const ServeRequest& q : reqs) {
    GenerateOptions o;
    o.keep_logits = true;
    std::vector<GenerateResult> g;
    ASSERT_TRUE(generate(m, *be, {GenerateRequest{q.prompt, max_tokens, 0}}, o, &g).ok);
    if (g[0].stopped_at_eos && !g[0].tokens.empty()) ++mid;
    ref.push_back(g[0]);
  }
  ASSERT_GE(mid, 2) << "fewer than two requests stop at <|eos|> after a token: the test would be vacuous";
  auto expect_greedy = [&](const std::vector<ServeResult>& got, const std::string& arm) {
    ASSERT_EQ(got.size(), ref.size()) << arm;
    for (size_t r = 0; r < ref.size(); ++r) {
      EXPECT_TRUE(got[r].refused.empty()) << arm << " " << r << ": " << got[r].refused;
      EXPECT_EQ(got[r].tokens, ref[r].tokens) << arm << " request " << r;
      EXPECT_EQ(got[r].stopped_at_eos, ref[r].stopped_at_eos) << arm << " request " << r;
      ASSERT_EQ(ref[r].logits.size(), ref[r].tokens.size() + (ref[r].stopped_at_eos ? 1 : 0));
      std::vector<uint64_t> digests;
      for (size_t k = 0; k < ref[r].tokens.size(); ++k)
        digests.push_back(fnv1a(ref[r].logits[k].data(), ref[r].logits[k].size() * sizeof(float)));
      EXPECT_EQ(got[r].digests, digests) << arm << " request " << r;
      if (ref[r].stopped_at_eos) {
        EXPECT_EQ(got[r].eos_digest, fnv1a(ref[r].logits.back().data(), ref[r].logits.back().size() * sizeof(float)))
            << arm << " request " << r << ": the digest of the row that chose <|eos|>";
      }
    }
  };
  ServeConfig c = mixed();
  std::vector<ServeResult> plain, chain, tree;
  ServeStats sp, sc, stree;
  ASSERT_TRUE(serve(m, nullptr, *be, c, reqs, &plain, &sp).ok);
  expect_greedy(plain, "plain");
  int64_t kept = 0;
  for (const GenerateResult& g : ref) kept += int64_t(g.tokens.size());
  EXPECT_EQ(sp.tokens, kept);
  c.draft_tokens = 3;
  ASSERT_TRUE(serve(m, &d, *be, c, reqs, &chain, &sc).ok);
  expect_greedy(chain, "chain");
  EXPECT_EQ(sc.tokens, kept);
  EXPECT_GT(sc.accepted, 0);
  c.draft_tokens = 0;
  c.draft_tree = {2, 2};
  ASSERT_TRUE(serve(m, &d, *be, c, reqs, &tree, &stree).ok);
  expect_greedy(tree, "tree");
  EXPECT_EQ(stree.tokens, kept);
  for (size_t r = 0; r < reqs.size(); ++r) {
    int64_t at = 0;
    EXPECT_EQ(compare_serve_results(plain[r], chain[r], true, &at), "") << r;
    EXPECT_EQ(compare_serve_results(plain[r], tree[r], true, &at), "") << r;
  }
}

TEST(DraftTree, ADraftOfAnotherVocabularyIsRefused) {
  const Models& t = models();
  Qwen3Weights other = t.dw;
  other.config.vocab_size = 300;
  other.embed_tokens.shape[0] = 300;
  other.embed_tokens.data.resize(size_t(300) * other.config.hidden_size, 0.f);
  Model d;
  ASSERT_TRUE(Model::create(other, ModelOptions{}, &d).ok);
  auto be = make_cpu_backend();
  ServeConfig c = mixed();
  c.draft_tokens = 2;
  std::vector<ServeResult> res;
  const Status st = serve(t.m, &d, *be, c, requests({"ab"}, 2), &res, nullptr);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("vocabulary (300) is not the target's (260)"), std::string::npos) << st.message;
}

// --- make-draft ---

TEST(MakeDraft, ShippedDraftIsReproducibleAndEqualsTheTruncatedTarget) {
  test::TempDir dir;
  const std::string out = dir.file("d");
  std::ostringstream o, e;
  ASSERT_EQ(make_draft_command(kTarget, 1, out, o, e), 0) << e.str();
  for (const char* f : {"config.json", "model.safetensors"})
    EXPECT_TRUE(test::read_bytes(out + "/" + f) == test::read_bytes(kDraft + "/" + f)) << f << " differs from the shipped draft";
  Qwen3Weights shipped;
  ASSERT_TRUE(load_qwen3_checkpoint(kDraft, &shipped).ok);
  const Qwen3Weights& mem = models().dw;
  ASSERT_EQ(shipped.layers.size(), 1u);
  EXPECT_EQ(shipped.config.vocab_size, mem.config.vocab_size);
  EXPECT_TRUE(shipped.config.tie_word_embeddings);
  auto eq = [](const HostTensor& a, const HostTensor& b) {
    return a.shape == b.shape && a.data.size() == b.data.size() &&
           std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(eq(shipped.embed_tokens, mem.embed_tokens));
  EXPECT_TRUE(eq(shipped.norm, mem.norm));
  const Qwen3LayerWeights &a = shipped.layers[0], &b = mem.layers[0];
  for (auto f : {&Qwen3LayerWeights::input_layernorm, &Qwen3LayerWeights::q_proj, &Qwen3LayerWeights::k_proj,
                 &Qwen3LayerWeights::v_proj, &Qwen3LayerWeights::o_proj, &Qwen3LayerWeights::q_norm,
                 &Qwen3LayerWeights::k_norm, &Qwen3LayerWeights::post_attention_layernorm,
                 &Qwen3LayerWeights::gate_proj, &Qwen3LayerWeights::up_proj, &Qwen3LayerWeights::down_proj})
    EXPECT_TRUE(eq(a.*f, b.*f));
}

// A sharded source (model.safetensors.index.json and its shards, as real checkpoints come):
// the draft has the tensors of the single-file source's draft, and its kc_source_sha256 is the
// sha256 over the index's and each shard's sha256 in name order, so a change in any shard
// changes it. Session 31's coverage audit: every make-draft ran from a single file.
TEST(MakeDraft, AShardedSourceGivesTheSameDraftAndItsHashSeesEveryShard) {
  test::TempDir dir;
  SafetensorsFile one;
  ASSERT_TRUE(SafetensorsFile::open(kTarget + "/model.safetensors", &one).ok);
  std::vector<TensorToWrite> ts;
  for (const TensorInfo& t : one.tensors()) {
    TensorToWrite w{t.name, t.dtype, t.shape, {}};
    ASSERT_TRUE(one.read_f32(t.name, &w.values).ok);
    ts.push_back(std::move(w));
  }
  ASSERT_GE(ts.size(), 4u);
  const std::string src = dir.file("src");
  std::filesystem::create_directories(src);
  test::write_bytes(src + "/config.json", test::read_bytes(kTarget + "/config.json"));
  const size_t half = ts.size() / 2;
  const std::vector<TensorToWrite> a(ts.begin(), ts.begin() + long(half)), b(ts.begin() + long(half), ts.end());
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  ASSERT_TRUE(write_safetensors(src + "/" + s1, a).ok);
  ASSERT_TRUE(write_safetensors(src + "/" + s2, b).ok);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& t : a) index["weight_map"][t.name] = s1;
  for (const auto& t : b) index["weight_map"][t.name] = s2;
  test::write_bytes(src + "/model.safetensors.index.json", index.dump());
  auto source_hash = [](const std::string& draft_dir) {
    SafetensorsFile f;
    EXPECT_TRUE(SafetensorsFile::open(draft_dir + "/model.safetensors", &f).ok);
    const auto it = f.metadata().find("kc_source_sha256");
    return it == f.metadata().end() ? std::string("(none)") : it->second;
  };
  std::ostringstream o, e;
  ASSERT_EQ(make_draft_command(src, 1, dir.file("d-sharded"), o, e), 0) << e.str();
  ASSERT_EQ(make_draft_command(kTarget, 1, dir.file("d-single"), o, e), 0) << e.str();
  SafetensorsFile ds, d1;
  ASSERT_TRUE(SafetensorsFile::open(dir.file("d-sharded") + "/model.safetensors", &ds).ok);
  ASSERT_TRUE(SafetensorsFile::open(dir.file("d-single") + "/model.safetensors", &d1).ok);
  ASSERT_EQ(ds.tensors().size(), d1.tensors().size());
  for (const TensorInfo& t : d1.tensors()) {
    std::vector<float> x, y;
    ASSERT_TRUE(d1.read_f32(t.name, &x).ok);
    ASSERT_TRUE(ds.read_f32(t.name, &y).ok) << t.name;
    EXPECT_TRUE(x == y) << t.name;
  }
  const std::string want = sha256_hex(sha256_hex(test::read_bytes(src + "/model.safetensors.index.json")) +
                                      sha256_hex(test::read_bytes(src + "/" + s1)) +
                                      sha256_hex(test::read_bytes(src + "/" + s2)));
  const std::string h = source_hash(dir.file("d-sharded"));
  EXPECT_EQ(h, want);
  EXPECT_NE(h, source_hash(dir.file("d-single")));
  // One value of the last shard's last tensor changed (the draft does not read it): the hash changes.
  std::vector<TensorToWrite> b2 = b;
  b2.back().values.back() += 1.0f;
  ASSERT_TRUE(write_safetensors(src + "/" + s2, b2).ok);
  ASSERT_EQ(make_draft_command(src, 1, dir.file("d-changed"), o, e), 0) << e.str();
  EXPECT_NE(source_hash(dir.file("d-changed")), h) << "a changed shard left the source hash as it was";
}

TEST(MakeDraft, BadInputExits2AndWritesNothing) {
  test::TempDir dir;
  struct Bad {
    std::string from;
    int layers;
    std::string out, want;
  };
  const std::string fresh = dir.file("fresh");
  std::filesystem::create_directories(dir.file("full"));  // a folder that holds a file
  test::write_bytes(dir.file("full/keep.txt"), "x");
  const std::vector<Bad> bad = {
      {kTarget, 0, fresh, "--layers: 0 is not in 1..3"},
      {kTarget, 4, fresh, "--layers: 4 is not in 1..3 (below the source's 4 layers)"},
      {"/no/such/model", 1, fresh, "--from: /no/such/model"},
      {kTarget, 1, dir.file("full"), "exists and is not empty"},
      {kTarget, 1, "", "--out: a folder is required"},
  };
  for (const Bad& b : bad) {
    std::ostringstream o, e;
    EXPECT_EQ(make_draft_command(b.from, b.layers, b.out, o, e), 2) << b.want;
    EXPECT_NE(e.str().find(b.want), std::string::npos) << "want '" << b.want << "' in: " << e.str();
    EXPECT_FALSE(std::filesystem::exists(fresh)) << b.want;
  }
  EXPECT_EQ(test::read_bytes(dir.file("full/keep.txt")), "x");
  EXPECT_FALSE(std::filesystem::exists(dir.file("full/config.json")));
}

// write_qwen3_checkpoint reads back what it wrote and compares every value: a weight that
// is not exact in the checkpoint's dtype (one fp32 ulp above a bf16 value) is refused by
// name, not silently rounded; the same weights without it write.
TEST(MakeDraft, AWeightNotExactInTheDtypeIsRefusedOnReadBack) {
  test::TempDir dir;
  Qwen3Weights w;
  ASSERT_TRUE(load_qwen3_checkpoint(kTarget, &w).ok);
  ASSERT_EQ(w.config.dtype, "bfloat16");
  const Status ok = write_qwen3_checkpoint(w, dir.file("exact"), {});
  EXPECT_TRUE(ok.ok) << ok.message;
  float& v = w.layers[1].k_proj.data[7];
  v = std::nextafter(v, 1e30f);
  const Status st = write_qwen3_checkpoint(w, dir.file("inexact"), {});
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("model.layers.1.self_attn.k_proj.weight: reads back with other values (not exact in "
                            "bfloat16)"),
            std::string::npos)
      << st.message;
}

// --- serve-memory ---

// serve-memory on `cmd` (exit 0), its receipt loaded into *r.
void run_serve_memory(ServeMemoryCommand& cmd, const test::TempDir& dir, nlohmann::json* r) {
  cmd.out_file = dir.file("mem.json");
  std::ostringstream o, e;
  ASSERT_EQ(serve_memory_command(cmd, o, e), 0) << o.str() << e.str();
  const Status ls = Receipt::load(cmd.out_file, r);
  ASSERT_TRUE(ls.ok) << ls.message;
}

TEST(ServeMemory, NumbersFollowFromTheLayoutAndTheControlsAreRed) {
  test::TempDir dir;
  ServeMemoryCommand cmd;
  cmd.preset = "qwen35-27b-attn";
  nlohmann::json r;
  ASSERT_NO_FATAL_FAILURE(run_serve_memory(cmd, dir, &r));
  EXPECT_EQ(r["kind"], "serve-memory");
  EXPECT_EQ(r["verdict"], "pass");
  // 2 layers x 4 kv heads x (k + v) x 256 dims x 2 bytes (bf16, no scale planes) per position.
  const uint64_t pos = 2ull * 4 * 2 * 256 * 2;
  const nlohmann::json& m = r["memory"];
  EXPECT_EQ(m["bytes_per_position"]["target"].get<uint64_t>(), pos);
  EXPECT_EQ(m["bytes_per_position"]["draft"].get<uint64_t>(), pos / 2);
  std::map<std::string, nlohmann::json> arm;
  for (const auto& a : m["arms"]) arm[a["arm"]] = a;
  ASSERT_EQ(arm.size(), 3u);
  const uint64_t window = 32768 * pos, page = 256 * pos;
  EXPECT_EQ(arm["windows"]["arena_bytes"].get<uint64_t>(), 4 * window);
  EXPECT_EQ(arm["windows"]["bytes_fixed_per_lane"].get<uint64_t>(), window);
  EXPECT_EQ(arm["windows"]["bytes_in_use"].get<uint64_t>(), 4 * window);
  EXPECT_EQ(arm["windows"]["pages_taken"], 0);
  // Prompts 1201, 2804, 4413, 6003 + 96 new tokens on pages of 256: 6 + 12 + 18 + 24 pages.
  EXPECT_EQ(arm["pool"]["pages_taken"], 60);
  EXPECT_EQ(arm["pool"]["bytes_in_use"].get<uint64_t>(), 60 * page);
  EXPECT_EQ(arm["pool"]["bytes_fixed_per_lane"], 0);
  EXPECT_EQ(arm["pool"]["arena_bytes"].get<uint64_t>(), 4 * 128 * page);
  // Lane 0 a window (its run: window + drafter cache); lanes 1-3 paged with a draft window
  // of 5 more positions each (12 + 18 + 24 pages) and a run of the drafter's cache.
  const uint64_t draft = 32768 * pos / 2;
  EXPECT_EQ(arm["pool-with-runs"]["pages_taken"], 54);
  EXPECT_EQ(arm["pool-with-runs"]["bytes_fixed_per_lane"].get<uint64_t>(), window + draft);
  EXPECT_EQ(arm["pool-with-runs"]["bytes_in_use"].get<uint64_t>(), 54 * page + (window + draft) + 3 * draft);
  EXPECT_EQ(arm["pool-with-runs"]["arena_bytes"].get<uint64_t>(), 4 * 128 * page + 4 * (window + draft));
  for (const auto& k : r["controls"]) EXPECT_TRUE(k["red"].get<bool>()) << k["name"];
  const std::string text = render_receipt(Receipt(r), cmd.out_file, ViewFormat::text);
  EXPECT_NE(text.find("pool-with-runs"), std::string::npos);
  EXPECT_NE(text.find("54 x " + std::to_string(page) + " B"), std::string::npos) << text;
}

// The default pool holds every lane's whole context: a context that ends inside a page takes
// that page too (32800 positions on pages of 256: 129 pages a lane, 516 for 4 lanes).
TEST(ServeMemory, DefaultPoolRoundsAPartialPageUp) {
  test::TempDir dir;
  ServeMemoryCommand cmd;
  cmd.preset = "qwen35-27b-attn";
  cmd.context = 32800;
  nlohmann::json r;
  ASSERT_NO_FATAL_FAILURE(run_serve_memory(cmd, dir, &r));
  EXPECT_EQ(r["memory"]["pool_pages"], 516);
  const uint64_t page = 256ull * (2 * 4 * 2 * 256 * 2);
  int pools = 0;
  for (const auto& a : r["memory"]["arms"]) {
    if (a["arm"] != "pool") continue;
    ++pools;
    EXPECT_EQ(a["arena_bytes"].get<uint64_t>(), 516 * page);
  }
  EXPECT_EQ(pools, 1);
}

TEST(ServeMemory, BadOptionsExit2AndWriteNothing) {
  test::TempDir dir;
  const std::vector<std::pair<std::function<void(ServeMemoryCommand&)>, std::string>> bad = {
      {[](ServeMemoryCommand& c) { c.preset = "nope"; }, "--preset: 'nope' is not a preset"},
      {[](ServeMemoryCommand& c) { c.kv_cache = "fp16"; }, "--kv-cache fp16: expected bf16, fp8, q4 or mxfp4"},
      {[](ServeMemoryCommand& c) { c.pool_pages = -5; }, "--pool-pages -5: must be at least 1"},
      {[](ServeMemoryCommand& c) { c.parallel = 0; }, "--parallel 0"},
      {[](ServeMemoryCommand& c) { c.page = 0; }, "--page 0"},
      {[](ServeMemoryCommand& c) { c.draft_layers = 2; }, "--draft-layers 2: must be in 1..1"},
      {[](ServeMemoryCommand& c) { c.prompts = {10, 10, 10, 10, 10}, c.prompts_given = true; }, "--prompts: give 1..4 prompt lengths"},
      {[](ServeMemoryCommand& c) { c.prompts = {40000}, c.prompts_given = true; }, "--prompts[0]: prompt 40000"},
      {[](ServeMemoryCommand& c) { c.prompts = {1}, c.prompts_given = true; }, "--prompts[0]: a prompt holds at least 2 tokens"},
      // Past the bounds: the default pool's page count overflowed an int, a context of 2^30
      // on pages of 1 ran out of host memory (exit 1), --layers 1 refused every --draft-layers.
      {[](ServeMemoryCommand& c) { c.context = 2147418113, c.page = 65536; }, "--context 2147418113: must be in 2..1048576"},
      {[](ServeMemoryCommand& c) { c.context = (1 << 20) + 1; }, "--context 1048577: must be in 2..1048576"},
      {[](ServeMemoryCommand& c) { c.pool_pages = (1 << 26) + 1; }, "--pool-pages 67108865: must be at most 67108864"},
      {[](ServeMemoryCommand& c) { c.layers = 1; }, "--layers 1: the pool-with-runs arm needs a drafter"},
      // Both ends of --draft-tokens (1..64, the serve fixture's bound) and of --max-tokens.
      {[](ServeMemoryCommand& c) { c.draft_tokens = 0; }, "--draft-tokens: must be in 1..64"},
      {[](ServeMemoryCommand& c) { c.draft_tokens = 65; }, "--draft-tokens: must be in 1..64"},
      {[](ServeMemoryCommand& c) { c.max_tokens = 0; }, "--max-tokens: must be at least 1"},
  };
  for (const auto& [edit, want] : bad) {
    ServeMemoryCommand cmd;
    cmd.preset = "qwen35-27b-attn";
    cmd.out_file = dir.file("mem.json");
    edit(cmd);
    std::ostringstream o, e;
    EXPECT_EQ(serve_memory_command(cmd, o, e), 2) << want;
    EXPECT_NE(e.str().find(want), std::string::npos) << "want '" << want << "' in: " << e.str();
    EXPECT_FALSE(std::filesystem::exists(cmd.out_file)) << want;
  }
  for (int dt : {1, 64}) {  // the bounds themselves are planned
    ServeMemoryCommand cmd;
    cmd.preset = "qwen35-27b-attn";
    cmd.draft_tokens = dt;
    cmd.out_file = dir.file("mem-dt.json");
    std::ostringstream o, e;
    EXPECT_EQ(serve_memory_command(cmd, o, e), 0) << "--draft-tokens " << dt << ": " << e.str();
  }
  // Every cache format the engine serves is planned, mxfp4 included.
  for (const char* f : {"fp8", "q4", "mxfp4"}) {
    ServeMemoryCommand cmd;
    cmd.preset = "qwen35-27b-attn";
    cmd.kv_cache = f;
    std::ostringstream o, e;
    EXPECT_EQ(serve_memory_command(cmd, o, e), 0) << f << ": " << e.str();
  }
}

// ---- host mutation sweep round 19 (reports/mutation-sweep/host-19-local/) ----

// Each lane's pages in the receipt run from its first page to its last: the pool arm hands pages
// out from the bottom in lane order, so lane l's first is the page after lane l-1's last and
// last = first + count - 1 (sm-lane-pages-last-is-first). And --page 65536, the largest page the
// serve fixture allows, plans (sm-page-65536-refused).
TEST(ServeMemory, EachLanesPagesRunFirstToLastAndTheLargestPagePlans) {
  test::TempDir dir;
  ServeMemoryCommand cmd;
  cmd.preset = "qwen35-27b-attn";
  nlohmann::json r;
  ASSERT_NO_FATAL_FAILURE(run_serve_memory(cmd, dir, &r));
  int lanes = 0;
  for (const auto& a : r["memory"]["arms"]) {
    if (a["arm"] != "pool") continue;
    int next = 0;
    for (const auto& l : a["lanes"]) {
      if (!l.contains("pages")) continue;
      ++lanes;
      const int count = l["pages"]["count"], first = l["pages"]["first"], last = l["pages"]["last"];
      EXPECT_EQ(first, next) << l.dump();
      EXPECT_EQ(last, first + count - 1) << l.dump();
      next = last + 1;
    }
  }
  EXPECT_EQ(lanes, 4);
  ServeMemoryCommand big;
  big.preset = "qwen35-27b-attn";
  big.page = 65536;
  ASSERT_NO_FATAL_FAILURE(run_serve_memory(big, dir, &r));
  EXPECT_EQ(r["memory"]["page"], 65536);
  EXPECT_EQ(r["verdict"], "pass");
}

}  // namespace
}  // namespace kc::engine
