// The device ceilings the benchmark compares against, measured in the same process: the
// device-to-device copy bandwidth and the BF16 tensor-core rate of a plain cuBLASLt GEMM.
#include "backend/cuda/backend.h"
#include "backend/cuda/check.h"
#include "backend/cuda/timing.h"

namespace infernix {

using cuda::MedianMs;

CudaDeviceReport MeasureCudaDevice(Backend& backend) {
  auto* be = dynamic_cast<CudaBackend*>(&backend);
  INFX_CHECK_MSG(be != nullptr, "MeasureCudaDevice needs the CUDA backend, got {}", backend.name());
  be->Synchronize();
  const cudaDeviceProp& p = be->properties();
  cudaStream_t s = be->stream();
  CudaDeviceReport r;
  r.name = p.name;
  r.sm_count = p.multiProcessorCount;
  r.memory_gib = static_cast<double>(p.totalGlobalMem) / (1ull << 30);
  {
    const size_t bytes = size_t{1} << 30;  // far beyond the L2
    cuda::DeviceBuffer a(bytes, "the copy-bandwidth test"), b(bytes, "the copy-bandwidth test");
    cuda::LaunchDummyBf16(s, a.data(), static_cast<int64_t>(bytes / 2), 7, 1.0f);
    double ms = MedianMs(s, 3, 10, [&] { INFX_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, s)); });
    r.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
  }
  {
    const int64_t n = 8192;
    const size_t bytes = static_cast<size_t>(n * n) * 2;
    cuda::DeviceBuffer x(bytes, "the GEMM test"), w(bytes, "the GEMM test"), out(bytes, "the GEMM test");
    cuda::LaunchDummyBf16(s, x.data(), n * n, 11, 1.0f);
    cuda::LaunchDummyBf16(s, w.data(), n * n, 13, 1.0f);
    const cuda::GemmPlan* plan = be->gemm().Find(n, n, n, DType::kBF16, 256);
    if (plan != nullptr) {
      double ms = MedianMs(s, 3, 10, [&] { cuda::GemmLt::Run(s, plan, x.data(), w.data(), out.data()); });
      r.bf16_flops_per_s = 2.0 * static_cast<double>(n) * n * n / (ms * 1e-3);
    }
  }
  INFX_CUDA_CHECK(cudaStreamSynchronize(s));
  return r;
}

CudaCounters ReadCudaCounters(Backend& backend) {
  auto* be = dynamic_cast<CudaBackend*>(&backend);
  INFX_CHECK_MSG(be != nullptr, "ReadCudaCounters needs the CUDA backend, got {}", backend.name());
  be->Synchronize();  // what is queued runs now, as its own unit, and counts
  const cuda::RecorderStats& s = be->recorder_stats();
  return CudaCounters{s.units_eager,    s.units_captured, s.units_replayed, s.units_timed,
                      s.prefix_replays, s.gpu_ms,         s.host_flush_ms,  be->host_wait_ms()};
}

}  // namespace infernix
