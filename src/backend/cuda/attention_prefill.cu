// Flash attention for prefill on tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulation): a block
// owns one query tile (up to kQueryTile consecutive tokens of one sequence) and one query head; its 4
// warps own 16 query rows each and walk the sequence's KV pages (kPageSize keys each) up to the tile's
// last position, with the causal mask on the diagonal pages and an online softmax in registers.
// head_dim is padded with zeros to the kernel's D (64, 128 or 256); it must be a multiple of 8.
#include <cmath>

#include "backend/cuda/kv_f8.cuh"

namespace infernix::cuda {

void ConfigureSplitAttention(size_t max_smem);
void ConfigureAttentionDecodeMma(size_t max_smem_optin);

namespace {

constexpr int kThreads = 128;
static_assert(kQueryTile == 64 && kPageSize == 64, "the flash kernel tiles 64 queries x 64 keys");

__device__ __forceinline__ void Mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Q, K and V tiles (bf16); an FP8 cache's page is staged raw after them (its codes [2][64][D], then the K and V
// scales [2][64]) and decoded into the K and V tiles.
template <int D>
constexpr size_t SmemBytes(bool f8 = false) {
  return 3ull * 64 * (D + 8) * sizeof(bf16) + (f8 ? 2ull * 64 * D + 2ull * 64 * sizeof(float) : 0);
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    FlashKernel(DeviceLayout layout, KvCacheView kv, const bf16* q, int n_heads, float scale_log2, bf16* out) {
  constexpr int kStride = D + 8;  // bf16 per shared-memory row: 16 bytes of padding against bank conflicts
  constexpr int kChunks = D / 8;  // 16-byte chunks per padded row
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* ks = qs + 64 * kStride;
  bf16* vs = ks + 64 * kStride;

  const int tile = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int hkv = kv.n_kv_heads, kvh = h / (n_heads / hkv), d = kv.head_dim, d_chunks = d / 8;
  const int seq = layout.tiles[tile * 2], row0 = layout.tiles[tile * 2 + 1];
  const int slot = layout.seq_info[seq * 4], tb = layout.seq_info[seq * 4 + 1];
  const int sn = layout.seq_info[seq * 4 + 2], pb = layout.seq_info[seq * 4 + 3];
  const int rows = min(kQueryTile, tb + sn - row0);
  const int pos0 = pb + (row0 - tb);
  const int n_keys = pos0 + rows;
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const uint4 zero = make_uint4(0, 0, 0, 0);

  for (int i = tid; i < 64 * kChunks; i += kThreads) {
    int r = i / kChunks, c = i - r * kChunks;
    bf16* dst = qs + r * kStride + c * 8;
    if (r < rows && c < d_chunks) {
      CpAsync16(dst, q + (static_cast<int64_t>(row0 + r) * n_heads + h) * d + c * 8);
    } else {
      *reinterpret_cast<uint4*>(dst) = zero;
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const int row_a = warp * 16 + g, row_b = row_a + 8;
  const int qpos_a = row_a < rows ? pos0 + row_a : -1;  // -1: padding row, every key masked
  const int qpos_b = row_b < rows ? pos0 + row_b : -1;

  const int n_blocks = (n_keys + kPageSize - 1) / kPageSize;
  const bf16* kpages = static_cast<const bf16*>(kv.k_pages);
  const bf16* vpages = static_cast<const bf16*>(kv.v_pages);
  for (int kb = 0; kb < n_blocks; ++kb) {
    const int page = kv.page_table[static_cast<int64_t>(slot) * kv.pages_per_slot + kb];
    const int64_t base = (static_cast<int64_t>(page) * hkv + kvh) * kPageSize * d;
    if (kv.f8()) {  // FP8 pages (kv_f8.cuh; head_dim % 16 == 0): staged raw, then decoded into the tiles
      uint8_t* raw = reinterpret_cast<uint8_t*>(vs + 64 * kStride);
      float* raw_scale = reinterpret_cast<float*>(raw + 2 * 64 * D);
      const uint8_t* kc = static_cast<const uint8_t*>(kv.k_pages) + base;
      const uint8_t* vc = static_cast<const uint8_t*>(kv.v_pages) + base;
      const int64_t row0 = base / d;
      for (int i = tid; i < 64 * (D / 16); i += kThreads) {
        const int r = i / (D / 16), c = i - r * (D / 16);
        const bool valid = kb * kPageSize + r < n_keys && c < d / 16;
        const int64_t src = valid ? static_cast<int64_t>(r) * d + c * 16 : 0;
        CpAsync16Zfill(raw + r * D + c * 16, kc + src, valid);
        CpAsync16Zfill(raw + (64 + r) * D + c * 16, vc + src, valid);
      }
      for (int i = tid; i < 32; i += kThreads)  // 4 rows' scales at a time, K's then V's
        CpAsync16(raw_scale + 4 * i, (i < 16 ? kv.k_scale : kv.v_scale) + row0 + 4 * (i % 16));
      CpAsyncCommit();
      CpAsyncWait<0>();
      __syncthreads();
      for (int i = tid; i < 2 * 64 * (D / 16); i += kThreads) {  // 16 codes at a time
        const int row = i / (D / 16), c = i - row * (D / 16);    // K's rows, then V's (ks and vs are adjacent)
        const float scale = kb * kPageSize + row % 64 < n_keys ? raw_scale[row] : 0.0f;  // stale rows: 0
        const uint4 codes = *reinterpret_cast<const uint4*>(raw + row * D + c * 16);
        uint4* dst = reinterpret_cast<uint4*>(ks + row * kStride + c * 16);
        dst[0] = KvF8x8ToBf16(make_uint2(codes.x, codes.y), scale);
        dst[1] = KvF8x8ToBf16(make_uint2(codes.z, codes.w), scale);
      }
      __syncthreads();
    } else {
      for (int i = tid; i < 64 * kChunks; i += kThreads) {
        int r = i / kChunks, c = i - r * kChunks;
        bf16* kd = ks + r * kStride + c * 8;
        bf16* vd = vs + r * kStride + c * 8;
        if (kb * kPageSize + r < n_keys && c < d_chunks) {
          CpAsync16(kd, kpages + base + static_cast<int64_t>(r) * d + c * 8);
          CpAsync16(vd, vpages + base + static_cast<int64_t>(r) * d + c * 8);
        } else {
          *reinterpret_cast<uint4*>(kd) = zero;
          *reinterpret_cast<uint4*>(vd) = zero;
        }
      }
      CpAsyncCommit();
      CpAsyncWait<0>();
      __syncthreads();
    }

    // S = Q K^T for this warp's 16 rows and the page's 64 keys (8 tiles of 8 keys).
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      LdMatrixX4(a, qs + (warp * 16 + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        uint32_t b[2];
        LdMatrixX2(b, ks + (nt * 8 + (lane & 7)) * kStride + kk * 16 + ((lane >> 3) & 1) * 8);
        Mma(s[nt], a, b[0], b[1]);
      }
    }

    // Causal mask and online softmax (base-2 exponent; scale_log2 = scale * log2(e)).
    OnlineSoftmaxStep(s, o, m_run, l_run, scale_log2, [&](int nt, int e, bool row_b) {
      return kb * kPageSize + nt * 8 + 2 * t4 + e <= (row_b ? qpos_b : qpos_a);
    });

    // O += P V: P's accumulator layout is the A-fragment layout of the next product.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t a[4] = {PackBf16(s[2 * kk][0], s[2 * kk][1]), PackBf16(s[2 * kk][2], s[2 * kk][3]),
                       PackBf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), PackBf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int nd = 0; nd < D / 8; nd += 2) {
        uint32_t b[4];
        LdMatrixX4Trans(b, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + (nd + (lane >> 4)) * 8);
        Mma(o[nd], a, b[0], b[1]);
        Mma(o[nd + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // the next page overwrites ks and vs
  }

  float l_a = l_run[0], l_b = l_run[1];
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, off);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, off);
  }
  const float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f, inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f;
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
    int dim = nd * 8 + 2 * t4;
    if (dim >= d) continue;
    if (row_a < rows) {
      __nv_bfloat162 v = __floats2bfloat162_rn(o[nd][0] * inv_a, o[nd][1] * inv_a);
      *reinterpret_cast<__nv_bfloat162*>(out + (static_cast<int64_t>(row0 + row_a) * n_heads + h) * d + dim) = v;
    }
    if (row_b < rows) {
      __nv_bfloat162 v = __floats2bfloat162_rn(o[nd][2] * inv_b, o[nd][3] * inv_b);
      *reinterpret_cast<__nv_bfloat162*>(out + (static_cast<int64_t>(row0 + row_b) * n_heads + h) * d + dim) = v;
    }
  }
}

template <int D>
void Launch(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads, float scale,
            void* out) {
  dim3 grid(static_cast<unsigned>(layout.n_tiles), static_cast<unsigned>(n_heads));
  FlashKernel<D><<<grid, kThreads, SmemBytes<D>(kv.f8()), s>>>(layout, kv, static_cast<const bf16*>(q), n_heads,
                                                               scale * 1.4426950408889634f, static_cast<bf16*>(out));
}

}  // namespace

void LaunchAttentionFlash(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads,
                          float scale, void* out) {
  if (layout.n_tiles == 0) return;
  if (kv.head_dim <= 64) {
    Launch<64>(s, layout, kv, q, n_heads, scale, out);
  } else if (kv.head_dim <= 128) {
    Launch<128>(s, layout, kv, q, n_heads, scale, out);
  } else {
    Launch<256>(s, layout, kv, q, n_heads, scale, out);
  }
  INFX_CUDA_CHECK_LAUNCH();
}

namespace {
// The largest shared memory a launch of FlashKernel<D> asks for on this device: an FP8 cache's where it fits.
template <int D>
void ConfigureFlash(size_t max_smem_optin) {
  const size_t smem = SmemBytes<D>(true) <= max_smem_optin ? SmemBytes<D>(true) : SmemBytes<D>(false);
  if (smem <= max_smem_optin)
    INFX_CUDA_CHECK(
        cudaFuncSetAttribute(FlashKernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
}
}  // namespace

void ConfigureAttentionKernels(size_t max_smem_optin) {
  ConfigureFlash<64>(max_smem_optin);
  ConfigureFlash<128>(max_smem_optin);
  ConfigureFlash<256>(max_smem_optin);
  ConfigureSplitAttention(std::min<size_t>(max_smem_optin, 160 * 1024));
  ConfigureAttentionDecodeMma(max_smem_optin);
}

bool FlashAttentionFits(int head_dim, size_t max_smem_optin, bool f8) {
  if (head_dim % (f8 ? 16 : 8) != 0 || head_dim > 256) return false;
  const size_t need = head_dim <= 64 ? SmemBytes<64>(f8) : head_dim <= 128 ? SmemBytes<128>(f8) : SmemBytes<256>(f8);
  return need <= max_smem_optin;
}

}  // namespace infernix::cuda
