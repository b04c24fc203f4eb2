// Per-sequence state of the CUDA backend: the paged KV cache of every full-attention layer (bf16, or FP8
// codes with a scale per row: StateSpec::kv_type), and the
// f32 conv and recurrent states of every Gated DeltaNet layer. Memory is allocated once, for
// max_slots sequences of max_context tokens; the page table maps (slot, page index) to a page (today
// slot-contiguous, so that a scheduler can later hand out pages without changing the kernels).
// Must not outlive the backend that made it.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/memory.h"
#include "backend/ops.h"

namespace infernix {

class CudaBackend;

class CudaState final : public SequenceState {
 public:
  // serial: unique among the backend's states (a replayed forward pass must be on the state it ran on).
  CudaState(const StateSpec& spec, CudaBackend& backend, int64_t serial);
  void ClearSlot(int slot) override;

  cuda::KvCacheView Kv(int attention_layer) const;
  // Slot 0's conv state [conv_kernel - 1, conv_channels] of a linear layer; other slots at + slot * ConvSlotStride().
  float* Conv(int linear_layer) const;
  int64_t ConvSlotStride() const { return conv_slot_elems_; }
  // Slot 0's recurrent state [n_v_heads, k_head_dim, v_head_dim]; other slots at + slot * RecurrentSlotStride().
  float* Recurrent(int linear_layer) const;
  int64_t RecurrentSlotStride() const { return rec_slot_elems_; }
  const CudaBackend* owner() const { return &backend_; }
  int64_t serial() const { return serial_; }

 private:
  CudaBackend& backend_;
  int64_t serial_ = 0;
  int32_t pages_per_slot_ = 0;
  int64_t KvLayerBytes() const;  // K and V of one layer, with an FP8 cache's scales
  int64_t kv_layer_elems_ = 0;   // elements of one layer's K (or V) pages
  int64_t conv_layer_elems_ = 0, conv_slot_elems_ = 0;
  int64_t rec_layer_elems_ = 0, rec_slot_elems_ = 0;
  cuda::DeviceBuffer kv_, page_table_, conv_, recurrent_;
};

// state as the CudaState that `backend` made; a clear error for any other.
CudaState& AsCudaState(SequenceState& state, const CudaBackend* backend);

}  // namespace infernix
