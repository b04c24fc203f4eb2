// Where random quantized blocks (quant/random_blocks.h, dummy weights) keep their scales, for the host
// fill and the CUDA backend's (Backend::MakeDummyWeight), which must write the same bytes: after the
// random words (tensor/dummy_values.h), the block at byte offset b gets
//  - FP8 (f8_e4m3_b128): the f32 d * DummyBlockFactor(seed, b) at byte 0;
//  - the other types: the f16 d * DummyBlockFactor(seed, b) at byte d_at and, where min_at >= 0, half of
//    it at min_at (products rounded once to f32, then to f16 to nearest even);
// with d chosen per type so that values stay within about +-scale.
#pragma once

#include "tensor/dtype.h"

namespace infernix {

struct DummyBlockScheme {
  bool fp8 = false;
  int d_at = 0, min_at = -1;
  float d = 0;
};

inline DummyBlockScheme DummyBlockSchemeOf(DType type, float scale) {
  DummyBlockScheme s;
  s.d = scale;
  switch (type) {
    case DType::kF8E4M3B128:
      s.fp8 = true;
      s.d = scale / 448;
      break;
    case DType::kQ8_0:
      s.d = scale / 127;
      break;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
      s.d = scale / 16;
      s.min_at = (type == DType::kQ4_1 || type == DType::kQ5_1) ? 2 : -1;
      break;
    case DType::kQ2_K:
      s.d_at = 80;
      s.min_at = 82;
      s.d = scale / 48;
      break;
    case DType::kQ3_K:
      s.d_at = 108;
      s.d = scale / 256;
      break;
    case DType::kQ4_K:
    case DType::kQ5_K:
      s.min_at = 2;
      s.d = scale / 1000;
      break;
    case DType::kQ6_K:
      s.d_at = 208;
      s.d = scale / 4096;
      break;
    case DType::kIQ4_XS:
      s.d = scale / 4096;
      break;
    default:
      break;
  }
  return s;
}

}  // namespace infernix
