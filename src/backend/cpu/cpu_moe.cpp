// CPU ops of mixture-of-experts layers: softmax top-k routing and the routed experts' SwiGLU MLPs.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "base/check.h"

namespace infernix {

void CpuBackend::MoeRouting(const Tensor& logits, int top_k, bool normalize, Tensor weights, Tensor ids) {
  int64_t n = logits.rows(), n_experts = logits.cols();
  INFX_CHECK(top_k >= 1 && top_k <= n_experts && weights.numel() == n * top_k && ids.numel() == n * top_k);
  std::vector<float> p(static_cast<size_t>(n_experts));
  std::vector<int32_t> order(static_cast<size_t>(n_experts));
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits.as<const float>() + t * n_experts;
    float max_l = *std::max_element(l, l + n_experts);
    double sum = 0;
    for (int64_t e = 0; e < n_experts; ++e) sum += (p[static_cast<size_t>(e)] = std::exp(l[e] - max_l));
    for (auto& x : p) x = static_cast<float>(x / sum);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
    float chosen_sum = 0;
    for (int j = 0; j < top_k; ++j) chosen_sum += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int j = 0; j < top_k; ++j) {
      float w = p[static_cast<size_t>(order[static_cast<size_t>(j)])];
      weights.as<float>()[t * top_k + j] = normalize ? w / chosen_sum : w;
      ids.as<int32_t>()[t * top_k + j] = order[static_cast<size_t>(j)];
    }
  }
}

void CpuBackend::MoeExperts(const Tensor& x, const Tensor& weights, const Tensor& ids, const ExpertWeights& experts,
                            Tensor out) {
  int64_t n = x.rows(), hidden = x.cols(), top_k = weights.cols();
  INFX_CHECK(out.rows() == n && out.cols() == hidden && ids.numel() == n * top_k);
  INFX_CHECK(experts.gate.size() == experts.up.size() && experts.gate.size() == experts.down.size());
  // Parallel over tokens; each token's experts are summed in routing order.
  pool_.ParallelFor(static_cast<size_t>(n), 1, [&](size_t b, size_t e) {
    std::vector<float> scratch, act, acc(static_cast<size_t>(hidden));
    for (size_t t = b; t < e; ++t) {
      const float* xt = x.as<const float>() + static_cast<int64_t>(t) * hidden;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < top_k; ++j) {
        int32_t ex = ids.as<const int32_t>()[static_cast<int64_t>(t) * top_k + j];
        INFX_CHECK(ex >= 0 && static_cast<size_t>(ex) < experts.gate.size());
        float w = weights.as<const float>()[static_cast<int64_t>(t) * top_k + j];
        const Tensor& gate = experts.gate[static_cast<size_t>(ex)];
        const Tensor& up = experts.up[static_cast<size_t>(ex)];
        const Tensor& down = experts.down[static_cast<size_t>(ex)];
        int64_t inter = gate.rows();
        act.resize(static_cast<size_t>(inter));
        for (int64_t i = 0; i < inter; ++i) {
          float gv = cpu::Dot(xt, cpu::WeightRow(gate, i, scratch), hidden);
          float uv = cpu::Dot(xt, cpu::WeightRow(up, i, scratch), hidden);
          act[static_cast<size_t>(i)] = cpu::Silu(gv) * uv;
        }
        for (int64_t o = 0; o < hidden; ++o)
          acc[static_cast<size_t>(o)] += w * cpu::Dot(act.data(), cpu::WeightRow(down, o, scratch), inter);
      }
      std::copy(acc.begin(), acc.end(), out.as<float>() + static_cast<int64_t>(t) * hidden);
    }
  });
}

}  // namespace infernix
