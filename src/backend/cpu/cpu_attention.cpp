// CPU ops: rotary position embedding and causal attention over the KV cache.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "base/check.h"
#include "quant/kv_f8.h"

namespace infernix {

void CpuBackend::Rope(Tensor x, const BatchLayout& layout, const Tensor& inv_freq, float attention_scale) {
  INFX_CHECK(x.shape.ndim == 3 && x.dtype == DType::kF32 && inv_freq.dtype == DType::kF32);
  int64_t n = x.dim(0), heads = x.dim(1), d = x.dim(2), half = inv_freq.numel();
  INFX_CHECK(n == layout.n_tokens && 2 * half <= d);
  pool_.ParallelFor(static_cast<size_t>(n), 8, [&](size_t b, size_t e) {
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
    for (size_t t = b; t < e; ++t) {
      float pos = static_cast<float>(layout.positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        float angle = pos * inv_freq.as<const float>()[i];  // f32 product, as transformers computes it
        cos_t[static_cast<size_t>(i)] = std::cos(angle) * attention_scale;
        sin_t[static_cast<size_t>(i)] = std::sin(angle) * attention_scale;
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x.as<float>() + (static_cast<int64_t>(t) * heads + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          float a = v[i], c = v[i + half];
          v[i] = a * cos_t[static_cast<size_t>(i)] - c * sin_t[static_cast<size_t>(i)];
          v[i + half] = c * cos_t[static_cast<size_t>(i)] + a * sin_t[static_cast<size_t>(i)];
        }
      }
    }
  });
}

void CpuBackend::Attention(const Tensor& q, const Tensor& k, const Tensor& v, SequenceState& state, int layer,
                           const BatchLayout& layout, float scale, Tensor out) {
  auto& st = static_cast<CpuState&>(state);
  const StateSpec& spec = st.spec();
  int64_t n = q.dim(0), hq = q.dim(1), d = q.dim(2), hkv = k.dim(1);
  INFX_CHECK(hkv == spec.n_kv_heads && d == spec.head_dim && hq % hkv == 0 && n == layout.n_tokens);
  int64_t group = hq / hkv, kv_row = hkv * d;
  // 1. Append this batch's keys and values to each sequence's cache.
  std::vector<const float*> k_base(layout.seqs.size()), v_base(layout.seqs.size());
  for (size_t s = 0; s < layout.seqs.size(); ++s) {
    const BatchSeq& seq = layout.seqs[s];
    int64_t end = seq.pos_begin + seq.n_tokens;
    float* kc = st.Keys(layer, seq.slot, end);
    float* vc = st.Values(layer, seq.slot, end);
    std::memcpy(kc + seq.pos_begin * kv_row, k.as<const float>() + seq.token_begin * kv_row,
                static_cast<size_t>(seq.n_tokens * kv_row) * sizeof(float));
    std::memcpy(vc + seq.pos_begin * kv_row, v.as<const float>() + seq.token_begin * kv_row,
                static_cast<size_t>(seq.n_tokens * kv_row) * sizeof(float));
    if (spec.kv_type == KvCacheType::kF8E4M3) {
      // The cache keeps f32, but exactly the values an FP8 cache decodes: each (token, KV head) row of
      // keys and of values goes through E4M3 with its own power-of-two scale (quant/kv_f8.h).
      for (int64_t r = seq.pos_begin * hkv; r < end * hkv; ++r) {
        quant::KvF8RoundTripRow(kc + r * d, d);
        quant::KvF8RoundTripRow(vc + r * d, d);
      }
    }
    k_base[s] = kc;
    v_base[s] = vc;
  }
  // 2. Each (token, head) attends to its sequence's cache up to its own position.
  std::vector<int32_t> seq_of(static_cast<size_t>(n));
  for (size_t s = 0; s < layout.seqs.size(); ++s)
    for (int64_t t = 0; t < layout.seqs[s].n_tokens; ++t)
      seq_of[static_cast<size_t>(layout.seqs[s].token_begin + t)] = static_cast<int32_t>(s);
  pool_.ParallelFor(static_cast<size_t>(n * hq), 4, [&](size_t b, size_t e) {
    std::vector<float> scores;
    for (size_t task = b; task < e; ++task) {
      int64_t t = static_cast<int64_t>(task) / hq, h = static_cast<int64_t>(task) % hq, kvh = h / group;
      size_t s = static_cast<size_t>(seq_of[static_cast<size_t>(t)]);
      int64_t pos = layout.positions[static_cast<size_t>(t)];
      const float* qv = q.as<const float>() + (t * hq + h) * d;
      scores.resize(static_cast<size_t>(pos + 1));
      float max_score = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j) {
        float sc = cpu::Dot(qv, k_base[s] + j * kv_row + kvh * d, d) * scale;
        scores[static_cast<size_t>(j)] = sc;
        max_score = std::max(max_score, sc);
      }
      double sum = 0;
      for (auto& sc : scores) {
        sc = std::exp(sc - max_score);
        sum += sc;
      }
      float inv = static_cast<float>(1.0 / sum);
      float* o = out.as<float>() + (t * hq + h) * d;
      std::fill(o, o + d, 0.0f);
      for (int64_t j = 0; j <= pos; ++j) {
        float p = scores[static_cast<size_t>(j)] * inv;
        const float* vr = v_base[s] + j * kv_row + kvh * d;
        for (int64_t i = 0; i < d; ++i) o[i] += p * vr[i];
      }
    }
  });
}

}  // namespace infernix
