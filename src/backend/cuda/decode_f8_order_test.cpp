// The FP8 decode attention's column and chunk orders (decode_f8_order.h), played through on the host: one
// warp's fragments built as DecodeMmaKernel<D, *, true> builds them (16 codes of a key row per lane and 64
// columns, Q staged in QFragCol's order, V's tiles transposed), multiplied as mma.sync m16n8k16, ldmatrix
// and movmatrix define their fragments (PTX ISA), must give Q K^T and P V exactly; and a quarter warp's
// 16-byte loads of a raw page must fall in different banks. Runs without a GPU.
#include "backend/cuda/decode_f8_order.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace infernix::cuda {
namespace {

constexpr int kKeys = 16;  // a warp's keys of a page
constexpr int kLanes = 32;

using Pair = std::pair<int64_t, int64_t>;  // the two 16-bit values of a fragment register
using Mat = std::vector<std::vector<int64_t>>;

Mat Random(int rows, int cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-7, 7);
  Mat m(rows, std::vector<int64_t>(cols));
  for (auto& row : m)
    for (auto& v : row) v = dist(rng);
  return m;
}

// c (16 x 8, lane (g, t): c[g][2t..2t+1] then c[g+8][2t..2t+1]) += a (16 x 16) b (16 x 8), from the lanes'
// fragments: a's registers (g, 2t), (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8); b's (k 2t, n g), (k 2t + 8, n g).
void Mma(std::array<std::array<int64_t, 4>, kLanes>& c, const std::array<std::array<Pair, 4>, kLanes>& a,
         const std::array<std::array<Pair, 2>, kLanes>& b) {
  Mat am(16, std::vector<int64_t>(16)), bm(16, std::vector<int64_t>(8));
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int r = 0; r < 4; ++r) {
      am[rows[r]][cols[r]] = a[lane][r].first;
      am[rows[r]][cols[r] + 1] = a[lane][r].second;
    }
    for (int r = 0; r < 2; ++r) {
      bm[2 * t + 8 * r][g] = b[lane][r].first;
      bm[2 * t + 8 * r + 1][g] = b[lane][r].second;
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int e = 0; e < 4; ++e)
      for (int k = 0; k < 16; ++k) c[lane][e] += am[rows[e]][k] * bm[k][cols[e]];
  }
}

// movmatrix.m8n8.trans: lane (g, t) holds row g, columns 2t and 2t + 1, before and after.
std::array<Pair, kLanes> MovMatrixTrans(const std::array<Pair, kLanes>& x) {
  int64_t m[8][8];
  for (int lane = 0; lane < kLanes; ++lane) {
    m[lane / 4][2 * (lane % 4)] = x[lane].first;
    m[lane / 4][2 * (lane % 4) + 1] = x[lane].second;
  }
  std::array<Pair, kLanes> y;
  for (int lane = 0; lane < kLanes; ++lane) y[lane] = {m[2 * (lane % 4)][lane / 4], m[2 * (lane % 4) + 1][lane / 4]};
  return y;
}

