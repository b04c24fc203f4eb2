// CPU ops of Gated DeltaNet: causal depthwise conv1d with its state, the gates, and the gated delta
// rule in recurrent form (the reference for the chunked GPU kernels).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "base/check.h"

namespace infernix {

void CpuBackend::CausalConv1d(const Tensor& x, const Tensor& w, SequenceState& state, int layer,
                              const BatchLayout& layout, Tensor out) {
  auto& st = static_cast<CpuState&>(state);
  int64_t c_count = x.cols();
  int64_t kernel = w.numel() / c_count;
  INFX_CHECK(kernel == st.spec().conv_kernel && c_count == st.spec().conv_channels && out.numel() == x.numel());
  int64_t keep = kernel - 1;
  std::vector<float> wf = cpu::WeightValues(w);
  for (const BatchSeq& seq : layout.seqs) {
    float* conv_state = st.Conv(layer, seq.slot);  // [keep, C], oldest first
    const float* xs = x.as<const float>() + seq.token_begin * c_count;
    float* ys = out.as<float>() + seq.token_begin * c_count;
    int64_t n = seq.n_tokens;
    pool_.ParallelFor(static_cast<size_t>(c_count), 16, [&](size_t b, size_t e) {
      std::vector<float> window(static_cast<size_t>(keep + n));
      for (size_t c = b; c < e; ++c) {
        int64_t ci = static_cast<int64_t>(c);
        for (int64_t j = 0; j < keep; ++j) window[static_cast<size_t>(j)] = conv_state[j * c_count + ci];
        for (int64_t t = 0; t < n; ++t) window[static_cast<size_t>(keep + t)] = xs[t * c_count + ci];
        const float* wc = wf.data() + ci * kernel;
        for (int64_t t = 0; t < n; ++t) {
          float acc = 0;
          for (int64_t j = 0; j < kernel; ++j) acc += wc[j] * window[static_cast<size_t>(t + j)];
          ys[t * c_count + ci] = cpu::Silu(acc);
        }
        for (int64_t j = 0; j < keep; ++j) conv_state[j * c_count + ci] = window[static_cast<size_t>(n + j)];
      }
    });
  }
}

void CpuBackend::GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor g,
                          Tensor beta) {
  int64_t n = a.rows(), nv = a.cols();
  INFX_CHECK(b.numel() == a.numel() && a_log.numel() == nv && dt_bias.numel() == nv && g.numel() == a.numel() &&
             beta.numel() == a.numel());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < nv; ++h) {
      int64_t i = t * nv + h;
      float x = a.as<const float>()[i] + LoadAsFloat(dt_bias, h);
      float softplus = x > 20.0f ? x : std::log1p(std::exp(x));  // torch's softplus, threshold 20
      g.as<float>()[i] = -std::exp(LoadAsFloat(a_log, h)) * softplus;
      beta.as<float>()[i] = cpu::Sigmoid(b.as<const float>()[i]);
    }
  }
}

void CpuBackend::GatedDeltaRule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, GdnHeadMapping mapping, SequenceState& state, int layer,
                                const BatchLayout& layout, Tensor out) {
  auto& st = static_cast<CpuState&>(state);
  const StateSpec& spec = st.spec();
  int64_t nk = q.dim(1), dk = q.dim(2), nv = v.dim(1), dv = v.dim(2);
  INFX_CHECK(nk == spec.n_k_heads && nv == spec.n_v_heads && dk == spec.k_head_dim && dv == spec.v_head_dim);
  INFX_CHECK(nv % nk == 0 && out.numel() == v.numel());
  int64_t ratio = nv / nk;
  bool tiled = mapping == GdnHeadMapping::kTiled;
  float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // Parallel over (sequence, value head): each owns its state matrix.
  size_t tasks = layout.seqs.size() * static_cast<size_t>(nv);
  pool_.ParallelFor(tasks, 1, [&](size_t b, size_t e) {
    std::vector<float> qn(static_cast<size_t>(dk)), kn(static_cast<size_t>(dk)), delta(static_cast<size_t>(dv));
    for (size_t task = b; task < e; ++task) {
      const BatchSeq& seq = layout.seqs[task / static_cast<size_t>(nv)];
      int64_t h = static_cast<int64_t>(task % static_cast<size_t>(nv)), kh = tiled ? h % nk : h / ratio;
      float* s = st.Recurrent(layer, seq.slot) + h * dk * dv;  // [dk, dv]
      for (int64_t i = 0; i < seq.n_tokens; ++i) {
        int64_t t = seq.token_begin + i;
        const float* qt = q.as<const float>() + (t * nk + kh) * dk;
        const float* kt = k.as<const float>() + (t * nk + kh) * dk;
        const float* vt = v.as<const float>() + (t * nv + h) * dv;
        float q_inv = 1.0f / std::sqrt(cpu::Dot(qt, qt, dk) + 1e-6f);
        float k_inv = 1.0f / std::sqrt(cpu::Dot(kt, kt, dk) + 1e-6f);
        for (int64_t j = 0; j < dk; ++j) {
          qn[static_cast<size_t>(j)] = qt[j] * q_inv * q_scale;
          kn[static_cast<size_t>(j)] = kt[j] * k_inv;
        }
        float decay = std::exp(g.as<const float>()[t * nv + h]);
        float bt = beta.as<const float>()[t * nv + h];
        for (int64_t j = 0; j < dk * dv; ++j) s[j] *= decay;
        // delta = beta * (v - S^T k)
        for (int64_t c = 0; c < dv; ++c) delta[static_cast<size_t>(c)] = 0;
        for (int64_t r = 0; r < dk; ++r)
          for (int64_t c = 0; c < dv; ++c) delta[static_cast<size_t>(c)] += s[r * dv + c] * kn[static_cast<size_t>(r)];
        for (int64_t c = 0; c < dv; ++c) delta[static_cast<size_t>(c)] = (vt[c] - delta[static_cast<size_t>(c)]) * bt;
        // S += k (x) delta; out = S^T q
        float* o = out.as<float>() + (t * nv + h) * dv;
        std::fill(o, o + dv, 0.0f);
        for (int64_t r = 0; r < dk; ++r) {
          float kr = kn[static_cast<size_t>(r)], qr = qn[static_cast<size_t>(r)];
          for (int64_t c = 0; c < dv; ++c) {
            s[r * dv + c] += kr * delta[static_cast<size_t>(c)];
            o[c] += s[r * dv + c] * qr;
          }
        }
      }
    }
  });
}

}  // namespace infernix
