// The engine kernels (kernels/engine/kernels.cu) over buffers past 2^31 elements, through the
// cuda backend's engine (EngineBackend on a stream of the test's). A row offset or element
// index computed in 32-bit int wraps there (device mutation sweep round 4,
// eng-addnorm-row-offset-32bit: the fused add + RMSNorm's `int(blockIdx.x) * dim`) and reads
// or writes another row, or outside the buffer. Each test runs a kernel over 2^18 + 32 rows of
// 8192 floats (2^31 + 2^18 floats, 8 GiB + 1 MiB a buffer), zeros but for drawn values in the
// last 16 rows, every output filled with NaN bytes first, and compares the last rows' outputs
// (all at 2^31 + 2^17 floats and past) byte for byte with the same rows launched alone, where
// every offset is small: the mirror, in buffers of 16 rows, gets the same calls. Every kernel
// computes an output row from its own input row (engine_backend.h, batch invariance), so the
// bytes must be equal. Labelled cuda; skipped (visibly) without a device, and where the device
// has too little free memory (the numbers in the reason). Each test takes 8 to 24 GiB of
// device memory; on an H100 80GB the first five took 15 to 490 ms each, 1.1 s the five. Three
// more (session 53) read the embedding table, an odd-K product's weights and the staged
// product's outputs past 2^31 elements.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend/backend.h"
#include "kernels/codecs/bf16.h"

#ifdef KC_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/backend/cuda_backend.h"
#include "kernels/engine/engine_backend.h"
#include "kernels/engine/launch.h"
#endif

namespace kc {
namespace {

constexpr int kDim = 8192;
constexpr int kRows = (1 << 18) + 32;  // rows of kDim: 2^31 + 2^18 floats
constexpr int kLast = 16;              // rows compared: the last 16, from 2^31 + 2^17 floats on
constexpr size_t kFloats = size_t(kRows) * kDim;
constexpr float kEps = 1e-6f;
static_assert(size_t(kRows - kLast) * kDim > (size_t(1) << 31), "the compared rows lie past 2^31 floats");

#ifdef KC_HAVE_CUDA
std::vector<float> drawn(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> x(n);
  for (float& v : x) v = nd(g);
  return x;
}

std::vector<uint16_t> drawn_bf16(size_t n, uint64_t seed) {
  const std::vector<float> f = drawn(n, seed);
  std::vector<uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = bf16_from_float(f[i]);
  return b;
}

std::string show(float v) { return std::to_string(v); }
std::string show(int32_t v) { return std::to_string(v); }
#endif

class EngineKernels : public ::testing::Test {
 protected:
#ifdef KC_HAVE_CUDA
  cudaStream_t s_ = nullptr;
  std::unique_ptr<Backend> be_;
  EngineBackend* eb_ = nullptr;

  void TearDown() override {
    be_.reset();  // its scratch freed
    if (s_) cudaStreamDestroy(s_);
  }
#endif

