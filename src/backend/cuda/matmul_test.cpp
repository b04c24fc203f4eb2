// CPU-vs-CUDA tests of MatMul on each of its paths: the small-batch tensor-core GEMV (alone and
// merged with its neighbours), cuBLASLt, and the CUDA-core fallback for other dtypes.
#include "backend/cuda/test_util.h"
#include "base/error.h"
#include "quant/random_blocks.h"

namespace infernix {
namespace {

using cuda_test::ExpectClose;
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

void CheckMatMul(Rig& rig, Shape3 s, DType w_dtype, DType out_dtype, uint64_t seed, const char* path) {
  float scale = 1.0f / std::sqrt(static_cast<float>(s.k));
  auto x = rig.Act({s.n, s.k}, Rand(s.n * s.k, seed, -2, 2));
  auto w = rig.Weight(w_dtype, {s.m, s.k}, Rand(s.m * s.k, seed + 1, -scale, scale));
  auto out = rig.Out({s.n, s.m}, out_dtype);
  rig.cpu.MatMul(x.cpu, w.cpu, out.cpu);
  rig.gpu.MatMul(x.gpu, w.gpu, out.gpu);
  // f32 accumulation in another order, then a bf16 rounding of the result when out is bf16.
  double l2 = out_dtype == DType::kF32 ? 1e-4 : 4e-3, mx = out_dtype == DType::kF32 ? 1e-3 : 1e-2;
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

TEST(CudaMatMul, CublasPathAtPrefillShapes) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 300;
  for (Shape3 s : {Shape3{17, 4096, 4096}, Shape3{300, 1024, 4096}, Shape3{129, 12288, 4096}, Shape3{64, 4096, 12288}})
    CheckMatMul(rig, s, DType::kBF16, DType::kBF16, seed++, "cublas");
  CheckMatMul(rig, {129, 4096, 2048}, DType::kBF16, DType::kF32, seed++, "cublas");
  CheckMatMul(rig, {33, 1, 2048}, DType::kBF16, DType::kF32, seed++, "cublas");
}

TEST(CudaMatMul, FallbackForOtherDtypesAndWithoutCublas) {
  INFX_REQUIRE_GPU();
  {
    Rig rig;
    CheckMatMul(rig, {5, 300, 512}, DType::kF32, DType::kBF16, 400, "simt f32 w");
    CheckMatMul(rig, {40, 200, 256}, DType::kF16, DType::kF32, 401, "simt f16 w");
    CheckMatMul(rig, {3, 50, 36}, DType::kBF16, DType::kBF16, 402, "simt k%8");
  }
  CudaOptions o;
  o.cublas = false;
  o.gemv = false;
  Rig rig(o);
  CheckMatMul(rig, {33, 700, 1024}, DType::kBF16, DType::kBF16, 403, "simt bf16");
  CheckMatMul(rig, {2, 64, 128}, DType::kBF16, DType::kF32, 404, "simt bf16");
}

}  // namespace
}  // namespace infernix

namespace infernix {
namespace {

// GGUF block types: the dequantizing GEMV (n <= 8) and the dequantize-then-GEMM prefill path, and
// embedding lookups from a quantized table, against the CPU backend's reference decoders.
TEST(CudaMatMul, QuantizedWeights) {
  INFX_REQUIRE_GPU();
  Rig rig;
  uint64_t seed = 700;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kF8E4M3B128}) {
    for (Shape3 s : {Shape3{1, 4096, 4096}, Shape3{3, 1000, 2048}, Shape3{8, 512, 12288}, Shape3{2, 300, 768},
                      Shape3{40, 1024, 4096}}) {
      HostBuffer packed = RandomQuantBlocks(type, s.m, s.k, seed, 1.0f / std::sqrt(static_cast<float>(s.k)));
      Pair w{rig.cpu.UploadWeight(packed.view()), rig.gpu.UploadWeight(packed.view())};
      auto x = rig.Act({s.n, s.k}, Rand(s.n * s.k, seed + 1, -2, 2));
      for (DType out_dtype : {DType::kBF16, DType::kF32}) {
        auto out = rig.Out({s.n, s.m}, out_dtype);
        rig.cpu.MatMul(x.cpu, w.cpu, out.cpu);
        rig.gpu.MatMul(x.gpu, w.gpu, out.gpu);
        // The GEMV computes in f32 from the exact weights; the prefill path rounds them to bf16 first.
        const bool gemv = s.n <= 8;
        double l2 = out_dtype == DType::kF32 && gemv ? 1e-4 : 5e-3, mx = out_dtype == DType::kF32 && gemv ? 1e-3 : 2e-2;
        ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), l2, mx,
                    std::string(DTypeName(type)) + " " + Name(gemv ? "quant gemv" : "dequant+gemm", s, out_dtype));
      }
      ++seed;
    }
    const int64_t vocab = 300, h = 1024;
    HostBuffer table = RandomQuantBlocks(type, vocab, h, seed++, 1.0f);
    Pair t{rig.cpu.UploadWeight(table.view()), rig.gpu.UploadWeight(table.view())};
    auto ids = rig.I32({5}, {0, 299, 17, 17, 150});
    auto out = rig.Out({5, h});
    rig.cpu.Embedding(ids.cpu, t.cpu, out.cpu);
    rig.gpu.Embedding(ids.gpu, t.gpu, out.gpu);
    ExpectClose(rig.Gpu(out.gpu), Rig::Cpu(out.cpu), 4e-3, 1e-2, std::string(DTypeName(type)) + " embedding");
  }
}

TEST(CudaMatMul, UnsupportedQuantizedTypeIsAClearError) {
  INFX_REQUIRE_GPU();
  Rig rig;
  HostBuffer packed = RandomQuantBlocks(DType::kIQ4_XS, 16, 256, 1, 1.0f);
  try {
    rig.gpu.UploadWeight(packed.view());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("iq4_xs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infernix
