// CPU ops: embedding lookup, matrix multiplication, row gathers and column slices.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "base/check.h"

namespace infernix {

void CpuBackend::Embedding(const Tensor& ids, const Tensor& table, Tensor out) {
  int64_t n = ids.numel(), h = table.cols();
  INFX_CHECK(ids.dtype == DType::kI32 && out.rows() == n && out.cols() == h);
  pool_.ParallelFor(static_cast<size_t>(n), 16, [&](size_t b, size_t e) {
    std::vector<float> scratch;
    for (size_t i = b; i < e; ++i) {
      int32_t id = ids.as<const int32_t>()[i];
      INFX_CHECK(id >= 0 && id < table.rows());
      const float* row = cpu::WeightRow(table, id, scratch);
      std::memcpy(out.as<float>() + static_cast<int64_t>(i) * h, row, static_cast<size_t>(h) * sizeof(float));
    }
  });
}

void CpuBackend::MatMul(const Tensor& x, const Tensor& w, Tensor out) {
  int64_t n = x.rows(), k = x.cols(), m = w.rows();
  INFX_CHECK_MSG(w.cols() == k && out.rows() == n && out.cols() == m, "MatMul x {} w {} out {}", x.Describe(),
                 w.Describe(), out.Describe());
  INFX_CHECK(x.dtype == DType::kF32 && out.dtype == DType::kF32);
  const float* xs = x.as<const float>();
  float* ys = out.as<float>();
  // Parallel over weight rows: each row is converted once and used for every token.
  size_t grain = static_cast<size_t>(std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k * n)));
  pool_.ParallelFor(static_cast<size_t>(m), grain, [&](size_t b, size_t e) {
    std::vector<float> scratch;
    for (size_t j = b; j < e; ++j) {
      const float* wr = cpu::WeightRow(w, static_cast<int64_t>(j), scratch);
      for (int64_t i = 0; i < n; ++i) ys[i * m + static_cast<int64_t>(j)] = cpu::Dot(xs + i * k, wr, k);
    }
  });
}

void CpuBackend::GatherRows(const Tensor& x, const std::vector<int32_t>& rows, Tensor out) {
  int64_t d = x.cols();
  INFX_CHECK(out.rows() == static_cast<int64_t>(rows.size()) && out.cols() == d && x.dtype == out.dtype);
  size_t row_bytes = static_cast<size_t>(d) * DTypeSize(x.dtype);
  for (size_t i = 0; i < rows.size(); ++i) {
    INFX_CHECK(rows[i] >= 0 && rows[i] < x.rows());
    std::memcpy(static_cast<char*>(out.data) + i * row_bytes,
                static_cast<const char*>(x.data) + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
  }
}

void CpuBackend::SliceColumns(const Tensor& x, int64_t col_begin, Tensor out) {
  int64_t rows = x.rows(), cols = x.cols(), c = out.cols();
  INFX_CHECK(out.rows() == rows && col_begin >= 0 && col_begin + c <= cols && x.dtype == out.dtype);
  size_t elem = DTypeSize(x.dtype);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(out.data) + static_cast<size_t>(r * c) * elem,
                static_cast<const char*>(x.data) + static_cast<size_t>(r * cols + col_begin) * elem,
                static_cast<size_t>(c) * elem);
}

}  // namespace infernix
