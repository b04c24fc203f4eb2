// Softmax top-k routing of one token by one warp (MoeRouting's math, ops.h), shared by the routing kernel
// (moe.cu) and the router's decode GEMV, whose last block routes the tokens (gemv.cu, GemvRouting).
#pragma once

#include "backend/cuda/device_util.cuh"

namespace infernix::cuda {

constexpr int kRouteMaxTopK = 32;  // lane j of the warp writes choice j

// The token's probabilities in registers (lane l holds experts l, l + 32, ..., n_experts <= 32 * kPer): each
// of the top_k rounds is a local pass over kPer values and one warp reduction; ties go to the lower expert
// id, as the CPU's stable sort does. l: the token's logits, read through L2 (another block may have just
// written them); weights, ids: its top_k outputs.
template <int kPer>
__device__ __forceinline__ void RouteToken(const float* l, int n_experts, int top_k, int normalize, float* weights,
                                           int32_t* ids, int lane) {
  float p[kPer];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < n_experts ? __ldcg(l + e) : -INFINITY;
    mx = fmaxf(mx, p[i]);
  }
  mx = WarpMax(mx);
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    p[i] = lane + 32 * i < n_experts ? expf(p[i] - mx) : -1.0f;  // -1: never chosen (p >= 0)
    sum += fmaxf(p[i], 0.0f);
  }
  const float inv = 1.0f / WarpSum(sum);
#pragma unroll
  for (int i = 0; i < kPer; ++i) p[i] = p[i] >= 0.0f ? p[i] * inv : -1.0f;
  float chosen_sum = 0, my_p = 0;
  int my_id = 0;
#pragma unroll 1
  for (int j = 0; j < top_k; ++j) {
    float best = -1.0f;
    int best_i = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (p[i] > best) {  // strict: the lowest index among this lane's ties
        best = p[i];
        best_i = i;
      }
    }
    // The warp's best in two integer reductions (one instruction each, where shuffles took five rounds of
    // two): the largest probability (p >= 0 orders as its bits; key 0: no probability left, -1), then the
    // lowest expert id among the lanes that hold it.
    const unsigned key = best >= 0.0f ? __float_as_uint(best) + 1u : 0u;
    const unsigned top = __reduce_max_sync(0xffffffffu, key);
    best = top == 0u ? -1.0f : __uint_as_float(top - 1u);
    int best_id = top == 0u ? n_experts
                            : static_cast<int>(__reduce_min_sync(
                                  0xffffffffu, key == top ? static_cast<unsigned>(lane + 32 * best_i) : 0xffffffffu));
    if (best_id >= n_experts) best_id = j;  // no finite probability left (NaN logits): keep ids in range
    if ((best_id & 31) == lane) {
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (i == best_id >> 5) p[i] = -1.0f;
    }
    chosen_sum += fmaxf(best, 0.0f);
    if (lane == j) {
      my_p = fmaxf(best, 0.0f);
      my_id = best_id;
    }
  }
  if (lane < top_k) {
    weights[lane] = normalize ? (chosen_sum > 0.0f ? my_p / chosen_sum : 0.0f) : my_p;
    ids[lane] = my_id;
  }
}

// RouteToken for n_experts <= 512, its register array sized to the count (32 per lane-slot).
__device__ __forceinline__ void RouteTokenUpTo512(const float* l, int n_experts, int top_k, int normalize,
                                                  float* weights, int32_t* ids, int lane) {
  if (n_experts <= 128) {
    RouteToken<4>(l, n_experts, top_k, normalize, weights, ids, lane);
  } else if (n_experts <= 256) {
    RouteToken<8>(l, n_experts, top_k, normalize, weights, ids, lane);
  } else {
    RouteToken<16>(l, n_experts, top_k, normalize, weights, ids, lane);
  }
}

}  // namespace infernix::cuda
