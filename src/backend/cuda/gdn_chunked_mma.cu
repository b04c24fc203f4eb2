// Gated DeltaNet prefill, the sequential pass over chunks on tensor cores: the second kernel of the
// chunked delta rule (gdn_chunked.cu has the math, the prep kernel and the CUDA-core form of this pass,
// which serves the shapes this one does not take). Same inputs and outputs as GdnChunkStateKernel.
//
// Per chunk of 64 tokens, with S the [dk, dv] f32 state before the chunk (Q, K raw bf16; qc, kc, gamma
// the prep kernel's per-token coefficients):
//   Delta = U - W S                               [64, dv]
//   O     = diag(qc) Q S + P Delta                 [64, dv]  (bf16 out)
//   S     = gamma_last S + (diag(kc) K)^T Delta    [dk, dv]
// A block takes 32 columns of S for one (value head, sequence): two groups of 16 columns, each shared by
// two warps that hold one half of dk each. A warp works on S^T, so that every product has its 16
// columns as the M = 16 rows: its half of S^T [16, dk / 2] stays in registers as mma accumulators (dk / 16
// tiles of m16n8) from the first chunk to the last, and the same registers are the A operand of its half
// of W S and Q S, because the k order inside an 8-wide mma step is permuted: logical k t -> physical 2t
// and t + 4 -> 2t + 1, so accumulator pair (2t, 2t + 1) of a thread is its A pair (t, t + 4), and every B
// operand is read with the same permutation (two adjacent values of a row). The two warps of a group swap
// their halves' sums through shared memory (each adds the other's to its own: the same bits in both), so
// both hold Delta^T, which feeds P Delta (the output tiles split between them) and each half's state
// update straight from its accumulators. Splitting dk gives 2 x 32 x 8 = 512 warps for Qwen3-Next's 32
// value heads of one sequence, about one per scheduler of the GPU, where a warp per 16 columns gave 256.
//
// Precision: the products run as mma.sync m16n8k8 tf32 with f32 accumulation, each f32 operand split into
// a tf32 value and a tf32 remainder (x = big + small; three products big*big + big*small + small*big), so
// the sums carry ~f32 precision (a plain tf32 product would round every operand to 11 bits, and the state
// would carry that error from chunk to chunk). Q and K are bf16, exact in tf32: their products take two.
//
// Each chunk's operands (W, P, U's columns, Q, K, the coefficients; 96 KB at dk = 128) are copied into
// shared memory with cp.async one chunk ahead (two buffers), the rows past a short last chunk zero-filled
// so that they stay inert. Rows are padded so that the fragment loads of a warp hit distinct banks.
#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {
namespace {

constexpr int kChunk = kGdnChunk;
constexpr int kWarpsPerBlock = 4;  // two groups of 16 columns, each split over dk by two warps
constexpr int kThreads = 32 * kWarpsPerBlock;
constexpr int kBlockCols = 16 * kWarpsPerBlock / 2;  // columns of S per block
constexpr int kTokenTiles = kChunk / 8;
static_assert(kChunk == 64, "the token tiles below");

// One chunk's operands in shared memory (byte offsets; strides in elements).
struct ChunkStage {
  int ldw, ldp, ldq, ldu;
  int w, p, q, k, u, coef, bytes;
};

__host__ __device__ constexpr ChunkStage StageOf(int dk) {
  ChunkStage s{};
  s.ldw = dk + 8;          // f32 W rows: 8 floats of padding, so rows g = 0..3 start 8 banks apart
  s.ldp = kChunk + 8;      // f32 P rows, likewise
  s.ldq = dk + 8;          // bf16 Q / K rows: 16 bytes of padding, rows 16-byte aligned
  s.ldu = kBlockCols + 4;  // f32 U rows (this block's columns)
  s.w = 0;
  s.p = s.w + 4 * kChunk * s.ldw;
  s.q = s.p + 4 * kChunk * s.ldp;
  s.k = s.q + 2 * kChunk * s.ldq;
  s.u = s.k + 2 * kChunk * s.ldq;
  s.coef = s.u + 4 * kChunk * s.ldu;
  s.bytes = s.coef + 16 * kChunk;
  return s;
}

// Two stages, then the exchange of the dk halves' partial sums (2 x 8 accumulator tiles per warp).
constexpr size_t SmemBytes(int dk) {
  return 2 * static_cast<size_t>(StageOf(dk).bytes) + sizeof(float) * kWarpsPerBlock * 2 * kTokenTiles * 4 * 32;
}

// x = big + small, both tf32 (the remainder of the rounding, rounded in turn).
__device__ __forceinline__ void SplitTf32(float x, uint32_t& big, uint32_t& small) {
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(big) : "f"(x));
  const float rest = x - __uint_as_float(big);
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(small) : "f"(rest));
}

