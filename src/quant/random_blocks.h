// Random but well-formed quantized blocks, for benchmarks (dummy weights) and tests: random quant bits
// with scales chosen so that values stay within about +-scale.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace infernix {

class ThreadPool;

// A [rows, k] tensor of block type `type` (k a multiple of its block size), same seed, same bytes
// (whatever the threads). With `pool`, tensors of 256 KiB and more are filled on it (dummy weights:
// thousands of expert tensors); without, tensors of 16 MiB and more on a pool of their own.
HostBuffer RandomQuantBlocks(DType type, int64_t rows, int64_t k, uint64_t seed, float scale,
                             ThreadPool* pool = nullptr);

}  // namespace infernix
