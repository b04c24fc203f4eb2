#include "backend/cuda/gemm_lt.h"

#include "backend/cuda/check.h"

namespace infernix::cuda {
namespace {

void DestroyPlan(GemmPlan& p) {
  if (p.a != nullptr) INFX_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.a));
  if (p.b != nullptr) INFX_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.b));
  if (p.c != nullptr) INFX_CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p.c));
  if (p.desc != nullptr) INFX_CUBLAS_CHECK(cublasLtMatmulDescDestroy(p.desc));
  p = GemmPlan{};
}

}  // namespace

GemmLt::GemmLt(size_t workspace_bytes) : workspace_(workspace_bytes, "the cuBLASLt workspace") {
  INFX_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

GemmLt::~GemmLt() {
  for (auto& [key, plan] : plans_)
    if (plan) DestroyPlan(*plan);
  if (handle_ != nullptr) INFX_CUBLAS_CHECK(cublasLtDestroy(handle_));
}

const GemmPlan* GemmLt::Find(int64_t n, int64_t m, int64_t k, DType out, unsigned alignment) {
  auto key = std::make_tuple(n, m, k, static_cast<int>(out), alignment);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<GemmPlan>();
  GemmPlan& p = *plan;
  p.handle = handle_;
  p.workspace = workspace_.data();
  p.workspace_bytes = workspace_.size_bytes();
  // Column-major view: out^T [m, n] = (w as k x m)^T @ (x as k x n).
  INFX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  INFX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  INFX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  cudaDataType_t out_type = out == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  INFX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  INFX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  INFX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out_type, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m));
  cublasLtMatmulPreference_t pref = nullptr;
  INFX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = p.workspace_bytes;
  INFX_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  uint32_t align = alignment;
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    INFX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &count);
  INFX_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  if (st != CUBLAS_STATUS_SUCCESS || count == 0) {
    DestroyPlan(p);
    plans_.emplace(key, nullptr);
    return nullptr;
  }
  p.algo = result.algo;
  const GemmPlan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

void GemmLt::Run(cudaStream_t s, const GemmPlan* p, const void* x, const void* w, void* out) {
  const float alpha = 1.0f, beta = 0.0f;
  INFX_CUBLAS_CHECK(cublasLtMatmul(p->handle, p->desc, &alpha, w, p->a, x, p->b, &beta, out, p->c, out, p->c, &p->algo,
                                   p->workspace, p->workspace_bytes, s));
}

}  // namespace infernix::cuda
