// The CPU backend: the reference implementation of every op in backend/ops.h. f32 activations,
// f32 math from the stored weights (f32/f16/bf16, or GGUF block-quantized types decoded row by row with
// DequantizeRow), multithreaded and deterministic: each output element is computed by one task in a
// fixed order, so results do not depend on the thread count.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "backend/ops.h"
#include "base/thread_pool.h"

namespace infernix {

// Not final: tests derive from it to stand for another backend's behaviour (engine_test.cpp).
class CpuBackend : public Backend {
 public:
  // n_threads == 0: one per hardware thread.
  explicit CpuBackend(size_t n_threads = 0);
  std::string_view name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::kF32; }
  ThreadPool& pool() { return pool_; }

  Tensor UploadWeight(const Tensor& host) override { return host; }
  Tensor Scratch(DType dtype, Shape shape) override;
  void ResetScratch() override;
  void CopyToBackend(const void* host, Tensor dst) override;
  void CopyToHost(const Tensor& src, void* host) override;
  std::span<float> ReadToHost(const Tensor& src) override;
  std::unique_ptr<SequenceState> CreateState(const StateSpec& spec) override;

  void Embedding(const Tensor& ids, const Tensor& table, Tensor out) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, bool unit_offset, Tensor out) override;
  void MatMul(const Tensor& x, const Tensor& w, Tensor out) override;
  void Add(const Tensor& a, const Tensor& b, Tensor out) override;
  void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) override;
  void SigmoidMul(const Tensor& x, const Tensor& gate, Tensor out) override;
  void SliceColumns(const Tensor& x, int64_t col_begin, Tensor out) override;
  void Rope(Tensor x, const BatchLayout& layout, const Tensor& inv_freq, float attention_scale) override;
  void Attention(const Tensor& q, const Tensor& k, const Tensor& v, SequenceState& state, int layer,
                 const BatchLayout& layout, float scale, Tensor out) override;
  void CausalConv1d(const Tensor& x, const Tensor& w, SequenceState& state, int layer, const BatchLayout& layout,
                    Tensor out) override;
  void GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor g,
                Tensor beta) override;
  void GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      GdnHeadMapping mapping, SequenceState& state, int layer, const BatchLayout& layout,
                      Tensor out) override;
  void GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) override;
  void MoeRouting(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids) override;
  void MoeExperts(const Tensor& x, const Tensor& weights, const Tensor& ids, const ExpertWeights& experts,
                  Tensor out) override;
  void AddSigmoidGated(Tensor acc, const Tensor& x, const Tensor& gate_logit) override;
  void GatherRows(const Tensor& x, const std::vector<int32_t>& rows, Tensor out) override;

 private:
  ThreadPool pool_;
  // Scratch arena: blocks reused after ResetScratch(), grown on demand.
  std::vector<HostBuffer> blocks_;
  size_t block_index_ = 0;
  size_t block_used_ = 0;
};

// The CPU backend's per-slot state: f32 KV caches grown on demand up to max_context, conv windows
// [kernel-1, C] and recurrent states [nv, dk, dv]. With kv_type kF8E4M3 the KV caches stay f32 but hold
// the FP8-decoded values of each row (Attention rounds them through quant::KvF8RoundTripRow on append).
class CpuState final : public SequenceState {
 public:
  explicit CpuState(const StateSpec& spec);
  void ClearSlot(int slot) override;

  // KV rows of (attention layer, slot), resized to hold `length` tokens: [length, n_kv_heads, head_dim].
  float* Keys(int layer, int slot, int64_t length);
  float* Values(int layer, int slot, int64_t length);
  float* Conv(int layer, int slot);       // [conv_kernel - 1, conv_channels]
  float* Recurrent(int layer, int slot);  // [n_v_heads, k_head_dim, v_head_dim]

 private:
  size_t Index(int layer, int slot) const;
  std::vector<std::vector<float>> keys_, values_, conv_, recurrent_;
};

// Helpers shared by the CPU op files.
namespace cpu {
// Row j of weight w [m, k] as f32: a pointer into w when it is f32, else decoded into `scratch`
// (f16, bf16 and every block-quantized type; a block type's k is a multiple of its block size). The
// one place the float ops read weights, so a quantized weight gives exactly the results of the same
// weight dequantized to f32 beforehand.
const float* WeightRow(const Tensor& w, int64_t j, std::vector<float>& scratch);
// Every element of a small weight (norm weights, conv kernels) as f32, decoded like WeightRow.
std::vector<float> WeightValues(const Tensor& w);
float Dot(const float* a, const float* b, int64_t n);
inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float Silu(float x) { return x / (1.0f + std::exp(-x)); }
// 1 / sqrt(mean(x^2) + eps), accumulated in double.
float InverseRms(const float* x, int64_t n, float eps);
}  // namespace cpu

}  // namespace infernix