  // Skips without a device, or where it has less free memory than `big` buffers of kFloats
  // floats and 1 GiB more; else makes the backend.
  void need(int big) {
#ifndef KC_HAVE_CUDA
    (void)big;
    GTEST_SKIP() << "this build has no cuda backend";
#else
    std::string why;
    if (!cuda_device_present(&why)) GTEST_SKIP() << why;
    size_t free_b = 0, total_b = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    const size_t want = size_t(big) * kFloats * 4 + (size_t(1) << 30);
    if (free_b < want)
      GTEST_SKIP() << "needs " << (want >> 20) << " MiB of device memory (" << big << " buffers of " << (kFloats * 4 >> 20)
                   << " MiB and 1 GiB more); " << (free_b >> 20) << " MiB free of " << (total_b >> 20);
    ASSERT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess);
    Status st;
    be_ = make_cuda_backend_on(s_, &st);
    ASSERT_TRUE(be_) << st.message;
    eb_ = be_->engine();
    ASSERT_TRUE(eb_ && eb_->on_device());
#endif
  }

#ifdef KC_HAVE_CUDA
  // `count` elements of scratch slot `slot`.
  template <typename T>
  Status get(int slot, size_t count, T** p) {
    void* q = nullptr;
    KC_RETURN_IF_ERROR(eb_->scratch(slot, count * sizeof(T), &q));
    *p = static_cast<T*>(q);
    return Status::Ok();
  }
  // Every byte of `count` elements at p set to `byte` (0: zeros; 0xFF: NaN floats).
  template <typename T>
  Status fill(T* p, size_t count, int byte) {
    const cudaError_t e = cudaMemsetAsync(p, byte, count * sizeof(T), s_);
    return e == cudaSuccess ? Status::Ok() : Status::Error(std::string("cudaMemsetAsync: ") + cudaGetErrorString(e));
  }
  template <typename T>
  Status put(T* p, const std::vector<T>& v) {
    return eb_->upload(p, v.data(), v.size() * sizeof(T));
  }
  // The last `n` of the `big_n` elements at big against the mirror's `n`, byte for byte.
  template <typename T>
  void expect_tail(const T* big, size_t big_n, const T* mirror, size_t n, const std::string& what) {
    std::vector<T> a(n), b(n);
    Status st = eb_->download(a.data(), big + (big_n - n), n * sizeof(T));
    ASSERT_TRUE(st.ok) << what << ": " << st.message;
    st = eb_->download(b.data(), mirror, n * sizeof(T));
    ASSERT_TRUE(st.ok) << what << ": " << st.message;
    size_t i = 0;
    while (i < n && std::memcmp(&a[i], &b[i], sizeof(T)) == 0) ++i;
    if (i < n)
      ADD_FAILURE() << what << ": element " << (big_n - n + i) << " of " << big_n << " is " << show(a[i])
                    << ", launched alone " << show(b[i]) << " (element " << i << " of " << n << ")";
  }
#endif
};

// The fused residual add + RMSNorm (EngineBackend::add_rms_norm, add_rms_rows_kernel, one block
// a row) over h, t and out of 8 GiB + 1 MiB each: the sums in h and the norms in out of the
// last 16 rows equal those of the same rows launched alone. Round 4's
// eng-addnorm-row-offset-32bit wraps their offsets to 2^31 floats before h, t and out: on an
// H100 its launch ended in an illegal address (this test red, the other four green). 24 GiB.
TEST_F(EngineKernels, AddRmsNormIndexesRowsPast2To31Floats) {
  need(3);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  float *h, *t, *out, *w, *hm, *tm, *om;
  ASSERT_TRUE(get(0, kFloats, &h).ok && get(1, kFloats, &t).ok && get(2, kFloats, &out).ok);
  ASSERT_TRUE(get(3, kDim, &w).ok && get(4, size_t(kLast) * kDim, &hm).ok && get(5, size_t(kLast) * kDim, &tm).ok &&
              get(6, size_t(kLast) * kDim, &om).ok);
  const size_t tail = size_t(kRows - kLast) * kDim, n = size_t(kLast) * kDim;
  const std::vector<float> hv = drawn(n, 1), tv = drawn(n, 2), wv = drawn(kDim, 3);
  ASSERT_TRUE(fill(h, kFloats, 0).ok && fill(t, kFloats, 0).ok && fill(out, kFloats, 0xFF).ok && fill(om, n, 0xFF).ok);
  ASSERT_TRUE(eb_->upload(h + tail, hv.data(), n * 4).ok && eb_->upload(t + tail, tv.data(), n * 4).ok);
  ASSERT_TRUE(put(hm, hv).ok && put(tm, tv).ok && put(w, wv).ok);
  // The fused kernel takes both launches (else the backend would run add, then rms_norm).
  ASSERT_TRUE(launch_engine_add_rms_norm_fits(h, t, w, kRows, kDim, out));
  ASSERT_TRUE(launch_engine_add_rms_norm_fits(hm, tm, w, kLast, kDim, om));
  Status st = eb_->add_rms_norm(h, t, w, kRows, kDim, kEps, out);
  ASSERT_TRUE(st.ok) << st.message;
  st = eb_->add_rms_norm(hm, tm, w, kLast, kDim, kEps, om);
  ASSERT_TRUE(st.ok) << st.message;
  expect_tail(h, kFloats, hm, n, "add_rms_norm, h (the sums)");
  expect_tail(out, kFloats, om, n, "add_rms_norm, out (the norms)");
  float first = -1.0f;  // a zero row's norm: zeros (the rows before the last are written too)
  ASSERT_TRUE(eb_->download(&first, out, 4).ok);
  EXPECT_EQ(first, 0.0f);
#endif
}

// The plain RMSNorm (rms_rows_kernel, and the legacy warp-a-row rms_norm_kernel), the joined
// rms_norm_parts (rms_parts_kernel: the big part after a small one, so its rows are block
// index minus the part's start) and logits' gathered norm (rms_rows_kernel<true> and the legacy
// gather_norm_kernel, selected rows past 2^31 floats of h, then the product with a head of 4
// rows) over x and out of 8 GiB + 1 MiB each. 16 GiB.
TEST_F(EngineKernels, NormsIndexRowsPast2To31Floats) {
  need(2);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  constexpr int kVocab = 4;
  const size_t tail = size_t(kRows - kLast) * kDim, n = size_t(kLast) * kDim;
  float *x, *out, *w, *xm, *om, *xs, *os, *lg, *lgm;
  uint16_t* head;
  ASSERT_TRUE(get(0, kFloats, &x).ok && get(1, kFloats, &out).ok);
  ASSERT_TRUE(get(2, kDim, &w).ok && get(3, n, &xm).ok && get(4, n, &om).ok && get(5, n, &xs).ok && get(6, n, &os).ok);
  ASSERT_TRUE(get(7, size_t(kVocab) * kDim, &head).ok && get(8, size_t(kLast) * kVocab, &lg).ok &&
              get(9, size_t(kLast) * kVocab, &lgm).ok);
  const std::vector<float> xv = drawn(n, 11), wv = drawn(kDim, 12), sv = drawn(n, 13);
  ASSERT_TRUE(fill(x, kFloats, 0).ok && eb_->upload(x + tail, xv.data(), n * 4).ok);
  ASSERT_TRUE(put(xm, xv).ok && put(w, wv).ok && put(xs, sv).ok && put(head, drawn_bf16(size_t(kVocab) * kDim, 14)).ok);
  for (bool legacy : {false, true}) {
    const std::string kind = legacy ? " (legacy kernels)" : "";
    EngineBackend::Debug d;
    d.legacy_kernels = legacy;
    ASSERT_TRUE(eb_->set_debug(d).ok);
    ASSERT_TRUE(fill(out, kFloats, 0xFF).ok && fill(om, n, 0xFF).ok);
    Status st = eb_->rms_norm(x, w, kRows, kDim, kEps, out);
    ASSERT_TRUE(st.ok) << st.message;
    ASSERT_TRUE(eb_->rms_norm(xm, w, kLast, kDim, kEps, om).ok);
    expect_tail(out, kFloats, om, n, "rms_norm" + kind);

    std::vector<int32_t> sel(kLast), selm(kLast);
    for (int j = 0; j < kLast; ++j) sel[j] = kRows - kLast + j, selm[j] = j;
    ASSERT_TRUE(fill(lg, size_t(kLast) * kVocab, 0xFF).ok && fill(lgm, size_t(kLast) * kVocab, 0xFF).ok);
    st = eb_->logits(x, sel.data(), kLast, kDim, w, kEps, head, kVocab, lg);
    ASSERT_TRUE(st.ok) << st.message;
    ASSERT_TRUE(eb_->logits(xm, selm.data(), kLast, kDim, w, kEps, head, kVocab, lgm).ok);
    expect_tail(lg, size_t(kLast) * kVocab, lgm, size_t(kLast) * kVocab, "logits (gathered norm)" + kind);
  }
  ASSERT_TRUE(eb_->set_debug(EngineBackend::Debug{}).ok);
  ASSERT_TRUE(fill(out, kFloats, 0xFF).ok && fill(om, n, 0xFF).ok && fill(os, n, 0xFF).ok);
  const NormPart parts[2] = {{xs, w, kLast, os}, {x, w, kRows, out}};
  Status st = eb_->rms_norm_parts(parts, 2, kDim, kEps);
  ASSERT_TRUE(st.ok) << st.message;
  const NormPart alone = {xm, w, kLast, om};
  ASSERT_TRUE(eb_->rms_norm_parts(&alone, 1, kDim, kEps).ok);
  expect_tail(out, kFloats, om, n, "rms_norm_parts, the big part");
  ASSERT_TRUE(eb_->rms_norm(xs, w, kLast, kDim, kEps, om).ok);
  expect_tail(os, n, om, n, "rms_norm_parts, the small part before it");
#endif
}

// The element-wise kernels over 2^31 + 2^18 elements (grid-stride loops: add_kernel,
// swiglu_kernel) and argmax over rows past 2^31 floats (argmax_kernel, a block a row). 24 GiB.
TEST_F(EngineKernels, AddSwigluArgmaxIndexPast2To31Floats) {
  need(3);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  const size_t tail = size_t(kRows - kLast) * kDim, n = size_t(kLast) * kDim;
  float *a, *b, *c, *am, *bm, *cm;
  int32_t *idx, *idxm;
  ASSERT_TRUE(get(0, kFloats, &a).ok && get(1, kFloats, &b).ok && get(2, kFloats, &c).ok);
  ASSERT_TRUE(get(3, n, &am).ok && get(4, n, &bm).ok && get(5, n, &cm).ok && get(6, size_t(kRows), &idx).ok &&
              get(7, size_t(kLast), &idxm).ok);
  const std::vector<float> av = drawn(n, 21), bv = drawn(n, 22);
  ASSERT_TRUE(fill(a, kFloats, 0).ok && fill(b, kFloats, 0).ok && fill(c, kFloats, 0xFF).ok && fill(cm, n, 0xFF).ok);
  ASSERT_TRUE(eb_->upload(a + tail, av.data(), n * 4).ok && eb_->upload(b + tail, bv.data(), n * 4).ok);
  ASSERT_TRUE(put(am, av).ok && put(bm, bv).ok);
  Status st = eb_->add(a, b, int64_t(kFloats));
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_TRUE(eb_->add(am, bm, int64_t(n)).ok);
  expect_tail(a, kFloats, am, n, "add");
  st = eb_->swiglu(a, b, int64_t(kFloats), c);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_TRUE(eb_->swiglu(am, bm, int64_t(n), cm).ok);
  expect_tail(c, kFloats, cm, n, "swiglu");
  ASSERT_TRUE(fill(idx, size_t(kRows), 0xFF).ok && fill(idxm, size_t(kLast), 0xFF).ok);
  st = eb_->argmax(c, kRows, kDim, idx);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_TRUE(eb_->argmax(cm, kLast, kDim, idxm).ok);
  expect_tail(idx, size_t(kRows), idxm, size_t(kLast), "argmax");
#endif
}

// The matrix product with each of its operands past 2^31 elements: x (batch rows of 8192 past
// 2^31 floats; the per-block kernel, batch tiles of 8), y (2^18 + 32 batch rows of 8192 outputs,
// K 8: y past 2^31 floats) and W (2^18 + 32 weight rows of 8192 bf16: rows past 2^31 elements,
// at batch 1 through the staged kernel and at batch 16 through the per-block one). x and y are
// 8 GiB + 1 MiB each, W lies in x's memory. 16 GiB.
TEST_F(EngineKernels, MatmulIndexesPast2To31Elements) {
  need(2);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  constexpr int kOut = 4, kK8 = 8;
  const size_t tail = size_t(kRows - kLast) * kDim, n = size_t(kLast) * kDim;
  float *x, *y, *xm, *y4, *y4m, *x8, *x8m, *ym, *yw, *ywm;
  uint16_t *w4, *w8, *wm;
  ASSERT_TRUE(get(0, kFloats, &x).ok && get(1, kFloats, &y).ok);
  ASSERT_TRUE(get(2, n, &xm).ok && get(3, size_t(kRows) * kOut, &y4).ok && get(4, size_t(kLast) * kOut, &y4m).ok &&
              get(5, size_t(kRows) * kK8, &x8).ok && get(6, size_t(kLast) * kK8, &x8m).ok && get(7, n, &ym).ok &&
              get(8, size_t(kLast) * kRows, &yw).ok && get(9, size_t(kLast) * kLast, &ywm).ok);
  ASSERT_TRUE(get(10, size_t(kOut) * kDim, &w4).ok && get(11, size_t(kDim) * kK8, &w8).ok && get(12, n, &wm).ok);
  const std::vector<float> xv = drawn(n, 31), x8v = drawn(size_t(kLast) * kK8, 32);
  const std::vector<uint16_t> w4v = drawn_bf16(size_t(kOut) * kDim, 33), w8v = drawn_bf16(size_t(kDim) * kK8, 34),
                              wv = drawn_bf16(n, 35);
  ASSERT_TRUE(put(xm, xv).ok && put(x8m, x8v).ok && put(w4, w4v).ok && put(w8, w8v).ok && put(wm, wv).ok);

  // x past 2^31 floats: y4 = x w4^T, 4 outputs a row.
  ASSERT_TRUE(fill(x, kFloats, 0).ok && eb_->upload(x + tail, xv.data(), n * 4).ok);
  ASSERT_TRUE(fill(y4, size_t(kRows) * kOut, 0xFF).ok && fill(y4m, size_t(kLast) * kOut, 0xFF).ok);
  Status st = eb_->matmul(w4, kOut, kDim, x, kRows, y4);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_TRUE(eb_->matmul(w4, kOut, kDim, xm, kLast, y4m).ok);
  expect_tail(y4, size_t(kRows) * kOut, y4m, size_t(kLast) * kOut, "matmul, x past 2^31 floats");

  // y past 2^31 floats: y = x8 w8^T, 8192 outputs of K 8 a row.
  ASSERT_TRUE(fill(x8, size_t(kRows) * kK8, 0).ok &&
              eb_->upload(x8 + size_t(kRows - kLast) * kK8, x8v.data(), x8v.size() * 4).ok);
  ASSERT_TRUE(fill(y, kFloats, 0xFF).ok && fill(ym, n, 0xFF).ok);
  st = eb_->matmul(w8, kDim, kK8, x8, kRows, y);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_TRUE(eb_->matmul(w8, kDim, kK8, x8m, kLast, ym).ok);
  expect_tail(y, kFloats, ym, n, "matmul, y past 2^31 floats");

  // W past 2^31 elements: 2^18 + 32 weight rows of 8192 bf16 (in x's memory), zeros but the
  // last 16, against those 16 alone; batch 1 (staged) and batch 16 (per block).
  uint16_t* W = reinterpret_cast<uint16_t*>(x);
  ASSERT_TRUE(fill(x, kFloats, 0).ok && eb_->upload(W + tail, wv.data(), n * 2).ok);
  for (int b : {1, kLast}) {
    const std::string what = "matmul, W past 2^31 elements, batch " + std::to_string(b);
    ASSERT_TRUE(fill(yw, size_t(kLast) * kRows, 0xFF).ok && fill(ywm, size_t(kLast) * kLast, 0xFF).ok);
    st = eb_->matmul(W, kRows, kDim, xm, b, yw);
    ASSERT_TRUE(st.ok) << what << ": " << st.message;
    ASSERT_TRUE(eb_->matmul(wm, kLast, kDim, xm, b, ywm).ok);
    for (int r = 0; r < b; ++r)  // y[r][o]: the last 16 outputs of each batch row
      expect_tail(yw + size_t(r) * kRows, size_t(kRows), ywm + size_t(r) * kLast, size_t(kLast),
                  what + ", row " + std::to_string(r));
  }
#endif
}

// The embedding (embed_kernel: a grid row per token) into out rows of 32772 floats, 65535 of
// them (the launch's most): the last 7 rows, from 2^31 - 32 floats on (the first of them
// across 2^31), each a drawn row of E. 8 GiB.
TEST_F(EngineKernels, EmbedWritesRowsPast2To31Floats) {
  need(1);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  constexpr int kN = 65535, kEDim = 32772, kVocab = 3, kTail = 7;
  constexpr size_t kOutN = size_t(kN) * kEDim;
  static_assert(kOutN <= kFloats && size_t(kN - kTail) * kEDim < (size_t(1) << 31) &&
                    size_t(kN - kTail + 1) * kEDim > (size_t(1) << 31),
                "the first compared row crosses 2^31 floats");
  float *out, *om;
  uint16_t* E;
  int32_t *tok, *tokm;
  ASSERT_TRUE(get(0, kOutN, &out).ok && get(1, size_t(kTail) * kEDim, &om).ok &&
              get(2, size_t(kVocab) * kEDim, &E).ok && get(3, size_t(kN), &tok).ok && get(4, size_t(kTail), &tokm).ok);
  const std::vector<int32_t> last = {1, 2, 0, 2, 1, 1, 2};
  ASSERT_TRUE(put(E, drawn_bf16(size_t(kVocab) * kEDim, 41)).ok && put(tokm, last).ok);
  ASSERT_TRUE(fill(tok, size_t(kN), 0).ok && eb_->upload(tok + (kN - kTail), last.data(), kTail * 4).ok);
  ASSERT_TRUE(fill(out, kOutN, 0xFF).ok && fill(om, size_t(kTail) * kEDim, 0xFF).ok);
  Status st = eb_->embed(E, kVocab, kEDim, tok, kN, out);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_TRUE(eb_->embed(E, kVocab, kEDim, tokm, kTail, om).ok);
  expect_tail(out, kOutN, om, size_t(kTail) * kEDim, "embed");
#endif
}


// The embedding's table read past 2^31 elements: E of 2^18 + 32 rows of 8192 bf16 (zeros but
// the last 16 rows, drawn), 16 tokens naming those rows (in a drawn order, one twice) against the
// same 16 rows as a table of their own, where every token * dim is small. embed_kernel forms
// `int64_t(token) * dim`; a 32-bit product wraps to 2^31 elements before the row. 8 GiB.
TEST_F(EngineKernels, EmbedReadsTableRowsPast2To31Elements) {
  need(1);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  const size_t n = size_t(kLast) * kDim;
  uint16_t *E, *Em;
  float *out, *om;
  int32_t *tok, *tokm;
  ASSERT_TRUE(get(0, kFloats, &E).ok && get(1, n, &Em).ok && get(2, n, &out).ok && get(3, n, &om).ok &&
              get(4, size_t(kLast), &tok).ok && get(5, size_t(kLast), &tokm).ok);
  const std::vector<uint16_t> ev = drawn_bf16(n, 51);
  ASSERT_TRUE(fill(E, kFloats, 0).ok && eb_->upload(E + (kFloats - n), ev.data(), n * 2).ok && put(Em, ev).ok);
  // Rows of the table's last 16, in an order that is not the identity, and row 15 twice.
  const std::vector<int32_t> rel = {15, 3, 0, 9, 12, 1, 15, 7, 2, 14, 5, 11, 4, 8, 13, 6};
  std::vector<int32_t> abs(kLast);
  for (int j = 0; j < kLast; ++j) abs[j] = kRows - kLast + rel[j];
  ASSERT_TRUE(put(tok, abs).ok && put(tokm, rel).ok);
  ASSERT_TRUE(fill(out, n, 0xFF).ok && fill(om, n, 0xFF).ok);
  Status st = eb_->embed(E, kRows, kDim, tok, kLast, out);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_TRUE(eb_->embed(Em, kLast, kDim, tokm, kLast, om).ok);
  expect_tail(out, n, om, n, "embed, table rows past 2^31 elements");
#endif
}

// The product's per-block kernel where K is not a multiple of 8 (8199: 1024 octets and 7 more,
// read by the scalar path and the short last octet) and W's rows lie past 2^31 elements (2^18 +
// 32 rows of 8199 bf16, zeros but the last 16), at batch 1 and 16, against those 16 rows
// alone. The vector path's W past 2^31 is MatmulIndexesPast2To31Elements's. 8 GiB.
TEST_F(EngineKernels, MatmulOddKIndexesWeightRowsPast2To31Elements) {
  need(1);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  constexpr int64_t kK = 8199;
  const size_t wn = size_t(kRows) * kK, n = size_t(kLast) * kK;
  static_assert(size_t(kRows - kLast) * 8199 > (size_t(1) << 31), "the compared weight rows lie past 2^31 elements");
  uint16_t *W, *Wm;
  float *x, *y, *ym;
  ASSERT_TRUE(get(0, wn, &W).ok && get(1, n, &Wm).ok && get(2, n, &x).ok && get(3, size_t(kLast) * kRows, &y).ok &&
              get(4, size_t(kLast) * kLast, &ym).ok);
  const std::vector<uint16_t> wv = drawn_bf16(n, 61);
  ASSERT_TRUE(fill(W, wn, 0).ok && eb_->upload(W + (wn - n), wv.data(), n * 2).ok && put(Wm, wv).ok);
  ASSERT_TRUE(put(x, drawn(n, 62)).ok);
  for (int b : {1, kLast}) {
    const std::string what = "matmul, K 8199, W past 2^31 elements, batch " + std::to_string(b);
    ASSERT_TRUE(fill(y, size_t(kLast) * kRows, 0xFF).ok && fill(ym, size_t(kLast) * kLast, 0xFF).ok);
    Status st = eb_->matmul(W, kRows, kK, x, b, y);
    ASSERT_TRUE(st.ok) << what << ": " << st.message;
    ASSERT_TRUE(eb_->matmul(Wm, kLast, kK, x, b, ym).ok);
    for (int r = 0; r < b; ++r)
      expect_tail(y + size_t(r) * kRows, size_t(kRows), ym + size_t(r) * kLast, size_t(kLast),
                  what + ", row " + std::to_string(r));
  }
#endif
}

// The staged product (batch <= 8) writing y past 2^31 floats: W of 310,000,000 rows of K 8
// (zeros but the last 16 rows), batch 8, so batch row 7's outputs start at 7 x 310e6 = 2.17e9
// floats; each batch row's last 16 outputs against those 16 weight rows alone. The staged
// kernel writes `y[int64_t(r) * rows + o]`; a 32-bit offset wraps there. y is 9.9 GB, W
// 5 GB. (MatmulIndexesPast2To31Elements's y past 2^31 is the per-block kernel's, at batch
// 2^18 + 32.)
TEST_F(EngineKernels, MatmulStagedWritesOutputsPast2To31Floats) {
  need(2);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  constexpr int64_t kOutRows = 310000000, kK = 8;
  constexpr int kB = 8;
  static_assert(int64_t(kB - 1) * kOutRows > (int64_t(1) << 31), "batch row 7's outputs lie past 2^31 floats");
  const size_t wn = size_t(kOutRows) * kK, yn = size_t(kB) * kOutRows, n = size_t(kLast) * kK;
  uint16_t *W, *Wm;
  float *x, *y, *ym;
  ASSERT_TRUE(get(0, wn, &W).ok && get(1, yn, &y).ok && get(2, n, &Wm).ok && get(3, size_t(kB) * kK, &x).ok &&
              get(4, size_t(kB) * kLast, &ym).ok);
  const std::vector<uint16_t> wv = drawn_bf16(n, 71);
  ASSERT_TRUE(fill(W, wn, 0).ok && eb_->upload(W + (wn - n), wv.data(), n * 2).ok && put(Wm, wv).ok);
  ASSERT_TRUE(put(x, drawn(size_t(kB) * kK, 72)).ok);
  // The group tree in one pass and in two (xs_tree_exchange<8> and <4>: both write y).
  for (int passes : {1, 2}) {
    EngineBackend::Debug d;
    d.tree_passes = passes;
    ASSERT_TRUE(eb_->set_debug(d).ok);
    const std::string what = "matmul (staged, tree in " + std::to_string(passes) + " pass(es)), y past 2^31 floats";
    ASSERT_TRUE(fill(y, yn, 0xFF).ok && fill(ym, size_t(kB) * kLast, 0xFF).ok);
    Status st = eb_->matmul(W, kOutRows, kK, x, kB, y);
    ASSERT_TRUE(st.ok) << what << ": " << st.message;
    ASSERT_TRUE(eb_->matmul(Wm, kLast, kK, x, kB, ym).ok);
    for (int r = 0; r < kB; ++r)
      expect_tail(y + size_t(r) * kOutRows, size_t(kOutRows), ym + size_t(r) * kLast, size_t(kLast),
                  what + ", batch row " + std::to_string(r));
  }
  ASSERT_TRUE(eb_->set_debug(EngineBackend::Debug{}).ok);
#endif
}

// The embedding of more rows than a grid's y holds (65535): 70,000 tokens in one launch
// (embed_kernel walks rows by gridDim.y), each row the bf16 values of its token's table row.
// Before, the launch refused more than 65535 rows, which a kv-gate fixture's prefill of 65536
// rows reaches. Small buffers.
TEST_F(EngineKernels, EmbedTakesMoreRowsThanAGridsY) {
  need(0);
  if (IsSkipped() || HasFatalFailure()) return;
#ifdef KC_HAVE_CUDA
  constexpr int kN = 70000, kEDim = 96, kVocab = 300;
  uint16_t* E;
  int32_t* tok;
  float* out;
  ASSERT_TRUE(get(0, size_t(kVocab) * kEDim, &E).ok && get(1, size_t(kN), &tok).ok &&
              get(2, size_t(kN) * kEDim, &out).ok);
  const std::vector<uint16_t> ev = drawn_bf16(size_t(kVocab) * kEDim, 81);
  std::vector<int32_t> tv(kN);
  for (int i = 0; i < kN; ++i) tv[i] = int32_t((uint64_t(i) * 2654435761u) % kVocab);
  ASSERT_TRUE(put(E, ev).ok && put(tok, tv).ok && fill(out, size_t(kN) * kEDim, 0xFF).ok);
  Status st = eb_->embed(E, kVocab, kEDim, tok, kN, out);
  ASSERT_TRUE(st.ok) << st.message;
  std::vector<float> got(size_t(kN) * kEDim);
  ASSERT_TRUE(eb_->download(got.data(), out, got.size() * 4).ok);
  int bad = 0;
  for (int i = 0; i < kN && bad < 5; ++i)
    for (int j = 0; j < kEDim; ++j) {
      const float want = bf16_to_float(ev[size_t(tv[i]) * kEDim + j]);
      if (std::memcmp(&got[size_t(i) * kEDim + j], &want, 4) != 0 && ++bad <= 5)
        ADD_FAILURE() << "row " << i << " (token " << tv[i] << ") element " << j << ": " << got[size_t(i) * kEDim + j]
                      << ", the table holds " << want;
    }
#endif
}

}  // namespace
}  // namespace kc
