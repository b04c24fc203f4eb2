// Host-side launchers of the CUDA kernels, one group per .cu file. Each takes the stream first and
// then trivially copyable arguments only, so that the recorder (recorder.h) can queue the call and
// key CUDA graphs on its bytes. Launchers check their launch for errors; they do not synchronise.
//
// Activations ("act") are bf16 or f32 (dtype codes below); weights may be f32, f16 or bf16. Every
// pointer is device memory unless stated otherwise. This header is C++17: .cu files include it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace infernix::cuda {

// DType codes as the kernels see them (static_cast<int>(DType), checked in backend_ops.cpp).
constexpr int kF32 = 0, kF16 = 1, kBF16 = 2;
// Block-quantized weight types (quant.cu): every GGUF block type the engine reads, and FP8 with its
// 128-value block scales.
constexpr int kQ4_0 = 6, kQ4_1 = 7, kQ5_0 = 8, kQ5_1 = 9, kQ8_0 = 10, kQ2_K = 11, kQ3_K = 12, kQ4_K = 13, kQ5_K = 14,
              kQ6_K = 15, kIQ4_NL = 16, kIQ4_XS = 17, kF8E4M3B128 = 18;
// Values of a scale group per type: 32, except Q2_K / Q3_K / Q6_K (16) and FP8 (its 128-value block); the
// integer types' x is rounded to int8 with factors per such group.
__host__ __device__ constexpr int QuantGroupValues(int type) {
  return (type == kQ2_K || type == kQ3_K || type == kQ6_K) ? 16 : type == kF8E4M3B128 ? 128 : 32;
}
// All of them, as QuantTypeSupported accepts them.
constexpr int kQuantTypes[] = {kQ4_0, kQ4_1, kQ5_0, kQ5_1,   kQ8_0,   kQ2_K,      kQ3_K,
                               kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS, kF8E4M3B128};

// Tokens per page of the paged KV cache, and query rows per tile of the flash-attention kernel.
constexpr int kPageSize = 64;
constexpr int kQueryTile = 64;

// The device copy of a BatchLayout (layout.h). No padding: its bytes key CUDA graphs.
struct DeviceLayout {
  const int32_t* token_pos = nullptr;  // [n_tokens]: position of each token row
  const int32_t* token_seq = nullptr;  // [n_tokens]: index of its sequence
  const int32_t* seq_info = nullptr;   // [n_seqs, 4]: slot, token_begin, n_tokens, pos_begin
  const int32_t* tiles = nullptr;      // [n_tiles, 2]: sequence, first token row (kQueryTile rows at most)
  int32_t n_tokens = 0, n_seqs = 0, n_tiles = 0, max_seq_tokens = 0;
};

// One attention layer's paged KV cache: K and V pages [n_pages, n_kv_heads, kPageSize, head_dim], bf16 or
// (k_scale set) FP8: E4M3 codes, with each row's power-of-two scale in k_scale / v_scale [n_pages,
// n_kv_heads, kPageSize] f32 (quant/kv_f8.h; kv_f8.cuh); page_table [max_slots, pages_per_slot] maps
// (slot, position / kPageSize) to a page.
struct KvCacheView {
  void* k_pages = nullptr;
  void* v_pages = nullptr;
  float* k_scale = nullptr;  // FP8 only
  float* v_scale = nullptr;
  const int32_t* page_table = nullptr;
  int32_t pages_per_slot = 0, n_kv_heads = 0, head_dim = 0, unused = 0;
  __host__ __device__ bool f8() const { return k_scale != nullptr; }
};

// ---- copies (copy.cu) ----
void LaunchMemcpy(cudaStream_t s, void* dst, const void* src, size_t bytes);
// dst [n] bf16 = src [n] (f32 / f16 / bf16) rounded (copy.cu).
void LaunchToBf16(cudaStream_t s, const void* src, int src_dtype, void* dst, int64_t n);  // any direction
void LaunchMemset(cudaStream_t s, void* dst, size_t bytes);                   // zeros
// dst rows of width_bytes, from src rows: a strided 2-D copy (SliceColumns).
void LaunchCopy2D(cudaStream_t s, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width_bytes,
                  size_t rows);
// out[i, :] = table[ids[i], :] (zeros for an id outside [0, vocab)). out is act [n, h].
void LaunchEmbedding(cudaStream_t s, const int32_t* ids, int64_t n, const void* table, int table_dtype, int64_t vocab,
                     int64_t h, void* out, int out_dtype);
// data[i] = bf16(scale * DummyUniform(base, i)) for i < n (tensor/dummy_values.h): uniform in
// [-scale, scale), deterministic in base; dummy weights and benchmark inputs.
void LaunchDummyBf16(cudaStream_t s, void* data, int64_t n, uint64_t base, float scale);
// Random quantized blocks (tensor/dummy_values.h, tensor/dummy_blocks.h): `bytes` bytes of blocks of
// `block_bytes`, their scale fields as `f` says (fp8: an f32 at byte 0; else f16 at d_at and min_at).
struct DummyBlockFields {
  int32_t fp8, d_at, min_at;
  float d;
};
void LaunchDummyBlocks(cudaStream_t s, void* data, size_t bytes, size_t block_bytes, uint64_t seed, DummyBlockFields f);
// FP8 weights (f8_e4m3_b128, `rows` rows of k values, k a multiple of 128) reordered in place from the
// host's blocks into the device layout every FP8 kernel reads (f8_layout.h). One block per row.
void LaunchF8ToDeviceRows(cudaStream_t s, void* data, int64_t rows, int64_t k);
// Returns cudaSuccess when this build has kernels for the current device.
cudaError_t ProbeKernelImage();
// out[i, :] = x[rows[i], :], rows of row_bytes bytes (a multiple of 2).
void LaunchGatherRows(cudaStream_t s, const void* x, const int32_t* rows, int64_t n_rows, int64_t row_bytes,
                      void* out);

