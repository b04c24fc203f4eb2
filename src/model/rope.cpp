#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace infernix {
namespace {

// theta ^ (2i / dim), in f32 as transformers computes it.
std::vector<float> PosFreqs(double theta, int dim) {
  std::vector<float> f(static_cast<size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i)
    f[static_cast<size_t>(i)] = std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(dim));
  return f;
}

double YarnCorrectionDim(double rotations, int dim, double theta, double max_pos) {
  return (dim * std::log(max_pos / (rotations * 2 * std::numbers::pi))) / (2 * std::log(theta));
}

double YarnMscale(double scale) { return scale <= 1 ? 1.0 : 0.1 * std::log(scale) + 1.0; }

}  // namespace

RopeFrequencies ComputeRopeFrequencies(const RopeConfig& rope, int64_t max_position_embeddings) {
  RopeFrequencies out;
  int dim = rope.rotary_dim;
  std::vector<float> pos_freqs = PosFreqs(rope.theta, dim);
  out.inv_freq.resize(pos_freqs.size());
  for (size_t i = 0; i < pos_freqs.size(); ++i) out.inv_freq[i] = 1.0f / pos_freqs[i];
  if (rope.type == RopeType::kLinear) {
    for (auto& f : out.inv_freq) f /= static_cast<float>(rope.factor);
  } else if (rope.type == RopeType::kYarn) {
    double original = rope.original_max_position_embeddings > 0 ? static_cast<double>(rope.original_max_position_embeddings)
                                                                : static_cast<double>(max_position_embeddings);
    double low = YarnCorrectionDim(rope.beta_fast, dim, rope.theta, original);
    double high = YarnCorrectionDim(rope.beta_slow, dim, rope.theta, original);
    if (rope.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (size_t i = 0; i < pos_freqs.size(); ++i) {
      float ramp = static_cast<float>(std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0));
      float extrapolation_factor = 1.0f - ramp;
      float extrapolation = 1.0f / pos_freqs[i];
      float interpolation = 1.0f / (static_cast<float>(rope.factor) * pos_freqs[i]);
      out.inv_freq[i] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    out.attention_scale = static_cast<float>(rope.attention_factor > 0 ? rope.attention_factor : YarnMscale(rope.factor));
  }
  return out;
}

}  // namespace infernix
