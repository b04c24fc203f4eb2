#include "backend/cuda/memory.h"

#include <algorithm>

#include "backend/cuda/check.h"
#include "base/error.h"

namespace infernix::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  cudaError_t err = cudaMalloc(&data_, bytes);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error state
    size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    ThrowError(ErrorCode::kOutOfRange, "CUDA: out of device memory for {} ({:.1f} MiB; {:.1f} of {:.1f} MiB free)",
               what, bytes / 1048576.0, free_bytes / 1048576.0, total_bytes / 1048576.0);
  }
  INFX_CUDA_CHECK(err);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) INFX_CUDA_CHECK(cudaFree(data_));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) INFX_CUDA_CHECK(cudaFree(data_));
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) INFX_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault));
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) INFX_CUDA_CHECK(cudaFreeHost(data_));
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) INFX_CUDA_CHECK(cudaFreeHost(data_));
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceArena::DeviceArena(std::string what, size_t first_chunk_bytes, size_t max_chunk_bytes)
    : what_(std::move(what)), next_chunk_bytes_(first_chunk_bytes), max_chunk_bytes_(max_chunk_bytes) {}

void* DeviceArena::Allocate(size_t bytes) {
  bytes = AlignUp(std::max<size_t>(bytes, 1));
  size_t chunk = 0;
  while (chunk < chunks_.size() && offsets_[chunk] + bytes > chunks_[chunk].size_bytes()) ++chunk;
  if (chunk == chunks_.size()) {
    size_t size = AlignUp(std::max(bytes, next_chunk_bytes_));
    chunks_.emplace_back(size, what_);
    offsets_.push_back(0);
    next_chunk_bytes_ = std::min(next_chunk_bytes_ * 2, max_chunk_bytes_);
  }
  void* p = static_cast<char*>(chunks_[chunk].data()) + offsets_[chunk];
  offsets_[chunk] += bytes;
  used_total_ += bytes;
  return p;
}

void DeviceArena::Reset() {
  high_water_ = std::max(high_water_, used_total_);
  if (chunks_.size() > 1) {
    // A cycle needed more than one chunk: one chunk with room for the largest cycle.
    size_t need = AlignUp(high_water_ + high_water_ / 8);
    chunks_.clear();
    offsets_.clear();
    chunks_.emplace_back(need, what_);
    offsets_.push_back(0);
    next_chunk_bytes_ = std::max(next_chunk_bytes_, need);
  }
  for (auto& o : offsets_) o = 0;
  used_total_ = 0;
}

size_t DeviceArena::capacity_bytes() const {
  size_t total = 0;
  for (const auto& c : chunks_) total += c.size_bytes();
  return total;
}

void* PinnedArena::Allocate(size_t bytes) {
  bytes = AlignUp(std::max<size_t>(bytes, 1));
  if (used_ + bytes > buffer_.size_bytes()) return nullptr;
  void* p = static_cast<char*>(buffer_.data()) + used_;
  used_ += bytes;
  return p;
}

}  // namespace infernix::cuda
