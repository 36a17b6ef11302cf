// Session 44: a lane-array model of the experiment patch's xs_tree_exchange<K> (bit 8) against the
// plain butterfly, bit for bit, 20000 draws of K = 2, 4, 8: g++ -O1 -ffp-contract=off tree_exchange_model.cpp
// && ./a.out prints "mismatches: 0" (a pairing off by one level, or the wrong lane writing, gave 280000).
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
// Lane-array model of xs_tree_exchange<K> against the plain butterfly of each value.
template <int K>
int check(std::mt19937& g) {
  std::uniform_real_distribution<float> u(-1e3f, 1e3f);
  float in[32][K];
  for (auto& l : in) for (auto& x : l) x = u(g) * (g() % 2 ? 1e-3f : 1.f);
  // reference: value j, lanes hold in[l][j], v += shfl_xor(v, h) for h = 16..1; lane 0's result
  float ref[K];
  for (int j = 0; j < K; ++j) {
    float v[32];
    for (int l = 0; l < 32; ++l) v[l] = in[l][j];
    for (int h = 16; h >= 1; h /= 2) {
      float nv[32];
      for (int l = 0; l < 32; ++l) nv[l] = v[l] + v[l ^ h];
      std::memcpy(v, nv, sizeof v);
    }
    ref[j] = v[0];
  }
  float v[32][K];
  std::memcpy(v, in, sizeof v);
  int h = 16;
  for (int cnt = K; cnt > 1; cnt /= 2, h /= 2) {
    float send[32][K], keep[32][K];
    for (int l = 0; l < 32; ++l) {
      const bool upper = (l & h) != 0;
      for (int j = 0; j < cnt / 2; ++j) {
        send[l][j] = upper ? v[l][j] : v[l][j + cnt / 2];
        keep[l][j] = upper ? v[l][j + cnt / 2] : v[l][j];
      }
    }
    for (int l = 0; l < 32; ++l)
      for (int j = 0; j < cnt / 2; ++j) v[l][j] = keep[l][j] + send[l ^ h][j];
  }
  for (; h >= 1; h /= 2) {
    float nv[32];
    for (int l = 0; l < 32; ++l) nv[l] = v[l][0] + v[l ^ h][0];
    for (int l = 0; l < 32; ++l) v[l][0] = nv[l];
  }
  constexpr int span = 32 / K;
  int bad = 0;
  for (int l = 0; l < 32; l += span) {
    const int j = l / span;
    if (std::memcmp(&v[l][0], &ref[j], 4) != 0) ++bad;
  }
  return bad;
}
int main() {
  std::mt19937 g(7);
  int bad = 0;
  for (int t = 0; t < 20000; ++t) bad += check<2>(g) + check<4>(g) + check<8>(g);
  std::printf("mismatches: %d\n", bad);
  return bad != 0;
}
