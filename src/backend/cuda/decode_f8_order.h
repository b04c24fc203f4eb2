// Where the FP8 decode attention (attention_decode_mma.cu, DecodeMmaKernel<D, *, true>) keeps what: the
// order of Q's staged columns, of P V's output columns and of a raw page row's 16-byte chunks. The kernel
// turns a key's codes into mma fragments in registers without reordering them, which works because a dot
// product does not care about the order of head_dim: Q is staged in the order the codes arrive in, and P
// V's output columns come out in an order the partial results undo. Host and device code (the host test,
// decode_f8_order_test.cpp, plays a warp's fragments through these maps). C++17.
#pragma once

#include <cuda_runtime.h>

namespace infernix::cuda {

// The column of Q's staged f16 row that holds column a. Within each 64 columns, lane t4 of a quad takes 16
// contiguous codes of a key row (columns 16 t4 + 4 j + i), which are its B fragment of mma step j of the
// 64: i = 0, 1 at k = 2 t4 + i and i = 2, 3 at k = 2 t4 + 8 + i - 2 (the m16n8k16 layout).
__host__ __device__ constexpr int QFragCol(int a) {
  const int w = a % 64, t4 = w / 16, j = (w % 16) / 4, hi = (w % 4) / 2, e = w % 2;
  return a - w + j * 16 + hi * 8 + 2 * t4 + e;
}

// The head_dim column of output column n (0-7) of P V's n-tile 8 kq + l (l 0-7): lane (g, t4) decodes V's
// codes 16 t4 .. 16 t4 + 15 of the 64 columns from kq * 64 along a key row, two per 8 x 8 tile, and
// transposes each tile into the B fragment (movmatrix), so tile l holds the columns 16 (n / 2) + 2 l + n % 2.
__host__ __device__ constexpr int VDim(int kq, int l, int n) { return kq * 64 + (n / 2) * 16 + 2 * l + n % 2; }

// Where 16-byte chunk c of a raw page's row `row` (D codes) is staged: from head_dim 128 a row is a multiple
// of 128 bytes, so odd rows swap their halves of each 128 bytes and a quarter warp's loads (rows 2 q and
// 2 q + 1, 4 chunks each) fall in different banks; at 64 odd rows already start mid-way.
template <int D>
__host__ __device__ constexpr int RawChunk(int row, int c) {
  return D >= 128 ? c ^ ((row & 1) << 2) : c;
}

}  // namespace infernix::cuda
