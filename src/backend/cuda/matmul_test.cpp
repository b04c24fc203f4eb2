// CPU-vs-CUDA tests of MatMul on each of its paths: the small-batch tensor-core GEMV (alone and
// merged with its neighbours), cuBLASLt, and the CUDA-core fallback for other dtypes.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/test_util.h"
#include "base/error.h"
#include "quant/random_blocks.h"

namespace infernix {
namespace {

using cuda_test::ExpectClose;
using cuda_test::ExpectSameBits;
using cuda_test::Pair;
using cuda_test::Rand;
using cuda_test::Rig;

struct Shape3 {
  int64_t n, m, k;
};

std::string Name(const char* path, Shape3 s, DType out) {
  return std::string(path) + " n=" + std::to_string(s.n) + " m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) +
         (out == DType::kF32 ? " f32" : " bf16");
}

// rounded_w: the GPU computes with the weights rounded to bf16 (f16 weights beyond the GEMV), which the
// bound allows for (one bf16 rounding of every weight: rel. L2 ~2e-3 over the sums).
void CheckMatMul(Rig& rig, Shape3 s, DType w_dtype, DType out_dtype, uint64_t seed, const char* path,
                 bool rounded_w = false) {
  float scale = 1.0f / std::sqrt(static_cast<float>(s.k));
  auto x = rig.Act({s.n, s.k}, Rand(s.n * s.k, seed, -2, 2));
  auto w = rig.Weight(w_dtype, {s.m, s.k}, Rand(s.m * s.k, seed + 1, -scale, scale));
  auto out = rig.Out({s.n, s.m}, out_dtype);
  rig.cpu.MatMul(x.cpu, w.cpu, out.cpu);
  rig.gpu.MatMul(x.gpu, w.gpu, out.gpu);
  // f32 accumulation in another order, then a bf16 rounding of the result when out is bf16.
  double l2 = out_dtype == DType::kF32 && !rounded_w ? 1e-4 : rounded_w ? 6e-3 : 4e-3;
  double mx = out_dtype == DType::kF32 && !rounded_w ? 1e-3 : rounded_w ? 2e-2 : 1e-2;
  ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), l2, mx, Name(path, s, out_dtype));
}

TEST(CudaMatMul, GemvPathAtDecodeShapes) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 100;
  for (int64_t n : {1, 3, 8, 9, 16})
    for (Shape3 s : {Shape3{n, 4096, 4096}, Shape3{n, 1000, 2048}, Shape3{n, 4096, 12288}, Shape3{n, 24, 72}})
      CheckMatMul(rig, s, DType::kBF16, DType::kBF16, seed++, "gemv");
  CheckMatMul(rig, {4, 512, 2048}, DType::kBF16, DType::kF32, seed++, "gemv");    // router logits
  CheckMatMul(rig, {2, 1, 2048}, DType::kBF16, DType::kF32, seed++, "gemv");      // shared-expert gate
  CheckMatMul(rig, {1, 151936, 1024}, DType::kBF16, DType::kF32, seed++, "gemv");  // lm_head
}

TEST(CudaMatMul, MergedGemvsMatchSeparateProducts) {
  INFX_REQUIRE_GPU();
  Rig rig;
  const int64_t n = 5, k = 4096;
  auto x = rig.Act({n, k}, Rand(n * k, 200, -2, 2));
  std::vector<Pair> w, out;
  const int64_t rows[] = {4096, 1024, 1024, 32};
  for (int i = 0; i < 4; ++i) {
    w.push_back(rig.Weight(DType::kBF16, {rows[i], k}, Rand(rows[i] * k, 201 + i, -0.02f, 0.02f)));
    out.push_back(rig.Out({n, rows[i]}, i == 3 ? DType::kF32 : DType::kBF16));
  }
  for (int i = 0; i < 4; ++i) {  // queued back to back: one launch
    rig.cpu.MatMul(x.cpu, w[static_cast<size_t>(i)].cpu, out[static_cast<size_t>(i)].cpu);
    rig.gpu.MatMul(x.gpu, w[static_cast<size_t>(i)].gpu, out[static_cast<size_t>(i)].gpu);
  }
  for (int i = 0; i < 4; ++i)
    ExpectClose(rig.Gpu(out[static_cast<size_t>(i)].gpu), Rig::Cpu(out[static_cast<size_t>(i)].cpu), 4e-3, 1e-2,
                "merged gemv #" + std::to_string(i));
}