// c (f32 16x8) += a (tf32 16x8, row) @ b (tf32 8x8, col): a0 / a1 rows g / g + 8 at k t, a2 / a3 at k t + 4;
// b0 / b1 column g at k t / t + 4.
__device__ __forceinline__ void MmaTf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// An accumulator tile (rows g, g + 8 at physical columns 2t, 2t + 1) as the split A operand of the next
// product (logical k t, t + 4 = physical 2t, 2t + 1).
__device__ __forceinline__ void SplitA(const float (&c)[4], uint32_t (&big)[4], uint32_t (&small)[4]) {
  SplitTf32(c[0], big[0], small[0]);
  SplitTf32(c[2], big[1], small[1]);
  SplitTf32(c[1], big[2], small[2]);
  SplitTf32(c[3], big[3], small[3]);
}

// c += a * b for split a and f32 b (the pair at physical k 2t, 2t + 1): three tf32 products.
__device__ __forceinline__ void Mma3(float (&c)[4], const uint32_t (&ab)[4], const uint32_t (&as)[4], float2 b) {
  uint32_t bb0, bs0, bb1, bs1;
  SplitTf32(b.x, bb0, bs0);
  SplitTf32(b.y, bb1, bs1);
  MmaTf32(c, as, bb0, bb1);
  MmaTf32(c, ab, bs0, bs1);
  MmaTf32(c, ab, bb0, bb1);
}

// c += a * b for split a and a bf16 pair b (low half at physical k 2t): two tf32 products (b is exact).
__device__ __forceinline__ void Mma2(float (&c)[4], const uint32_t (&ab)[4], const uint32_t (&as)[4], uint32_t b) {
  const uint32_t b0 = b << 16, b1 = b & 0xffff0000u;
  MmaTf32(c, as, b0, b1);
  MmaTf32(c, ab, b0, b1);
}

