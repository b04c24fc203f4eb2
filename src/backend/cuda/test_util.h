// Helpers for the CPU-vs-CUDA op tests: one rig holds both backends; inputs are drawn at random and
// rounded to bf16, so that the CPU oracle (f32 activations) and the GPU (bf16 activations) see the
// same values; outputs are poisoned with NaN before each op, so an unwritten element fails.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/backend.h"
#include "tensor/dtype.h"

namespace infernix::cuda_test {

inline const std::string& GpuMissing() {
  static const std::string reason = CudaUnavailableReason(0);
  return reason;
}

#define INFX_REQUIRE_GPU()                                                        \
  do {                                                                            \
    if (!::infernix::cuda_test::GpuMissing().empty())                             \
      GTEST_SKIP() << "no usable GPU: " << ::infernix::cuda_test::GpuMissing();   \
  } while (0)

// n values uniform in [lo, hi), rounded to bf16.
inline std::vector<float> Rand(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = Bf16ToF32(F32ToBf16(dist(rng)));
  return v;
}

struct Pair {
  Tensor cpu, gpu;
};

class Rig {
 public:
  explicit Rig(const CudaOptions& options = {}) : cpu(0), gpu(options) {}

  // An activation: f32 on the CPU, `gpu_dtype` (bf16 by default) on the GPU. Values must be bf16-exact.
  Pair Act(Shape shape, const std::vector<float>& values, DType gpu_dtype = DType::kBF16) {
    Pair p{HostF32(shape, values), gpu.Scratch(gpu_dtype, shape)};
    Upload(p.gpu, values);
    return p;
  }
  // New values (bf16-exact) for an activation made by Act, through the same tensors.
  void Set(const Pair& p, const std::vector<float>& values) {
    std::memcpy(p.cpu.data, values.data(), values.size() * sizeof(float));
    Upload(p.gpu, values);
  }
  // Outputs, poisoned with NaN on both sides.
  Pair Out(Shape shape, DType gpu_dtype = DType::kBF16) {
    std::vector<float> nan(static_cast<size_t>(shape.numel()), NAN);
    return Act(shape, nan, gpu_dtype);
  }
  // f32 on both sides (router logits, gates).
  Pair F32(Shape shape, const std::vector<float>& values) { return Act(shape, values, DType::kF32); }
  Pair I32(Shape shape, const std::vector<int32_t>& values) {
    auto b = std::make_unique<HostBuffer>(DType::kI32, shape);
    std::memcpy(b->view().data, values.data(), values.size() * sizeof(int32_t));
    Pair p{b->view(), gpu.Scratch(DType::kI32, shape)};
    gpu.CopyToBackend(values.data(), p.gpu);
    keep_.push_back(std::move(b));
    return p;
  }
  // A weight of `dtype` with the same stored values on both backends.
  Pair Weight(DType dtype, Shape shape, const std::vector<float>& values) {
    auto b = std::make_unique<HostBuffer>(dtype, shape);
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::kF32) b->view().as<float>()[i] = values[i];
      if (dtype == DType::kBF16) b->view().as<uint16_t>()[i] = F32ToBf16(values[i]);
      if (dtype == DType::kF16) b->view().as<uint16_t>()[i] = F32ToF16(values[i]);
    }
    Pair p{cpu.UploadWeight(b->view()), gpu.UploadWeight(b->view())};
    keep_.push_back(std::move(b));
    return p;
  }

  // A weight whose stored bytes the caller made (block-quantized: RandomQuantBlocks) on both backends; the
  // caller keeps `packed` alive while the weight is used.
  Pair Packed(const HostBuffer& packed) {
    return Pair{cpu.UploadWeight(packed.view()), gpu.UploadWeight(packed.view())};
  }

  // An i32 tensor's values, as they are.
  std::vector<int32_t> GpuIds(const Tensor& t) {
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    gpu.CopyToHost(t, v.data());
    return v;
  }
  std::vector<float> Gpu(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    if (t.dtype == DType::kF32) {
      gpu.CopyToHost(t, out.data());
    } else if (t.dtype == DType::kI32) {
      const std::vector<int32_t> v = GpuIds(t);
      for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
    } else {
      std::vector<uint16_t> bits(out.size());
      gpu.CopyToHost(t, bits.data());
      for (size_t i = 0; i < bits.size(); ++i) out[i] = t.dtype == DType::kBF16 ? Bf16ToF32(bits[i]) : F16ToF32(bits[i]);
    }
    return out;
  }
  static std::vector<float> Cpu(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = t.dtype == DType::kI32 ? static_cast<float>(t.as<const int32_t>()[i]) : LoadAsFloat(t, static_cast<int64_t>(i));
    return out;
  }

  CpuBackend cpu;
  CudaBackend gpu;

 private:
  Tensor HostF32(Shape shape, const std::vector<float>& values) {
    auto b = std::make_unique<HostBuffer>(DType::kF32, shape);
    std::memcpy(b->view().data, values.data(), values.size() * sizeof(float));
    Tensor t = b->view();
    keep_.push_back(std::move(b));
    return t;
  }
  void Upload(const Tensor& t, const std::vector<float>& values) {
    if (t.dtype == DType::kF32) {
      gpu.CopyToBackend(values.data(), t);
    } else {
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = F32ToBf16(values[i]);
      gpu.CopyToBackend(bits.data(), t);
    }
  }
  std::vector<std::unique_ptr<HostBuffer>> keep_;
};