// ---- block-quantized weights (quant.cu) ----
constexpr int kQuantGemvMaxTokens = 8;
// Beyond kQuantGemvMaxTokens and up to this many tokens, MatMul runs the decode product once per group of
// the most tokens one launch takes (the packed weight read once per group) instead of dequantizing the weight
// to bf16 and reading that back. 32 lost while every block rounded its group's x itself (Qwen3-8B q4_k on an
// H100: 24 and 32 sequences 8% and 18% slower, q8_0 at 32 23% slower, against the bf16 copy for the products
// one launch does not take; docs/performance.md); with x rounded once per group by the held op that makes it,
// 32 gains over 16 (q4_k at 24 / 32 sequences 0.848 / 0.942 of the step, q8_0 0.879 / 0.948).
constexpr int kQuantSplitMaxTokens = 32;
// The most tokens one launch of the tensor-core product takes (integer types; where x fits in shared memory).
constexpr int kQuantGemvWideMaxTokens = 32;
// Block-type experts (GGUF types and FP8) beyond kQuantGemvMaxTokens (FP8: kMoeGemvMaxTokens) and up to this
// many tokens run the decode expert kernels once per group of kQuantGemvMaxTokens tokens instead of the
// grouped GEMMs, whose loader decodes the packed blocks at a fraction of the bandwidth (Qwen3-30B-A3B q4_k on
// an H100: at 32 tokens the groups took 32.1 ms a step against the grouped GEMMs' 33.1; at 48 and 64 the
// groups 42.0 and 52.1 against 33.1: docs/performance.md).
constexpr int kQuantMoeGroupsMaxTokens = 32;
// Whether quant.cu has kernels for a weight type (a DType code).
bool QuantTypeSupported(int type);
// out [n, rows] (act dtype) = x [n, k] bf16 @ dequant(w [rows, k])^T, n <= kQuantGemvMaxTokens.
void LaunchQuantGemv(cudaStream_t s, int type, const void* x, const void* w, void* out, int out_dtype, int64_t n,
                     int64_t rows, int64_t k);
// out[i, :] (act dtype) = dequant(w row ids[i]) for i < n (ids null: row i); ids outside [0, n_table): zeros.
void LaunchDequantRows(cudaStream_t s, int type, const void* w, const int32_t* ids, int64_t n_table, int64_t k,
                       void* out, int out_dtype, int64_t n);

// ---- elementwise (elementwise.cu) ----
enum BinaryOp : int { kOpAdd = 0, kOpSiluMul = 1, kOpSigmoidMul = 2 };
// out = a + b | silu(a) * b | a * sigmoid(b), n elements of act dtype (out may alias a or b).
void LaunchBinary(cudaStream_t s, int op, int dtype, const void* a, const void* b, void* out, int64_t n);
// SiLU(gate) * up (LaunchBinary's kOpSiluMul) of `rows` bf16 rows of d values that a quantized product of an
// integer type reads next, the stored rows also rounded to int8 into xq in kGemvXInt8's layout (QuantXBytes;
// scale groups of `group`, 16 or 32; blocks of `block` rows). SiluMulInt8Fits: d % 256 == 0, 16-byte aligned
// rows.
bool SiluMulInt8Fits(const void* gate, const void* up, const void* out, int64_t rows, int64_t d);
void LaunchSiluMulInt8(cudaStream_t s, const void* gate, const void* up, void* out, int64_t rows, int64_t d, int group,
                       int64_t block, void* xq);
// acc[r, :] += sigmoid(gate_logit[r]) * x[r, :].
void LaunchAddSigmoidGated(cudaStream_t s, int dtype, void* acc, const void* x, const float* gate_logit, int64_t rows,
                           int64_t cols);

// ---- norms (norm.cu) ----
// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * (w + w_offset). out may alias x.
void LaunchRmsNorm(cudaStream_t s, int dtype, const void* x, const void* w, int w_dtype, float eps, float w_offset,
                   void* out, int64_t rows, int64_t d);
// The residual add fused with the norm that follows it: sum = a + b (stored, may alias a), then
// out[r] = RmsNorm(sum[r]) as LaunchRmsNorm computes it from the stored (rounded) sum.
void LaunchAddRmsNorm(cudaStream_t s, int dtype, const void* a, const void* b, void* sum, const void* w, int w_dtype,
                      float eps, float w_offset, void* out, int64_t rows, int64_t d);
// LaunchAddRmsNorm (b set) or LaunchRmsNorm (b and sum null) for up to kQuantGemvWideMaxTokens bf16 rows that a
// quantized product of an integer type reads next: the normalised rows are also rounded to int8 blocks of
// 32 into xq in kGemvXInt8's layout (QuantXBytes; scale groups of `group`, 16 or 32; blocks of `block` rows),
// the codes that product's prologue would give.
// RmsNormInt8Fits: d % 256 == 0, 16-byte aligned rows (and a bf16 weight).
bool RmsNormInt8Fits(const void* a, const void* b, const void* sum, const void* w, int w_dtype, const void* out,
                     int64_t rows, int64_t d);
void LaunchRmsNormInt8(cudaStream_t s, const void* a, const void* b, void* sum, const void* w, int w_dtype, float eps,
                       float w_offset, void* out, int64_t rows, int64_t d, int group, int64_t block, void* xq);
// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w * silu(z[r]).
void LaunchGatedRmsNorm(cudaStream_t s, int dtype, const void* x, const void* z, const void* w, int w_dtype, float eps,
                        void* out, int64_t rows, int64_t d);

// ---- rotary embedding (rope.cu) ----
// In place on x [n, heads, d]: rotate-half RoPE of dims [0, 2 * half) at positions token_pos.
void LaunchRope(cudaStream_t s, int dtype, void* x, const int32_t* token_pos, int64_t n, int64_t heads, int64_t d,
                const float* inv_freq, int64_t half, float scale);

// ---- matrix products ----
// Up to 4 products that share x, computed in one pass: out_i [n, rows_i] = x [n, k] @ w_i [rows_i, k]^T,
// bf16 x and w, out bf16 or f32. n <= 16, k % 8 == 0, x and w 16-byte aligned (gemv.cu).
struct GemvSegment {
  const void* w = nullptr;
  void* out = nullptr;
  int64_t rows = 0;
  int32_t out_dtype = kBF16;
  // 1 where the kernel just before makes w (a block type or F16 weight dequantized to bf16 in the op
  // workspace, for 9-16 tokens): the product then waits for it before its first weight loads, which
  // otherwise go out before the wait (only weights that the host wrote may be read before it).
  int32_t w_after_wait = 0;
};
// How a bf16 GEMV gets x (gemv.cu): read as it is, or made by the op before it, fused in so that the
// decode step has one launch (and one wait for the previous kernel) less.
//  kGemvXNorm: x = RmsNorm(a (+ b)) with weight w [k] (dtype w_dtype, plus w_offset), eps; every block
//    computes the n <= kGemvNormMaxTokens rows into shared memory (a + b rounded to bf16 first, as
//    LaunchAddRmsNorm), and the last block to have read a and b writes a + b to `sum` (when b is set)
//    and x to `out`, so that later ops see the same tensors as without the fusion. `counter` is a
//    device int that is zero at launch (the electing block resets it).
//  kGemvXScaled: x is a residual sum times its norm's weight, made by the GEMV before as its deferred
//    norm (GemvResidual::deferred): this GEMV multiplies its sums by 1 / rms of the sum (`a`, bf16), from
//    the sums of squares that GEMV's ss_tiles tiles left in ss [n][ss_tiles], and writes RmsNorm(a) to
//    `out` for later readers (w, w_dtype, w_offset, eps as kGemvXNorm's), a slice per block. bf16 weights,
//    n <= kGemvNormMaxTokens, n * ss_tiles <= kGemvScaledMaxSums, no tail (GemvXScaledFits).
//  kGemvXInt8 (quant_gemv_mma.cu, integer types, 2 to kQuantGemvWideMaxTokens tokens): x already rounded to
//    int8 by the kernel before (LaunchRmsNormInt8, LaunchSiluMulInt8, DecodeAttentionFusion::xq): `a` holds
//    the rows' codes and group factors as that kernel lays them out, which the product copies into shared
//    memory instead of rounding x itself.
enum GemvXKind : int32_t { kGemvXPlain = 0, kGemvXNorm = 1, kGemvXScaled = 2, kGemvXInt8 = 3 };
// kGemvXInt8's layout of `rows` rows of d values rounded to int8 with scale groups of g (16 or 32) values: the
// rows' codes [rows][d + 16] (the padding as the product's shared memory keeps it), then their factors
// [rows][d / g] {dx, dx * sum}. Where a product of more tokens than one launch takes runs per group of `block`
// tokens (MatMul), the writers lay x out block after block (the last maybe shorter), each block so for its own
// rows (QuantXRowAt), and each group's product reads its block. Its bytes (in the integer type of rows and d):
template <typename I>
__host__ __device__ constexpr I QuantXBytes(I rows, I d, int g) {
  return rows * (d + 16) + rows * (d / g) * 8;
}
constexpr int kGemvNormMaxTokens = 8;
constexpr int kGemvScaledMaxSums = 4096;
struct GemvPrologue {
  int32_t kind = kGemvXPlain, w_dtype = kBF16;
  const void* a = nullptr;
  const void* b = nullptr;
  void* sum = nullptr;
  const void* w = nullptr;
  void* out = nullptr;
  int32_t* counter = nullptr;
  float eps = 0, w_offset = 0;
  const float* ss = nullptr;  // kGemvXScaled
  int32_t ss_tiles = 0, unused = 0;
};
// The residual add after a bf16 GEMV of one segment (bf16 out, n <= kGemvNormMaxTokens), fused in as its
// epilogue: out = in + the product (the product rounded to bf16 first, the sum rounded as LaunchBinary's
// add rounds it; out may be `in` or the segment's out, which is then not written; `in` must not overlap
// the segment's out). With norm_out set, also norm_out = RmsNorm(out) (weight w of dtype w_dtype, plus
// w_offset; eps): each 16-row tile leaves the sums of squares of its rows per token in ss [n][tiles],
// and the last block to finish (elected through `counter`, a device int that is zero at launch and
// that it resets) adds them in a fixed order and writes the normalised rows. norm_out may be out. With
// deferred set instead, no block normalises: each tile writes out times the norm's weight (plus w_offset)
// to deferred ([n][rows] bf16), and the next GEMV, whose x that is, finishes the norm (kGemvXScaled).
struct GemvResidual {
  const void* in = nullptr;
  void* out = nullptr;
  void* norm_out = nullptr;
  const void* w = nullptr;
  float* ss = nullptr;
  int32_t* counter = nullptr;
  int32_t w_dtype = kBF16;
  float eps = 0, w_offset = 0;
  void* deferred = nullptr;
};
// Shared memory of a GEMV with a kGemvXNorm prologue (the normalised rows), and whether it fits.
size_t GemvNormSmemBytes(int64_t n, int64_t k);
// w_type: kBF16 or FP8 as GemvTakesWeights says (gemv.cu), or a block-quantized type that every segment
// has (quant_gemv_mma.cu). Both kernels launch as programmatic dependents of the kernel before (sm_90+):
// the weights start streaming before x is ready. gemv.cu only: `pro` says where x comes from (`x` is then
// pro.out), and the residual epilogue and the tails below. Either
// kernel: with silu_out set, the batch is gate and up (two segments of equal rows, bf16 out) and
// SiLU(gate) * up is written there as well (it may be gate's or up's output, which is then not written).
struct GemvBatch {
  GemvSegment seg[4];
  const void* x = nullptr;
  int64_t n = 0, k = 0;
  int32_t n_segments = 0, w_type = kBF16;
  GemvPrologue pro;
  void* silu_out = nullptr;
  GemvResidual res;
};
constexpr int kGemvMaxTokens = 16;
// Whether a batch with a kGemvXScaled prologue can launch: bf16 weights and norm weight, 16-byte aligned
// rows, and blocks enough for one 16-byte chunk of the normalised rows per thread.
bool GemvXScaledFits(const GemvBatch& b);
// The MoE routing of the router's logits fused into its decode GEMV (bf16, plain x, no epilogue): with ids
// set, segment 0's output (f32 logits [n, n_experts], n <= kGemvNormMaxTokens, n_experts <=
// kGemvRoutingMaxExperts) is routed as MoeRouting says by the last block to finish, elected through
// `counter` (a device int, zero at launch, which it resets), a warp per token.
constexpr int kGemvRoutingMaxExperts = 512;
struct GemvRouting {
  float* weights = nullptr;  // [n, top_k]
  int32_t* ids = nullptr;    // [n, top_k]
  int32_t* counter = nullptr;
  int32_t top_k = 0, normalize = 0;
};
// The decode conv1d of Gated DeltaNet fused into the GEMV that makes its input (segment 0's output, bf16
// [n, channels]; n <= kGemvNormMaxTokens tokens, each its own sequence: layout.max_seq_tokens == 1): with
// out set, the thread that stores element (token, channel) of the product also computes CausalConv1d's
// output there (out bf16 [n, channels]) from the sequence's conv state (f32 [kernel - 1, channels] per
// slot, slot_stride floats apart, oldest first), which it advances. w: [channels, kernel] of w_dtype.
constexpr int kGemvConvMaxKernel = 8;
struct GemvConv {
  DeviceLayout layout{};
  const void* w = nullptr;
  float* state = nullptr;
  void* out = nullptr;
  int64_t slot_stride = 0;
  int32_t w_dtype = kBF16, kernel = 0;
};
// What may follow a decode GEMV in the same launch: the routing or the conv (at most one).
struct GemvTail {
  GemvRouting route;
  GemvConv conv;
};
void LaunchGemv(cudaStream_t s, GemvBatch batch);
// Whether the GEMV (gemv.cu, with the fusions above) takes a batch of n tokens, k values and weights of
// w_type: bf16 (n <= kGemvMaxTokens, k % 8 == 0), or f8_e4m3_b128 in the device layout (2 <= n <=
// kGemvNormMaxTokens, k % 512 == 0: 16-byte aligned rows), 16-byte aligned x and w either way; other
// block-quantized weights, and FP8 at one token (faster there), go to LaunchQuantGemvMma.
bool GemvTakesWeights(int w_type, int64_t n, int64_t k);
// The same with a tail (the routing or the conv); a launcher of its own, so that the GEMVs without one keep
// their recorded arguments (a unit's key) as small as before.
void LaunchGemvWithTail(cudaStream_t s, GemvBatch batch, GemvTail tail);
// Once per device: lets the fused-norm GEMV use up to max_smem_optin bytes of shared memory.
void ConfigureGemv(size_t max_smem_optin);
// The same with block-quantized weights on tensor cores (quant_gemv_mma.cu): integer types with x rounded
// to int8 blocks of 32 (as llama.cpp's q8_1), n <= kQuantGemvWideMaxTokens (beyond kQuantGemvMaxTokens
// only without the SiLU pair: plain outputs), FP8 with x exact (as f16 scaled by a power of two when it fits
// in shared memory, else bf16), n <= kQuantGemvMaxTokens.
// QuantGemvMmaFits says whether a product qualifies (k % 256 == 0, 16-byte aligned x, w and rows, the
// shared memory it needs within max_smem_optin: x takes n (k + 16 + k / 4) bytes or more, so many tokens fit
// only a short k); LaunchQuantGemv (quant.cu) takes the others.
bool QuantGemvMmaFits(int type, int64_t n, int64_t k, int64_t rows, const void* x, const void* w,
                      size_t max_smem_optin);