template <int DK>
__global__ void __launch_bounds__(kThreads, 1)
    GdnChunkStateMmaKernel(DeviceLayout layout, const bf16* q, const bf16* k, GdnChunkScratch ws, float* state,
                           int64_t slot_stride, int nk, int nv, int dv, int tiled, bf16* out) {
  constexpr int kJ = DK / 8 / 2;  // dk tiles of S^T per warp (its half of dk)
  constexpr ChunkStage L = StageOf(DK);
  extern __shared__ __align__(16) uint8_t smem[];
  const int h = blockIdx.y, seq = blockIdx.z;
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1], n = layout.seq_info[seq * 4 + 2];
  if (n == 0) return;
  const int kh = GdnKeyHead(h, nk, nv, tiled);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int half = warp & 1, group = warp >> 1;  // the warp's half of dk, and its 16 columns
  const int j0 = half * kJ;                      // its first dk tile
  const int c_block = blockIdx.x * kBlockCols, cl = 16 * group, c0 = c_block + cl;
  const bool mine = c0 < dv;  // dv % 16 == 0: a warp's 16 columns are all valid or none
  float* st = state + slot * slot_stride + static_cast<int64_t>(h) * DK * dv;  // [dk, dv]
  float* xchg = reinterpret_cast<float*>(smem + 2 * L.bytes);                  // [warp][2][8 tiles][4][32 lanes]

  // Copies chunk i0's operands into stage buffer `buf` (rows past the chunk's end as zeros).
  auto stage = [&](int i0, uint8_t* buf) {
    const int len = min(kChunk, n - i0);
    const int64_t t0 = tb + i0;
    constexpr int kWq = DK / 4, kQq = DK / 8;  // 16-byte words of a W row, of a Q / K row
    for (int e = tid; e < kChunk * kWq; e += kThreads) {
      const int i = e / kWq, w4 = e % kWq;
      const bool in = i < len;
      CpAsync16Zfill(buf + L.w + 4 * (i * L.ldw + 4 * w4), ws.w + ((t0 + (in ? i : 0)) * nv + h) * DK + 4 * w4, in);
    }
    for (int e = tid; e < kChunk * (kChunk / 4); e += kThreads) {
      const int i = e / (kChunk / 4), w4 = e % (kChunk / 4);
      const bool in = i < len;
      CpAsync16Zfill(buf + L.p + 4 * (i * L.ldp + 4 * w4), ws.p + ((t0 + (in ? i : 0)) * nv + h) * kChunk + 4 * w4, in);
    }
    for (int e = tid; e < 2 * kChunk * kQq; e += kThreads) {
      const int which = e / (kChunk * kQq), r = e % (kChunk * kQq), i = r / kQq, w8 = r % kQq;
      const bool in = i < len;
      const bf16* src = (which == 0 ? q : k) + ((t0 + (in ? i : 0)) * nk + kh) * DK + 8 * w8;
      CpAsync16Zfill(buf + (which == 0 ? L.q : L.k) + 2 * (i * L.ldq + 8 * w8), src, in);
    }
    for (int e = tid; e < kChunk * (kBlockCols / 4); e += kThreads) {
      const int i = e / (kBlockCols / 4), w4 = e % (kBlockCols / 4);
      const bool in = i < len && c_block + 4 * w4 < dv;
      CpAsync16Zfill(buf + L.u + 4 * (i * L.ldu + 4 * w4),
                     ws.u + ((t0 + (in ? i : 0)) * nv + h) * dv + (in ? c_block + 4 * w4 : 0), in);
    }
    for (int i = tid; i < kChunk; i += kThreads) {
      const bool in = i < len;
      CpAsync16Zfill(buf + L.coef + 16 * i, ws.coef + ((t0 + (in ? i : 0)) * nv + h) * 4, in);
    }
  };

  stage(0, smem);
  CpAsyncCommit();

  // S^T tile j (of this warp's half): rows c0 + g, c0 + g + 8 (columns of S) at dk 8 (j0 + j) + 2t, + 1.
  float s[kJ][4];
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const int64_t r = 8 * (j0 + j) + 2 * t;
    s[j][0] = mine ? st[r * dv + c0 + g] : 0.0f;
    s[j][1] = mine ? st[(r + 1) * dv + c0 + g] : 0.0f;
    s[j][2] = mine ? st[r * dv + c0 + g + 8] : 0.0f;
    s[j][3] = mine ? st[(r + 1) * dv + c0 + g + 8] : 0.0f;
  }

  const int chunks = (n + kChunk - 1) / kChunk;
  for (int ci = 0; ci < chunks; ++ci) {
    if (ci + 1 < chunks) stage((ci + 1) * kChunk, smem + ((ci + 1) & 1) * L.bytes);
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    const uint8_t* buf = smem + (ci & 1) * L.bytes;
    const float* w_sm = reinterpret_cast<const float*>(buf + L.w);
    const float* p_sm = reinterpret_cast<const float*>(buf + L.p);
    const bf16* q_sm = reinterpret_cast<const bf16*>(buf + L.q);
    const bf16* k_sm = reinterpret_cast<const bf16*>(buf + L.k);
    const float* u_sm = reinterpret_cast<const float*>(buf + L.u) + cl;
    const float4* cf = reinterpret_cast<const float4*>(buf + L.coef);
    const int len = min(kChunk, n - ci * kChunk);
    const int64_t t0 = tb + static_cast<int64_t>(ci) * kChunk;

    // This half's parts of (S^T W^T) and S^T Q^T, token tiles nt (tokens 8 nt + 2t, + 1 at rows g, g + 8).
    float d[kTokenTiles][4] = {}, o[kTokenTiles][4] = {};
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      uint32_t ab[4], as[4];
      SplitA(s[j], ab, as);
#pragma unroll
      for (int nt = 0; nt < kTokenTiles; ++nt) {
        const int row = 8 * nt + g, col = 8 * (j0 + j) + 2 * t;
        Mma3(d[nt], ab, as, *reinterpret_cast<const float2*>(w_sm + row * L.ldw + col));
        Mma2(o[nt], ab, as, *reinterpret_cast<const uint32_t*>(q_sm + row * L.ldq + col));
      }
    }
    // The two halves' sums: each warp adds the other's part to its own, so both hold the same bits.
    float* mine_x = xchg + warp * (2 * kTokenTiles * 4 * 32) + lane;
    const float* other_x = xchg + (warp ^ 1) * (2 * kTokenTiles * 4 * 32) + lane;
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        mine_x[(nt * 4 + e) * 32] = d[nt][e];
        mine_x[((kTokenTiles + nt) * 4 + e) * 32] = o[nt][e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        d[nt][e] += other_x[(nt * 4 + e) * 32];
        o[nt][e] += other_x[((kTokenTiles + nt) * 4 + e) * 32];
      }
    }
    // Delta^T = U^T - S^T W^T; O^T scaled by qc per token.