// Relative errors of got against want: ||got - want||_2 / ||want||_2, and max |got - want| / max |want|.
// Any NaN or infinity in got fails.
inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rel_l2, double rel_max,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff2 = 0, ref2 = 0, max_diff = 0, max_ref = 0;
  size_t bad = 0, worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(want[i])) ++bad;
    double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (d > max_diff) {
      max_diff = d;
      worst = i;
    }
    diff2 += d * d;
    ref2 += static_cast<double>(want[i]) * want[i];
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " non-finite outputs";
  double l2 = std::sqrt(diff2) / std::max(1e-30, std::sqrt(ref2));
  double mx = max_diff / std::max(1e-30, max_ref);
  EXPECT_LE(l2, rel_l2) << what << ": relative L2 error";
  EXPECT_LE(mx, rel_max) << what << ": max error " << max_diff << " at " << worst << " (got " << got[worst]
                         << ", want " << want[worst] << ", max |want| " << max_ref << ")";
  std::printf("[ metric ] %-48s rel_l2 %.3e  rel_max %.3e\n", what.c_str(), l2, mx);
}

// Expects got and want to hold the same bits everywhere (a fused form against the ops it replaces).
inline void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << what << ": values that differ";
}

// A layout from (slot, n_tokens, pos_begin) per sequence, tokens in that order.
inline BatchLayout MakeLayout(const std::vector<std::array<int64_t, 3>>& seqs) {
  BatchLayout l;
  for (const auto& s : seqs) {
    l.seqs.push_back(BatchSeq{static_cast<int>(s[0]), l.n_tokens, s[1], s[2]});
    for (int64_t i = 0; i < s[1]; ++i) l.positions.push_back(static_cast<int32_t>(s[2] + i));
    l.n_tokens += s[1];
  }
  return l;
}

// State of two DeltaNet layers: conv window [kernel - 1, channels], recurrent state [nv, dk, dv].
inline StateSpec LinearSpec(int channels, int kernel, int nk, int nv, int dk, int dv, int slots = 3,
                            int max_context = 64) {
  StateSpec s;
  s.max_slots = slots;
  s.max_context = max_context;
  s.n_linear_layers = 2;
  s.conv_channels = channels;
  s.conv_kernel = kernel;
  s.n_k_heads = nk;
  s.n_v_heads = nv;
  s.k_head_dim = dk;
  s.v_head_dim = dv;
  return s;
}

}  // namespace infernix::cuda_test
