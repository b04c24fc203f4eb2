// Tensor views and host buffers.
//
// A Tensor is a non-owning view: a pointer to contiguous row-major data (host or device memory, as the
// backend that made it decides), its dtype and its shape (up to 4 dims). Ownership lives elsewhere:
// HostBuffer for host data, the weight store for mapped files, a backend arena for activations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace infernix {

inline constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int ndim = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  static Shape FromVector(const std::vector<int64_t>& d);
  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  std::string ToString() const;  // "[2, 3]"
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  // Block-quantized tensors: the bytes of their packed blocks (the last dim is a multiple of the block).
  size_t size_bytes() const { return RowBytes(dtype, numel()); }
  int64_t dim(int i) const { return shape[i]; }
  // Rows of the last dimension: numel / dims[ndim-1].
  int64_t rows() const { return shape.ndim == 0 ? 1 : numel() / shape[shape.ndim - 1]; }
  int64_t cols() const { return shape.ndim == 0 ? 1 : shape[shape.ndim - 1]; }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  // Same data, another shape of the same element count (checked).
  Tensor Reshaped(Shape new_shape) const;
  // Rows [begin, begin + count) of the first dimension (contiguous, so still a view).
  Tensor SliceRows(int64_t begin, int64_t count) const;
  std::string Describe() const;  // "bf16[4096, 128]"
};

// An owning, 64-byte aligned host allocation.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(DType dtype, Shape shape);
  Tensor view() const { return Tensor{data_.get(), dtype_, shape_}; }
  size_t size_bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  DType dtype_ = DType::kF32;
  Shape shape_;
  size_t bytes_ = 0;
};

// Reads element i of a float tensor (f32/f16/bf16) as float; host memory only.
float LoadAsFloat(const Tensor& t, int64_t i);

}  // namespace infernix