#pragma unroll
    for (int nt = 0; nt < kTokenTiles; ++nt) {
      const int r = 8 * nt + 2 * t;
      d[nt][0] = u_sm[r * L.ldu + g] - d[nt][0];
      d[nt][1] = u_sm[(r + 1) * L.ldu + g] - d[nt][1];
      d[nt][2] = u_sm[r * L.ldu + g + 8] - d[nt][2];
      d[nt][3] = u_sm[(r + 1) * L.ldu + g + 8] - d[nt][3];
      const float qa = cf[r].x, qb = cf[r + 1].x;
      o[nt][0] *= qa;
      o[nt][1] *= qb;
      o[nt][2] *= qa;
      o[nt][3] *= qb;
    }

    // O^T += Delta^T P^T (P is zero above the diagonal: token tile ks reaches output tiles nt >= ks), the
    // output tiles shared out by cost: half 0 takes 0, 3, 4, 7 and half 1 takes 1, 2, 5, 6 (18 products
    // each), then stores them.
#pragma unroll
    for (int ks = 0; ks < kTokenTiles; ++ks) {
      uint32_t ab[4], as[4];
      SplitA(d[ks], ab, as);
#pragma unroll
      for (int nt = ks; nt < kTokenTiles; ++nt) {
        if (((nt ^ (nt >> 1)) & 1) != half) continue;  // the same for the whole warp
        Mma3(o[nt], ab, as, *reinterpret_cast<const float2*>(p_sm + (8 * nt + g) * L.ldp + 8 * ks + 2 * t));
      }
    }
    if (mine) {
#pragma unroll
      for (int nt = 0; nt < kTokenTiles; ++nt) {
        if (((nt ^ (nt >> 1)) & 1) != half) continue;
        const int r = 8 * nt + 2 * t;
        bf16* o0 = out + ((t0 + r) * nv + h) * dv + c0 + g;
        if (r < len) {
          o0[0] = __float2bfloat16_rn(o[nt][0]);
          o0[8] = __float2bfloat16_rn(o[nt][2]);
        }
        if (r + 1 < len) {
          o0[static_cast<int64_t>(nv) * dv] = __float2bfloat16_rn(o[nt][1]);
          o0[static_cast<int64_t>(nv) * dv + 8] = __float2bfloat16_rn(o[nt][3]);
        }
      }
    }

    // S^T = gamma_last S^T + (Delta^T diag(kc)) K, this warp's half of dk.
    const float gamma_last = cf[len - 1].w;
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] *= gamma_last;
    }