// The tokens of a group when a product of n tokens runs per group: n itself when n <= kQuantGemvMaxTokens or
// QuantGemvMmaFits takes it; else the most, a multiple of 8 below n, that it takes, and at least
// kQuantGemvMaxTokens (which LaunchQuantGemv takes where the tensor-core product does not).
int64_t QuantGemvMmaGroupTokens(int type, int64_t n, int64_t k, int64_t rows, const void* x, const void* w,
                                size_t max_smem_optin);
void LaunchQuantGemvMma(cudaStream_t s, GemvBatch batch, size_t max_smem_optin);
// Raises the kernels' dynamic shared-memory limit to max_smem_optin (once per device, before use).
void ConfigureQuantGemvMma(size_t max_smem_optin);
// Any dtypes, tiled on CUDA cores: the fallback for f32/f16 weights and odd shapes (gemm_simt.cu).
void LaunchGemmSimt(cudaStream_t s, const void* x, int x_dtype, const void* w, int w_dtype, void* out, int out_dtype,
                    int64_t n, int64_t m, int64_t k);
// The decode GEMV of f32 or f16 weights on CUDA cores (gemm_simt.cu): out [n, m] (bf16 or f32) = x [n, k] bf16 @
// w [m, k]^T in f32, n <= kFloatGemvMaxTokens, k % 8 == 0, x and w 16-byte aligned (FloatGemvFits).
constexpr int kFloatGemvMaxTokens = 8;
bool FloatGemvFits(int w_dtype, int x_dtype, int64_t n, int64_t k, const void* x, const void* w);
void LaunchGemvFloat(cudaStream_t s, const void* x, const void* w, int w_dtype, void* out, int out_dtype, int64_t n,
                     int64_t m, int64_t k);

