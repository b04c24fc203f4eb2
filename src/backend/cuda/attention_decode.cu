// Split-KV attention ("flash decoding") for any batch layout, on CUDA cores: a block owns one token,
// one KV head (all query heads of its GQA group, so K and V are read once per group) and one chunk of
// the key positions; a combine kernel merges the chunks' partial softmax results. Used for decode
// steps, and for any head_dim the flash kernel does not take. The number of splits is fixed by the
// host (so that decode steps replay as one graph); the keys per split follow each token's context
// length on the device, in whole sub-tiles of kKeys, so a short context runs on few busy blocks and
// a long one on all of them. K/V sub-tiles are double-buffered with cp.async.
#include <cmath>

#include "backend/cuda/kv_f8.cuh"

namespace infernix::cuda {
namespace {

constexpr int kThreads = 256;  // 8 warps: a warp per query head of a GQA group of 8 (Qwen3-30B-A3B, -Next)
constexpr int kKeys = 32;  // keys per shared-memory sub-tile
static_assert(kPageSize % kKeys == 0, "a sub-tile lies within one KV page");

// K rows in shared memory are padded by 16 bytes: a lane per key then reads its row 16 bytes at a time
// without bank conflicts (for head_dim a multiple of 16).
__host__ __device__ inline int KeyStride(int d) { return d + 8; }

struct SmemLayout {
  size_t qs, os, ss, ms, ls, al, ks, vs, total;
};

__host__ __device__ inline SmemLayout Layout(int group, int d) {
  SmemLayout l{};
  size_t off = 0;
  auto take = [&](size_t bytes) {
    size_t at = off;
    off += (bytes + 15) / 16 * 16;
    return at;
  };
  l.qs = take(sizeof(float) * group * d);
  l.os = take(sizeof(float) * group * d);
  l.ss = take(sizeof(float) * group * kKeys);
  l.ms = take(sizeof(float) * group);
  l.ls = take(sizeof(float) * group);
  l.al = take(sizeof(float) * group);
  l.ks = take(sizeof(bf16) * 2 * kKeys * KeyStride(d));  // two sub-tiles: the one in use and the next
  l.vs = take(sizeof(bf16) * 2 * kKeys * d);
  l.total = off;
  return l;
}

__global__ void __launch_bounds__(kThreads)
    AttentionSplitKernel(DeviceLayout layout, KvCacheView kv, const bf16* q, int n_heads, float scale, int n_splits,
                         float* ws_o, float* ws_ml, bf16* direct_out) {
  AllowDependentLaunch();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int hkv = kv.n_kv_heads, d = kv.head_dim, group = n_heads / hkv, tid = threadIdx.x;
  const int seq = layout.token_seq[t], slot = layout.seq_info[seq * 4], pos = layout.token_pos[t];
  WaitForPrevious();  // q and this token's K/V come from the kernel before
  const int len = pos + 1, per_split = (len + n_splits - 1) / n_splits;
  const int chunk = max(kKeys, (per_split + kKeys - 1) / kKeys * kKeys);
  const int begin = split * chunk, end = min(begin + chunk, len);
  const int64_t head0 = static_cast<int64_t>(t) * n_heads + static_cast<int64_t>(kvh) * group;
  if (begin >= end) {  // nothing to attend to in this chunk: an empty partial result
    for (int i = tid; i < group; i += kThreads) {
      ws_ml[((head0 + i) * n_splits + split) * 2] = -INFINITY;
      ws_ml[((head0 + i) * n_splits + split) * 2 + 1] = 0.0f;
    }
    return;
  }
  extern __shared__ __align__(16) unsigned char smem[];
  const SmemLayout sl = Layout(group, d);
  float* qs = reinterpret_cast<float*>(smem + sl.qs);
  float* os = reinterpret_cast<float*>(smem + sl.os);
  float* ss = reinterpret_cast<float*>(smem + sl.ss);
  float* ms = reinterpret_cast<float*>(smem + sl.ms);
  float* ls = reinterpret_cast<float*>(smem + sl.ls);
  float* al = reinterpret_cast<float*>(smem + sl.al);
  bf16* ks = reinterpret_cast<bf16*>(smem + sl.ks);
  bf16* vs = reinterpret_cast<bf16*>(smem + sl.vs);
  for (int i = tid; i < group * d; i += kThreads) {
    qs[i] = __bfloat162float(q[head0 * d + i]) * scale;
    os[i] = 0.0f;
  }
  for (int i = tid; i < group; i += kThreads) {
    ms[i] = -INFINITY;
    ls[i] = 0.0f;
  }
  const bf16* kpages = static_cast<const bf16*>(kv.k_pages);
  const bf16* vpages = static_cast<const bf16*>(kv.v_pages);
  const int warp = tid >> 5, lane = tid & 31, kst = KeyStride(d);
  // Sub-tile [kb, kb + kKeys) into buffer buf: its keys are consecutive rows of one page.
  auto load = [&](int kb, int buf) {
    const int nk = min(kKeys, end - kb);
    const int page = kv.page_table[static_cast<int64_t>(slot) * kv.pages_per_slot + kb / kPageSize];
    const int64_t src = ((static_cast<int64_t>(page) * hkv + kvh) * kPageSize + kb % kPageSize) * d;
    bf16* kd = ks + buf * kKeys * kst;
    bf16* vd = vs + buf * kKeys * d;
    if (kv.f8()) {  // FP8 pages (kv_f8.cuh): decoded here into the same bf16 sub-tiles
      const uint8_t* kc = static_cast<const uint8_t*>(kv.k_pages) + src;
      const uint8_t* vc = static_cast<const uint8_t*>(kv.v_pages) + src;
      const float* ksc = kv.k_scale + src / d;
      const float* vsc = kv.v_scale + src / d;
      for (int i = tid; i < nk * d; i += kThreads) {
        const int j = i / d;
        kd[j * kst + i - j * d] = __float2bfloat16_rn(KvF8Value(kc[i], ksc[j]));
        vd[i] = __float2bfloat16_rn(KvF8Value(vc[i], vsc[j]));
      }
    } else if (d % 8 == 0) {
      const int units = d / 8;
      for (int i = tid; i < nk * units; i += kThreads) {
        const int j = i / units, c = (i - j * units) * 8;
        CpAsync16(kd + j * kst + c, kpages + src + j * d + c);
        CpAsync16(vd + j * d + c, vpages + src + j * d + c);
      }
    } else {
      for (int i = tid; i < nk * d; i += kThreads) {
        const int j = i / d;
        kd[j * kst + i - j * d] = kpages[src + i];
        vd[i] = vpages[src + i];
      }
    }
    CpAsyncCommit();
  };
  load(begin, 0);
  int buf = 0;
  for (int kb = begin; kb < end; kb += kKeys, buf ^= 1) {
    const int nk = min(kKeys, end - kb);
    __syncthreads();  // the previous sub-tile fully consumed (and q/o/m/l initialised)
    if (kb + kKeys < end) {
      load(kb + kKeys, buf ^ 1);
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    const bf16* kt = ks + buf * kKeys * kst;
    const bf16* vt = vs + buf * kKeys * d;
    // Scores and the online softmax: a warp per head of the group, a lane per key.
    for (int gi = warp; gi < group; gi += kThreads / 32) {
      float sc = -INFINITY;
      if (lane < nk) {
        const bf16* kr = kt + lane * kst;
        const float* qr = qs + gi * d;
        float acc = 0;
        if (d % 8 == 0) {
#pragma unroll 4
          for (int c = 0; c < d; c += 8) {
            const uint4 raw = *reinterpret_cast<const uint4*>(kr + c);
            const __nv_bfloat162* kh = reinterpret_cast<const __nv_bfloat162*>(&raw);
            const float4 qa = *reinterpret_cast<const float4*>(qr + c),
                         qb = *reinterpret_cast<const float4*>(qr + c + 4);
            const float2 k0 = __bfloat1622float2(kh[0]), k1 = __bfloat1622float2(kh[1]);
            const float2 k2 = __bfloat1622float2(kh[2]), k3 = __bfloat1622float2(kh[3]);
            acc += qa.x * k0.x + qa.y * k0.y + qa.z * k1.x + qa.w * k1.y + qb.x * k2.x + qb.y * k2.y + qb.z * k3.x +
                   qb.w * k3.y;
          }
        } else {
          for (int dd = 0; dd < d; ++dd) acc += qr[dd] * __bfloat162float(kr[dd]);
        }
        sc = acc;
      }
      const float m_old = ms[gi], m_new = fmaxf(m_old, WarpMax(sc));
      const float p = lane < nk ? expf(sc - m_new) : 0.0f;
      ss[gi * kKeys + lane] = p;
      const float sum = WarpSum(p);
      __syncwarp();  // every lane has read ms[gi] before lane 0 updates it
      if (lane == 0) {
        const float a = expf(m_old - m_new);  // 0 on the first sub-tile (m_old = -inf)
        al[gi] = a;
        ls[gi] = ls[gi] * a + sum;
        ms[gi] = m_new;
      }
    }
    __syncthreads();
    // o += p v: a thread per (two heads, two columns) when it can, so that each V load serves four sums.
    if (d % 2 == 0 && group % 2 == 0) {
      const int half = d / 2, hg = group / 2;
      const __nv_bfloat162* vt2 = reinterpret_cast<const __nv_bfloat162*>(vt);
      float2* os2 = reinterpret_cast<float2*>(os);
      for (int i = tid; i < hg * half; i += kThreads) {
        const int g0 = (i / half) * 2, c = i - (i / half) * half;
        const float a0 = al[g0], a1 = al[g0 + 1];
        float2 o0 = os2[g0 * half + c], o1 = os2[(g0 + 1) * half + c];
        o0.x *= a0, o0.y *= a0, o1.x *= a1, o1.y *= a1;
        const float* p0 = ss + g0 * kKeys;
        const float* p1 = p0 + kKeys;
#pragma unroll 4
        for (int j = 0; j < nk; ++j) {
          const float2 v = __bfloat1622float2(vt2[j * half + c]);
          o0.x += p0[j] * v.x, o0.y += p0[j] * v.y;
          o1.x += p1[j] * v.x, o1.y += p1[j] * v.y;
        }
        os2[g0 * half + c] = o0;
        os2[(g0 + 1) * half + c] = o1;
      }
    } else {
      for (int i = tid; i < group * d; i += kThreads) {
        int gi = i / d, dd = i - gi * d;
        float o = os[i] * al[gi];
        for (int j = 0; j < nk; ++j) o += ss[gi * kKeys + j] * __bfloat162float(vt[j * d + dd]);
        os[i] = o;
      }
    }
  }
  __syncthreads();
  if (direct_out != nullptr) {  // a single split: the final output
    for (int i = tid; i < group * d; i += kThreads) {
      int gi = i / d;
      direct_out[head0 * d + i] = __float2bfloat16_rn(ls[gi] > 0.0f ? os[i] / ls[gi] : 0.0f);
    }
    return;
  }
  for (int i = tid; i < group * d; i += kThreads) {
    int gi = i / d, dd = i - gi * d;
    ws_o[((head0 + gi) * n_splits + split) * d + dd] = os[i];
  }
  for (int gi = tid; gi < group; gi += kThreads) {
    ws_ml[((head0 + gi) * n_splits + split) * 2] = ms[gi];
    ws_ml[((head0 + gi) * n_splits + split) * 2 + 1] = ls[gi];
  }
}

// The combine: a block per (token, query head) of kCombineThreads threads in groups of kCombineGroup, group j
// summing the splits j, j + groups, ... for its columns; the groups' sums are then added in group order
// (deterministic). At 131,072 tokens all 128-odd splits have keys, and a thread per column looping over
// them one load after another took longer than one wave of the split kernel's blocks.
constexpr int kCombineThreads = 1024;
constexpr int kCombineGroup = 256;  // columns of a group's pass (head_dim up to 256 in one)
constexpr int kCombineMaxSplits = 1024;

// gate: the gated attention's output gate (Qwen3-Next / 3.5), bf16 [n_tokens, n_heads * d], or nullptr: out is
// then multiplied by its sigmoid as SigmoidMul would (the output rounded to bf16 first). A split without
// keys (l = 0) weighs 0, and its partial output, which its kernel did not write, is not added.
__global__ void __launch_bounds__(kCombineThreads)
    AttentionCombineKernel(int n_heads, int d, int n_splits, const float* ws_o, const float* ws_ml, const bf16* gate,
                           bf16* out) {
  __shared__ float weight[kCombineMaxSplits];  // exp(m_s - m), 0 for a split without keys
  __shared__ float part[kCombineThreads / kCombineGroup][kCombineGroup];
  __shared__ float inv_l;
  AllowDependentLaunch();
  WaitForPrevious();
  const int64_t head = static_cast<int64_t>(blockIdx.x) * n_heads + blockIdx.y;
  const float* ml = ws_ml + head * n_splits * 2;
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < 32) {  // the weights and 1 / l by the first warp
    float m = -INFINITY;
    for (int s = tid; s < n_splits; s += 32)
      if (ml[2 * s + 1] > 0.0f) m = fmaxf(m, ml[2 * s]);
    m = WarpMax(m);
    float l = 0;
    for (int s = tid; s < n_splits; s += 32) {
      const float ls = ml[2 * s + 1];
      const float w = ls > 0.0f ? expf(ml[2 * s] - m) : 0.0f;
      weight[s] = w;
      l += ls * w;
    }
    l = WarpSum(l);
    if (tid == 0) inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  }
  __syncthreads();
  constexpr int kGroups = kCombineThreads / kCombineGroup;
  const int group = tid / kCombineGroup, col = tid % kCombineGroup;
  for (int d0 = 0; d0 < d; d0 += kCombineGroup) {
    const int dd = d0 + col;
    float o = 0;
    if (dd < d) {
      const float* src = ws_o + head * n_splits * d + dd;
#pragma unroll 8
      for (int s = group; s < n_splits; s += kGroups) {
        const float v = __ldcg(src + static_cast<int64_t>(s) * d);  // loaded whether or not the split has keys
        o += weight[s] != 0.0f ? v * weight[s] : 0.0f;
      }
    }
    part[group][col] = o;
    __syncthreads();
    if (group == 0 && dd < d) {
      float v = 0;
#pragma unroll
      for (int j = 0; j < kGroups; ++j) v += part[j][col];
      v *= inv_l;
      out[head * d + dd] =
          __float2bfloat16_rn(gate == nullptr ? v : RoundBf16(v) * SigmoidF(__bfloat162float(gate[head * d + dd])));
    }
    __syncthreads();  // part is free for the next columns
  }
}

}  // namespace

size_t AttentionSplitSmemBytes(int group, int head_dim) { return Layout(group, head_dim).total; }

void LaunchAttentionSplit(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads,
                          float scale, int32_t n_splits, float* ws_o, float* ws_ml, void* direct_out) {
  if (layout.n_tokens == 0) return;
  dim3 grid(static_cast<unsigned>(layout.n_tokens), static_cast<unsigned>(kv.n_kv_heads),
            static_cast<unsigned>(n_splits));
  size_t smem = AttentionSplitSmemBytes(n_heads / kv.n_kv_heads, kv.head_dim);
  LaunchDependent(AttentionSplitKernel, grid, kThreads, smem, s, layout, kv, static_cast<const bf16*>(q), n_heads,
                  scale, n_splits, ws_o, ws_ml, static_cast<bf16*>(direct_out));
  INFX_CUDA_CHECK_LAUNCH();
}

void LaunchAttentionCombine(cudaStream_t s, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_splits,
                            const float* ws_o, const float* ws_ml, const void* gate, void* out) {
  if (n_tokens == 0) return;
  INFX_CHECK_MSG(n_splits <= kCombineMaxSplits, "attention combine: {} splits (at most {})", n_splits,
                 kCombineMaxSplits);
  dim3 grid(static_cast<unsigned>(n_tokens), static_cast<unsigned>(n_heads));
  LaunchDependent(AttentionCombineKernel, grid, kCombineThreads, 0, s, n_heads, head_dim, n_splits, ws_o, ws_ml,
                  static_cast<const bf16*>(gate), static_cast<bf16*>(out));
  INFX_CUDA_CHECK_LAUNCH();
}

void ConfigureSplitAttention(size_t max_smem) {
  INFX_CUDA_CHECK(cudaFuncSetAttribute(AttentionSplitKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(max_smem)));
}

}  // namespace infernix::cuda
