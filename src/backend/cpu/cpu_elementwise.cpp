// CPU ops: elementwise arithmetic and the RMS norms.
#include "backend/cpu/cpu_backend.h"
#include "base/check.h"

namespace infernix {
namespace {

void CheckSameF32(const Tensor& a, const Tensor& b) {
  INFX_CHECK_MSG(a.numel() == b.numel() && a.dtype == DType::kF32 && b.dtype == DType::kF32, "{} vs {}",
                 a.Describe(), b.Describe());
}

}  // namespace

void CpuBackend::Add(const Tensor& a, const Tensor& b, Tensor out) {
  CheckSameF32(a, b);
  CheckSameF32(a, out);
  for (int64_t i = 0; i < a.numel(); ++i) out.as<float>()[i] = a.as<const float>()[i] + b.as<const float>()[i];
}

void CpuBackend::SiluMul(const Tensor& gate, const Tensor& up, Tensor out) {
  CheckSameF32(gate, up);
  CheckSameF32(gate, out);
  for (int64_t i = 0; i < gate.numel(); ++i)
    out.as<float>()[i] = cpu::Silu(gate.as<const float>()[i]) * up.as<const float>()[i];
}

void CpuBackend::SigmoidMul(const Tensor& x, const Tensor& gate, Tensor out) {
  CheckSameF32(x, gate);
  CheckSameF32(x, out);
  for (int64_t i = 0; i < x.numel(); ++i)
    out.as<float>()[i] = x.as<const float>()[i] * cpu::Sigmoid(gate.as<const float>()[i]);
}

void CpuBackend::AddSigmoidGated(Tensor acc, const Tensor& x, const Tensor& gate_logit) {
  CheckSameF32(acc, x);
  int64_t n = x.rows(), h = x.cols();
  INFX_CHECK(gate_logit.numel() == n);
  for (int64_t r = 0; r < n; ++r) {
    float s = cpu::Sigmoid(gate_logit.as<const float>()[r]);
    for (int64_t i = 0; i < h; ++i) acc.as<float>()[r * h + i] += s * x.as<const float>()[r * h + i];
  }
}

void CpuBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, bool unit_offset, Tensor out) {
  CheckSameF32(x, out);
  int64_t rows = x.rows(), d = x.cols();
  INFX_CHECK_MSG(weight.numel() == d, "RmsNorm x {} weight {}", x.Describe(), weight.Describe());
  std::vector<float> w = cpu::WeightValues(weight);
  if (unit_offset)
    for (float& v : w) v += 1.0f;
  pool_.ParallelFor(static_cast<size_t>(rows), 64, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      const float* xr = x.as<const float>() + static_cast<int64_t>(r) * d;
      float* yr = out.as<float>() + static_cast<int64_t>(r) * d;
      float inv = cpu::InverseRms(xr, d, eps);
      for (int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv * w[static_cast<size_t>(i)];
    }
  });
}

void CpuBackend::GatedRmsNorm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) {
  CheckSameF32(x, z);
  CheckSameF32(x, out);
  int64_t rows = x.rows(), d = x.cols();
  INFX_CHECK(weight.numel() == d);
  std::vector<float> w = cpu::WeightValues(weight);
  pool_.ParallelFor(static_cast<size_t>(rows), 64, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      const float* xr = x.as<const float>() + static_cast<int64_t>(r) * d;
      const float* zr = z.as<const float>() + static_cast<int64_t>(r) * d;
      float* yr = out.as<float>() + static_cast<int64_t>(r) * d;
      float inv = cpu::InverseRms(xr, d, eps);
      for (int64_t i = 0; i < d; ++i) yr[i] = w[static_cast<size_t>(i)] * (xr[i] * inv) * cpu::Silu(zr[i]);
    }
  });
}

}  // namespace infernix