// A launch whose tiles would take more than one wave of 8-warp blocks (2 per SM) but fit in one of 4-warp
// blocks (4 per SM) runs as the latter where k >= 4096 (gemv.cu, GemvFourWarps; Qwen3-8B's q/k/v): here 3
// tiles per SM, read as plain x and (one token) with the norm of the residual GEMV before deferred to it, and
// as a gate/up pair.
TEST(CudaMatMul, GemvOfFourWarpBlocks) {
  INFX_REQUIRE_GPU();
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int64_t k = 4096, rows = 16 * 3 * int64_t{sms}, ff = 16 * 3 * int64_t{sms};
  const float s = 1.0f / std::sqrt(static_cast<float>(k));
  for (int64_t n : {1, 3, 8}) {
    Rig rig;
    auto h = rig.Act({n, k}, Rand(n * k, 40, -2, 2));
    auto attn = rig.Act({n, 512}, Rand(n * 512, 41, -2, 2));
    auto nw = rig.Weight(DType::kBF16, {k}, Rand(k, 42, 0.5f, 1.5f));
    auto wo = rig.Weight(DType::kBF16, {k, 512}, Rand(512 * k, 43, -0.05f, 0.05f));
    auto wq = rig.Weight(DType::kBF16, {rows, k}, Rand(rows * k, 44, -s, s));
    auto wg = rig.Weight(DType::kBF16, {ff, k}, Rand(ff * k, 45, -s, s));
    auto wu = rig.Weight(DType::kBF16, {ff, k}, Rand(ff * k, 46, -s, s));
    auto o = rig.Out({n, k}), normed = rig.Out({n, k}), q = rig.Out({n, rows}), q_plain = rig.Out({n, rows}),
         gate = rig.Out({n, ff}), up = rig.Out({n, ff}), act = rig.Out({n, ff});
    auto step = [&](Backend& be, Tensor Pair::*side) {
      be.MatMul(attn.*side, wo.*side, o.*side);  // o_proj: the add and the norm as its epilogue
      be.Add(h.*side, o.*side, h.*side);
      be.RmsNorm(h.*side, nw.*side, 1e-6f, false, normed.*side);
      be.MatMul(normed.*side, wq.*side, q.*side);  // one token: the norm deferred to this GEMV
      be.MatMul(h.*side, wq.*side, q_plain.*side);
      be.MatMul(normed.*side, wg.*side, gate.*side);
      be.MatMul(normed.*side, wu.*side, up.*side);
      be.SiluMul(gate.*side, up.*side, act.*side);
    };
    step(rig.cpu, &Pair::cpu);
    step(rig.gpu, &Pair::gpu);
    const std::string at = " n=" + std::to_string(n) + " rows=" + std::to_string(rows);
    ExpectClose(rig.Gpu(normed.gpu), Rig::Cpu(normed.cpu), 4e-3, 8e-3, "4 warps: add + norm" + at);
    for (auto [got, name] : std::vector<std::pair<Pair*, const char*>>{
             {&q, "q"}, {&q_plain, "plain x"}, {&gate, "gate"}, {&act, "silu(gate) * up"}})
      ExpectClose(rig.Gpu(got->gpu), Rig::Cpu(got->cpu), 8e-3, 2e-2, std::string("4 warps: ") + name + at);
    // The same rows of x among 9 tokens take 8-warp blocks (two tiles of tokens): the same sums in the same
    // order, so the same bits.
    std::vector<float> x9 = Rand(9 * k, 47, -2, 2);
    auto xn = rig.Act({n, k}, std::vector<float>(x9.begin(), x9.begin() + n * k));
    auto xb = rig.Act({9, k}, x9);
    auto qn = rig.Out({n, rows}), qb = rig.Out({9, rows});
    rig.gpu.MatMul(xn.gpu, wq.gpu, qn.gpu);
    rig.gpu.MatMul(xb.gpu, wq.gpu, qb.gpu);
    const std::vector<float> got_n = rig.Gpu(qn.gpu), got_b = rig.Gpu(qb.gpu);
    ASSERT_EQ(0, std::memcmp(got_n.data(), got_b.data(), got_n.size() * sizeof(float))) << "4 vs 8 warps" << at;
  }
}