// ---- attention (kv_cache.cu, attention_decode.cu, attention_prefill.cu) ----
// Writes k, v [n_tokens, n_kv_heads, head_dim] (act dtype bf16) into the cache at each token's position.
void LaunchKvAppend(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* k, const void* v);
// The attention inputs of a layer prepared in one launch: per tensor (q, k, v), optionally the per-head
// RMSNorm, then RoPE, each rounded to bf16 exactly as RmsNorm and Rope would store it, written back in
// place and (k, v) into the KV cache.
struct HeadPrep {
  void* x = nullptr;             // [n_tokens, heads, head_dim] bf16
  const void* norm_w = nullptr;  // [head_dim], or null: no norm
  int32_t w_dtype = kBF16, heads = 0;
  float eps = 0, w_offset = 0;
  int32_t rope = 0;   // 1: rotate dims [0, 2 * half)
  int32_t cache = 0;  // 0: none, 1: K pages, 2: V pages
};
struct QkvPrep {
  HeadPrep t[3];
  const float* inv_freq = nullptr;
  int32_t half = 0;
  float rope_scale = 1.0f;
  int32_t head_dim = 0, n_tensors = 0;
};
void LaunchQkvPrep(cudaStream_t s, DeviceLayout layout, KvCacheView kv, QkvPrep prep);
// Split-KV attention for any layout: each (token, KV head, split) block attends to keys
// [split * chunk, min((split + 1) * chunk, pos + 1)), chunk = (pos + 1) / n_splits rounded up to
// whole sub-tiles of 32 keys (so splits past the context are empty), and leaves an unnormalised partial result:
// ws_o [n_tokens, n_heads, n_splits, head_dim], ws_ml [n_tokens, n_heads, n_splits, 2] (max, sum).
// With n_splits == 1 and direct_out set, it writes the final bf16 output there instead.
void LaunchAttentionSplit(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads,
                          float scale, int32_t n_splits, float* ws_o, float* ws_ml, void* direct_out);
// The same on tensor cores (attention_decode_mma.cu), where AttentionDecodeMmaFits: head_dim % 8 == 0 and
// <= 256, GQA groups of <= 16, its shared memory within max_smem_optin. Chunks are whole KV pages.
// direct_out is given exactly when n_splits == 1.
// f8: for an FP8 cache (KvCacheView::f8), whose kernels stage pages differently (head_dim % 16 == 0).
bool AttentionDecodeMmaFits(int group, int head_dim, size_t max_smem_optin, bool f8 = false);
// Blocks of that kernel resident on the device at once, per cache type and head_dim (the splits fill one
// wave): asked of the driver once, when the backend starts, not on a decode step's host path.
struct DecodeMmaResidency {
  int64_t blocks[2][3] = {{1, 1, 1}, {1, 1, 1}};  // [bf16, FP8][head_dim <= 64, <= 128, <= 256]
  int64_t For(int head_dim, bool f8 = false) const {
    return blocks[f8 ? 1 : 0][head_dim <= 64 ? 0 : head_dim <= 128 ? 1 : 2];
  }
};
DecodeMmaResidency AttentionDecodeMmaResidency();
void LaunchAttentionDecodeMma(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads,
                              float scale, int32_t n_splits, float* ws_o, float* ws_ml, void* direct_out);
// The decode attention of a step in which every sequence has exactly one new token (layout.max_seq_tokens
// == 1), on the tensor-core kernel with what would otherwise be a kernel before it and one after it: each
// block prepares its query heads from q as prep.t[0] says (the QkvPrep of q, k, v = t[0], t[1], t[2]);
// the block whose chunk holds the new token prepares its key and value (k and v written back and appended
// to the cache as LaunchQkvPrep would); and the splits' partial results are merged by the last block of
// each (token, KV head) to finish, which also writes the prepared q back. Keys before the new one are
// staged before the kernel waits for the previous one: earlier forwards wrote them. out gets the output
// (times sigmoid(gate) when gate is set, as LaunchAttentionCombine); ws_o / ws_ml as LaunchAttentionDecodeMma's
// (unused when n_splits == 1); counter: n_tokens * n_kv_heads zero ints, left at zero. Needs
// AttentionDecodeFusedFits.
struct DecodeAttentionFusion {
  QkvPrep prep;
  const void* gate = nullptr;
  int32_t* counter = nullptr;
  // A context of up to this many KV pages takes one split (no merge; its pages load one after the other);
  // a longer one spreads over the splits as the plain kernel's does: a page per split until the pages
  // outnumber the splits, each staged before the kernel waits. In one split (a bf16 cache) the blocks of
  // the other splits take shares of the group's query heads instead of returning.
  int32_t one_split_pages = 2;
  // Set (2 to kQuantGemvWideMaxTokens tokens; head_dim 64 or 128): the output rows, as stored, also rounded to
  // int8 into xq in kGemvXInt8's layout (QuantXBytes: scale groups of xq_group, 16 or 32, blocks of xq_block
  // rows), for the quantized product that reads them next.
  void* xq = nullptr;
  int32_t xq_group = 0, xq_block = 0;
  // Bit i set: prep.t[i]'s rows, where the preparation changes them, are written back in place as the
  // separate ops would leave them. Cleared by Backend::Discard (nothing reads them after the attention):
  // then with shares of the group (one split) no block counts the others out before its write-back.
  int32_t keep_rows = 0b111;
};
// Whether the fused decode attention can round its output to int8 (DecodeAttentionFusion::xq) for this
// head_dim and number of query heads.
bool AttentionDecodeRoundsOutput(int head_dim, int n_heads);
constexpr int64_t kAttentionFusedMaxCounters = 8192;
// Also false above head_dim 128: there the plain kernel with its prep and combine was faster.
bool AttentionDecodeFusedFits(int group, int head_dim, int n_splits, size_t max_smem_optin, bool f8 = false);
void LaunchAttentionDecodeFused(cudaStream_t s, DeviceLayout layout, KvCacheView kv, int32_t n_heads, float scale,
                                int32_t n_splits, float* ws_o, float* ws_ml, void* out, DecodeAttentionFusion f);
