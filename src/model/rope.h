// Rotary position embedding frequencies, as transformers computes them for each rope type.
#pragma once

#include <vector>

#include "formats/hf_config.h"

namespace infernix {

struct RopeFrequencies {
  std::vector<float> inv_freq;  // [rotary_dim / 2]
  float attention_scale = 1.0f;  // multiplies cos and sin (YaRN's attention factor)
};

RopeFrequencies ComputeRopeFrequencies(const RopeConfig& rope, int64_t max_position_embeddings);

}  // namespace infernix