// The decode step's RMSNorm (after the residual add, or alone) becomes the prologue of the GEMV that reads
// its result, and SiLU-and-multiply (in place, as the model calls it, or into another tensor) the epilogue
// of the gate/up GEMV (gemv.cu); the tensors they write must be written all the same. Three rounds with
// new values through the same tensors, so that the later ones replay a captured graph (the fused norm
// elects a writer with a device counter that must be back at zero after each step). 9 tokens take the
// unfused norm.
TEST(CudaMatMul, NormAndSiluFusedIntoGemv) {
  INFX_REQUIRE_GPU();
  const int64_t k = 2048, ff = 1536, vocab = 1000;
  const float s = 1.0f / std::sqrt(static_cast<float>(k)), sd = 1.0f / std::sqrt(static_cast<float>(ff));
  for (int64_t n : {1, 3, 8, 9, 16}) {
    const bool in_place = n % 2 == 1;
    Rig rig;
    auto h = rig.Act({n, k}, Rand(n * k, 1, -2, 2));
    auto nw = rig.Weight(DType::kBF16, {k}, Rand(k, 3, 0.5f, 1.5f));
    auto nw2 = rig.Weight(DType::kF32, {k}, Rand(k, 4, -0.5f, 0.5f));
    auto wq = rig.Weight(DType::kBF16, {512, k}, Rand(512 * k, 5, -s, s));
    auto wk = rig.Weight(DType::kBF16, {128, k}, Rand(128 * k, 6, -s, s));
    auto wg = rig.Weight(DType::kBF16, {ff, k}, Rand(ff * k, 7, -s, s));
    auto wu = rig.Weight(DType::kBF16, {ff, k}, Rand(ff * k, 8, -s, s));
    auto wd = rig.Weight(DType::kBF16, {k, ff}, Rand(ff * k, 9, -sd, sd));
    auto wl = rig.Weight(DType::kBF16, {vocab, k}, Rand(vocab * k, 10, -s, s));
    auto wo = rig.Weight(DType::kBF16, {k, 512}, Rand(512 * k, 30, -0.05f, 0.05f));
    auto attn = rig.Act({n, 512}, Rand(n * 512, 31, -2, 2));
    auto normed = rig.Out({n, k}), q = rig.Out({n, 512}), kk = rig.Out({n, 128}), normed_b = rig.Out({n, k}),
         gate = rig.Out({n, ff}), up = rig.Out({n, ff}), act = rig.Out({n, ff}), down = rig.Out({n, k}),
         h2 = rig.Out({n, k}), normed2 = rig.Out({n, k}), logits = rig.Out({n, vocab}, DType::kF32),
         o = rig.Out({n, k}), normed3 = rig.Out({n, k});
    Pair& silu = in_place ? gate : act;
    // Both ways a norm joins a GEMV: as the epilogue of the GEMV before, with its residual add (o_proj,
    // down), and as the prologue of the GEMV that reads it (a norm of h alone, of down alone).
    auto step = [&](Backend& be, Tensor Pair::*side) {
      be.MatMul(attn.*side, wo.*side, o.*side);  // o_proj: the add and the norm as its epilogue
      be.Add(h.*side, o.*side, h.*side);         // in place, as the residual stream
      be.RmsNorm(h.*side, nw.*side, 1e-6f, false, normed.*side);
      be.MatMul(normed.*side, wq.*side, q.*side);
      be.MatMul(normed.*side, wk.*side, kk.*side);
      be.RmsNorm(h.*side, nw2.*side, 1e-6f, true, normed_b.*side);
      be.MatMul(normed_b.*side, wg.*side, gate.*side);
      be.MatMul(normed_b.*side, wu.*side, up.*side);
      be.SiluMul(gate.*side, up.*side, silu.*side);
      be.MatMul(silu.*side, wd.*side, down.*side);
      be.Add(down.*side, h.*side, h2.*side);  // the product as the first addend, a new output
      if (in_place) {                         // an in-place norm: not fused, the add still is
        be.RmsNorm(h2.*side, nw2.*side, 1e-6f, true, h2.*side);
        be.MatMul(h2.*side, wl.*side, logits.*side);
      } else {
        be.RmsNorm(h2.*side, nw2.*side, 1e-6f, true, normed2.*side);
        be.MatMul(normed2.*side, wl.*side, logits.*side);
      }
      be.RmsNorm(down.*side, nw2.*side, 1e-6f, true, normed3.*side);
      be.MatMul(normed3.*side, wq.*side, attn.*side);  // the next round's input
    };
    for (int round = 0; round < 3; ++round) {
      if (round > 0) rig.Set(h, Rand(n * k, 11 + round, -2, 2));
      step(rig.cpu, &Pair::cpu);
      step(rig.gpu, &Pair::gpu);
      const std::string at = " n=" + std::to_string(n) + " round " + std::to_string(round);
      // The residual sum and its norms: bf16 roundings of f32 values; the products (and the norm of one) as
      // CheckMatMul's.
      ExpectClose(rig.Gpu(h.gpu), Rig::Cpu(h.cpu), 4e-3, 8e-3, "fused: residual sum" + at);
      ExpectClose(rig.Gpu(normed.gpu), Rig::Cpu(normed.cpu), 4e-3, 8e-3, "fused: add + norm" + at);
      ExpectClose(rig.Gpu(normed_b.gpu), Rig::Cpu(normed_b.cpu), 4e-3, 8e-3, "fused: norm" + at);
      std::vector<std::pair<Pair*, const char*>> products = {{&o, "o_proj"},
                                                             {&q, "q"},
                                                             {&kk, "k"},
                                                             {&up, "up"},
                                                             {&silu, "silu(gate) * up"},
                                                             {&down, "down"},
                                                             {&h2, "down + h"},
                                                             {&logits, "logits"},
                                                             {&normed3, "norm of down"},
                                                             {&attn, "attn"}};
      if (!in_place) products.emplace_back(&normed2, "norm of down + h");
      if (!in_place) products.emplace_back(&gate, "gate");
      for (auto [got, name] : products)
        ExpectClose(rig.Gpu(got->gpu), Rig::Cpu(got->cpu), 8e-3, 2e-2, std::string("fused: ") + name + at);
    }
  }
}

TEST(CudaMatMul, CublasPathAtPrefillShapes) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 300;
  for (Shape3 s : {Shape3{17, 4096, 4096}, Shape3{300, 1024, 4096}, Shape3{129, 12288, 4096}, Shape3{64, 4096, 12288}})
    CheckMatMul(rig, s, DType::kBF16, DType::kBF16, seed++, "cublas");
  CheckMatMul(rig, {129, 4096, 2048}, DType::kBF16, DType::kF32, seed++, "cublas");
  CheckMatMul(rig, {33, 1, 2048}, DType::kBF16, DType::kF32, seed++, "cublas");
}

// f32 and f16 weights at decode (the CUDA-core GEMV): a GGUF file's f32 router and shared-expert gate, an
// F16 file's projections and LM head (m not a multiple of 8: the last block's idle warps), k not a multiple
// of 256 (the last step of 8-value chunks partly past the row).
TEST(CudaMatMul, FloatWeightsAtDecode) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 410;
  for (int64_t n : {1, 2, 3, 8}) {
    CheckMatMul(rig, {n, 512, 2048}, DType::kF32, DType::kF32, seed++, "float gemv f32 w");  // router
    CheckMatMul(rig, {n, 1, 2048}, DType::kF32, DType::kF32, seed++, "float gemv f32 w");    // shared gate
    CheckMatMul(rig, {n, 4096, 4096}, DType::kF16, DType::kBF16, seed++, "float gemv f16 w");
    CheckMatMul(rig, {n, 1003, 1000}, DType::kF16, DType::kF32, seed++, "float gemv f16 w");
  }
  CheckMatMul(rig, {1, 151936, 1024}, DType::kF16, DType::kF32, seed++, "float gemv f16 w");  // LM head
}