// out [n_tokens, n_heads, head_dim] (bf16) from the partial results; with gate (bf16, out's shape) set, out *
// sigmoid(gate) (the gated attention's output gate, SigmoidMul's rounding).
void LaunchAttentionCombine(cudaStream_t s, int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t n_splits,
                            const float* ws_o, const float* ws_ml, const void* gate, void* out);
// Flash attention over query tiles (layout.tiles), tensor cores; head_dim % 8 == 0 and <= 256.
void LaunchAttentionFlash(cudaStream_t s, DeviceLayout layout, KvCacheView kv, const void* q, int32_t n_heads,
                          float scale, void* out);
// Kernels that usually precede a GEMV let it launch early (griddepcontrol.launch_dependents, sm_90+).
// Raises the dynamic shared-memory limits of the attention kernels (once per device, before use);
// max_smem_optin: the device's cudaDevAttrMaxSharedMemoryPerBlockOptin.
void ConfigureAttentionKernels(size_t max_smem_optin);
// Whether the flash kernel takes this head_dim on a device with that shared-memory limit.
bool FlashAttentionFits(int head_dim, size_t max_smem_optin, bool f8 = false);
// Bytes of dynamic shared memory LaunchAttentionSplit needs per block.
size_t AttentionSplitSmemBytes(int group, int head_dim);

// ---- Gated DeltaNet (gdn.cu, gdn_chunked.cu) ----
// state: this layer's conv state of slot 0, [kernel - 1, channels] f32; slot s's is at state + s * slot_stride.
// x, out act [n, channels]. From kConvParallelMinTokens tokens in the longest sequence on, every
// (token, channel) output is computed in parallel and the window saved by a second kernel; below, a
// thread per channel walks the tokens.
constexpr int kConvParallelMinTokens = 16;
void LaunchCausalConv1d(cudaStream_t s, DeviceLayout layout, const void* x, const void* w, int w_dtype, float* state,
                        int64_t slot_stride, int32_t channels, int32_t kernel, void* out);
void LaunchGdnGates(cudaStream_t s, const void* a, const void* b, const void* a_log, int a_log_dtype,
                    const void* dt_bias, int dt_bias_dtype, float* g, float* beta, int64_t n, int64_t nv);
// state: this layer's recurrent state of slot 0, [nv, dk, dv] f32; slot s's is at state + s * slot_stride.
// tiled: 0 = value head h uses key head h / (nv / nk), 1 = key head h % nk (ops.h GdnHeadMapping).
void LaunchGatedDeltaRule(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, const void* v,
                          const float* g, const float* beta, float* state, int64_t slot_stride, int32_t nk,
                          int32_t nv, int32_t dk, int32_t dv, int32_t tiled, void* out);
// The same rule in chunks of kGdnChunk tokens (gdn_chunked.cu), for prefill: the backend takes it when
// the longest sequence of the batch has kGdnChunkedMinTokens tokens or more and GdnChunkedFits. The
// threshold is an estimate, to be re-measured: the recurrent kernel costs ~1.2 us per token of the
// longest sequence (10 ms for 8,192 tokens, one block per (sequence, head)); the chunked one ~2 launches
// plus one chunk's prep and ~64 tokens' worth of sequential state work per chunk, so it wins from a few
// tens of tokens on, while decode steps and short speculative batches stay recurrent.
// Scratch (f32, device), written by the first kernel and read by the second, indexed by token row and
// value head: w [n_tokens, nv, dk], u [n_tokens, nv, dv], p [n_tokens, nv, kGdnChunk],
// coef [n_tokens, nv, 4] (16-byte aligned).
constexpr int kGdnChunk = 64;
constexpr int kGdnChunkedMaxDim = 128;
constexpr int kGdnChunkedMinTokens = 32;
struct GdnChunkScratch {
  float* w = nullptr;
  float* u = nullptr;
  float* p = nullptr;
  float* coef = nullptr;
};
// Whether the chunked kernels take dk, dv (<= kGdnChunkedMaxDim) within that shared-memory limit.
bool GdnChunkedFits(int dk, int dv, size_t max_smem_optin);
// The chunks' sequential pass runs on tensor cores (gdn_chunked_mma.cu) where GdnChunkStateMmaFits (dk 16,
// 32, 64 or 128, dv a multiple of 16, two chunks' operands in max_smem_optin) and q, k are 16-byte aligned;
// on CUDA cores otherwise.
void LaunchGatedDeltaRuleChunked(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, const void* v,
                                 const float* g, const float* beta, float* state, int64_t slot_stride, int32_t nk,
                                 int32_t nv, int32_t dk, int32_t dv, int32_t tiled, GdnChunkScratch ws, void* out,
                                 size_t max_smem_optin);
