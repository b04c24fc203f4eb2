#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"

namespace infernix {

Shape::Shape(std::initializer_list<int64_t> d) {
  INFX_CHECK(d.size() <= kMaxDims);
  for (int64_t v : d) dims[static_cast<size_t>(ndim++)] = v;
}

Shape Shape::FromVector(const std::vector<int64_t>& d) {
  INFX_CHECK(d.size() <= kMaxDims);
  Shape s;
  for (int64_t v : d) s.dims[static_cast<size_t>(s.ndim++)] = v;
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[static_cast<size_t>(i)] != o.dims[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::ToString() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", dims[static_cast<size_t>(i)]);
  return s + "]";
}

Tensor Tensor::Reshaped(Shape new_shape) const {
  INFX_CHECK_MSG(new_shape.numel() == numel(), "reshape {} -> {}", shape.ToString(), new_shape.ToString());
  return Tensor{data, dtype, new_shape};
}

Tensor Tensor::SliceRows(int64_t begin, int64_t count) const {
  INFX_CHECK(shape.ndim >= 1 && begin >= 0 && count >= 0 && begin + count <= shape[0]);
  int64_t row_elems = numel() / (shape[0] == 0 ? 1 : shape[0]);
  Shape s = shape;
  s.dims[0] = count;
  auto* base = static_cast<char*>(data) + RowBytes(dtype, begin * row_elems);
  return Tensor{base, dtype, s};
}

std::string Tensor::Describe() const { return fmt::format("{}{}", DTypeName(dtype), shape.ToString()); }

HostBuffer::HostBuffer(DType dtype, Shape shape) : dtype_(dtype), shape_(shape) {
  bytes_ = RowBytes(dtype, shape.numel());
  size_t alloc = (bytes_ + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, alloc == 0 ? 64 : alloc);
  INFX_CHECK_MSG(p != nullptr, "out of host memory allocating {} bytes", alloc);
  std::memset(p, 0, alloc == 0 ? 64 : alloc);
  data_.reset(p);
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

float LoadAsFloat(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return t.as<const float>()[i];
    case DType::kBF16: return Bf16ToF32(t.as<const uint16_t>()[i]);
    case DType::kF16: return F16ToF32(t.as<const uint16_t>()[i]);
    default: INFX_CHECK_MSG(false, "LoadAsFloat on {}", DTypeName(t.dtype));
  }
  return 0;
}

}  // namespace infernix