TEST(CudaMatMul, FallbackForOtherDtypesAndWithoutCublas) {
  INFX_REQUIRE_GPU();
  {
    Rig rig;
    CheckMatMul(rig, {9, 300, 512}, DType::kF32, DType::kBF16, 400, "simt f32 w");
    // f16 weights beyond the GEMV: rounded to bf16 in the op workspace, then cuBLASLt (twice, so that the
    // second product finds the first one's weight replaced in the workspace).
    CheckMatMul(rig, {40, 200, 256}, DType::kF16, DType::kF32, 401, "f16 w via bf16", true);
    CheckMatMul(rig, {300, 1024, 512}, DType::kF16, DType::kBF16, 406, "f16 w via bf16", true);
    CheckMatMul(rig, {12, 96, 512}, DType::kF16, DType::kBF16, 407, "f16 w via bf16 gemv", true);
    CheckMatMul(rig, {3, 50, 36}, DType::kBF16, DType::kBF16, 402, "simt k%8");
    CheckMatMul(rig, {2, 50, 36}, DType::kF32, DType::kF32, 405, "simt f32 w k%8");
  }
  CudaOptions o;
  o.cublas = false;
  o.gemv = false;
  Rig rig(o);
  CheckMatMul(rig, {33, 700, 1024}, DType::kBF16, DType::kBF16, 403, "simt bf16");
  CheckMatMul(rig, {2, 64, 128}, DType::kBF16, DType::kF32, 404, "simt bf16");
  CheckMatMul(rig, {40, 200, 256}, DType::kF16, DType::kF32, 408, "simt f16 w");
}

}  // namespace
}  // namespace infernix

namespace infernix {
namespace {

// x rounded as the tensor-core GEMV rounds it for integer weight types: int8 blocks of 32 values with
// scale max |x| / 127, round to nearest even (quant_gemv_mma.cu).
std::vector<float> Int8Blocks(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f, dx = amax / 127.0f;
    for (size_t i = b; i < b + 32; ++i) out[i] = std::nearbyint(x[i] * inv) * dx;
  }
  return out;
}

// Which decode path a quantized product takes, and the activations it computes with.
struct QuantPath {
  bool gemv = false;      // gemv.cu (FP8 where cuda::GemvTakesWeights says)
  bool mma = false;       // quant_gemv_mma.cu (else quant.cu's f32 GEMV)
  bool int8_x = false;    // x rounded to int8 blocks (integer types on the tensor-core path)
};
size_t SmemOptin() {
  int device = 0, optin = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  return static_cast<size_t>(optin);
}
QuantPath PathFor(DType type, Shape3 s, const Tensor& x, const Tensor& w) {
  const size_t optin = SmemOptin();
  QuantPath p;
  p.gemv = cuda::GemvTakesWeights(static_cast<int>(type), s.n, s.k) && reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
  p.mma = !p.gemv && cuda::QuantGemvMmaFits(static_cast<int>(type), s.n, s.k, s.m, x.data, w.data, optin);
  p.int8_x = p.mma && type != DType::kF8E4M3B128;
  return p;
}

// GGUF block types: the dequantizing GEMVs (n <= 8; tensor cores when the shape allows, else the f32
// kernel; the integer types' tensor-core product up to kQuantGemvWideMaxTokens tokens in one launch where x
// fits in shared memory; up to kQuantSplitMaxTokens tokens once per group of the most tokens a launch takes
// at that shape) and the dequantize-then-GEMM prefill path
// (the tiled dequantizer, and its per-thread fallback for FP8 rows that are not 16-byte aligned: k = 768),
// and embedding lookups from a quantized table,
// against the CPU backend's reference decoders. The CPU sees the activations the GPU path computes with
// (int8-rounded for the integer types on tensor cores), so the bounds check the decoding itself.
TEST(CudaMatMul, QuantizedWeights) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 700;
  for (DType type : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                     DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kF8E4M3B128}) {
    int mma_cases = 0, gemv_cases = 0, wide_cases = 0;
    for (Shape3 s : {Shape3{1, 4096, 4096}, Shape3{3, 1000, 2048}, Shape3{8, 512, 12288}, Shape3{2, 300, 768},
                      Shape3{5, 48, 256}, Shape3{2, 20000, 1024}, Shape3{12, 768, 2048}, Shape3{24, 512, 2048},
                      Shape3{16, 520, 4096}, Shape3{32, 256, 4096}, Shape3{14, 256, 12288}, Shape3{40, 1024, 4096},
                      Shape3{40, 300, 768}}) {
      HostBuffer packed = RandomQuantBlocks(type, s.m, s.k, seed, 1.0f / std::sqrt(static_cast<float>(s.k)));
      Pair w = rig.Packed(packed);
      const std::vector<float> xv = Rand(s.n * s.k, seed + 1, -2, 2);
      auto x = rig.Act({s.n, s.k}, xv);
      // More than 8 tokens: one launch of the tensor-core product where it takes them all (integer types, x in
      // shared memory), else up to kQuantSplitMaxTokens tokens per group of the most it takes (at least 8).
      const Shape3 group{cuda::QuantGemvMmaGroupTokens(static_cast<int>(type), s.n, s.k, s.m, x.gpu.data, w.gpu.data,
                                                        SmemOptin()),
                         s.m, s.k};
      const bool one = group.n == s.n, gemv = one || s.n <= cuda::kQuantSplitMaxTokens, split = gemv && !one;
      const QuantPath path = gemv ? PathFor(type, group, x.gpu, w.gpu) : QuantPath{};
      mma_cases += path.mma ? 1 : 0;
      gemv_cases += path.gemv ? 1 : 0;
      wide_cases += path.mma && group.n > cuda::kQuantGemvMaxTokens ? 1 : 0;
      auto x_seen = path.int8_x ? rig.Act({s.n, s.k}, Int8Blocks(xv), DType::kF32) : x;
      const std::string what = std::string(DTypeName(type)) +
                               (split ? " per " + std::to_string(group.n) + " tokens: " : std::string(" ")) +
                               (gemv ? (path.gemv  ? "gemv (the bf16 kernel)"
                                        : path.mma ? "quant gemv (tensor cores)"
                                                   : "quant gemv (f32)")
                                     : "dequant+gemm");
      for (DType out_dtype : {DType::kBF16, DType::kF32}) {
        auto out = rig.Out({s.n, s.m}, out_dtype);
        rig.cpu.MatMul(x_seen.cpu, w.cpu, out.cpu);
        rig.gpu.MatMul(x.gpu, w.gpu, out.gpu);
        // The GEMVs compute in f32 from the exact weights; the prefill path rounds them to bf16 first.
        double l2 = out_dtype == DType::kF32 && gemv ? 1e-4 : 5e-3, mx = out_dtype == DType::kF32 && gemv ? 1e-3 : 2e-2;
        ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), l2, mx, Name(what.c_str(), s, out_dtype));
      }
      if (path.int8_x) {  // what rounding x costs against the exact product (reported, loosely bounded)
        auto exact = rig.Out({s.n, s.m}, DType::kF32), got = rig.Out({s.n, s.m}, DType::kF32);
        rig.cpu.MatMul(x.cpu, w.cpu, exact.cpu);
        rig.gpu.MatMul(x.gpu, w.gpu, got.gpu);
        ExpectClose(rig.Gpu(got.gpu), Rig::Cpu(exact.cpu), 2e-2, 5e-2, Name((what + " vs exact x").c_str(), s, DType::kF32));
      }
      ++seed;
    }
    if (type == DType::kF8E4M3B128) {  // 2-8 tokens and k % 512 == 0 on the bf16 GEMV's kernel, 1 on tensor cores
      EXPECT_GE(gemv_cases, 3) << "FP8: the bf16 GEMV's kernel took too few of the shapes";
      EXPECT_GE(mma_cases, 1) << "FP8: the tensor-core GEMV took too few of the shapes";
    } else {
      EXPECT_EQ(gemv_cases, 0) << DTypeName(type);
      EXPECT_GE(mma_cases, 3) << DTypeName(type) << ": the tensor-core GEMV took too few of the shapes";
      // 12 x 2048, 16 x 4096 and 24 x 2048 fit every integer type's wide form in 227 KB (sm_90's opt-in).
      if (SmemOptin() >= 227 * 1024) {
        EXPECT_GE(wide_cases, 3) << DTypeName(type) << ": the wide form took too few";
      }
    }
    const int64_t vocab = 300, h = 1024;
    HostBuffer table = RandomQuantBlocks(type, vocab, h, seed++, 1.0f);
    Pair t = rig.Packed(table);
    auto ids = rig.I32({5}, {0, 299, 17, 17, 150});
    auto out = rig.Out({5, h});
    rig.cpu.Embedding(ids.cpu, t.cpu, out.cpu);
    rig.gpu.Embedding(ids.gpu, t.gpu, out.gpu);
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 4e-3, 1e-2, std::string(DTypeName(type)) + " embedding");
  }
}