#pragma unroll
    for (int ks = 0; ks < kTokenTiles; ++ks) {
      const int r = 8 * ks + 2 * t;
      const float ka = cf[r].y, kb = cf[r + 1].y;
      const float dkc[4] = {d[ks][0] * ka, d[ks][1] * kb, d[ks][2] * ka, d[ks][3] * kb};
      uint32_t ab[4], as[4];
      SplitA(dkc, ab, as);
      if constexpr (kJ % 4 == 0) {
        // K [token 8 ks + 2t, + 1][dk 8j + g] as bf16 pairs: one transposing ldmatrix per 4 dk tiles.
#pragma unroll
        for (int j4 = 0; j4 < kJ / 4; ++j4) {
          uint32_t kr[4];
          LdMatrixX4Trans(kr, k_sm + (8 * ks + (lane & 7)) * L.ldq + 8 * (j0 + 4 * j4 + (lane >> 3)));
#pragma unroll
          for (int m = 0; m < 4; ++m) Mma2(s[4 * j4 + m], ab, as, kr[m]);
        }
      } else {
        const uint16_t* kh16 = reinterpret_cast<const uint16_t*>(k_sm);
#pragma unroll
        for (int j = 0; j < kJ; ++j) {
          const uint32_t lo = kh16[r * L.ldq + 8 * (j0 + j) + g], hi = kh16[(r + 1) * L.ldq + 8 * (j0 + j) + g];
          Mma2(s[j], ab, as, lo | (hi << 16));
        }
      }
    }
    __syncthreads();  // this buffer is staged again for chunk ci + 2, and the exchange is written again
  }

  if (mine) {
#pragma unroll
    for (int j = 0; j < kJ; ++j) {
      const int64_t r = 8 * (j0 + j) + 2 * t;
      st[r * dv + c0 + g] = s[j][0];
      st[(r + 1) * dv + c0 + g] = s[j][1];
      st[r * dv + c0 + g + 8] = s[j][2];
      st[(r + 1) * dv + c0 + g + 8] = s[j][3];
    }
  }
}

// The head dims with a kernel: With(dk, f) calls f(integral_constant<dk>) if dk is one of them, Each(f)
// calls it for every one.
template <int... kDims>
struct HeadDims {
  template <typename F>
  static bool With(int dk, F&& f) {
    return ((dk == kDims && (f(std::integral_constant<int, kDims>{}), true)) || ...);
  }
  template <typename F>
  static void Each(F&& f) {
    (f(std::integral_constant<int, kDims>{}), ...);
  }
};
using KernelDims = HeadDims<16, 32, 64, 128>;

}  // namespace

bool GdnChunkStateMmaFits(int dk, int dv, size_t max_smem_optin) {
  bool fits = false;
  KernelDims::With(dk, [&](auto dc) { fits = SmemBytes(decltype(dc)::value) <= max_smem_optin; });
  return fits && dv >= 16 && dv % 16 == 0 && dv <= kGdnChunkedMaxDim;
}

void ConfigureGdnChunkStateMma(size_t max_smem_optin) {
  KernelDims::Each([&](auto dc) {
    constexpr int DK = decltype(dc)::value;
    if (SmemBytes(DK) <= max_smem_optin)
      INFX_CUDA_CHECK(cudaFuncSetAttribute(GdnChunkStateMmaKernel<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(SmemBytes(DK))));
  });
}

void LaunchGdnChunkStateMma(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, GdnChunkScratch ws,
                            float* state, int64_t slot_stride, int32_t nk, int32_t nv, int32_t dk, int32_t dv,
                            int32_t tiled, void* out) {
  const dim3 grid(static_cast<unsigned>((dv + kBlockCols - 1) / kBlockCols), static_cast<unsigned>(nv),
                  static_cast<unsigned>(layout.n_seqs));
  const bool known = KernelDims::With(dk, [&](auto dc) {
    constexpr int DK = decltype(dc)::value;
    GdnChunkStateMmaKernel<DK>
        <<<grid, kThreads, SmemBytes(DK), s>>>(layout, static_cast<const bf16*>(q), static_cast<const bf16*>(k), ws,
                                               state, slot_stride, nk, nv, dv, tiled, static_cast<bf16*>(out));
  });
  INFX_CHECK_MSG(known, "chunked GatedDeltaRule on tensor cores: no kernel for dk {}", dk);
  INFX_CUDA_CHECK_LAUNCH();
}

}  // namespace infernix::cuda