template <int D>
void CheckWarpProducts() {
  std::mt19937 rng(D);
  const Mat q = Random(16, D, rng), k = Random(kKeys, D, rng), v = Random(kKeys, D, rng), p = Random(16, kKeys, rng);
  // The staged rows: Q in QFragCol's order; K and V codes with their chunks in RawChunk's order.
  Mat qs(16, std::vector<int64_t>(D)), ks(kKeys, std::vector<int64_t>(D)), vs(kKeys, std::vector<int64_t>(D));
  for (int r = 0; r < 16; ++r)
    for (int a = 0; a < D; ++a) qs[r][QFragCol(a)] = q[r][a];
  for (int r = 0; r < kKeys; ++r)
    for (int c = 0; c < D / 16; ++c)
      for (int i = 0; i < 16; ++i) {
        ks[r][RawChunk<D>(r, c) * 16 + i] = k[r][c * 16 + i];
        vs[r][RawChunk<D>(r, c) * 16 + i] = v[r][c * 16 + i];
      }
  // A lane's 16 codes of row r from the 64 columns at kq * 64, as the kernel loads them.
  auto codes = [](const Mat& m, int r, int kq, int t4) {
    std::array<int64_t, 16> out;
    for (int i = 0; i < 16; ++i) out[i] = m[r][RawChunk<D>(r, kq * 4 + t4) * 16 + i];
    return out;
  };

  // S = Q K^T: tiles nt of 8 keys (rows nt * 8 + g of K), 4 mma steps per 64 columns.
  std::array<std::array<std::array<int64_t, 4>, kLanes>, 2> s{};
  for (int kq = 0; kq < D / 64; ++kq)
    for (int j = 0; j < 4; ++j) {
      std::array<std::array<Pair, 4>, kLanes> a;  // ldmatrix.x4 of Q's staged columns (kq * 4 + j) * 16 ..
      for (int lane = 0; lane < kLanes; ++lane) {
        const int g = lane / 4, t = lane % 4, c0 = (kq * 4 + j) * 16;
        a[lane] = {Pair{qs[g][c0 + 2 * t], qs[g][c0 + 2 * t + 1]},
                   Pair{qs[g + 8][c0 + 2 * t], qs[g + 8][c0 + 2 * t + 1]},
                   Pair{qs[g][c0 + 8 + 2 * t], qs[g][c0 + 9 + 2 * t]},
                   Pair{qs[g + 8][c0 + 8 + 2 * t], qs[g + 8][c0 + 9 + 2 * t]}};
      }
      for (int nt = 0; nt < 2; ++nt) {
        std::array<std::array<Pair, 2>, kLanes> b;
        for (int lane = 0; lane < kLanes; ++lane) {
          const auto w = codes(ks, nt * 8 + lane / 4, kq, lane % 4);
          b[lane] = {Pair{w[4 * j], w[4 * j + 1]}, Pair{w[4 * j + 2], w[4 * j + 3]}};
        }
        Mma(s[nt], a, b);
      }
    }
  for (int lane = 0; lane < kLanes; ++lane)
    for (int nt = 0; nt < 2; ++nt)
      for (int e = 0; e < 4; ++e) {
        const int row = lane / 4 + (e / 2) * 8, key = nt * 8 + 2 * (lane % 4) + e % 2;
        int64_t want = 0;
        for (int i = 0; i < D; ++i) want += q[row][i] * k[key][i];
        ASSERT_EQ(s[nt][lane][e], want) << "D " << D << " row " << row << " key " << key;
      }

  // O += P V: P in the accumulator layout of S (its A fragment); V's tiles decoded along rows h * 8 + g.
  std::array<std::array<Pair, 4>, kLanes> pa;
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4, t = lane % 4;
    pa[lane] = {Pair{p[g][2 * t], p[g][2 * t + 1]}, Pair{p[g + 8][2 * t], p[g + 8][2 * t + 1]},
                Pair{p[g][8 + 2 * t], p[g][9 + 2 * t]}, Pair{p[g + 8][8 + 2 * t], p[g + 8][9 + 2 * t]}};
  }
  std::vector<std::array<std::array<int64_t, 4>, kLanes>> o(D / 8);
  for (auto& tile : o)
    for (auto& acc : tile) acc.fill(0);
  for (int kq = 0; kq < D / 64; ++kq)
    for (int l = 0; l < 8; ++l) {
      std::array<std::array<Pair, kLanes>, 2> half;  // rows h * 8 + g, codes 2 l and 2 l + 1 of the lane's 16
      for (int h = 0; h < 2; ++h) {
        std::array<Pair, kLanes> x;
        for (int lane = 0; lane < kLanes; ++lane) {
          const auto w = codes(vs, h * 8 + lane / 4, kq, lane % 4);
          x[lane] = {w[2 * l], w[2 * l + 1]};
        }
        half[h] = MovMatrixTrans(x);
      }
      std::array<std::array<Pair, 2>, kLanes> b;
      for (int lane = 0; lane < kLanes; ++lane) b[lane] = {half[0][lane], half[1][lane]};
      Mma(o[kq * 8 + l], pa, b);
    }
  for (int lane = 0; lane < kLanes; ++lane)
    for (int nd = 0; nd < D / 8; ++nd)
      for (int e = 0; e < 4; ++e) {
        const int row = lane / 4 + (e / 2) * 8, col = VDim(nd / 8, nd % 8, 2 * (lane % 4)) + e % 2;
        int64_t want = 0;
        for (int key = 0; key < kKeys; ++key) want += p[row][key] * v[key][col];
        ASSERT_EQ(o[nd][lane][e], want) << "D " << D << " row " << row << " column " << col;
      }
}

TEST(DecodeF8Order, WarpFragmentsGiveTheProducts) {
  CheckWarpProducts<64>();
  CheckWarpProducts<128>();
  CheckWarpProducts<256>();
}

TEST(DecodeF8Order, ColumnOrdersArePermutations) {
  for (int d : {64, 128, 256}) {
    std::set<int> q, o;
    for (int a = 0; a < d; ++a) q.insert(QFragCol(a));
    for (int kq = 0; kq < d / 64; ++kq)
      for (int l = 0; l < 8; ++l)
        for (int n = 0; n < 8; ++n) o.insert(VDim(kq, l, n));
    EXPECT_EQ(q.size(), static_cast<size_t>(d));
    EXPECT_EQ(o.size(), static_cast<size_t>(d));
    EXPECT_EQ(*q.rbegin(), d - 1);
    EXPECT_EQ(*o.rbegin(), d - 1);
  }
}

// A 16-byte shared-memory load is served a quarter warp at a time: lanes 8 q .. 8 q + 7 (rows 2 q and 2 q + 1
// of the 8 a load touches, chunk 4 kq + t4 of each) must cover the 32 banks once.
template <int D>
void CheckBanks() {
  for (int row0 = 0; row0 < 64; row0 += 8)  // rows key0 + nt * 8 + g (or + 8 h): row0 + g
    for (int kq = 0; kq < D / 64; ++kq)
      for (int quarter = 0; quarter < 4; ++quarter) {
        std::set<int> banks;
        for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane) {
          const int r = row0 + lane / 4, byte = r * D + RawChunk<D>(r, kq * 4 + lane % 4) * 16;
          for (int w = 0; w < 4; ++w) banks.insert((byte / 4 + w) % 32);
        }
        EXPECT_EQ(banks.size(), 32U) << "D " << D << " rows from " << row0 << " kq " << kq;
      }
}

TEST(DecodeF8Order, QuarterWarpLoadsTakeEveryBankOnce) {
  CheckBanks<64>();
  CheckBanks<128>();
  CheckBanks<256>();
}

}  // namespace
}  // namespace infernix::cuda