// Quantized products that read the same x (q/k/v, gate/up) run as one launch; each output is checked.
TEST(CudaMatMul, QuantizedProductsSharingInput) {
  INFX_REQUIRE_GPU();
  Rig rig;
  for (DType type : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kF8E4M3B128}) {
    for (int64_t n : {1, 2}) {  // one token: the kernel's one-token form
      const int64_t k = 2048;
      const std::vector<float> xv = Rand(n * k, 900, -2, 2);
      auto x = rig.Act({n, k}, xv);
      auto x_f32 = rig.Act({n, k}, type == DType::kF8E4M3B128 ? xv : Int8Blocks(xv), DType::kF32);
      std::vector<HostBuffer> packed;
      std::vector<Pair> ws, outs;
      uint64_t seed = 901;
      for (int64_t m : {2048, 512, 512}) {
        packed.push_back(RandomQuantBlocks(type, m, k, seed++, 0.02f));
        ws.push_back(rig.Packed(packed.back()));
        outs.push_back(rig.Out({n, m}));
      }
      for (size_t i = 0; i < ws.size(); ++i) rig.gpu.MatMul(x.gpu, ws[i].gpu, outs[i].gpu);
      for (size_t i = 0; i < ws.size(); ++i) {
        rig.cpu.MatMul(x_f32.cpu, ws[i].cpu, outs[i].cpu);
        ExpectClose(rig.Gpu(outs[i].gpu), Rig::Cpu(outs[i].cpu), 5e-3, 2e-2,
                    std::string(DTypeName(type)) + " joined product " + std::to_string(i) + " n=" + std::to_string(n));
      }
    }
  }
}

