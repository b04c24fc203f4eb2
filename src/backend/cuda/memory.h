// Device and pinned host memory, RAII, and the two arenas of the CUDA backend:
//  - DeviceArena: a bump allocator over device chunks. The weight arena only grows; the scratch
//    (activation) arena is Reset() before each forward pass and reuses its chunks, so a forward pass
//    of a shape seen before allocates nothing and gets the same addresses (CUDA graphs rely on it).
//  - PinnedArena: page-locked host memory that small uploads (token ids, batch layouts) pass through,
//    so that their copies are asynchronous and can be captured into CUDA graphs.
// None of these is thread-safe; the backend that owns them is used by one thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace infernix::cuda {

// cudaMalloc'd memory. Throws Error(kOutOfRange) naming `what` when the device is out of memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t size_bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// cudaHostAlloc'd (page-locked) host memory.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; o.bytes_ = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return data_; }
  size_t size_bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Bump allocation from device chunks; allocations are 256-byte aligned.
class DeviceArena {
 public:
  // first_chunk_bytes: size of the first chunk; later ones double up to max_chunk_bytes (or the request).
  DeviceArena(std::string what, size_t first_chunk_bytes, size_t max_chunk_bytes);
  void* Allocate(size_t bytes);
  // Forgets every allocation; chunks are kept. If the arena has more than one chunk, they are
  // replaced by one chunk that holds the high-water mark of all cycles (this frees device memory:
  // the caller must make sure no queued work still uses it).
  void Reset();
  size_t capacity_bytes() const;
  // Whether the next Reset frees chunks.
  bool WillConsolidate() const { return chunks_.size() > 1; }
  size_t used_bytes() const { return used_total_; }

 private:
  std::string what_;
  size_t next_chunk_bytes_, max_chunk_bytes_;
  std::vector<DeviceBuffer> chunks_;
  std::vector<size_t> offsets_;  // bytes used in each chunk (first fit, so placement is deterministic)
  size_t used_total_ = 0;        // bytes handed out since the last Reset (with alignment)
  size_t high_water_ = 0;        // the most used_total_ has been
};

// Bump allocation from one pinned host block; Allocate returns nullptr when the block is full (the
// caller then copies synchronously instead).
class PinnedArena {
 public:
  explicit PinnedArena(size_t bytes) : buffer_(bytes) {}
  void* Allocate(size_t bytes);
  void Reset() { used_ = 0; }

 private:
  PinnedBuffer buffer_;
  size_t used_ = 0;
};

}  // namespace infernix::cuda