bool GdnChunkStateMmaFits(int dk, int dv, size_t max_smem_optin);
void LaunchGdnChunkStateMma(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, GdnChunkScratch ws,
                            float* state, int64_t slot_stride, int32_t nk, int32_t nv, int32_t dk, int32_t dv,
                            int32_t tiled, void* out);
// Raises the chunked kernels' dynamic shared-memory limits (once per device, before use).
void ConfigureGdnKernels(size_t max_smem_optin);
void ConfigureGdnChunkStateMma(size_t max_smem_optin);
// Decode of Gated DeltaNet with the ops around the delta rule fused in (gdn.cu): one token per sequence,
// dk <= 128. The gates (GdnGates of a, b [n, nv] bf16 with a_log, dt_bias; g and beta are still written),
// then the recurrent delta rule (LaunchGatedDeltaRule's kernel, out = its output, bf16), then with norm_out
// set the gated RMSNorm of each head's dv outputs (GatedRmsNorm with z [n, nv, dv] and weight norm_w [dv]):
// ss (floats) and counter (ints, zero at launch; left at zero) hold n * nv * ceil(dv / 32) and n * nv
// entries, at most kGdnFusedMaxRows rows (sequence, head).
struct GdnDecodeFusion {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* a_log = nullptr;
  const void* dt_bias = nullptr;
  float* g = nullptr;
  float* beta = nullptr;
  const void* z = nullptr;
  const void* norm_w = nullptr;
  void* norm_out = nullptr;
  float* ss = nullptr;
  int32_t* counter = nullptr;
  int32_t a_log_dtype = kF32, dt_bias_dtype = kF32, norm_w_dtype = kF32;
  float eps = 0;
};
constexpr int64_t kGdnFusedMaxRows = 4096;
inline bool GdnDecodeFusionFits(int64_t n_seqs, int64_t max_seq_tokens, int64_t nv, int64_t dk, int64_t dv) {
  return max_seq_tokens == 1 && dk <= 128 && dv <= 1024 && n_seqs * nv <= kGdnFusedMaxRows;
}
void LaunchGatedDeltaRuleDecode(cudaStream_t s, DeviceLayout layout, const void* q, const void* k, const void* v,
                                float* state, int64_t slot_stride, int32_t nk, int32_t nv, int32_t dk, int32_t dv,
                                int32_t tiled, GdnDecodeFusion fusion, void* out);

// ---- mixture of experts (moe.cu) ----
void LaunchMoeRouting(cudaStream_t s, const float* logits, int64_t n, int32_t n_experts, int32_t top_k,
                      int32_t normalize, float* weights, int32_t* ids);
// Device arrays of per-expert weight pointers: gate and up [inter, hidden], down [hidden, inter].
struct ExpertTable {
  const void* const* gate = nullptr;
  const void* const* up = nullptr;
  const void* const* down = nullptr;
  int32_t dtype = kBF16, n_experts = 0;
  int64_t inter = 0, hidden = 0;
  int32_t aligned16 = 0;  // every expert's weights start 16-byte aligned
  int32_t shared = 0;     // entry n_experts of the arrays is the layer's shared expert (same shapes and dtype)
};
// act: scratch f32 [n, top_k, inter]. x, out act bf16 [n, hidden]. Float expert weights (moe.cu).
void LaunchMoeExperts(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n,
                      int32_t top_k, ExpertTable experts, float* act, void* out);
// The same for many tokens on tensor cores (moe_grouped.cu): the (token, expert) pairs grouped by
// expert, two grouped GEMMs (gate/up with SiLU, down) and a weighted combine. bf16 experts whose
// hidden and intermediate sizes are multiples of 32 (MoeGroupedFits); scratch: MoeGroupedScratchBytes.
constexpr int kMoeGroupedMinTokens = 16;
bool MoeGroupedFits(const ExpertTable& experts);
// Raises the grouped GEMMs' dynamic shared-memory limit (once per device, before use).
void ConfigureMoeGrouped(size_t max_smem_optin);
size_t MoeGroupedScratchBytes(int64_t n, int32_t top_k, const ExpertTable& experts);
void LaunchMoeGrouped(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, int64_t n,
                      int32_t top_k, ExpertTable experts, void* scratch, void* out);
// The same for block-quantized expert weights of a type QuantTypeSupported accepts (moe_quant.cu): on
// tensor cores (x and act rounded to int8 blocks for the integer types) up to kQuantGemvMaxTokens tokens
// when the shapes and max_smem_optin allow, else in f32. With shared_logit (f32 [n]) the table's shared
// expert (ex.shared) runs in the same kernels as every token's last slot, weight sigmoid(shared_logit):
// only where QuantMoeSharedFits (tensor cores; act then holds n * (top_k + 1) rows).
bool QuantMoeSharedFits(int64_t n, int32_t top_k, const ExpertTable& ex, size_t max_smem_optin);
// Whether the tensor-core kernels take n tokens of these routed experts without a shared one.
bool QuantMoeMmaFits(int64_t n, int32_t top_k, const ExpertTable& ex, size_t max_smem_optin);
void LaunchQuantMoeExperts(cudaStream_t s, const void* x, const float* weights, const int32_t* ids,
                           const float* shared_logit, int64_t n, int32_t top_k, ExpertTable experts, float* act,
                           void* out, size_t max_smem_optin);