// The residual add and the RMSNorm after a quantized product (the GGUF types take them as ops of their
// own: one fused add + norm kernel, or the norm held for the next bf16 GEMV; FP8 on the bf16 GEMV's kernel
// as its epilogue): in place, out of place, with a norm in place.
TEST(CudaMatMul, ResidualAndNormAfterQuantizedGemv) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 950;
  for (DType type : {DType::kQ8_0, DType::kQ4_K, DType::kF8E4M3B128}) {
    for (int64_t n : {1, 5, 8}) {
      const int64_t k = 2048, m = 1024;
      const std::vector<float> xv = Rand(n * k, seed++, -2, 2);
      auto x = rig.Act({n, k}, xv);
      auto x_seen = rig.Act({n, k}, type == DType::kF8E4M3B128 ? xv : Int8Blocks(xv), DType::kF32);
      HostBuffer packed = RandomQuantBlocks(type, m, k, seed++, 0.02f);
      Pair w = rig.Packed(packed);
      auto nw = rig.Weight(DType::kBF16, {m}, Rand(m, seed++, 0.5f, 1.5f));
      auto h = rig.Act({n, m}, Rand(n * m, seed++, -2, 2));
      auto o = rig.Out({n, m}), normed = rig.Out({n, m}), h2 = rig.Out({n, m});
      auto step = [&](Backend& be, Tensor Pair::*side, const Tensor& input) {
        be.MatMul(input, w.*side, o.*side);
        be.Add(h.*side, o.*side, h.*side);  // in place, then a norm
        be.RmsNorm(h.*side, nw.*side, 1e-6f, false, normed.*side);
        be.MatMul(input, w.*side, o.*side);
        be.Add(o.*side, h.*side, h2.*side);  // out of place, then a norm in place
        be.RmsNorm(h2.*side, nw.*side, 1e-6f, true, h2.*side);
      };
      step(rig.cpu, &Pair::cpu, x_seen.cpu);
      step(rig.gpu, &Pair::gpu, x.gpu);
      const std::string at = std::string(DTypeName(type)) + " n=" + std::to_string(n);
      ExpectClose(rig.Gpu(o.gpu), Rig::Cpu(o.cpu), 5e-3, 2e-2, "after quantized: product " + at);
      ExpectClose(rig.Gpu(h.gpu), Rig::Cpu(h.cpu), 4e-3, 8e-3, "after quantized: residual sum " + at);
      ExpectClose(rig.Gpu(normed.gpu), Rig::Cpu(normed.cpu), 4e-3, 8e-3, "after quantized: norm " + at);
      ExpectClose(rig.Gpu(h2.gpu), Rig::Cpu(h2.cpu), 4e-3, 8e-3, "after quantized: norm in place " + at);
    }
  }
}

// Three rounds of `step` on the side of a fused rig and on that of an unfused one (`inputs` sets new inputs on
// both before the later rounds, which then replay captured graphs); after each, every listed output must hold
// the same bits on both.
template <typename Side, typename Step, typename Inputs>
void ExpectFusedAsUnfused(Rig& fused, Side& a, Rig& unfused, Side& b, Step step, Inputs inputs,
                          const std::vector<std::pair<Pair Side::*, const char*>>& outputs, const std::string& at) {
  for (int round = 0; round < 3; ++round) {
    if (round > 0) inputs();
    step(fused.gpu, a);
    step(unfused.gpu, b);
    for (const auto& [member, name] : outputs)
      ExpectSameBits(fused.Gpu((a.*member).gpu), unfused.Gpu((b.*member).gpu),
                     std::string(name) + " " + at + " round " + std::to_string(round) + " (fused / unfused)");
  }
}

// At 2-32 tokens the held RMSNorm (after the residual add, or alone) that makes a quantized product's x also
// rounds its rows to int8 for that product and the ones that join it (cuda::LaunchRmsNormInt8, kGemvXInt8),
// with the codes the product's own prologue would give: every output equals the unfused rig's bit for bit
// (whose products the other tests check against the CPU). Three rounds through the same tensors, so that
// the later ones replay a captured graph.
TEST(CudaMatMul, NormRoundsXForQuantizedGemv) {
  INFX_REQUIRE_GPU();
  const int64_t ff = 1000;
  CudaOptions unfused_options;
  unfused_options.fuse = false;
  uint64_t seed = 1200;
  for (DType type : {DType::kQ4_K, DType::kQ8_0, DType::kQ6_K, DType::kQ5_1}) {
    for (int64_t n : {2, 3, 8, 12, 32}) {  // beyond 8: the wide form
      // 32 tokens of 4,096 values: q8_0 and q6_k run per group of 24 and 8 (QuantGemvMmaGroupTokens), each
      // group reading its own block of the norm's int8 rows.
      const int64_t k = n == 32 ? 4096 : 2048;
      Rig fused, unfused(unfused_options);
      struct Side {
        Pair h, o, nw, nw2, normed, normed_b, q, kk, gate;
        std::vector<Pair> w;
      };
      std::vector<HostBuffer> packed;
      for (int64_t m : {int64_t{512}, int64_t{128}, ff})
        packed.push_back(RandomQuantBlocks(type, m, k, seed++, 0.05f));
      const std::vector<float> h0 = Rand(n * k, seed++, -2, 2), o0 = Rand(n * k, seed++, -2, 2);
      const std::vector<float> nwv = Rand(k, seed++, 0.5f, 1.5f), nw2v = Rand(k, seed++, -0.5f, 0.5f);
      auto make = [&](Rig& rig) {
        Side t{rig.Act({n, k}, h0),     rig.Act({n, k}, o0), rig.Weight(DType::kBF16, {k}, nwv),
               rig.Weight(DType::kF32, {k}, nw2v), rig.Out({n, k}), rig.Out({n, k}), rig.Out({n, 512}),
               rig.Out({n, 128}, DType::kF32), rig.Out({n, ff}), {}};
        for (const HostBuffer& p : packed)
          t.w.push_back(rig.Packed(p));
        return t;
      };
      Side a = make(fused), b = make(unfused);
      auto step = [](Backend& be, Side& t) {
        be.Add(t.h.gpu, t.o.gpu, t.h.gpu);  // in place, as the residual stream
        be.RmsNorm(t.h.gpu, t.nw.gpu, 1e-6f, false, t.normed.gpu);
        be.MatMul(t.normed.gpu, t.w[0].gpu, t.q.gpu);
        be.MatMul(t.normed.gpu, t.w[1].gpu, t.kk.gpu);
        be.RmsNorm(t.h.gpu, t.nw2.gpu, 1e-6f, true, t.normed_b.gpu);  // a norm alone, f32 weight with offset
        be.MatMul(t.normed_b.gpu, t.w[2].gpu, t.gate.gpu);
      };
      auto inputs = [&] {
        const std::vector<float> h = Rand(n * k, seed++, -2, 2), o = Rand(n * k, seed++, -2, 2);
        fused.Set(a.h, h);
        fused.Set(a.o, o);
        unfused.Set(b.h, h);
        unfused.Set(b.o, o);
      };
      ExpectFusedAsUnfused<Side>(fused, a, unfused, b, step, inputs,
                                 {{&Side::h, "residual sum"},
                                  {&Side::normed, "add + norm"},
                                  {&Side::normed_b, "norm"},
                                  {&Side::q, "q"},
                                  {&Side::kk, "k (f32)"},
                                  {&Side::gate, "gate"}},
                                 std::string(DTypeName(type)) + " n=" + std::to_string(n));
    }
  }
}

