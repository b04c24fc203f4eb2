#include "backend/cuda/state.h"

#include <vector>

#include "backend/cuda/backend.h"
#include "backend/cuda/check.h"
#include "base/check.h"

namespace infernix {

// Layouts: kv_ [layer][K, V][max_slots * pages_per_slot pages][n_kv_heads][kPageSize][head_dim] bf16, or
// for an FP8 cache [layer][K codes, V codes, K scales, V scales] (codes as the bf16 pages, one f32 per
// row); conv_ [layer][slot][kernel - 1][channels] and recurrent_ [layer][slot][nv][dk][dv] f32.
CudaState::CudaState(const StateSpec& spec, CudaBackend& backend, int64_t serial)
    : SequenceState(spec), backend_(backend), serial_(serial) {
  INFX_CHECK(spec.max_slots >= 1 && spec.max_context >= 1);
  const int64_t slots = spec.max_slots;
  pages_per_slot_ = static_cast<int32_t>((spec.max_context + cuda::kPageSize - 1) / cuda::kPageSize);
  kv_layer_elems_ = slots * pages_per_slot_ * spec.n_kv_heads * cuda::kPageSize * static_cast<int64_t>(spec.head_dim);
  conv_slot_elems_ = ConvStateElems(spec);
  conv_layer_elems_ = conv_slot_elems_ * slots;
  rec_slot_elems_ = RecurrentStateElems(spec);
  rec_layer_elems_ = rec_slot_elems_ * slots;
  cudaStream_t stream = backend_.stream();
  if (spec.n_attention_layers > 0) {
    kv_ = cuda::DeviceBuffer(static_cast<size_t>(spec.n_attention_layers) * KvLayerBytes(), "the KV cache");
    std::vector<int32_t> table(static_cast<size_t>(slots * pages_per_slot_));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    page_table_ = cuda::DeviceBuffer(table.size() * sizeof(int32_t), "the KV page table");
    INFX_CUDA_CHECK(cudaMemcpyAsync(page_table_.data(), table.data(), table.size() * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream));
    INFX_CUDA_CHECK(cudaStreamSynchronize(stream));  // `table` goes out of scope
  }
  if (spec.n_linear_layers > 0) {
    conv_ = cuda::DeviceBuffer(static_cast<size_t>(spec.n_linear_layers * conv_layer_elems_) * sizeof(float),
                               "the conv states");
    recurrent_ = cuda::DeviceBuffer(static_cast<size_t>(spec.n_linear_layers * rec_layer_elems_) * sizeof(float),
                                    "the recurrent states");
    INFX_CUDA_CHECK(cudaMemsetAsync(conv_.data(), 0, conv_.size_bytes(), stream));
    INFX_CUDA_CHECK(cudaMemsetAsync(recurrent_.data(), 0, recurrent_.size_bytes(), stream));
  }
}

void CudaState::ClearSlot(int slot) {
  INFX_CHECK(slot >= 0 && slot < spec_.max_slots);
  for (int l = 0; l < spec_.n_linear_layers; ++l) {
    backend_.Enqueue(cuda::LaunchMemset, Conv(l) + slot * conv_slot_elems_,
                     static_cast<size_t>(conv_slot_elems_) * sizeof(float));
    backend_.Enqueue(cuda::LaunchMemset, Recurrent(l) + slot * rec_slot_elems_,
                     static_cast<size_t>(rec_slot_elems_) * sizeof(float));
  }
  ResetLength(slot);
}

cuda::KvCacheView CudaState::Kv(int layer) const {
  INFX_CHECK(layer >= 0 && layer < spec_.n_attention_layers);
  cuda::KvCacheView v;
  auto* base = static_cast<uint8_t*>(kv_.data()) + static_cast<int64_t>(layer) * KvLayerBytes();
  if (spec_.kv_type == KvCacheType::kF8E4M3) {
    v.k_pages = base;
    v.v_pages = base + kv_layer_elems_;
    v.k_scale = reinterpret_cast<float*>(base + 2 * kv_layer_elems_);
    v.v_scale = v.k_scale + kv_layer_elems_ / spec_.head_dim;
  } else {
    v.k_pages = base;
    v.v_pages = base + kv_layer_elems_ * 2;
  }
  v.page_table = static_cast<const int32_t*>(page_table_.data());
  v.pages_per_slot = pages_per_slot_;
  v.n_kv_heads = spec_.n_kv_heads;
  v.head_dim = spec_.head_dim;
  v.unused = 0;
  return v;
}

int64_t CudaState::KvLayerBytes() const {
  if (spec_.kv_type == KvCacheType::kF8E4M3)  // codes, then a scale per row of head_dim
    return 2 * kv_layer_elems_ + 2 * (kv_layer_elems_ / spec_.head_dim) * static_cast<int64_t>(sizeof(float));
  return 2 * kv_layer_elems_ * 2;
}

float* CudaState::Conv(int layer) const {
  INFX_CHECK(layer >= 0 && layer < spec_.n_linear_layers);
  return static_cast<float*>(conv_.data()) + layer * conv_layer_elems_;
}

float* CudaState::Recurrent(int layer) const {
  INFX_CHECK(layer >= 0 && layer < spec_.n_linear_layers);
  return static_cast<float*>(recurrent_.data()) + layer * rec_layer_elems_;
}

CudaState& AsCudaState(SequenceState& state, const CudaBackend* backend) {
  auto* st = dynamic_cast<CudaState*>(&state);
  INFX_CHECK_MSG(st != nullptr && st->owner() == backend, "state was not created by this CUDA backend");
  return *st;
}

}  // namespace infernix
