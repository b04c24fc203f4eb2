// Random but well-formed quantized blocks, for benchmarks (dummy weights) and tests: random quant bits
// with scales chosen so that values stay within about +-scale.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace infernix {

// A [rows, k] tensor of block type `type` (k a multiple of its block size), same seed, same bytes.
HostBuffer RandomQuantBlocks(DType type, int64_t rows, int64_t k, uint64_t seed, float scale);

}  // namespace infernix