// At 2-32 tokens SiLU(gate) * up is held, and the quantized product that reads it next has it round its rows
// to int8 for it (cuda::LaunchSiluMulInt8, kGemvXInt8), with the codes the product's own prologue would give:
// every output equals the unfused rig's bit for bit (whose products the other tests check against the
// CPU), in place as the MLP runs it and out of place; a result that no quantized product reads next (a bf16
// product) is the plain op's. Three rounds through the same tensors, so that the later ones replay a graph.
TEST(CudaMatMul, SiluMulRoundsXForQuantizedGemv) {
  INFX_REQUIRE_GPU();
  const int64_t k = 1024, m = 1000;
  CudaOptions unfused_options;
  unfused_options.fuse = false;
  uint64_t seed = 1300;
  // (tokens, ff): beyond 8 tokens the wide form; ff = 12,288 (Qwen3-8B's down) takes 8 tokens a launch, so
  // 12, 17 and 24 tokens run per group, each reading its own block of SiLU's int8 rows (17: a last group of
  // one token, which rounds its row itself).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{2, 1536},   {3, 1536},   {8, 1536},   {12, 1536},
                                                           {32, 1536},  {12, 12288}, {17, 12288}, {24, 12288}};
  for (DType type : {DType::kQ4_K, DType::kQ8_0, DType::kQ6_K, DType::kQ5_1}) {
    for (const auto& shape : shapes) {
      const int64_t n = shape.first, ff = shape.second;
      Rig fused, unfused(unfused_options);
      struct Side {
        Pair x, gate, up, h, down, down2, down3;
        std::vector<Pair> w;
        Pair wb;
      };
      std::vector<HostBuffer> packed;
      for (auto [rows, cols] : {std::pair{ff, k}, std::pair{ff, k}, std::pair{m, ff}, std::pair{m, ff}})
        packed.push_back(RandomQuantBlocks(type, rows, cols, seed++, 0.05f));
      const std::vector<float> x0 = Rand(n * k, seed++, -2, 2), wbv = Rand(m * ff, seed++, -0.05f, 0.05f);
      auto make = [&](Rig& rig) {
        Side t{rig.Act({n, k}, x0), rig.Out({n, ff}), rig.Out({n, ff}), rig.Out({n, ff}), rig.Out({n, m}),
               rig.Out({n, m}),     rig.Out({n, m}),  {},               rig.Weight(DType::kBF16, {m, ff}, wbv)};
        for (const HostBuffer& p : packed)
          t.w.push_back(rig.Packed(p));
        return t;
      };
      Side a = make(fused), b = make(unfused);
      auto step = [](Backend& be, Side& t) {
        be.MatMul(t.x.gpu, t.w[0].gpu, t.gate.gpu);
        be.MatMul(t.x.gpu, t.w[1].gpu, t.up.gpu);
        be.SiluMul(t.gate.gpu, t.up.gpu, t.h.gpu);  // out of place; down and a product joining it
        be.MatMul(t.h.gpu, t.w[2].gpu, t.down.gpu);
        be.MatMul(t.h.gpu, t.w[3].gpu, t.down2.gpu);
        be.SiluMul(t.gate.gpu, t.up.gpu, t.gate.gpu);  // in place, as the MLP runs it, then a bf16 product
        be.MatMul(t.gate.gpu, t.wb.gpu, t.down3.gpu);
        be.SiluMul(t.h.gpu, t.up.gpu, t.up.gpu);  // into up, read by a quantized product
        be.MatMul(t.up.gpu, t.w[2].gpu, t.down.gpu);
      };
      auto inputs = [&] {
        const std::vector<float> x = Rand(n * k, seed++, -2, 2);
        fused.Set(a.x, x);
        unfused.Set(b.x, x);
      };
      ExpectFusedAsUnfused<Side>(fused, a, unfused, b, step, inputs,
                                 {{&Side::gate, "SiLU in place"},
                                  {&Side::up, "SiLU into up"},
                                  {&Side::h, "SiLU"},
                                  {&Side::down, "down"},
                                  {&Side::down2, "joined product"},
                                  {&Side::down3, "bf16 product"}},
                                 std::string(DTypeName(type)) + " n=" + std::to_string(n));
    }
  }
}