// Raises the tensor-core expert kernels' dynamic shared-memory limit (once per device, before use).
void ConfigureQuantMoeMma(size_t max_smem_optin);
// bf16 or FP8 (f8_e4m3_b128) experts of up to kMoeGemvMaxTokens tokens as weight-streaming tensor-core
// products (moe_gemv.cu), with the shared expert folded in when shared_logit (f32 [n], its gate logits) is
// set (the table's entry n_experts; ex.shared). act: bf16 scratch [n, top_k (+ 1), inter]. MoeGemvFits:
// 16-byte aligned weights, hidden and inter multiples of 32 (FP8: 128), top_k (+ 1) <= kMoeGemvMaxSlots.
// res: the residual add after
// the experts (and the norm of the sum) as the down kernel's epilogue, as GemvResidual says for the GEMV
// (out is the product), or none (res.out null).
// sync: two zero-initialised ints only these kernels use, or nullptr. With them, the up kernel's first routed
// block numbers the pair at its start (sync[0] += 1, before it lets the down kernel start) and, once it has
// waited for the routing, stores that number in sync[1]; the down kernel's blocks that find sync[1] equal to
// sync[0] read the expert ids and issue their first weight loads before they wait for the up kernel (blocks
// that start on SMs the up kernel has left). Why a number and not a flag: each kernel may start as soon as
// every block of the one before it has, so at small grids a pair's kernels can run beside the previous
// pair's, whose up kernel may publish its routing late. A down block reads both before it lets the next
// kernel start, so no later pair has numbered itself yet.
// Every token's routed slots are work items of their own and the down pass runs per token, so a token's
// result does not depend on the others in the batch; the shared expert takes the tokens 8 at a time (the
// mma's columns), which changes nothing per column either. Up to 15 tokens: from 16 the grouped GEMM
// (kMoeGroupedMinTokens) reads each expert's weights once for all of them (FP8 experts: up to
// kQuantMoeGroupsMaxTokens these kernels per group of 8 tokens first).
constexpr int kMoeGemvMaxTokens = 15;
constexpr int kMoeGemvTokenGroup = 8;
constexpr int kMoeGemvMaxSlots = 33;
bool MoeGemvFits(int64_t n, int32_t top_k, bool shared, const ExpertTable& ex);
void LaunchMoeGemv(cudaStream_t s, const void* x, const float* weights, const int32_t* ids, const float* shared_logit,
                   int64_t n, int32_t top_k, ExpertTable ex, void* act, void* out, GemvResidual res,
                   int32_t* sync);

// ---- sampling-side reductions (sampling.cu); logits f32 [rows, cols] ----
// Greedy picks (pick.h, PickGreedyRows): ids[r] = the lowest index of the largest of row r's first
// `sampleable` values, or -1 where one of them is NaN or +inf or all are -inf. Each row is split over
// kGreedySplits blocks; parts: rows * kGreedySplits entries of scratch; counters: rows zeroed ints, left
// zeroed (the last block of a row resets its own). rows <= kGreedyMaxRows.
struct GreedyPart {
  float v;
  int32_t i, bad;
};
static_assert(sizeof(GreedyPart) == 3 * sizeof(int32_t), "the backend allocates parts as 3 words each");
constexpr int kGreedySplits = 32;
constexpr int64_t kGreedyMaxRows = 1024;
void LaunchGreedyRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int64_t sampleable,
                      GreedyPart* parts, int32_t* counters, int32_t* ids);
// Draws (pick.h, PickRows; base/token_draw.h's DrawToken for its top-k branch, to the bit): ids[r] = row r's
// token drawn with draws[r] from its first `sampleable` values (a greedy row: top_k 1), or -1 where one of
// them is NaN or +inf or all are -inf. Each row is split over kDrawSplits blocks; parts: rows * kDrawSplits *
// kDrawPartWords ints of scratch; counters as LaunchGreedyRows's. rows <= kGreedyMaxRows, sampleable <=
// kDrawMaxSampleable.
struct DrawRow {
  int32_t top_k;     // [1, kDrawMaxTopK]
  float inv_temp;    // DrawRule::inv_temp
  float min_weight;  // float(min_p * (1 - kDrawBoundaryTolerance)), 0 without min-p
  int32_t unused;
  double top_p;  // 1: off
  double u;      // [0, 1)
};
static_assert(sizeof(DrawRow) == 32, "uploaded as packed rows");
constexpr int kDrawSplits = 64;
constexpr int kDrawMaxTopK = 64;
constexpr int64_t kDrawPartWords = 2 + 2 * kDrawMaxTopK;                  // a count, the best key, the pairs
constexpr int64_t kDrawMaxSampleable = int64_t{kDrawSplits} * 48 * 1024;  // a part's keys in 192 KB of shared memory
constexpr size_t kDrawMaxSharedBytes = 48 * 1024 * sizeof(uint32_t);
void LaunchDrawRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int64_t sampleable,
                    const DrawRow* draws, int32_t* parts, int32_t* counters, int32_t* ids);
// Token ids from picks (pick.h, FeedFromPicks): ids[i] = max(picks[rows[i]], 0), i < n.
void LaunchFeedTokens(cudaStream_t s, const int32_t* picks, const int32_t* rows, int64_t n, int32_t* ids);
// The k largest per row, descending, ties to the lower index. k <= 256.
void LaunchTopKRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, int32_t k, float* values,
                    int32_t* ids);
void LaunchLogSumExpRows(cudaStream_t s, const float* logits, int64_t rows, int64_t cols, float* out);

}  // namespace infernix::cuda