// SiLU(gate) * up right after a quantized gate / up pair of one-token products is the pair's epilogue (a
// block takes the gate tile and the up tile of the same rows; several tokens run it as its own kernel): the
// products and the result against the CPU, out of place and in place (into gate, into up).
TEST(CudaMatMul, SiluFusedIntoQuantizedGatePair) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 990;
  for (DType type : {DType::kQ4_K, DType::kQ8_0, DType::kQ6_K, DType::kF8E4M3B128}) {
    for (int64_t n : {1, 3, 8}) {
      const int64_t k = 2048, ff = 1000;  // ff: a last tile of 8 rows; k: whole 16-byte Q6_K rows
      const std::vector<float> xv = Rand(n * k, seed++, -2, 2);
      auto x = rig.Act({n, k}, xv);
      auto x_seen = rig.Act({n, k}, type == DType::kF8E4M3B128 ? xv : Int8Blocks(xv), DType::kF32);
      HostBuffer pg = RandomQuantBlocks(type, ff, k, seed++, 0.05f), pu = RandomQuantBlocks(type, ff, k, seed++, 0.05f);
      Pair wg = rig.Packed(pg);
      Pair wu = rig.Packed(pu);
      for (int where = 0; where < 3; ++where) {  // out of place, into gate, into up
        auto gate = rig.Out({n, ff}), up = rig.Out({n, ff}), act = rig.Out({n, ff});
        Pair& out = where == 0 ? act : where == 1 ? gate : up;
        auto step = [&](Backend& be, Tensor Pair::*side, const Tensor& input) {
          be.MatMul(input, wg.*side, gate.*side);
          be.MatMul(input, wu.*side, up.*side);
          be.SiluMul(gate.*side, up.*side, out.*side);
        };
        step(rig.cpu, &Pair::cpu, x_seen.cpu);
        step(rig.gpu, &Pair::gpu, x.gpu);
        const std::string at =
            std::string(DTypeName(type)) + " n=" + std::to_string(n) + " where=" + std::to_string(where);
        if (where != 1) ExpectClose(rig.Gpu(gate.gpu), Rig::Cpu(gate.cpu), 5e-3, 2e-2, "gate " + at);
        if (where != 2) ExpectClose(rig.Gpu(up.gpu), Rig::Cpu(up.cpu), 5e-3, 2e-2, "up " + at);
        ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 8e-3, 3e-2, "silu(gate) * up " + at);
      }
    }
  }
}

TEST(CudaMatMul, UnsupportedWeightTypeIsAClearError) {
  INFX_REQUIRE_GPU();
  Rig rig;
  // Raw E4M3 weights come without their block scales (an FP8 checkpoint is repacked into f8_e4m3_b128).
  HostBuffer raw(DType::kF8E4M3, {16, 256});
  try {
    rig.gpu.UploadWeight(raw.view());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find(std::string(DTypeName(DType::kF8E4M3))), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infernix

namespace infernix {
namespace {

// Every E4M3 code decodes exactly on the GPU's bf16 path (E4m3x4ToBf16's integer conversion, used with
// more than two tokens and by the expert GEMVs): block scales of 1 and one-hot rows of x pick single
// weights, whose f32 products are the codes' values themselves (the E4M3 subnormals included, which a
// flush to zero would lose). Row r, column c holds code (r + c) % 256 (NaN codes replaced by zero), so
// every column reads all codes, the picked columns cover all four bytes of a word and both blocks.
TEST(CudaMatMul, Fp8CodesDecodeExactlyOnTheBf16Path) {
  INFX_REQUIRE_GPU();
  Rig rig;
  constexpr int64_t kRows = 256, kK = 256;
  HostBuffer packed(DType::kF8E4M3B128, {kRows, kK});
  auto code_at = [](int64_t r, int64_t c) {
    const auto q = static_cast<uint8_t>((r + c) % 256);
    return (q & 0x7f) == 0x7f ? uint8_t{0} : q;
  };
  auto* bytes = static_cast<uint8_t*>(packed.view().data);
  const float one = 1.0f;
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t b = 0; b < kK / 128; ++b) {
      uint8_t* block = bytes + (r * (kK / 128) + b) * 132;
      std::memcpy(block, &one, 4);
      for (int64_t j = 0; j < 128; ++j) block[4 + j] = code_at(r, b * 128 + j);
    }
  Pair w = rig.Packed(packed);
  const int64_t cols[] = {0, 37, 130, 255};  // bytes 0, 1, 2, 3 of their words; blocks 0, 0, 1, 1
  constexpr int64_t kN = 4;
  std::vector<float> xv(static_cast<size_t>(kN * kK), 0.0f);
  for (int64_t t = 0; t < kN; ++t) xv[static_cast<size_t>(t * kK + cols[t])] = 1.0f;
  auto x = rig.Act({kN, kK}, xv);
  auto out = rig.Out({kN, kRows}, DType::kF32);
  rig.gpu.MatMul(x.gpu, w.gpu, out.gpu);
  const std::vector<float> got = rig.Gpu(out.gpu);
  int subnormals = 0;
  for (int64_t t = 0; t < kN; ++t)
    for (int64_t r = 0; r < kRows; ++r) {
      const uint8_t q = code_at(r, cols[t]);
      subnormals += (q & 0x78) == 0 && (q & 7) != 0 ? 1 : 0;
      ASSERT_EQ(got[static_cast<size_t>(t * kRows + r)], F8E4M3ToF32(q)) << "code " << int{q} << ", token " << t;
    }
  EXPECT_EQ(subnormals, kN * 14);  // codes 0x01..0x07 and 0x81..0x87 in every column
}

}  // namespace
}  // namespace infernix
